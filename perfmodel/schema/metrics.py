"""Run metrics from a timeline: one definition for simulated and measured runs (docs/metrics.md).

``perfmodel.simulate`` and ``executor.runtime.record`` both call these, so that a prediction
and a measurement compare field by field: the measured window, throughput and iteration time
over it, stage times and utilization, the behaviour policy's staleness, and the run's counts.
Also here: ``error_pct``, the one definition of a prediction's error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from perfmodel.schema.plan import Plan
from perfmodel.schema.timeline import STAGES, Recorder

# Stages that occupy GPUs: colocated's shared GPUs run all of them (swaps included).
GPU_STAGES = ("inference", "train", "optimizer_step", "phase_switch")


@dataclass(frozen=True)
class WindowMetrics:
    """What the measured window says (docs/metrics.md, "Throughput" and "Stages")."""

    window: tuple[float, float]
    measured_iterations: int
    iteration_time_s: float
    throughput_env_steps_per_s: float
    stage_time_s: dict[str, float]
    utilization: dict[str, dict[str, float]]


def error_pct(predicted: float | None, measured: float | None) -> float | None:
    """The one definition of a prediction's error (docs/metrics.md, "Error"): prediction /
    measurement - 1, in percent; positive when the model predicted more. None without both
    numbers or with a zero measurement."""
    if predicted is None or measured is None or measured == 0:
        return None
    return 100.0 * (predicted / measured - 1.0)


def plan_fields(plan: Plan) -> dict[str, Any]:
    """The plan's size and split, as every prediction and run record states them."""
    return {"gpus": plan.cluster.gpus, "allocation_ratio": plan.allocation_ratio, "rollout_gpus": plan.rollout_gpus,
            "actor_gpus": plan.actor_gpus, "pipeline_stage_num": plan.pipeline_stage_num,
            "total_num_envs": plan.workload.total_num_envs, "global_batch_size": plan.workload.global_batch_size,
            "micro_batch_size": plan.workload.micro_batch_size}


def measured_window(iteration_done: list[float], warmup: int) -> tuple[float, float] | None:
    """[t0, t1]: from the end of the last warm-up iteration's training (0 without warm-up) to
    the end of the last iteration's; None when fewer than warmup + 1 iterations completed."""
    if len(iteration_done) <= warmup:
        return None
    return (iteration_done[warmup - 1] if warmup > 0 else 0.0), iteration_done[-1]


class TimedWindow(NamedTuple):
    """The measured window's timing (``WindowMetrics``' first fields): all a throughput needs."""

    window: tuple[float, float]
    measured_iterations: int
    iteration_time_s: float
    throughput_env_steps_per_s: float


def window_throughput(plan: Plan, iteration_done: list[float], warmup: int) -> TimedWindow | None:
    """The measured window (``measured_window``) timed, or None when it is empty: what
    ``window_metrics`` reports of it, and all a throughput needs (no span is summed)."""
    window = measured_window(iteration_done, warmup)
    if window is None:
        return None
    measured = len(iteration_done) - warmup
    iteration_s = (window[1] - window[0]) / measured
    return TimedWindow(window, measured, iteration_s, plan.workload.env_steps_per_iteration / iteration_s)


def staleness(behaviour_version: dict[int, list[int]], warmup: int) -> dict[str, float]:
    """Mean and max version lag of the behaviour policy over the iterations after the warm-up:
    ``behaviour_version[k]`` lists the weight version each rollout of iteration k used."""
    lags = [k - v for k, vs in behaviour_version.items() if k >= warmup for v in vs]
    if not lags:
        return {"mean": 0.0, "max": 0.0}
    return {"mean": math.fsum(lags) / len(lags), "max": float(max(lags))}


def window_metrics(plan: Plan, rec: Recorder, iteration_done: list[float], warmup: int, *,
                   env_workers: int | None = None,
                   busy: dict[str, float] | None = None) -> WindowMetrics | None:
    """Throughput, iteration time, stage times and utilization over the measured window; None
    when the window is empty (see ``measured_window``).

    ``env_workers``: env workers (one per rollout GPU) whose spans ``rec`` holds; by default the
    plan's rollout GPUs (the simulator records fewer replicas). ``busy``: unit-seconds of
    stages in the window that override ``rec.busy_time`` (the executor caps env stages at the
    workers' cores)."""
    timed = window_throughput(plan, iteration_done, warmup)
    if timed is None:
        return None
    (t0, t1), measured, iteration_s, throughput = timed
    span = t1 - t0
    g_r = plan.rollout_gpus if env_workers is None else env_workers
    g_a = plan.actor_gpus
    env_cores = g_r * max(1.0, plan.env_cores_per_worker)
    disaggregated = plan.mechanisms.disaggregated
    units = {"env_reset": env_cores, "env_step": env_cores, "inference": g_r, "train": g_a,
             "optimizer_step": g_a, "weight_sync": g_r,
             "phase_switch": plan.cluster.gpus if disaggregated else g_r}
    stage_busy = {s: rec.busy_time(s, t0, t1) for s in STAGES}
    stage_busy.update(busy or {})
    stage_util = {s: stage_busy[s] / (span * units[s]) for s in STAGES}
    # Per-unit busy seconds per iteration: what one GPU / one worker's cores spend on the stage.
    stage_time = {s: stage_busy[s] / units[s] / measured for s in STAGES}
    resources: dict[str, float]
    if not disaggregated:
        # each GPU runs every phase; with the rollout on some of them (colocated_rollout_gpus),
        # inference keeps only that share of the GPUs busy (1 otherwise: x * 1.0 is x exactly)
        share = plan.rollout_gpus / plan.actor_gpus
        resources = {"gpu": sum(stage_util[s] * (share if s == "inference" else 1.0) for s in GPU_STAGES)}
    else:
        resources = {"rollout_gpu": stage_busy["inference"] / (span * g_r),
                     "actor_gpu": (stage_busy["train"] + stage_busy["optimizer_step"]) / (span * g_a)}
    resources["env_cpu"] = (stage_busy["env_reset"] + stage_busy["env_step"]) / (span * env_cores)
    return WindowMetrics((t0, t1), measured, iteration_s, throughput,
                         stage_time, {"stages": stage_util, "resources": resources})


def run_counts(*, iterations: int, warmup: int, env_steps: int, samples: int, optimizer_steps: int,
               micro_batches: int, weight_versions: int, inference_calls: int) -> dict[str, Any]:
    """The run's counts, warm-up included (docs/metrics.md, "Counts")."""
    return {"iterations": iterations, "warmup_iterations": warmup, "env_steps": env_steps, "samples": samples,
            "optimizer_steps": optimizer_steps, "micro_batches": micro_batches,
            "weight_versions": weight_versions, "inference_calls": inference_calls}
