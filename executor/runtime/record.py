"""The run record: ``perfmodel.simulate.predict``'s fields, measured (docs/metrics.md).

Busy time, stage times and utilization are computed exactly as ``perfmodel.simulate.simulate``
does from its recorder, over the same window (the actor's last optimizer step of the last
warm-up iteration to that of the last iteration), so prediction and measurement compare field
by field.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.schema.plan import Plan
from perfmodel.schema.timeline import STAGES, Recorder

RECORD_SCHEMA_VERSION = 1


def env_busy_capped(plan: Plan, rec: Recorder, t0: float, t1: float) -> dict[str, float]:
    """Busy core-seconds of the env stages in [t0, t1], never more than each worker's cores at
    any instant. The simulator's groups take cores from a container and wait when none are
    free; real env processes all run at once, time-sliced by the OS, so each span is longer
    and summing span x cores would count a core twice when a worker's groups oversubscribe it
    (dynamic batching: more single-env groups than cores). Where the spans ask for more cores
    than the worker has, each gets its share."""
    cap = max(1.0, plan.env_cores_per_worker)
    per_res: dict[str, list[tuple[str, float, float, float]]] = {}
    for stage, resource, _lane, start, end, args in rec.spans:
        if stage in ("env_reset", "env_step"):
            lo, hi = max(start, t0), min(end, t1)
            if hi > lo:
                per_res.setdefault(resource, []).append((stage, lo, hi, float(args.get("cores", 1.0))))
    busy = {"env_reset": 0.0, "env_step": 0.0}
    for spans in per_res.values():
        points = sorted({p for _, a, b, _ in spans for p in (a, b)})
        for a, b in zip(points, points[1:]):
            active = [(st, u) for st, lo, hi, u in spans if lo <= a and hi >= b]
            total = sum(u for _, u in active)
            if total <= 0:
                continue
            scale = min(1.0, cap / total)
            for st, u in active:
                busy[st] += u * scale * (b - a)
    return busy


def measured_fields(plan: Plan, rec: Recorder, iteration_done: list[float], warmup: int,
                    behaviour_version: dict[int, list[int]]) -> dict[str, Any]:
    """throughput, iteration time, stage_time_s, utilization, staleness over the measured
    window; None figures when fewer than warmup + 1 iterations completed."""
    done = len(iteration_done)
    lags = [k - v for k, vs in behaviour_version.items() if k >= warmup for v in vs]
    staleness = {"mean": float(np.mean(lags)) if lags else 0.0, "max": float(max(lags)) if lags else 0.0}
    if done <= warmup:
        return {"throughput_env_steps_per_s": None, "iteration_time_s": None, "window_s": None,
                "measured_iterations": 0, "utilization": None, "stage_time_s": None, "staleness": staleness}
    t0 = iteration_done[warmup - 1] if warmup > 0 else 0.0
    t1 = iteration_done[-1]
    measured = done - warmup
    iteration_s = (t1 - t0) / measured
    span = t1 - t0
    g_r, g_a = plan.rollout_gpus, plan.actor_gpus
    env_cores = g_r * max(1.0, plan.env_cores_per_worker)
    units = {"env_reset": env_cores, "env_step": env_cores, "inference": g_r, "train": g_a,
             "optimizer_step": g_a, "weight_sync": g_r,
             "phase_switch": g_r if plan.mode == "colocated" else plan.cluster.gpus}
    busy = {s: rec.busy_time(s, t0, t1) for s in STAGES}
    busy.update(env_busy_capped(plan, rec, t0, t1))
    stage_util = {s: busy[s] / (span * units[s]) for s in STAGES}
    stage_time = {s: busy[s] / units[s] / measured for s in STAGES}
    if plan.mode == "colocated":
        resources = {"gpu": sum(stage_util[s] for s in ("inference", "train", "optimizer_step", "phase_switch"))}
    else:
        resources = {"rollout_gpu": busy["inference"] / (span * g_r),
                     "actor_gpu": (busy["train"] + busy["optimizer_step"]) / (span * g_a)}
    resources["env_cpu"] = (busy["env_reset"] + busy["env_step"]) / (span * env_cores)
    return {"throughput_env_steps_per_s": plan.workload.env_steps_per_iteration / iteration_s,
            "iteration_time_s": iteration_s, "window_s": [t0, t1], "measured_iterations": measured,
            "utilization": {"stages": stage_util, "resources": resources}, "stage_time_s": stage_time,
            "staleness": staleness}


def compare(record: dict[str, Any], prediction: dict[str, Any]) -> dict[str, Any]:
    """Predicted vs measured: throughput error and per-stage times, error = prediction /
    measurement - 1 in percent (docs/metrics.md; positive: the model predicted more)."""
    def err(meas, pred):
        if meas is None or pred is None or meas == 0:
            return None
        return 100.0 * (pred / meas - 1.0)

    thr_m, thr_p = record["throughput_env_steps_per_s"], prediction["throughput_env_steps_per_s"]
    stages = {}
    for s in STAGES:
        p = (prediction.get("stage_time_s") or {}).get(s, 0.0)
        m = (record.get("stage_time_s") or {}).get(s)
        if p or m:
            stages[s] = {"predicted_s": p, "measured_s": m, "error_pct": err(m, p)}
    return {"predicted_throughput_env_steps_per_s": thr_p,
            "predicted_iteration_time_s": prediction["iteration_time_s"],
            "error_pct": err(thr_m, thr_p),
            "iteration_time_error_pct": err(record["iteration_time_s"], prediction["iteration_time_s"]),
            "stages": stages}
