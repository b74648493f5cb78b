"""benchmarks/workload_grid.py: the grid spans what issue 39 asks (every point a valid plan the
model predicts), its slope interval is least squares, and the smoke grid resumes and runs for real
(``executor run --compare`` on real LIBERO scenes, quick envs) and writes its results."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import workload_grid as grid  # noqa: E402

from perfmodel.prediction import predict  # noqa: E402
from perfmodel.schema.plan import Plan  # noqa: E402
from perfmodel.schema.profile import load_profile  # noqa: E402


def test_grid_spans_the_issues_axes_and_every_point_predicts():
    profile = load_profile(str(ROOT / "profiles" / "pi05_tiny_cpu.json"))
    per_core = []
    for p in grid.GRID:
        plan = grid.plan_of(p, "profiles/pi05_tiny_cpu.json")
        per_core.append(grid.envs_per_core(plan))
        d = predict(Plan.from_dict(plan, "plan"), profile, interval=False)
        assert d["throughput_env_steps_per_s"] > 0
        # RLinf's rule: a global batch is a whole number of micro-batches on every actor rank
        assert not any("global_batch_size" in w for w in d["warnings"]), p.name
    assert len(grid.GRID) >= 12 and min(per_core) < 1 and max(per_core) >= 4
    assert {p.chunk for p in grid.GRID} >= {5, 10}
    assert {p.mode for p in grid.GRID} >= {"colocated", "rollout_async", "train_async"}
    assert any(p.mode == "train_async" and p.ratio is None for p in grid.GRID)  # on shared GPUs
    assert len({p.denoising_steps for p in grid.GRID}) > 1 and len({p.rollout_epoch for p in grid.GRID}) > 1


def test_slope_interval_is_least_squares():
    xs, ys = [0.5, 1.0, 2.0, 4.0], [1.0, 2.0, 4.0, 8.5]
    s = grid.slope_interval(xs, ys)
    import numpy as np

    assert s["slope_pct_per_env_per_core"] == pytest.approx(np.polyfit(xs, ys, 1)[0])
    assert s["low"] < s["slope_pct_per_env_per_core"] < s["high"]
    assert grid.slope_interval([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None


def test_a_drifted_point_is_measured_again_and_its_earlier_attempts_kept(monkeypatch, tmp_path):
    """The re-measuring rule is on the host, never on the error: a point whose host drifted more
    than STEADY_DRIFT runs again (up to the attempts given, the stored row counted), a steady one
    does not even when it missed; the earlier attempts stay in the row and the summary says so.
    (run_point itself is the real executor run, tested by the smoke grid below.)"""
    drifts = iter([1.30, 0.95])
    calls = []

    def fake_run_point(p, profile, runs, iterations, warmup, extra):
        calls.append(p.name)
        return {"name": p.name, "status": "ok", "mode": p.mode, "axes": {"chunk": p.chunk}, "envs_per_core": 1.0,
                "quiet": True, "error_pct": 30.0 if p.name == "colo_e2_c5" else 3.0, "date": f"d{len(calls)}",
                "host_drift_env_step": next(drifts) if p.name == "ra_e4_c5" else 1.0}

    monkeypatch.setattr(grid, "run_point", fake_run_point)
    monkeypatch.setattr(grid, "wait_quiet", lambda s: 0.0)
    stored = {"name": "ra_e4_c5", "status": "ok", "host_drift_env_step": 0.72, "error_pct": -30.8, "date": "d0"}
    steady_miss = {"name": "colo_e2_c5", "status": "ok", "host_drift_env_step": 1.02, "error_pct": -12.0}
    assert not grid.steady(stored) and grid.steady(steady_miss) and grid.steady({"error_pct": 50.0})
    ra = next(p for p in grid.GRID if p.name == "ra_e4_c5")
    row = grid.run_until_steady(ra, "p.json", tmp_path, 3, 1, [], 3, 0.0, grid.attempt_of(stored))
    assert calls == ["ra_e4_c5", "ra_e4_c5"] and row["host_drift_env_step"] == 0.95  # third attempt: steady
    assert [a["date"] for a in row["earlier_attempts"]] == ["d0", "d1"]
    assert [a["error_pct"] for a in row["earlier_attempts"]] == [-30.8, 3.0]
    colo = next(p for p in grid.GRID if p.name == "colo_e2_c5")
    assert "earlier_attempts" not in grid.run_until_steady(colo, "p.json", tmp_path, 3, 1, [], 3, 0.0)
    s = grid.summary([{**row, "quiet": True, "mode": "rollout_async", "axes": {"chunk": 5}, "envs_per_core": 2.0}])
    assert s["remeasured"] == {"points": 1, "earlier_attempts": 2}
    doc = {"summary": {**s, "median_abs_unscaled_error_pct": 1.0, "median_abs_error_at_run_env_costs_pct": 1.0,
                       "max_abs_error_at_run_env_costs_pct": 1.0}}
    assert "1 point was measured again after the host drifted more than 10 %" in grid.markdown_summary(doc)


@pytest.mark.slow
def test_smoke_grid_resumes_a_stored_point_and_runs_the_other_for_real(tmp_path):
    """``--resume`` over a results file that holds one measured point (a colocated row of the stored
    layout-probe grid, kept as it is) runs only the point it lacks: the smoke grid's rollout_async
    point, for real, with the probe before and after it; the summary covers both. (The smoke's
    colocated point is not run: a colocated run with the probe is test_executor_probe's.)"""
    stored = json.loads((ROOT / "benchmarks" / "results" / "workload_grid_noisy_host.json").read_text())
    kept = next(r for r in stored["points"] if r["mode"] == "colocated" and r["status"] == "ok")
    out = tmp_path / "grid.json"
    out.write_text(json.dumps({"points": [kept]}))
    ra = next(p for p in grid.SMOKE if p.mode == "rollout_async")
    rc = grid.main(["--smoke", "--resume", "--points", ra.name, "--profile", str(ROOT / "profiles" / "pi05_tiny_cpu.json"),
                    "--out", str(out), "--runs", str(tmp_path / "runs")])
    doc = json.loads(out.read_text())
    assert rc == 0, doc
    assert [r["name"] for r in doc["points"]] == [kept["name"], ra.name] and doc["points"][0] == kept
    r = doc["points"][1]
    assert r["status"] == "ok" and r["predicted_env_steps_per_s"] > 0 and r["measured_env_steps_per_s"] > 0
    assert r["error_pct"] == pytest.approx(100 * (r["predicted_env_steps_per_s"] / r["measured_env_steps_per_s"] - 1))
    assert "loadavg_1min_before" in r and r["quiet"] == (r["loadavg_1min_before"] < grid.QUIET_LOAD)
    # the probe again after the run: the host's drift while the point ran, CPU seconds after over before
    assert r["host_drift_env_step"] == pytest.approx(r["host_probe_after"]["env_step"] / r["host_probe_cpu_ratio"]["env_step"])
    assert doc["summary"] == grid.summary(doc["points"])
    assert doc["summary"]["points"] == 2 and doc["summary"]["modes"] == ["colocated", "rollout_async"]


def test_device_script_plans_rlinfs_per_gpu_workload_and_predicts_it_from_the_h200_profile(tmp_path):
    """benchmarks/device_h200.sh, dry (DRY_RUN=1): the two runs it would make on a lent H200 (one
    GPU, its 16 cores, colocated, 8 and 16 envs, RLinf's chunk 5 and 3 denoising steps), each an
    ``executor run --compare`` with the H200 profile, whose prediction of each plan answers."""
    import subprocess

    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "DRY_RUN": "1", "RUN_DIR": str(tmp_path),
           "PYTHON": sys.executable}
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "device_h200.sh")], capture_output=True, text=True,
                       env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    cmds = r.stdout.strip().splitlines()
    assert len(cmds) == 2 and all("executor.cli run" in c and "--compare" in c and "--device cuda" in c
                                  and "--profile profiles/pi05_full_gpu.json" in c for c in cmds)
    profile = load_profile(str(ROOT / "profiles" / "pi05_full_gpu.json"))
    for n in (8, 16):
        plan = Plan.load(tmp_path / f"colocated_{n}envs_plan.json")
        assert (plan.mode, plan.cluster.gpus, plan.cluster.gpu, plan.cluster.cpu_cores_per_node) == ("colocated", 1, "h200", 16)
        assert (plan.workload.total_num_envs, plan.workload.num_action_chunks, plan.denoising_steps) == (n, 5, 3)
        assert predict(plan, profile, interval=False)["throughput_env_steps_per_s"] > 0


