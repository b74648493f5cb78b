"""The update ``executor run`` performs is ``executor.learner``'s: one real iteration (real
LIBERO envs, Ray, torch) with the trainer ranks saving every global batch they trained; each is
replayed through ``learner.update_global_batch`` from the same weights, which must give the
same loss and the same gradient norm (slow: starts Ray, once for both algorithms, and env processes)."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
from quick_envs import QUICK_ENVS

from perfmodel.schema.plan import Plan

# 2 envs x 10 steps (2 chunks of 5): 4 samples per iteration, global batch 4 in micro-batches of 2.
PLAN = {
    "mode": "disaggregated", "allocation_ratio": "1:1", "pipeline_stage_num": 1, "b_max": None,
    "t_max_s": 0.05, "max_staleness": 1, "profile": "pi05_tiny_cpu",
    "workload": {"total_num_envs": 2, "max_episode_steps": 10, "num_action_chunks": 5, "rollout_epoch": 1,
                 "update_epoch": 2, "micro_batch_size": 2, "global_batch_size": 4, "group_size": 1,
                 "algorithm": "ppo"},
    "cluster": {"gpus": 2, "gpus_per_node": 2, "cpu_cores_per_node": 2, "node_ram_gb": 24,
                "intra_node_bw_GBps": 2.4, "inter_node_bw_GBps": 2.4},
}


def _concat(mbs: list[dict]) -> dict:
    """Micro-batches (as the driver collated them) back into their global batch, in order."""
    out: dict = {}
    for k, v in mbs[0].items():
        if isinstance(v, dict):
            out[k] = _concat([m[k] for m in mbs])
        elif isinstance(v, list):
            out[k] = [x for m in mbs for x in m[k]]
        else:
            out[k] = np.concatenate([m[k] for m in mbs])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("algorithm,group_size", [("ppo", 1), ("grpo", 2)])
def test_run_update_is_the_learner_update(ray_session, tmp_path: Path, algorithm: str, group_size: int):
    import torch

    from executor.learner import LearnerConfig, make_optimizer, update_global_batch
    from executor.policies import make_policy
    from executor.runtime.session import execute
    from executor.runtime.modes import RunOptions

    d = copy.deepcopy(PLAN)
    d["workload"].update(algorithm=algorithm, group_size=group_size)
    plan = Plan.from_dict(d)
    dump = tmp_path / "updates"
    record, _ = execute(plan, iterations=1, warmup=0, progress=False,  # in the file's Ray session
                        opts=RunOptions(image_size=64, **QUICK_ENVS, dump_updates=str(dump)))
    assert record["status"] == "ok", record["error"]
    files = sorted(dump.glob("rank0_step*.pt"))
    w = plan.workload
    assert len(files) == w.optimizer_steps_per_iteration == record["counts"]["optimizer_steps"] == 2

    cfg = LearnerConfig.from_plan(plan)
    torch.set_num_threads(1)
    for f in files:
        saved = torch.load(f, weights_only=False)
        gbatch = _concat(saved["micro_batches"])
        assert len(gbatch["logprob"]) == w.global_batch_size
        assert saved["micro_steps"] == len(saved["micro_batches"]) == 2
        policy = make_policy("pi05", "tiny")
        policy.load_state_dict(saved["weights_before"])
        replay = update_global_batch(policy, make_optimizer(policy, cfg), gbatch, cfg,
                                     use_value=algorithm == "ppo")
        ran = saved["metrics"]
        for key in ("losses/total", "losses/policy", "losses/value", "charts/grad_norm"):
            assert replay[key] == pytest.approx(ran[key], rel=1e-5, abs=1e-7), (f.name, key)
        if algorithm == "ppo":
            assert ran["charts/grad_norm"] > 0  # the value loss always has a gradient
        else:
            # no critic; with no success in 2 short episodes the group advantages may all be 0
            assert ran["losses/value"] == 0.0
