"""Calibrating from the user's own runs, end to end on this machine (slow, issue 29): executor run
at two scales -> perfmodel calibrate --from-run -> predict a third -> run it -> compare. Its three
runs share one Ray session (the ``ray_session`` fixture). A file of its own, so that the suite's
workers run it beside the rest of tests/test_own_runs.py (files, not tests, are spread over the
workers: pyproject addopts, tests/conftest.py LONGEST_FILES)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytest.importorskip("tensorboard")
pytest.importorskip("torch")


def _tiny(gpus: int, envs: int) -> dict:
    # pi05_tiny_cpu's node (2 GPUs, 2 cores): the config.yaml RLinf-style carries no node, so the
    # plans use the profile's, which the importer reads back
    return {"mode": "colocated", "allocation_ratio": None, "pipeline_stage_num": 1, "b_max": None, "t_max_s": 0.05,
            "max_staleness": 1, "profile": "pi05_tiny_cpu",
            "workload": {"total_num_envs": envs, "max_episode_steps": E2E_EPISODE_STEPS, "num_action_chunks": 5,
                         "rollout_epoch": 1, "update_epoch": 1, "micro_batch_size": 2, "global_batch_size": 2 * envs,
                         "group_size": 1, "algorithm": "ppo"},
            "cluster": {"gpus": gpus, "gpus_per_node": 2, "cpu_cores_per_node": 2}}


# name: (GPUs, envs); a and b calibrate, c is predicted: twice the GPUs, one env per core as in a.
# Rendered, with the settle steps, as a calibration reads them (soft resets: the run's provenance
# names them, env_not_as_rlinf); the fewest envs that vary the density: each rendered env costs
# several CPU s an iteration here (below)
E2E = {"a": (1, 1), "b": (1, 2), "c": (2, 2)}
# Iterations of each run: the fewest a calibration reads (perfmodel.rlinf.logs.read_run), the first
# dropped as warm-up (drop_warmup always leaves one step); each more costs every run an iteration of
# its envs. Episodes of one action chunk: a rendered env's reset (its 15 settle steps, ~5 CPU s here)
# is most of an iteration's env cost, each step after it ~0.3 CPU s (the runs' env_cpu, 2026-12-06).
E2E_ITERATIONS = 2
E2E_EPISODE_STEPS = 5
# calibrate --max-evals for the runs (its default: 80, perfmodel.calibration.from_runs)
E2E_MAX_EVALS = 30


@pytest.mark.slow
def test_end_to_end_executor_runs_calibrate_predict_run(ray_session, tmp_path: Path) -> None:
    from inproc import run_main

    def executor(name: str) -> dict:
        plan = tmp_path / f"{name}.json"
        plan.write_text(json.dumps(_tiny(*E2E[name])))
        r = run_main("run", str(plan), "--out", str(tmp_path / name), "--iterations", str(E2E_ITERATIONS),
                     "--image-size", "32", "--soft-reset", "--no-progress", "--json", module="executor.cli",
                     limit_s=3600)
        assert r.returncode == 0, r.output
        return json.loads((tmp_path / name / "record.json").read_text())

    rec = {n: executor(n) for n in ("a", "b")}
    for n in ("a", "b"):
        assert (tmp_path / n / "tensorboard" / "config.yaml").is_file()
    # The fit's budget: what is checked below is the loop's structure, not how far the fit went
    # (the figures in docs/own-runs.md were measured with calibrate's default budget, 80).
    started = time.perf_counter()
    r = run_cli("calibrate", "--from-run", str(tmp_path / "a"), str(tmp_path / "b"), "--out-dir",
                str(tmp_path / "prof"), "--json", "--no-progress", "--max-evals", str(E2E_MAX_EVALS))
    calibrate_s = time.perf_counter() - started
    assert r.returncode == 0, r.stderr
    cal = json.loads(r.stdout)
    # the runs' throughputs are the records' over the same iterations (the first dropped as warm-up)
    for n, run in zip(("a", "b"), cal["runs"]):
        done = rec[n]["iteration_done_s"]
        # the warm-up rule drops step 0 and leaves the last one (perfmodel.rlinf.logs.drop_warmup)
        first, last = run["steps_used"]
        assert (first, last) == (1, E2E_ITERATIONS - 1) and run["steps_used_count"] == last - first + 1
        assert run["steps_logged"] == len(done) == E2E_ITERATIONS
        assert run["throughput_env_steps_per_s"] == pytest.approx(
            rec[n]["counts"]["env_steps"] / E2E_ITERATIONS * (last - first + 1) / (done[last] - done[first - 1]),
            rel=1e-3)
        assert run["env_not_as_rlinf"] == ["--soft-reset"]  # read from the run's record.json
    assert len(cal["leave_one_run_out"]) == 2
    prof = tmp_path / "prof" / "pi05_cluster.json"
    c_plan = tmp_path / "c.json"
    c_plan.write_text(json.dumps(_tiny(*E2E["c"])))
    pred = json.loads(run_cli("predict", "--profile", str(prof), "--plan", str(c_plan), "--json").stdout)
    prior = json.loads(run_cli("predict", "--profile", "pi05", "--plan", str(c_plan), "--json",
                               "--no-interval").stdout)
    measured = executor("c")["throughput_env_steps_per_s"]
    p = pred["throughput_env_steps_per_s"]
    assert pred["throughput_interval"] is not None and pred["extrapolation"]["beyond_calibrated_gpus"]
    # No claim on the error itself (timing on a shared machine is noisy: docs/own-runs.md records
    # the figures); the profile is the runs' (their node, both runs named) and differs from its prior.
    prof_doc = json.loads(prof.read_text())
    assert prof_doc["node"]["gpus_per_node"] == 2 and prof_doc["node"]["cpu_cores_per_node"] == 2
    assert [r["total_num_envs"] for r in prof_doc["provenance"]["runs"]] == [E2E["a"][1], E2E["b"][1]]
    assert p != prior["throughput_env_steps_per_s"]
    figures = {"runs": cal["runs"], "fit_points": cal["points"], "leave_one_run_out": cal["leave_one_run_out"],
               "predicted": p, "interval": [pred["throughput_interval"]["low"], pred["throughput_interval"]["high"]],
               "prior_predicted": prior["throughput_env_steps_per_s"], "measured": measured,
               "error_pct": (p / measured - 1) * 100, "max_evals": E2E_MAX_EVALS, "calibrate_wall_s": calibrate_s}
    print("E2E figures:", json.dumps(figures))