def test_validation_doc_shows_the_stored_grid():
    """docs/validation.md's grid table is benchmarks/results/workload_grid.json as stored."""
    doc = json.loads((ROOT / "benchmarks" / "results" / "workload_grid.json").read_text())
    text = (ROOT / "docs" / "validation.md").read_text()
    assert grid.markdown_table(doc) in text
    assert " ".join(grid.markdown_summary(doc).split()) in " ".join(text.split())  # reflowed as prose
    assert all("loadavg_1min_before" in r for r in doc["points"])


def test_validation_doc_states_the_stored_action_cost_ratios():
    """The probe's action spread against uniform actions and the stand-in's own chunks: the doc's
    numbers are benchmarks/results/probe_actions.json's, its means its samples'."""
    import probe_actions

    r = json.loads((ROOT / "benchmarks" / "results" / "probe_actions.json").read_text())
    for kind, v in r["samples"].items():
        assert r["mean_s"][kind] == pytest.approx(sum(v) / len(v))
    assert r["mean_s"]["uniform"] / r["mean_s"]["policy_like"] == pytest.approx(r["uniform_over_policy_like"])
    assert r["mean_s"]["stand_in"] / r["mean_s"]["policy_like"] == pytest.approx(r["stand_in_over_policy_like"])
    assert len(probe_actions.cycle_ratios(r, "stand_in")) == len(r["samples"]["stand_in"]) // r["chunks_per_episode"]
    text = " ".join((ROOT / "docs" / "validation.md").read_text().split())
    assert probe_actions.sentence(r) in text


