"""``executor profile --run-share``: the share of their cores the env processes get in a run.

The env costs of a profile are measured with the envs alone on their cores. In a run they are
not alone: the driver, Ray's own processes and, on a CPU host, the generator and trainer actors
(a "GPU" there is a slot of the same cores) take part of the cores, by 4-11 % in the runs of
issue 30 on a 2-core host. A prediction that assumes a share of 1 is then optimistic by that
much before the model composes anything. This runs each requested mode for real, shaped like a
plan on this host (the profile's default workload on its device slots, ``RUN_SHARE_ITERATIONS``
iterations with the first dropped), and reads what the run record measures
(``env_cpu.<stage>.cpu_share``: CPU seconds the env processes got over the wall seconds x cores
the plan gives them), which ``Costs.env_cpu_share`` stores and the simulator charges.
"""

from __future__ import annotations

import os
import time
from typing import Any

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.modes import MODES
from perfmodel.schema.plan import Plan

RUN_SHARE_ITERATIONS = 3  # the first is warm-up (env creation, first calls): shares over all three
RUN_SHARE_WARMUP = 1


def parse_modes(text: str) -> tuple[str, ...]:
    """``--run-share``: ``none``, ``all`` or a comma list of modes."""
    text = text.strip()
    if text in ("", "none"):
        return ()
    if text == "all":
        return MODES
    modes = tuple(m.strip() for m in text.split(","))
    for m in modes:
        if m not in MODES:
            raise ConfigError("run-share", f"must be none, all or modes among {', '.join(MODES)}; got {m!r}")
    return modes


def share_plan(mode: str, workload: dict[str, Any], slots: int, profile_name: str, ram_gb: float) -> Plan:
    """A plan of ``mode`` shaped like the profile's: its default workload on this host's device
    slots (one node), the disaggregated modes split 1:1."""
    if mode != "colocated" and slots < 2:
        raise ConfigError("run-share", f"{mode} puts generators and the actor on different device slots: it needs 2 "
                                       f"or more (--gpus-per-node), this profile has {slots}")
    return Plan.from_dict({
        "mode": mode, "allocation_ratio": None if mode == "colocated" else "1:1", "pipeline_stage_num": 1,
        "b_max": None, "t_max_s": 0.05, "max_staleness": 1, "profile": profile_name, "workload": dict(workload),
        "cluster": {"gpus": slots, "gpus_per_node": slots, "cpu_cores_per_node": os.cpu_count() or 1,
                    "node_ram_gb": ram_gb, "actor_cpu_cores_per_gpu": 0.0}}, "run_share_plan")


def measure_run_share(modes: tuple[str, ...], workload: dict[str, Any], slots: int, profile_name: str,
                      ram_gb: float, opts: Any, bar: Any = None) -> dict[str, dict[str, Any]]:
    """{mode: {env_step, env_reset (the shares), raw: what the run measured}} for each mode."""
    from executor.runtime.session import RunFailed, execute

    out: dict[str, dict[str, Any]] = {}
    for mode in modes:
        plan = share_plan(mode, workload, slots, profile_name, ram_gb)
        if bar is not None:
            bar.set_description(f"run share: {mode}")
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        try:
            record, _ = execute(plan, iterations=RUN_SHARE_ITERATIONS, warmup=RUN_SHARE_WARMUP, opts=opts,
                                progress=False, verbose=False)
        except RunFailed as e:
            raise ConfigError("run-share", f"the {mode} run failed: {e}") from None
        env_cpu = record.get("env_cpu") or {}
        shares = {}
        for stage in ("env_step", "env_reset"):
            v = (env_cpu.get(stage) or {}).get("cpu_share")
            if not v or v <= 0:
                raise ConfigError("run-share", f"the {mode} run measured no CPU share for {stage}")
            shares[stage] = min(1.0, float(v))  # above 1 is tick rounding (executor.runtime.record)
        out[mode] = {**shares, "raw": {
            "iterations": RUN_SHARE_ITERATIONS, "run_wall_s": round(time.perf_counter() - t0, 2),
            "loadavg_before_after": [round(load, 2), round(os.getloadavg()[0], 2)],
            "env_cpu": env_cpu, "throughput_env_steps_per_s": record.get("throughput_env_steps_per_s"),
            "plan": plan.to_dict()}}
        if bar is not None:
            bar.update(1)
    return out
