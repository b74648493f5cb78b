"""Suite: the run's own orchestration per chunk step (executor run's driver, Ray calls, hand-offs)."""

from __future__ import annotations

import os
from typing import Any

from executor.profiling.config import ProfileConfig
from executor.profiling.host import ram_gb

# ---------------------------------------------------------------------------------------------
# The run's own orchestration per chunk step (executor run's driver, Ray calls, hand-offs)


def driver_plan(mode: str, envs: int, chunk: int, chunk_steps: int) -> Any:
    """A rollout-only-sized plan on two device slots of this machine for measuring the driver:
    ``envs`` envs on one env worker, one episode of ``chunk_steps`` chunk steps."""
    from perfmodel.schema.plan import DEFAULT_T_MAX_S, Plan

    cores = os.cpu_count() or 1
    samples = envs * chunk_steps
    return Plan.from_dict({
        "mode": mode, "allocation_ratio": "1:1", "pipeline_stage_num": 1, "b_max": None, "t_max_s": DEFAULT_T_MAX_S,
        "max_staleness": 1, "profile": "pi05_tiny_cpu",
        "workload": {"total_num_envs": envs, "max_episode_steps": chunk * chunk_steps, "num_action_chunks": chunk,
                     "rollout_epoch": 1, "update_epoch": 1, "micro_batch_size": samples,
                     "global_batch_size": samples, "group_size": 1, "algorithm": "ppo"},
        "cluster": {"gpus": 2, "gpus_per_node": 2, "cpu_cores_per_node": max(2, cores), "node_ram_gb": ram_gb(),
                    "intra_node_bw_GBps": 1.0, "inter_node_bw_GBps": 1.0, "actor_cpu_cores_per_gpu": 0.0}},
        "driver plan")


def measure_driver(cfg: ProfileConfig, chunk: int, bar) -> dict[str, Any] | None:
    """``driver_chunk_step_s``: a real ``executor run`` of one iteration (real LIBERO envs, the
    policy, Ray actors, the driver's threads) per stepping kind, lock-step (disaggregated) and
    dynamic batching (rollout_async), and the driver's own seconds per chunk step of an env group
    (``Context.driver_s``: the cycle less inference, env step and the modelled queueing; the run
    record's ``driver_s_per_chunk_step``): what the simulator adds per chunk step. None when
    ``driver_chunk_steps`` is 0 or env costs come from another profile (the profile has none then,
    or the other profile's, and the model charges nothing without one)."""
    if cfg.driver_chunk_steps <= 0 or cfg.env_profile:
        return None
    if cfg.device.startswith("cuda"):
        import torch

        if torch.cuda.device_count() < 2:  # the runs put the rollout and the actor on two slots
            return None
    from executor.learner import LearnerConfig
    from executor.runtime.modes import RunOptions
    from executor.runtime.record import driver_cost
    from executor.runtime.session import RaySession, execute_session

    envs = len(os.sched_getaffinity(0))  # one env per core of the worker
    out: dict[str, float] = {}
    extra: dict[str, Any] = {}
    # The driver's cost is its cycle per chunk step, less the env step: how an episode starts is
    # not in it. So the scenes reset without a rebuild or settle steps (the runs' start-up and
    # resets are shorter), and still render (the envs take the cores from the driver as in a run).
    opts = RunOptions(backbone=cfg.backbone, scale=cfg.scale, device=cfg.device, image_size=cfg.image_size,
                      suite=cfg.suite, hard_reset=False, settle_steps=0)
    # One local Ray for both runs (a run uses a running session and leaves it): one start-up less.
    ray = RaySession(None, num_cpus=max(2, os.cpu_count() or 1))
    ray.start()
    res = None
    try:
        for kind, mode in (("lockstep", "disaggregated"), ("dynamic", "rollout_async")):
            bar.set_description(f"driver per chunk step ({kind})")
            plan = driver_plan(mode, envs, chunk, cfg.driver_chunk_steps)
            res = execute_session(plan, iterations=1, opts=opts, learner=LearnerConfig.from_plan(plan),
                                  progress=False, verbose=False)
            if res.status != "ok":
                raise RuntimeError(f"driver measurement ({mode}): {res.error}")
            cost = driver_cost(list(res.ctx.driver_s))
            out[kind] = cost["mean_s"]
            extra[kind] = {"mode": mode, "envs": envs, "chunk_steps": cfg.driver_chunk_steps, **cost,
                           "samples_s": [round(x, 6) for x in res.ctx.driver_s],
                           "loadavg_1min": round(os.getloadavg()[0], 2)}
            bar.update(1)
    finally:
        # a run that failed or left a thread inside a Ray call: end Ray at once (ray.shutdown would
        # block on it, RaySession.kill), as a run that started its own Ray does
        if res is None or res.status != "ok" or res.abandoned:
            ray.kill()
        else:
            ray.stop()
    return {"driver_chunk_step_s": out, "extra": extra,
            "assumption": f"costs.driver_chunk_step_s: one real executor run per stepping kind ({envs} envs, "
                          f"{cfg.driver_chunk_steps} chunk steps of {chunk}, one iteration, soft resets without "
                          "settle steps, one Ray session): the mean over chunk "
                          "steps of each group's cycle on the driver less its inference, its env step and the "
                          "queueing the simulator models (batch firing, the slot): Ray calls and hand-offs"}