def test_validation_doc_shows_the_layout_probes_grid_with_its_drift():
    """The layout probe's quiet grid (three sittings on a drifting host) is shown as stored, table
    and summary, with the drift that explains its misses (the probe again after each point), and
    spans the three modes."""
    doc = json.loads((ROOT / "benchmarks" / "results" / "workload_grid_noisy_host.json").read_text())
    text = (ROOT / "docs" / "validation.md").read_text()
    assert grid.markdown_table(doc) in text and grid.markdown_summary(doc) in text
    assert doc["summary"] == grid.summary(doc["points"])
    ok = [r for r in doc["points"] if r.get("status") == "ok"]
    assert ok and all(r["quiet"] and r.get("host_drift_env_step") for r in ok)
    assert {r["mode"] for r in ok} >= {"colocated", "train_async", "rollout_async"}
    assert max(abs(r["host_drift_env_step"] - 1) for r in ok) > 0.15  # what the doc says: a fifth or more


def test_validation_doc_shows_the_full_grid_on_the_current_host():
    """The whole grid (13 points, three modes) in one quiet sitting on the current host, its
    profile measured there first: shown as stored, table and summary; every point keeps its load
    before and its host drift, and the summary's steady-host figures are the points' own."""
    doc = json.loads((ROOT / "benchmarks" / "results" / "workload_grid_current_host.json").read_text())
    text = (ROOT / "docs" / "validation.md").read_text()
    assert grid.markdown_table(doc) in text and grid.markdown_summary(doc) in text
    assert doc["summary"] == grid.summary(doc["points"])
    ok = [r for r in doc["points"] if r.get("status") == "ok"]
    assert len(ok) >= 12 and {r["mode"] for r in ok} == {"colocated", "train_async", "rollout_async"}
    assert {r["axes"]["chunk"] for r in ok} == {5, 10}
    assert min(r["envs_per_core"] for r in ok) < 1 and max(r["envs_per_core"] for r in ok) >= 4
    assert all(r.get("host_drift_env_step") and "loadavg_1min_before" in r for r in ok)
    steady = [r for r in ok if abs(r["host_drift_env_step"] - 1) <= grid.STEADY_DRIFT]
    assert doc["summary"]["steady_host"]["points"] == len(steady)
    assert doc["profile"]["measured_here"] and (ROOT / doc["profile"]["path"]).is_file()


def test_the_current_hosts_grid_profile_adds_the_run_share_and_changes_nothing_else():
    """The grid's profile is its base profile with the env CPU share of the asynchronous modes
    added (executor profile --run-share --base-profile): every other cost as the base measured it,
    so the colocated points, predicted from the base, are what the new profile predicts (it has
    no colocated share); each asynchronous point was predicted from the profile with the share (its
    command names it)."""
    doc = json.loads((ROOT / "benchmarks" / "results" / "workload_grid_current_host.json").read_text())
    entry = doc["profile"]
    with_share = json.loads((ROOT / entry["path"]).read_text())
    base = json.loads((ROOT / entry["base_path"]).read_text())
    modes = entry["run_share"].split(",")
    assert sorted(with_share["costs"].pop("env_cpu_share")) == sorted(modes) and "colocated" not in modes
    assert not base["costs"].pop("env_cpu_share", None)
    assert with_share["costs"] == base["costs"] and with_share["node"] == base["node"]
    assert with_share["provenance"]["run_share_added"]["modes"] == modes
    for r in doc["points"]:
        if r["mode"] in modes:
            assert r["command"].endswith(f"--profile {entry['path']}"), r["name"]
