"""benchmarks/workload_distance.py: the interval's width away from the calibrated workload is
learned from the measured grid (issue 39 item 4), and the stored widths file is what the code
computes from the stored grid and profile."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import workload_distance as wd  # noqa: E402


def test_stored_widths_are_what_the_grid_gives():
    stored = json.loads(wd.OUT.read_text())
    doc = wd.build()
    assert stored["kind"] == "workload_widths" and set(stored["axes"]) == set(doc["axes"])
    for axis, v in doc["axes"].items():
        assert stored["axes"][axis]["sd_log_by_distance"] == v["sd_log_by_distance"], axis


def test_each_width_grows_with_the_distance_as_fitted():
    doc = wd.build()
    for axis, v in doc["axes"].items():
        pts = v["sd_log_by_distance"]
        assert [d for d, _ in pts] == sorted(d for d, _ in pts) and all(d > 0 for d, _ in pts)
        k = v["log_error_per_doubling"]
        assert all(math.isclose(s, round(k * d, 6)) for d, s in pts), axis
        assert all(b[1] >= a[1] for a, b in zip(pts, pts[1:])), axis


def test_fit_recovers_a_known_width():
    """Folds made from a known model (s0 = 3 %, chunk 10 % per doubling, none on epochs) give it back."""
    folds = []
    for i, (dc, de) in enumerate([(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (0, 2)]):
        e = math.sqrt(0.03 ** 2 + (0.10 * dc) ** 2)
        dist = {k: float(v) for k, v in (("num_action_chunks", dc), ("rollout_epoch", de)) if v}
        folds.append({"fold": f"f{i}", "kind": "test", "distance": dist, "log_error": e, "error_pct": 100 * e})
    res = wd.fit(folds)
    assert math.isclose(res["axes"]["num_action_chunks"]["log_error_per_doubling"], 0.10, rel_tol=1e-6)
    assert res["axes"]["rollout_epoch"]["log_error_per_doubling"] < 1e-6
    assert math.isclose(res["residual_log_error_at_measured_workload"], 0.03, rel_tol=1e-6)


def test_density_fold_reads_each_point_from_the_others():
    prof = {"costs": {"env_density": {"step_lockstep": {"points": [[1.0, 0.30], [2.0, 0.40], [4.0, 0.50]]}}}}
    folds = {f["fold"]: f for f in wd.density_folds(prof)}
    mid = folds["envs per core 2 held out"]  # interpolated between 1 and 4: 0.30 + 0.20 / 3
    assert math.isclose(mid["read_from_others_cpu_s"], 0.30 + 0.20 / 3)
    assert math.isclose(mid["log_error"], -math.log((0.30 + 0.20 / 3) / 0.40))
    assert mid["distance"] == {"envs_per_gpu": 1.0}
    end = folds["envs per core 4 held out"]  # beyond the others: the nearest measured point
    assert math.isclose(end["read_from_others_cpu_s"], 0.40) and end["distance"] == {"envs_per_gpu": 1.0}
