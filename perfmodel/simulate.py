"""Run the discrete-event model of one plan and turn it into a prediction (docs/metrics.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import simpy

from perfmodel.bound import bound
from perfmodel.costs import StageCosts
from perfmodel.extrapolation import calibrated_gpu_type, extrapolation
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.metrics import plan_fields, run_counts, staleness, window_metrics
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile
from perfmodel.schema.timeline import Recorder
from perfmodel.sim.durations import Durations
from perfmodel.sim.modes import DEFAULT_MAX_SIMULATED_WORKERS, wire

DEFAULT_ITERATIONS = 3
DEFAULT_WARMUP = 1
# What one simulation can answer in seconds: the rollout side has an event per env group and
# chunk step, the trainer's first pass per micro-batch when streaming. The largest RLinf LIBERO
# configs use 820 chunk steps per iteration (512 steps / 5 chunks x 8 epochs) and 2 update epochs.
MAX_CHUNK_STEPS_PER_ITERATION = 10_000
MAX_UPDATE_EPOCH = 1_000
MAX_MICRO_BATCHES_PER_GLOBAL_BATCH = 10_000


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
    events: int = 0  # SimPy events scheduled (the simulation's cost, independent of timing)


def check_fits(plan: Plan, costs: StageCosts) -> None:
    """Refuse plans whose envs do not fit a node's RAM (an env holds GBs of memory)."""
    costs.check_gpu_memory()
    envs, need, have = max(costs.env_memory_by_node(), key=lambda e: e[1] / e[2])
    if need > have:
        part = "" if have >= plan.cluster.node_ram_gb else f" (this plan's part of a {plan.cluster.node_ram_gb:g} GB node)"
        raise ConfigError(
            "plan.workload.total_num_envs",
            f"the fullest node's {envs} envs ({plan.envs_per_worker} per env worker) need {need:.0f} GB at "
            f"{costs.profile.costs.env_memory_gb:.3g} GB each but have {have:g} GB{part} (cluster.node_ram_gb): "
            "use fewer envs per GPU, or another ratio or placement",
        )


def check_simulable(plan: Plan) -> None:
    """Refuse sizes the simulator cannot answer in seconds (one line naming the field)."""
    w = plan.workload
    per_iter = w.chunk_steps_per_epoch * w.rollout_epoch
    if per_iter > MAX_CHUNK_STEPS_PER_ITERATION:
        field = "max_episode_steps" if w.chunk_steps_per_epoch > w.rollout_epoch else "rollout_epoch"
        raise ConfigError(f"plan.workload.{field}",
                          f"max_episode_steps / num_action_chunks x rollout_epoch must be <= "
                          f"{MAX_CHUNK_STEPS_PER_ITERATION} chunk steps per iteration, got {per_iter}")
    if w.update_epoch > MAX_UPDATE_EPOCH:
        raise ConfigError("plan.workload.update_epoch", f"must be <= {MAX_UPDATE_EPOCH}, got {w.update_epoch}")
    if w.global_batch_size // w.micro_batch_size > MAX_MICRO_BATCHES_PER_GLOBAL_BATCH:
        raise ConfigError("plan.workload.global_batch_size",
                          f"must be <= {MAX_MICRO_BATCHES_PER_GLOBAL_BATCH} x micro_batch_size "
                          f"({MAX_MICRO_BATCHES_PER_GLOBAL_BATCH * w.micro_batch_size}), got {w.global_batch_size}")


