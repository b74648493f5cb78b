"""A prediction: the simulation of one plan (perfmodel.simulate) with its prediction interval
(perfmodel.calibration.uncertainty), as one JSON-ready dict (the fields are defined in
docs/metrics.md). Composed here, one layer above both, so that the simulator imports nothing
from the calibration that fits it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from perfmodel.bound import bound
from perfmodel.bound_gap import bound_gap
from perfmodel.costs import StageCosts
from perfmodel.extrapolation import calibrated_gpu_type, extrapolation, workload_extrapolation
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.metrics import plan_fields
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile
from perfmodel.simulate import DEFAULT_ITERATIONS, DEFAULT_WARMUP, simulate, simulated_throughput


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


def actor_headroom(plan: Plan, bottleneck: str, utilization: dict[str, Any]) -> dict[str, Any]:
    """``{"headroom": {"stage": "actor", "factor": f}}`` where training overlaps the rollout
    (the asynchronous modes) and the rollout binds: the actor binds once its time per iteration
    grows by ``f`` = 1 / its GPUs' busy share. What such a prediction leans on beyond its
    bottleneck: pi0.5 rollout_async at 32 GPUs is env-bound with the actor 84 % busy (f 1.19),
    so an actor 1.3x slower than modelled costs 5.5 %, 1.5x costs 17 % (docs/metrics.md,
    "What differs between the backbones at 32 GPUs"). Empty otherwise: in the synchronous modes
    every stage adds to the iteration (``stage_time_s``), and an actor-bound plan has none."""
    busy = utilization.get("resources", {}).get("actor_gpu", 0.0)
    if not plan.mechanisms.async_training or bottleneck == "actor" or not 0.0 < busy < 1.0:
        return {}
    return {"headroom": {"stage": "actor", "factor": 1.0 / busy}}


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
        # the plan's own rollout where it names one (plan.rollout): absent, the mode's
        **({"rollout": plan.rollout} if plan.rollout is not None else {}),
        "backbone": profile.backbone,
        "profile": profile.name,
        **plan_fields(plan),
        "throughput_env_steps_per_s": mean,
        "iteration_time_s": it_mean,
        "bound_env_steps_per_s": b.throughput_env_steps_per_s,
        "bottleneck": b.bottleneck,
        # the share of the bound the simulated timeline keeps, and what takes the rest
        "bound_gap": bound_gap(first.recorder, first.window, first.measured_iterations, costs, b),
        **actor_headroom(plan, b.bottleneck, first.utilization),
        "utilization": first.utilization,
        "stage_time_s": first.stage_time_s,
        "staleness": first.staleness,
        "counts": first.counts,
        "replications": replications,
        # what the costs are not measured for (env costs at another envs per core): never silent
        "warnings": costs.warnings,
        # beyond the calibrated GPU or node counts or GPU type: stated with or without an interval
        "extrapolation": {**extrapolation(plan, profile.uncertainty, calibrated_gpu_type(profile)),
                          **workload_extrapolation(plan, profile)},
    }
    if profile.backbone_uncalibrated:
        # no published point calibrates this backbone (perfmodel.calibration.uncalibrated): its
        # per-backbone parameters are bracketed over the calibrated backbones' spread
        out["extrapolation"]["backbone_not_calibrated"] = True
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
        return simulated_throughput(pl, pr, iterations=iterations, warmup=warmup,
                                    seed=seed if pr.variability.any else None)

    iv, why = prediction_interval(plan, profile, first, run, ext)
    if iv is not None and first > 0 and mean != first:
        f = mean / first
        iv["low"], iv["high"] = iv["low"] * f, iv["high"] * f
        if "gpu_type_other_end" in iv:
            iv["gpu_type_other_end"] *= f
        for w in iv.get("worlds", []):
            w["throughput"] *= f
    out: dict[str, Any] = {"throughput_interval": iv}
    if why is not None:
        out["throughput_interval_unavailable"] = why
    return out
