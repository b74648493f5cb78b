"""Fitting and statistics of raw samples: linear cost curves, env density curves, timed calls."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import numpy as np



# ---------------------------------------------------------------------------------------------
# Fitting and statistics


def fit_linear(samples: list[tuple[float, list[float]]], origin: bool = False) -> dict[str, Any]:
    """Least-squares line through the per-size medians of the raw samples (robust to a sample
    slowed by another process), on relative residuals so that small and large sizes count alike
    (``origin``: through 0); fit error = max relative error on those medians. Returns a perfmodel Curve dict (model, intercept, slope, samples, fit_error_pct)."""
    xs = np.array([x for x, _ in samples], float)
    ys = np.array([statistics.median(yv) for _, yv in samples], float)
    w = 1.0 / ys  # residual / y: relative error

    def through_origin() -> tuple[float, float]:
        return float((w * w * xs * ys).sum() / (w * w * xs * xs).sum()), 0.0

    if origin or len(xs) < 2:
        slope, intercept = through_origin()
    else:
        slope, intercept = (float(v) for v in np.polyfit(xs, ys, 1, w=w))
    if slope < 0:  # noise swamped the size dependence (a cost never falls with size): a constant
        slope, intercept = 0.0, float((w * w * ys).sum() / (w * w).sum())
    if intercept < 0:  # a fixed cost is never negative (noise tilted the line): its bound, through 0
        slope, intercept = through_origin()
    errs = [abs(intercept + slope * x - statistics.median(yv)) / statistics.median(yv) * 100 for x, yv in samples]
    return {"model": "linear", "intercept": float(intercept), "slope": float(slope),
            "samples": [[float(x), [float(y) for y in yv]] for x, yv in samples],
            "fit_error_pct": round(float(max(errs)), 3)}


def cv(values: list[float]) -> float:
    return float(np.std(values) / np.mean(values)) if len(values) > 1 and np.mean(values) > 0 else 0.0


def timed(fn: Callable[[], Any], repeats: int, warmup: int, sync: Callable[[], None],
          cpu_time: bool = False, wall: list[float] | None = None) -> list[float]:
    """Seconds of ``repeats`` calls after ``warmup`` calls. ``cpu_time``: this process's CPU
    seconds (for single-threaded CPU work: its time on a dedicated core, not counting preemption by
    other processes); the wall seconds are appended to ``wall``."""
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        sync()
        w, c = time.perf_counter() - t0, time.process_time() - c0
        out.append(c if cpu_time else w)
        if wall is not None:
            wall.append(w)
    return out


# ---------------------------------------------------------------------------------------------
# Env measurements


def density_curve(samples: dict[int, list[float]], cores: int) -> dict[str, Any] | None:
    """An ``EnvDensityCurve`` dict: per env count n >= cores (every core busy), the mean CPU
    seconds at n / cores envs per core, with the raw samples; None when no count filled the cores."""
    full = sorted(n for n in samples if n >= cores and samples[n])
    if not full:
        return None
    return {"points": [[n / cores, statistics.fmean(samples[n])] for n in full],
            "samples": [[n / cores, [float(y) for y in samples[n]]] for n in full]}


