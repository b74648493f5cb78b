"""benchmarks/probe_noise.py: the host's noise floor for a prediction made before a run. The
statistics on hand-made ratios; the stored result recomputes to its summary, and the docs state it."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import probe_noise  # noqa: E402


def test_ratio_stats_on_known_ratios():
    s = probe_noise.ratio_stats([0.8, 1.0, 1.25, 1.05])
    assert s["n"] == 4
    assert s["geometric_mean"] == pytest.approx((0.8 * 1.0 * 1.25 * 1.05) ** 0.25)
    logs = [math.log(x) for x in (0.8, 1.0, 1.25, 1.05)]
    mean = sum(logs) / 4
    assert s["sd_log"] == pytest.approx(math.sqrt(sum((x - mean) ** 2 for x in logs) / 3))
    assert s["median_abs_deviation"] == pytest.approx((0.05 + 0.2) / 2)
    assert s["share_beyond_10pct"] == 0.5  # 0.8 and 1.25; 1.05 is within


def test_summary_divides_each_probe_by_the_window():
    reps = [{"pre_run_probe": {"step_cpu_s_mean": 0.33}, "probe_on_run_processes": {"step_cpu_s_mean": 0.27},
             "window": {"step_cpu_s_mean": 0.30}}] * 2
    s = probe_noise.summary(reps, [0.5])
    assert s["pre_run_probe"]["geometric_mean"] == pytest.approx(1.1)
    assert s["probe_on_run_processes"]["geometric_mean"] == pytest.approx(0.9)
    assert s["workload_grid_run_over_probe"]["geometric_mean"] == pytest.approx(2.0)  # probe over run


def test_stored_result_recomputes_and_the_docs_state_it():
    doc = json.loads(probe_noise.RESULTS.read_text())
    assert doc["summary"] == probe_noise.summary(doc["repetitions"], probe_noise.grid_ratios())
    assert len(doc["repetitions"]) >= 5 and "loadavg_1min_before" in doc and doc["host"]["cpu_model"]
    for r in doc["repetitions"]:  # raw samples kept, the means are theirs
        for k in probe_noise.PROBES:
            assert r[k]["step_cpu_s_mean"] == pytest.approx(sum(r[k]["samples"]) / len(r[k]["samples"]))
        assert r["window"]["step_cpu_s_mean"] == pytest.approx(
            sum(r["window"]["episode_step_cpu_s"]) / len(r["window"]["episode_step_cpu_s"]))
    text = " ".join((ROOT / "docs" / "validation.md").read_text().split())
    assert probe_noise.markdown(doc) in text


@pytest.mark.parametrize("args", [["--repeats", "1"], ["--episodes", "0"]])
def test_too_few_repetitions_or_episodes_is_a_one_line_error(args, capsys):
    with pytest.raises(SystemExit) as e:
        probe_noise.main(args + ["--out", "/nonexistent/never_written.json"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--repeats must be >= 2 and --episodes >= 1" in err
