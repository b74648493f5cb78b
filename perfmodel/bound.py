"""Analytic results that the simulation must respect: the bottleneck bound and closed forms.

Per-iteration lower bounds on each resource's busy time (mean costs):
- env CPU: one worker's reset + chunk steps with all its envs in parallel on its cores;
- inference: the worker's samples at the cheapest per-sample GPU time of a batch size it can
  form (a call's host-path latency, ``Costs.infer_latency_s``, does not hold the GPU);
- actor: every micro-batch and optimizer step of the iteration (no overlap inside the actor);
- synchronous modes add the phases (rollout, then training, then sync or swaps) since they
  never overlap; asynchronous modes overlap rollout with training, except on the GPU they
  share when actor and rollout are on the same GPUs (train_async, allocation_ratio null): each
  GPU's inference and training add up (bottleneck ``inference+actor``).
The bound's throughput is env steps per iteration over that time; no schedule beats it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfmodel.costs import StageCosts
from perfmodel.schema.plan import REPLAY_ALGORITHMS
from perfmodel.schema.rules import training_runs


@dataclass(frozen=True)
class Bound:
    env_s: float
    inference_s: float
    actor_s: float
    sync_s: float
    switch_s: float
    iteration_s: float
    throughput_env_steps_per_s: float
    bottleneck: str


def cheapest_per_sample_s(costs: StageCosts, b_hi: int) -> float:
    """min over batch sizes b in 1..b_hi of the GPU part of a call, infer_gpu(b) / b, in O(table
    points): on each linear piece of the curve, infer_gpu(b) / b = slope + c / b is monotone in
    b, so the minimum is at 1, b_hi or an integer next to a breakpoint or to where a piece
    reaches zero."""
    curve = costs.profile.costs.infer_s
    lat = costs.infer_latency_s
    cands = {1, b_hi}
    pieces = [(curve.intercept - lat, curve.slope)] if curve.model == "linear" else []
    if curve.model != "linear":
        pts = list(curve.points)
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            slope = (y1 - y0) / (x1 - x0)
            pieces.append((y0 - slope * x0 - lat, slope))
        cands |= {v for x, _ in pts for v in (math.floor(x), math.ceil(x))}
    for c, slope in pieces:
        if slope:
            cands |= {math.floor(-c / slope), math.ceil(-c / slope)}
    cands = {b for b in cands if 1 <= b <= b_hi}
    if b_hi <= 4096:  # small ranges: every size, as before
        cands |= set(range(1, b_hi + 1))
    return min(costs.infer_gpu_s(b) / b for b in cands)


def actor_iteration_s(costs: StageCosts) -> float:
    w = costs.plan.workload
    total = 0.0
    runs, passes = training_runs(w.samples_per_iteration, w.global_batch_size, w.update_epoch,
                                 w.algorithm in REPLAY_ALGORITHMS)
    for size, count in runs:
        steps, per_rank = costs.micro_batching(size)
        total += count * passes * (steps * costs.micro_batch_s(per_rank) + costs.optimizer_step_s())
        intake = costs.intake_s(size)  # once per global batch (StageCosts.intake_s; 0 unless fitted)
        if intake:
            total += count * intake
    return total


def bound(costs: StageCosts) -> Bound:
    plan, w = costs.plan, costs.plan.workload
    n = plan.envs_per_worker
    lockstep = plan.mechanisms.lockstep
    env_s = w.rollout_epoch * (costs.env_reset_s(n) + w.chunk_steps_per_epoch * costs.env_chunk_s(n, lockstep))
    samples_per_worker = n * w.chunk_steps_per_epoch * w.rollout_epoch
    b_hi = costs.max_infer_batch
    per_sample = cheapest_per_sample_s(costs, b_hi)
    inference_s = samples_per_worker * per_sample
    actor_s = actor_iteration_s(costs)
    sync_s = costs.weight_sync_s()
    switch_s = 0.0 if plan.mechanisms.disaggregated else 2 * costs.phase_switch_s()
    rollout_s = max(env_s, inference_s)
    if plan.mechanisms.async_training:
        # Rollout and training overlap. (Weight syncs are left out: within a finite window a
        # worker may pick up fewer new versions than iterations, so they bound nothing.)
        if not plan.mechanisms.trains_beside_rollout:
            iteration_s = max(rollout_s, actor_s)
            bottleneck = "actor" if actor_s > rollout_s else ("env" if env_s >= inference_s else "inference")
        else:  # one GPU does a worker's inference and an actor rank's training
            iteration_s = max(env_s, inference_s + actor_s)
            bottleneck = "env" if env_s >= inference_s + actor_s else "inference+actor"
    else:
        iteration_s = rollout_s + sync_s + actor_s + switch_s
        parts = {"env": env_s if env_s >= inference_s else 0.0, "inference": inference_s if inference_s > env_s else 0.0,
                 "actor": actor_s, "weight_sync": sync_s, "phase_switch": switch_s}
        bottleneck = max(parts, key=parts.get)
    return Bound(env_s, inference_s, actor_s, sync_s, switch_s, iteration_s,
                 w.env_steps_per_iteration / iteration_s, bottleneck)


def closed_form_iteration_s(costs: StageCosts) -> float:
    """Steady-state iteration time of a synchronous mode with deterministic costs.

    Rollout, lock-step (one stage): every chunk step is inference, env step and the run's
    orchestration (``driver_chunk_s``, 0 unless measured), in sequence:
        rollout_epoch * (reset + chunks * (infer(n) + env_chunk(n) + driver)).
    Pipelined (``pipeline_stage_num`` = p > 1, resets free): the p stages of a worker alternate
    between its GPU and its CPU cores, a two-machine flow shop over n = chunks * p * epochs items:
        warm-up (infer + env_chunk of one stage) + (n - 1) * max(infer, env_chunk).
    Then the actor trains the whole iteration; colocated adds two phase switches
    (offload/reload), disaggregated one weight sync.
    """
    plan, w = costs.plan, costs.plan.workload
    if plan.mechanisms.async_training:
        raise ValueError("closed forms are for the synchronous modes (colocated, disaggregated)")
    p = plan.pipeline_stage_num
    n_g = plan.envs_per_stage
    infer, env = costs.infer_s(n_g), costs.env_chunk_s(n_g)
    if p == 1:
        rollout = w.rollout_epoch * (costs.env_reset_s(n_g)
                                     + w.chunk_steps_per_epoch * (infer + env + costs.driver_chunk_s()))
    else:
        if costs.driver_chunk_s() != 0:
            raise ValueError("the pipelined closed form assumes no driver cost per chunk step")
        if costs.infer_latency_s != 0:
            raise ValueError("the pipelined closed form assumes no host-path latency of inference calls")
        if costs.profile.costs.env_reset_s != 0:
            raise ValueError("the pipelined closed form assumes env_reset_s = 0")
        if costs.env_cores_used(n_g) < costs.cores_per_worker:
            raise ValueError("the pipelined closed form assumes each stage occupies all the worker's cores")
        items = w.chunk_steps_per_epoch * p * w.rollout_epoch
        rollout = infer + env + (items - 1) * max(infer, env)
    extra = costs.weight_sync_s() if plan.mechanisms.disaggregated else 2 * costs.phase_switch_s()
    return rollout + actor_iteration_s(costs) + extra
