"""How wide a prediction's interval must be away from the calibrated workload, learned from the
measured workload grid (issue 39, item 4).

The grid (benchmarks/workload_grid.py, benchmarks/results/workload_grid.json) runs real LIBERO
scenes and the stand-in policy at RLinf's workloads and the paper's, each point predicted before
its run from a profile measured on the same host (benchmarks/results/workload_grid_profile.json).
That profile was measured at one workload: its ``default_workload`` (chunk, epochs, batches,
episode length) and its backbone's denoising steps; its env costs at several envs per core.
Each grid point then lies some distance from what the profile measured, along each axis:
``|log2(value / measured value)|`` (a doubling is 1). Two kinds of held-out fold give the error
at a distance:

- one value of one axis: the grid points whose value on the axis differs from the profile's
  (chunk 5 against the profile's 10, 10 denoising steps against 4, 2 rollout epochs against 1,
  ...), predicted from the profile measured at the other value; their error is
  ``log(prediction / measurement)``;
- envs per core: each density the profile measured, dropped from its env cost curves and read
  again from the others (``EnvDensityCurve.at``: interpolated, or the nearest measured point
  beyond them); its error is the env step cost's, which an env-bound plan's throughput takes 1:1.

The width per doubling of each axis comes from one least-squares fit over every fold,
``e_i^2 = s0^2 + sum_a (k_a d_ia)^2`` with non-negative unknowns (scipy.optimize.nnls): ``s0``
the error at the profile's own workload (the residual the calibration already carries), ``k_a``
the error added per doubling along axis ``a``. So the width grows linearly with the distance
along each axis, as measured, and in quadrature across axes. An axis the grid never moved has
no width, and a prediction away from the calibrated workload on it says so.

    python benchmarks/workload_distance.py                 # print, and write profiles/reference/workload_widths.json
    python benchmarks/workload_distance.py --check         # recompute and compare with the stored file
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GRID = ROOT / "benchmarks" / "results" / "workload_grid.json"
PROFILE = ROOT / "benchmarks" / "results" / "workload_grid_profile.json"
OUT = ROOT / "profiles" / "reference" / "workload_widths.json"  # perfmodel.extrapolation.WORKLOAD_WIDTHS

# grid point axis -> the plan's workload field (perfmodel.extrapolation.WORKLOAD_FIELDS, plus the
# policy's denoising steps); envs per core is the envs_per_gpu axis (one node's cores per GPU fixed)
AXES = {"chunk": "num_action_chunks", "horizon": "max_episode_steps", "rollout_epoch": "rollout_epoch",
        "update_epoch": "update_epoch", "global_batch": "global_batch_size", "denoising_steps": "denoising_steps"}
DENSITY_AXIS = "envs_per_gpu"


def measured_workload(profile: dict[str, Any]) -> dict[str, float]:
    """What the profile measured, per axis: its default workload and its backbone's denoising steps."""
    from perfmodel.backbones import BACKBONES

    w = profile["default_workload"]
    return {"num_action_chunks": w["num_action_chunks"], "max_episode_steps": w["max_episode_steps"],
            "rollout_epoch": w["rollout_epoch"], "update_epoch": w["update_epoch"],
            "global_batch_size": w["global_batch_size"],
            "denoising_steps": BACKBONES[profile["backbone"]].denoise_steps}


def grid_folds(grid: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, Any]]:
    """One fold per measured grid point: its distances from the profile's workload and its error."""
    base = measured_workload(profile)
    out = []
    for p in grid["points"]:
        if p.get("status") != "ok":
            continue
        axes = p["axes"]
        dist = {}
        for key, field in AXES.items():
            v = axes.get(key)
            if key == "denoising_steps" and v is None:
                v = base[field]  # the backbone's own
            d = abs(math.log2(v / base[field]))
            if d > 1e-9:
                dist[field] = round(d, 4)
        out.append({"fold": p["name"], "kind": "grid point", "distance": dist,
                    "log_error": math.log1p(p["error_pct"] / 100.0), "error_pct": p["error_pct"]})
    return out


