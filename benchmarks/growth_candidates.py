"""Back-of-envelope for issue 40: what each candidate mechanism of cost growing from two to four
nodes would add per iteration, at physical values, against what the held-out points ask for.

No fit here. "needed" is the extra iteration time each published point asks of the model fitted
without it (benchmarks/results/calibration_30.json, the ``extrapolate`` folds: fit on 8 -> 16; fit
on 8 and 16 -> 32): published iteration time minus predicted. Each candidate is costed with the
bundled profiles' shapes (bytes, FLOPs) on the published plans, at the hardware's physical values:
3.2 Tb/s RDMA per node (scaling-facts.md) = 50 GB/s per GPU across nodes; 20 GB/s per GPU inside
a node through host memory (NCCL_P2P_DISABLE=1, calibrate.NODE's assumption).

Candidates (what the RL-VLA3 fork's code does, cited by path under ../shared/reference/rl-vla3-fork/code):
- ``sync``: the weight sync once per global step (runners/embodied_runner.py:174-175, 297-298):
  every actor rank all-gathers the full state dict (workers/actor/fsdp_actor_worker.py:928-950,
  get_model_state_dict(full_state_dict=True)) and sends it to its ceil(N/M) rollout ranks by the
  modulo rule (fsdp_actor_worker.py:892-908): point to point, in parallel, not from one source.
- ``sync_fanout_upper``: the structural member's reading (one source rank, serial, 2 s per
  generator, its upper bound): what a single-source sync would cost at most.
- ``fsdp_cross_node``: the inter-node share of FSDP full_shard's all-gathers per micro-batch and
  reduce-scatter per optimizer step (StageCosts._ring_s), at 50 GB/s per GPU.
- ``intake``: trajectories through the node-0 channel (rollout worker
  flexible_per_env_async_rollout_worker.py:341-393 puts them into the actor channel), serial, at
  line rate (10 us per 0.3 MB sample) and at the member's upper bound (3 ms per sample).
- ``ring``: a fixed time per ring step of each actor collective (P2P disabled), at the member's
  fit on 30 points (4.8 ms) and its upper end (24 ms), docs/metrics.md.
- ``epoch_tail``: the asynchronous runner's global-step barrier (runners/embodied_runner.py:278-342:
  ``actor_handle.wait()`` before the next step's ``update_rollout_weights``) with the actor
  training per rollout epoch once that epoch's data is in (fsdp_actor_worker.py:1940-2040,
  ``recv_single_epoch_batch`` then ``run_training_single_epoch``): the last epoch's training is
  exposed every global step, the actor's time per iteration over ``rollout_epoch`` (train_async,
  rollout_async; the streamer trains per message, fsdp_actor_worker.py:2404, its tail is one
  message's). Shape-driven (pi0.5's actor is the heavier), but it would also open a streamer lead
  over rollout_async of that size at every GPU count and for both backbones.
- ``straggler_cv``: not a cost but what it would take: the coefficient of variation of a rank's
  compute time at which waiting for the slowest of R ranks at every optimizer step (the expected
  maximum of R normal draws) closes the gap.

    PYTHONPATH=$PWD python benchmarks/growth_candidates.py
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

from perfmodel.bound import actor_iteration_s
from perfmodel.calibration.calibrate import GROWTH_PARAMS, NODE
from perfmodel.calibration.reference import published_plan
from perfmodel.costs import StageCosts
from perfmodel.schema.profile import load_profile

ROOT = Path(__file__).resolve().parent.parent
INTER_NODE_GBPS = 3200 / 8 / 8  # 3.2 Tb/s per node (scaling-facts.md), 8 GPUs per node: 50 GB/s per GPU
HOST_GBPS = NODE["host_bw_GBps"]
INTAKE_LINE_RATE_S = 1e-5
INTAKE_UPPER_S = GROWTH_PARAMS["intake"].hi
RING_FIT_S, RING_UPPER_S = 4.8e-3, 24e-3  # docs/metrics.md, the ring member on 30 points
SYNC_FANOUT_UPPER_S = GROWTH_PARAMS["sync_fanout"].hi


def expected_max_normal(n: int) -> float:
    """E[max of n standard normal draws] (Blom's approximation)."""
    if n <= 1:
        return 0.0
    return statistics.NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def candidates(backbone: str, mode: str, gpus: int) -> dict[str, float]:
    prof = load_profile(backbone)
    plan = published_plan(prof, mode, gpus, None if mode == "colocated" else "1:1")
    phys = plan.with_(cluster=replace(plan.cluster, inter_node_bw_GBps=INTER_NODE_GBPS, host_bw_GBps=HOST_GBPS))
    c = StageCosts(phys, prof)
    w, pl = plan.workload, plan.placement
    ranks, gens = plan.actor_gpus, plan.rollout_gpus
    weight = prof.costs.weight_sync_bytes
    # the fork's sync: all-gather of the full state dict over the actor ranks, then each actor
    # rank's ceil(N/M) sends in parallel (across nodes when the generator sits on another node)
    gather = c._ring_s(weight, 1)
    if plan.mechanisms.disaggregated:
        bw = INTER_NODE_GBPS if pl.sync_crosses_nodes else HOST_GBPS
        send = math.ceil(gens / ranks) * weight / (bw * 1e9)
    else:
        send = 0.0  # colocated: the generator is on the same GPU
    no_net = StageCosts(phys.with_(cluster=replace(phys.cluster, inter_node_bw_GBps=1e6)), prof)
    off0 = c.actor_ranks_off_node0 / ranks
    samples = w.samples_per_iteration
    steps = w.optimizer_steps_per_iteration
    micro, per_rank = c.micro_batching(w.global_batch_size)
    ring_steps = steps * (micro + 1) * (ranks - 1)
    per_rank_compute = steps * micro * (c.train_compute_s(per_rank) - prof.costs.train_micro_batch_s.intercept)
    return {
        "sync": gather + send,
        "sync_fanout_upper": SYNC_FANOUT_UPPER_S * gens if plan.mechanisms.disaggregated else 0.0,
        "fsdp_cross_node": actor_iteration_s(c) - actor_iteration_s(no_net),
        "intake_line_rate": INTAKE_LINE_RATE_S * samples * off0,
        "intake_upper": INTAKE_UPPER_S * samples * off0,
        "ring_fit": RING_FIT_S * ring_steps,
        "ring_upper": RING_UPPER_S * ring_steps,
        "per_rank_train_compute": per_rank_compute,
        "epoch_tail": (actor_iteration_s(c) / w.rollout_epoch
                       if mode in ("train_async", "rollout_async") else 0.0),
        "z_max_ranks": expected_max_normal(ranks),
        "env_steps_per_iteration": w.env_steps_per_iteration,
    }


def main() -> None:
    cal = json.loads((ROOT / "benchmarks" / "results" / "calibration_30.json").read_text())
    rows = []
    for fold in cal["extrapolate"]["folds"]:
        for r in fold["points"]:
            g = r["gpus"]
            cand = candidates(r["backbone"], r["mode"], g)
            steps_per_it = cand.pop("env_steps_per_iteration")
            needed = steps_per_it / r["published"] - steps_per_it / r["predicted"]
            cv = needed / (cand["per_rank_train_compute"] * cand["z_max_ranks"]) if needed > 0 else 0.0
            rows.append({"backbone": r["backbone"], "mode": r["mode"], "gpus": g, "fold": fold["label"],
                         "iteration_s": steps_per_it / r["published"], "needed_s": needed,
                         **{k: v for k, v in cand.items() if k not in ("z_max_ranks",)}, "straggler_cv": cv})
    keys = ("needed_s", "sync", "sync_fanout_upper", "fsdp_cross_node", "intake_line_rate", "intake_upper",
            "ring_fit", "ring_upper", "epoch_tail", "per_rank_train_compute", "straggler_cv")
    print("seconds per iteration (straggler_cv: a fraction)")
    print(f"{'backbone':10s} {'mode':14s} {'GPUs':>4s} {'iter':>6s} " + " ".join(f"{k[:12]:>12s}" for k in keys))
    for r in rows:
        print(f"{r['backbone']:10s} {r['mode']:14s} {r['gpus']:4d} {r['iteration_s']:6.0f} "
              + " ".join(f"{r[k]:12.3g}" for k in keys))


if __name__ == "__main__":
    main()