def simulate(plan: Plan, profile: Profile, *, iterations: int = DEFAULT_ITERATIONS,
             warmup: int = DEFAULT_WARMUP, seed: int | None = None, trace: bool = False,
             max_workers: int | None = None, collapse: bool = True) -> SimResult:
    """``max_workers``: env workers simulated (replicas of the real ones, perfmodel.sim.modes);
    by default one with deterministic costs (identical replicas give the same timeline, tested)
    and DEFAULT_MAX_SIMULATED_WORKERS with variability (stragglers at the barriers).
    ``collapse=False``: one event per step everywhere (the reference the collapsed blocks of
    perfmodel.sim.workers are tested against)."""
    if warmup >= iterations:
        raise ConfigError("iterations", f"must exceed warmup iterations ({warmup}), got {iterations}")
    check_simulable(plan)
    costs = StageCosts(plan, profile)
    check_fits(plan, costs)
    rng = None
    if seed is not None and profile.variability.any:
        import numpy as np  # only for variable costs: a plain prediction starts faster without it

        rng = np.random.default_rng(seed)
    env = simpy.Environment()
    rec = Recorder(keep_spans=trace)
    if max_workers is None:
        max_workers = 1 if rng is None else DEFAULT_MAX_SIMULATED_WORKERS
    wiring = wire(env, costs, Durations(costs, rng), rec, max_workers, collapse)
    if plan.mechanisms.dynamic_batching:
        for server in wiring.servers:
            env.process(server.run())
    for worker in wiring.workers:
        env.process(worker.run(iterations))
    done = env.process(wiring.trainer.run(iterations))
    env.run(until=done)
    for worker in wiring.workers:
        worker.settle(env.now)

    g_r = wiring.simulated_workers
    m = window_metrics(plan, rec, wiring.train_log.iteration_done, warmup, env_workers=g_r)
    assert m is not None  # the trainer ran every iteration
    counts = {
        **run_counts(iterations=iterations, warmup=warmup, env_steps=wiring.rollout_log.env_steps,
                     samples=wiring.train_log.samples, optimizer_steps=wiring.train_log.optimizer_steps,
                     micro_batches=wiring.train_log.micro_batches, weight_versions=wiring.weights.version,
                     inference_calls=sum(s.calls for s in wiring.servers) * (plan.rollout_gpus // g_r)),
        "simulated_env_workers": g_r,
    }
    return SimResult(plan, m.iteration_time_s, m.throughput_env_steps_per_s, m.window, m.measured_iterations,
                     m.stage_time_s, m.utilization, counts,
                     staleness(wiring.rollout_log.behaviour_version, warmup), rec,
                     next(env._eid))  # SimPy's event id counter: events scheduled so far


def _interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and a 95 % Student-t interval."""
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, mean, mean
    import numpy as np
    # Student's t quantile: scipy.stats.t.ppf is this function (bit for bit), without importing
    # scipy.stats (about 1 s more; scipy.special about 0.4 s), and only when replicating.
    from scipy.special import stdtrit

    arr = np.asarray(values, dtype=float)
    half = float(stdtrit(len(arr) - 1, 0.975) * arr.std(ddof=1) / math.sqrt(len(arr)))
    return mean, mean - half, mean + half


def predict(plan: Plan, profile: Profile, *, replications: int = 1, seed: int = 0,
            iterations: int = DEFAULT_ITERATIONS, warmup: int = DEFAULT_WARMUP,
            trace_path: str | Path | None = None, interval: bool = True) -> dict[str, Any]:
    """One prediction as a JSON-ready dict (the fields are defined in docs/metrics.md).
    ``interval``: add ``throughput_interval`` and ``extrapolation`` (a few more simulations)."""
    if replications < 1:
        raise ConfigError("replications", f"must be an integer >= 1, got {replications}")
    if profile.variability.any:
        runs = [simulate(plan, profile, iterations=iterations, warmup=warmup, seed=seed + r,
                         trace=(trace_path is not None and r == 0))
                for r in range(replications)]
    else:  # deterministic costs: every replication is the same simulation, run once
        runs = [simulate(plan, profile, iterations=iterations, warmup=warmup, seed=None,
                         trace=trace_path is not None)] * replications
    first = runs[0]
    costs = StageCosts(plan, profile)
    b = bound(costs)
    thr = [r.throughput_env_steps_per_s for r in runs]
    its = [r.iteration_time_s for r in runs]
    mean, lo, hi = _interval(thr)
    it_mean, it_lo, it_hi = _interval(its)
    out: dict[str, Any] = {
        "mode": plan.mode,
        "backbone": profile.backbone,
        "profile": profile.name,
        **plan_fields(plan),
        "throughput_env_steps_per_s": mean,
        "iteration_time_s": it_mean,
        "bound_env_steps_per_s": b.throughput_env_steps_per_s,
        "bottleneck": b.bottleneck,
        "utilization": first.utilization,
        "stage_time_s": first.stage_time_s,
        "staleness": first.staleness,
        "counts": first.counts,
        "replications": replications,
        # what the costs are not measured for (env costs at another envs per core): never silent
        "warnings": costs.warnings,
        # beyond the calibrated GPU or node counts or GPU type: stated with or without an interval
        "extrapolation": extrapolation(plan, profile.uncertainty, calibrated_gpu_type(profile)),
    }
    if interval:
        out.update(_prediction_interval(plan, profile, first.throughput_env_steps_per_s, mean, out["extrapolation"],
                                        seed=seed, iterations=iterations, warmup=warmup))
    if replications > 1:
        out["throughput_ci95"] = [lo, hi]
        out["iteration_time_ci95"] = [it_lo, it_hi]
        out["seed"] = seed
    if trace_path is not None:
        first.recorder.write_trace(trace_path, {"source": "perfmodel", "plan": plan.to_dict(),
                                                 "profile": profile.name})
        out["trace"] = str(trace_path)
    return out


def _prediction_interval(plan: Plan, profile: Profile, first: float, mean: float, ext: dict[str, Any], *,
                         seed: int, iterations: int, warmup: int) -> dict[str, Any]:
    """``throughput_interval`` (perfmodel.calibration.uncertainty), widened by ``ext``, centred
    on the mean of the replications; the perturbed simulations replay the first replication's
    random draws (common random numbers), or one worker replica when costs are deterministic
    (exact then, perfmodel.sim.modes)."""
    from perfmodel.calibration.uncertainty import prediction_interval

    def run(pl: Plan, pr: Profile) -> float:
        return simulate(pl, pr, iterations=iterations, warmup=warmup,
                        seed=seed if pr.variability.any else None).throughput_env_steps_per_s

    iv, why = prediction_interval(plan, profile, first, run, ext)
    if iv is not None and first > 0:
        f = mean / first
        iv["low"], iv["high"] = iv["low"] * f, iv["high"] * f
        if "gpu_type_other_end" in iv:
            iv["gpu_type_other_end"] *= f
    out: dict[str, Any] = {"throughput_interval": iv}
    if why is not None:
        out["throughput_interval_unavailable"] = why
    return out
