"""Run the discrete-event model of one plan and turn it into a prediction (docs/metrics.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import simpy

from perfmodel.bound import bound
from perfmodel.costs import StageCosts
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile
from perfmodel.sim.modes import DEFAULT_MAX_SIMULATED_WORKERS, wire
from perfmodel.schema.timeline import STAGES, Recorder
from perfmodel.sim.workers import Durations

DEFAULT_ITERATIONS = 3
DEFAULT_WARMUP = 1


@dataclass
class SimResult:
    plan: Plan
    iteration_time_s: float
    throughput_env_steps_per_s: float
    window: tuple[float, float]
    measured_iterations: int
    stage_time_s: dict[str, float]
    utilization: dict[str, dict[str, float]]
    counts: dict[str, int]
    staleness: dict[str, float]
    recorder: Recorder


def check_fits(plan: Plan, costs: StageCosts) -> None:
    """Refuse plans whose envs do not fit a node's RAM (an env holds GBs of memory)."""
    costs.check_gpu_memory()
    need = costs.env_memory_per_node_gb()
    have = plan.cluster.node_ram_gb
    if need > have:
        raise ConfigError(
            "plan.workload.total_num_envs",
            f"{plan.envs_per_worker} envs per worker need {need:.0f} GB per node "
            f"({costs.profile.costs.env_memory_gb:g} GB each) but cluster.node_ram_gb is {have:g}",
        )


def simulate(plan: Plan, profile: Profile, *, iterations: int = DEFAULT_ITERATIONS,
             warmup: int = DEFAULT_WARMUP, seed: int | None = None, trace: bool = False,
             max_workers: int = DEFAULT_MAX_SIMULATED_WORKERS) -> SimResult:
    if warmup >= iterations:
        raise ConfigError("iterations", f"must exceed warmup iterations ({warmup}), got {iterations}")
    costs = StageCosts(plan, profile)
    check_fits(plan, costs)
    rng = np.random.default_rng(seed) if (seed is not None and profile.variability.any) else None
    env = simpy.Environment()
    rec = Recorder(keep_spans=trace)
    wiring = wire(env, costs, Durations(costs, rng), rec, max_workers)
    if wiring.dynamic_batching:
        for gen in wiring.generators:
            env.process(gen.run())
    for worker in wiring.workers:
        env.process(worker.run(iterations))
    done = env.process(wiring.actor.run(iterations))
    env.run(until=done)

    ends = wiring.train_log.iteration_done
    t0 = ends[warmup - 1] if warmup > 0 else 0.0
    t1 = ends[-1]
    measured = iterations - warmup
    iteration_s = (t1 - t0) / measured
    w = plan.workload
    throughput = w.env_steps_per_iteration / iteration_s

    span = t1 - t0
    g_r, g_a = wiring.simulated_workers, plan.actor_gpus
    env_cores = g_r * costs.cores_per_worker
    units = {"env_reset": env_cores, "env_step": env_cores, "inference": g_r, "train": g_a,
             "optimizer_step": g_a, "weight_sync": g_r,
             "phase_switch": g_r if plan.mode == "colocated" else plan.cluster.gpus}
    busy = {s: rec.busy_time(s, t0, t1) for s in STAGES}
    stage_util = {s: busy[s] / (span * units[s]) for s in STAGES}
    # Per-unit busy seconds per iteration: what one GPU / one worker's cores spend on the stage.
    stage_time = {s: busy[s] / units[s] / measured for s in STAGES}
    if plan.mode == "colocated":
        resources = {"gpu": sum(stage_util[s] for s in ("inference", "train", "optimizer_step", "phase_switch"))}
    else:
        resources = {
            "rollout_gpu": busy["inference"] / (span * g_r),
            "actor_gpu": (busy["train"] + busy["optimizer_step"]) / (span * g_a),
        }
    resources["env_cpu"] = (busy["env_reset"] + busy["env_step"]) / (span * env_cores)

    lags = [k - v for k, vs in wiring.rollout_log.behaviour_version.items() if k >= warmup for v in vs]
    counts = {
        "iterations": iterations,
        "warmup_iterations": warmup,
        "env_steps": wiring.rollout_log.env_steps,
        "samples": wiring.train_log.samples,
        "optimizer_steps": wiring.train_log.optimizer_steps,
        "micro_batches": wiring.train_log.micro_batches,
        "weight_versions": wiring.weights.version,
        "inference_calls": sum(g.calls for g in wiring.generators) * (plan.rollout_gpus // g_r),
        "simulated_env_workers": g_r,
    }
    staleness = {"mean": float(np.mean(lags)) if lags else 0.0, "max": float(max(lags)) if lags else 0.0}
    return SimResult(plan, iteration_s, throughput, (t0, t1), measured, stage_time,
                     {"stages": stage_util, "resources": resources}, counts, staleness, rec)


def _interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and a 95 % Student-t interval."""
    from scipy import stats

    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean())
    if len(arr) < 2:
        return mean, mean, mean
    half = float(stats.t.ppf(0.975, len(arr) - 1) * arr.std(ddof=1) / math.sqrt(len(arr)))
    return mean, mean - half, mean + half


def predict(plan: Plan, profile: Profile, *, replications: int = 1, seed: int = 0,
            iterations: int = DEFAULT_ITERATIONS, warmup: int = DEFAULT_WARMUP,
            trace_path: str | Path | None = None) -> dict[str, Any]:
    """One prediction as a JSON-ready dict (the fields are defined in docs/metrics.md)."""
    if replications < 1:
        raise ConfigError("replications", f"must be an integer >= 1, got {replications}")
    runs = [
        simulate(plan, profile, iterations=iterations, warmup=warmup,
                 seed=(seed + r) if profile.variability.any else None,
                 trace=(trace_path is not None and r == 0))
        for r in range(replications)
    ]
    first = runs[0]
    b = bound(StageCosts(plan, profile))
    thr = [r.throughput_env_steps_per_s for r in runs]
    its = [r.iteration_time_s for r in runs]
    mean, lo, hi = _interval(thr)
    it_mean, it_lo, it_hi = _interval(its)
    out: dict[str, Any] = {
        "mode": plan.mode,
        "backbone": profile.backbone,
        "profile": profile.name,
        "gpus": plan.cluster.gpus,
        "allocation_ratio": plan.allocation_ratio,
        "rollout_gpus": plan.rollout_gpus,
        "actor_gpus": plan.actor_gpus,
        "pipeline_stage_num": plan.pipeline_stage_num,
        "total_num_envs": plan.workload.total_num_envs,
        "throughput_env_steps_per_s": mean,
        "iteration_time_s": it_mean,
        "bound_env_steps_per_s": b.throughput_env_steps_per_s,
        "bottleneck": b.bottleneck,
        "utilization": first.utilization,
        "stage_time_s": first.stage_time_s,
        "staleness": first.staleness,
        "counts": first.counts,
        "replications": replications,
    }
    if replications > 1:
        out["throughput_ci95"] = [lo, hi]
        out["iteration_time_ci95"] = [it_lo, it_hi]
        out["seed"] = seed
    if trace_path is not None:
        first.recorder.write_trace(trace_path, {"source": "perfmodel", "plan": plan.to_dict(),
                                                 "profile": profile.name})
        out["trace"] = str(trace_path)
    return out