def density_folds(profile: dict[str, Any]) -> list[dict[str, Any]]:
    """Each measured envs-per-core point of the lock-step step curve held out and read from the others."""
    from perfmodel.schema.profile import EnvDensityCurve

    raw = profile["costs"]["env_density"].get("step_lockstep")
    if not raw:
        return []
    points = [tuple(p) for p in raw["points"]]
    out = []
    for i, (x, y) in enumerate(points):
        rest = points[:i] + points[i + 1:]
        if not rest:
            continue
        got, _ = EnvDensityCurve(tuple(rest)).at(x)
        nearest = min(rest, key=lambda p: abs(math.log2(p[0] / x)))[0]
        # a dearer env step predicts a slower, env-bound plan: throughput error = -cost error
        out.append({"fold": f"envs per core {x:g} held out", "kind": "profile env cost",
                    "distance": {DENSITY_AXIS: round(abs(math.log2(x / nearest)), 4)},
                    "log_error": -math.log(got / y), "error_pct": 100.0 * (y / got - 1.0),
                    "measured_cpu_s": y, "read_from_others_cpu_s": got})
    return out


def fit(folds: list[dict[str, Any]]) -> dict[str, Any]:
    """Non-negative least squares of e^2 = s0^2 + sum_a k_a^2 d_a^2 over the folds."""
    import numpy as np
    from scipy.optimize import nnls

    axes = sorted({a for f in folds for a in f["distance"]})
    a = np.array([[1.0] + [f["distance"].get(ax, 0.0) ** 2 for ax in axes] for f in folds])
    b = np.array([f["log_error"] ** 2 for f in folds])
    x, _ = nnls(a, b)
    fitted = a @ x
    for f, e2 in zip(folds, fitted):
        f["fitted_abs_log_error"] = math.sqrt(max(0.0, float(e2)))
    per_axis = {}
    for ax, k2 in zip(axes, x[1:]):
        pts = [f for f in folds if ax in f["distance"]]
        k = math.sqrt(max(0.0, float(k2)))
        # k = 0: the folds along it are no worse than those at the measured workload (a measured
        # width of zero, not a missing one)
        distances = sorted({f["distance"][ax] for f in pts})
        # the reader's format (perfmodel.extrapolation.load_workload_widths): the width at each
        # distance the grid measured, linear in the distance (the fit's k per doubling)
        per_axis[ax] = {"sd_log_by_distance": [[d, round(k * d, 6)] for d in distances],
                        "log_error_per_doubling": round(k, 6),
                        "folds": [{"fold": f["fold"], "distance_doublings": f["distance"][ax],
                                   "error_pct": round(f["error_pct"], 2)} for f in pts]}
    unmoved = [ax for ax, k2 in zip(axes, x[1:]) if k2 <= 0.0]
    return {"residual_log_error_at_measured_workload": math.sqrt(max(0.0, float(x[0]))), "axes": per_axis,
            "axes_without_excess_error": unmoved}


def build() -> dict[str, Any]:
    grid = json.loads(GRID.read_text())
    profile = json.loads(PROFILE.read_text())
    folds = grid_folds(grid, profile) + density_folds(profile)
    res = fit(folds)
    return {"kind": "workload_widths", "source": "python benchmarks/workload_distance.py",
            "method": "non-negative least squares of e^2 = s0^2 + sum_a (k_a d_a)^2 over held-out folds: grid "
                      "points (one value of one axis away from the profile's measured workload, predicted before "
                      "the run) and the profile's envs-per-core points read from the others; e = log(prediction / "
                      "measurement), d_a = |log2(value / measured value)|",
            "grid": str(GRID.relative_to(ROOT)), "profile": str(PROFILE.relative_to(ROOT)),
            "measured_workload": measured_workload(profile), **res,
            "folds": [{k: (round(v, 5) if isinstance(v, float) else v) for k, v in f.items()} for f in folds]}


def main(argv: list[str] | None = None) -> int:
    from perfmodel.schema.jsonio import write_json_atomic

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="recompute and compare with the stored file; write nothing")
    a = ap.parse_args(argv)
    doc = build()
    for ax, v in doc["axes"].items():
        print(f"{ax:<20} {100 * v['log_error_per_doubling']:6.2f} % sd per doubling  "
              + ", ".join(f"{f['fold']} ({f['distance_doublings']:g}: {f['error_pct']:+.1f} %)" for f in v["folds"]))
    print(f"{'at the measured one':<20} {100 * doc['residual_log_error_at_measured_workload']:6.2f} %")
    if a.check:
        stored = json.loads(OUT.read_text())
        same = all(abs(stored["axes"][k]["log_error_per_doubling"] - v["log_error_per_doubling"]) < 1e-9
                   for k, v in doc["axes"].items()) and set(stored["axes"]) == set(doc["axes"])
        print("matches the stored file" if same else "differs from the stored file")
        return 0 if same else 1
    write_json_atomic(OUT, doc)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
