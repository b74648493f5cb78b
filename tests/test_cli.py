"""The perfmodel CLI: predictions from bundled profiles, validation, and every bad input."""

from __future__ import annotations

import json
import math
import re

import pytest

from conftest import ROOT, run_cli, write_json

REFERENCE = ROOT / "profiles" / "reference" / "rl_vla3_libero.csv"


def test_predict_default_command_answers():
    r = run_cli("predict", "--mode", "rollout_async", "--gpus", "32")
    assert r.returncode == 0, r.stderr
    assert "throughput" in r.stdout and "env steps/s" in r.stdout


@pytest.mark.parametrize("backbone", ["pi05", "gr00t_n15"])
@pytest.mark.parametrize("mode", ["colocated", "disaggregated", "train_async", "rollout_async", "streamer"])
def test_predict_json_every_mode_and_backbone(mode, backbone):
    r = run_cli("predict", "--mode", mode, "--gpus", "16", "--backbone", backbone, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("mode", "backbone", "gpus", "allocation_ratio", "throughput_env_steps_per_s",
                "iteration_time_s", "bound_env_steps_per_s", "utilization"):
        assert key in out
    assert out["mode"] == mode and out["backbone"] == backbone and out["gpus"] == 16
    assert out["allocation_ratio"] == (None if mode == "colocated" else "1:1")
    assert 0 < out["throughput_env_steps_per_s"] <= out["bound_env_steps_per_s"] * (1 + 1e-9)
    assert math.isclose(out["throughput_env_steps_per_s"] * out["iteration_time_s"],
                        16 * 48 * 480 * 4, rel_tol=1e-9)
    for group in out["utilization"].values():
        assert all(0 <= v <= 1 + 1e-9 for v in group.values())


@pytest.mark.parametrize("plan", sorted(p.name for p in (ROOT / "examples" / "plans").glob("*.json")))
def test_predict_text_for_every_example_plan(plan):
    """The text output of a measured profile's prediction (an interval from raw samples, no
    model-error term) prints its interval: the shipped examples are what a new user runs first."""
    r = run_cli("predict", "--plan", str(ROOT / "examples" / "plans" / plan))
    assert r.returncode == 0, r.stderr
    assert "interval" in r.stdout and "fitted parameters" not in r.stdout


def test_predict_ratio_and_plan_file_agree(tmp_path):
    r = run_cli("predict", "--mode", "train_async", "--gpus", "16", "--ratio", "3:1", "--json")
    assert r.returncode == 0, r.stderr
    direct = json.loads(r.stdout)
    assert (direct["rollout_gpus"], direct["actor_gpus"]) == (12, 4)
    from perfmodel.schema.profile import load_profile
    from perfmodel.calibration.reference import published_plan

    plan = published_plan(load_profile("pi05"), "train_async", 16, "3:1")
    path = write_json(tmp_path / "plan.json", plan.to_dict())
    r2 = run_cli("predict", "--plan", str(path), "--json")
    assert r2.returncode == 0, r2.stderr
    assert json.loads(r2.stdout)["throughput_env_steps_per_s"] == direct["throughput_env_steps_per_s"]


def test_predict_trace_and_replications(tmp_path):
    trace = tmp_path / "trace.json"
    r = run_cli("predict", "--mode", "streamer", "--gpus", "8", "--trace", str(trace), "--json")
    assert r.returncode == 0, r.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e["ph"] == "X" and e["name"] == "inference" for e in events)


def test_replications_same_seed_same_output(tmp_path, scenario_dict):
    scenario_dict["variability"] = {"env_step_cv": 0.1, "infer_cv": 0.1, "train_cv": 0.1}
    prof = write_json(tmp_path / "p.json", scenario_dict)
    args = ("predict", "--mode", "rollout_async", "--gpus", "8", "--profile", str(prof),
            "--replications", "4", "--seed", "3", "--json")
    a, b = run_cli(*args), run_cli(*args)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    out = json.loads(a.stdout)
    lo, hi = out["throughput_ci95"]
    assert lo <= out["throughput_env_steps_per_s"] <= hi and lo < hi


def test_validate_json_on_reference():
    r = run_cli("validate", "--reference", str(REFERENCE), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["points"]) == 30
    for p in out["points"]:
        assert set(p) >= {"mode", "backbone", "gpus", "allocation_ratio", "published", "predicted", "error_pct"}
        assert p["error_pct"] == pytest.approx(100 * (p["predicted"] / p["published"] - 1))
    assert out["mape_pct"] == pytest.approx(sum(abs(p["error_pct"]) for p in out["points"]) / 30)
    a = out["best_mode_agreement"]
    assert a["groups"] == 6
    assert -1 <= out["spearman"] <= 1
    # a predicted tie is counted apart, never as a match (issue 41 item 10)
    from perfmodel.calibration.validate import agreement_of

    for g in a["per_group"]:
        assert g["outcome"] == agreement_of(g["published_best"], g["predicted_best"])
        assert g["match"] == (g["outcome"] == "agree")
    assert a["matches"] == sum(g["outcome"] == "agree" for g in a["per_group"])
    assert a["predicted_ties"] == sum(g["outcome"] == "tie" for g in a["per_group"])


def test_validate_counts_a_predicted_tie_apart_from_agreeing():
    """Issue 41 item 10: a predicted tie that includes the published best does not name it, so it
    is counted apart (predicted_ties, 'TIE'), never as agreeing; one mode of a published tie, or
    the same tied set, agrees."""
    from perfmodel.calibration.validate import agreement_of
    from perfmodel.commands.validate import format_validation

    assert agreement_of(["streamer"], ["streamer"]) == "agree"
    assert agreement_of(["streamer", "rollout_async"], ["streamer"]) == "agree"
    assert agreement_of(["streamer", "rollout_async"], ["rollout_async", "streamer"]) == "agree"
    assert agreement_of(["streamer"], ["rollout_async", "streamer"]) == "tie"
    assert agreement_of(["streamer"], ["rollout_async"]) == "mismatch"
    fake = {"points": [], "mape_pct": 1.0, "median_abs_error_pct": 1.0, "max_abs_error_pct": 1.0, "spearman": None,
            "best_mode_agreement": {"matches": 0, "predicted_ties": 1, "groups": 1, "per_group": [
                {"backbone": "pi05", "gpus": 8, "published_best": ["streamer"],
                 "predicted_best": ["rollout_async", "streamer"], "match": False, "outcome": "tie"}]}}
    text = format_validation(fake)
    assert "agrees in 0/1" in text and "1 more a predicted tie" in text and "[TIE]" in text


def _validate_points() -> list[dict]:
    r = run_cli("validate", "--reference", str(REFERENCE), "--json")
    return json.loads(r.stdout)["points"]


def test_bundled_calibration_median_error():
    """The bundled fit on the 30 published points: median |error| <= 5 %."""
    errs = sorted(abs(p["error_pct"]) for p in _validate_points())
    assert (errs[14] + errs[15]) / 2 <= 5.0, errs


@pytest.mark.xfail(strict=True, reason="issue 40's target is not met: pi0.5 at 32 GPUs is 11-21 % above the published "
                                       "points (in-sample MAPE 14.8 %) and no mechanism of the model closes it "
                                       "(docs/validation.md, 'All 30 points')")
def test_bundled_calibration_meets_target_at_32_gpus():
    """Issue 40's target: in-sample MAPE at 32 GPUs <= 5 %, and <= 6 % per backbone."""
    at32 = [p for p in _validate_points() if p["gpus"] == 32]
    assert sum(abs(p["error_pct"]) for p in at32) / len(at32) <= 5.0
    for b in ("pi05", "gr00t_n15"):
        errs = [abs(p["error_pct"]) for p in at32 if p["backbone"] == b]
        assert sum(errs) / len(errs) <= 6.0, (b, errs)


def test_validate_human_output():
    r = run_cli("validate", "--reference", str(REFERENCE))
    assert r.returncode == 0, r.stderr
    assert "MAPE" in r.stdout and "Spearman" in r.stdout and "best mode agrees" in r.stdout


def _bad(*args: str, field: str):
    r = run_cli(*args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [l for l in r.stderr.strip().splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert lines[0].startswith("error: ") and field in lines[0], lines[0]
    return r


@pytest.mark.parametrize("args,field", [
    (("--mode", "turbo", "--gpus", "8"), "--mode"),
    (("--mode", "streamer", "--gpus", "8", "--backbone", "llama"), "--backbone"),
    (("--mode", "streamer", "--gpus", "0"), "--gpus"),
    (("--mode", "streamer", "--gpus", "-4"), "--gpus"),
    (("--mode", "streamer", "--gpus", "8", "--ratio", "1-1"), "--ratio"),
    (("--mode", "streamer", "--gpus", "8", "--ratio", "0:8"), "--ratio"),
    (("--mode", "streamer", "--gpus", "8", "--ratio", "2:1"), "--ratio"),
    (("--mode", "colocated", "--gpus", "8", "--ratio", "1:1"), "--ratio"),
    (("--mode", "streamer", "--gpus", "eight"), "--gpus"),
    (("--gpus", "8"), "--mode"),
    (("--mode", "streamer"), "--gpus"),
    (("--mode", "streamer", "--gpus", "8", "--pipeline-stages", "5"), "--pipeline-stages"),
    (("--mode", "streamer", "--gpus", "8", "--replications", "0"), "--replications"),
    (("--mode", "streamer", "--gpus", "8", "--profile", "/nonexistent/p.json"), "profile"),
    (("--mode", "streamer", "--gpus", "8", "--plan", "/nonexistent/plan.json"), "plan"),
])
def test_predict_bad_input(args, field):
    _bad("predict", *args, field=field)


def test_bad_plan_files(tmp_path):
    from perfmodel.schema.profile import load_profile
    from perfmodel.calibration.reference import published_plan

    good = published_plan(load_profile("pi05"), "streamer", 8, "1:1").to_dict()
    cases = {
        "not_json": ("{ nope", "plan"),
        "unknown": ({**good, "turbo": True}, "plan.turbo"),
        "missing_mode": ({k: v for k, v in good.items() if k != "mode"}, "plan.mode"),
        "missing_cluster": ({k: v for k, v in good.items() if k != "cluster"}, "plan.cluster"),
        "bad_mode": ({**good, "mode": "fast"}, "plan.mode"),
        "envs_do_not_divide": ({**good, "workload": {**good["workload"], "total_num_envs": 383}},
                               "total_num_envs"),
        "stages_do_not_divide": ({**good, "pipeline_stage_num": 5}, "pipeline_stage_num"),
        "negative_envs": ({**good, "workload": {**good["workload"], "total_num_envs": -8}},
                          "plan.workload.total_num_envs"),
        "unknown_workload_field": ({**good, "workload": {**good["workload"], "horizon": 3}},
                                   "plan.workload.horizon"),
        "ratio_for_colocated": ({**good, "mode": "colocated"}, "plan.allocation_ratio"),
        "ratio_does_not_split": ({**good, "allocation_ratio": "2:1"}, "plan.allocation_ratio"),
        "nan_bandwidth": ({**good, "cluster": {**good["cluster"], "inter_node_bw_GBps": float("nan")}},
                          "plan.cluster.inter_node_bw_GBps"),
    }
    for name, (content, field) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        _bad("predict", "--plan", str(path), field=field)


def test_bad_profile_files(tmp_path, scenario_dict):
    def variant(**costs):
        d = json.loads(json.dumps(scenario_dict))
        d["costs"].update(costs)
        return d

    cases = {
        "negative_cost": (variant(optimizer_step_s=-1.0), "profile.costs.optimizer_step_s"),
        "infinite_cost": (variant(env_reset_s=float("inf")), "profile.costs.env_reset_s"),
        "zero_env_step": (variant(env_step_core_s=0.0), "profile.costs.env_step_core_s"),
        "bad_curve": (variant(infer_s={"model": "cubic"}), "profile.costs.infer_s.model"),
        "unknown_cost": (variant(teleport_s=1.0), "profile.costs.teleport_s"),
        "missing_costs": ({k: v for k, v in scenario_dict.items() if k != "costs"}, "profile.costs"),
        "bad_provenance": ({**scenario_dict, "provenance": {"kind": "guessed", "date": "x", "method": "x"}},
                           "profile.provenance.kind"),
    }
    for name, (content, field) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(content))
        _bad("predict", "--mode", "streamer", "--gpus", "8", "--profile", str(path), field=field)
    path = tmp_path / "text.json"
    path.write_text("this is not json")
    _bad("predict", "--mode", "streamer", "--gpus", "8", "--profile", str(path), field="profile")


def test_plan_that_does_not_fit_node_ram(tmp_path, scenario_dict):
    scenario_dict["node"]["node_ram_gb"] = 4
    prof = write_json(tmp_path / "p.json", scenario_dict)
    _bad("predict", "--mode", "streamer", "--gpus", "8", "--profile", str(prof), field="node_ram_gb")


def test_validate_bad_reference(tmp_path):
    _bad("validate", "--reference", str(tmp_path / "missing.csv"), field="reference")
    bad = tmp_path / "bad.csv"
    bad.write_text("mode,gpus\nstreamer,8\n")
    _bad("validate", "--reference", str(bad), field="reference")
    worse = tmp_path / "worse.csv"
    worse.write_text("mode,backbone,gpus,allocation_ratio,throughput_env_steps_per_s\nwarp,pi05,8,1:1,3\n")
    _bad("validate", "--reference", str(worse), field="mode")


def test_validate_max_evals_says_which_rule_it_breaks():
    r = _bad("validate", "--max-evals", "5", field="--max-evals")
    assert "only with --cross-validate" in r.stderr
    r = _bad("validate", "--cross-validate", "--max-evals", "0", field="--max-evals")
    assert r.stderr.strip().endswith("must be an integer in 1..100000, got 0")


def test_a_json_value_of_the_wrong_kind_is_named_in_json_words():
    from perfmodel.schema.errors import ConfigError
    from perfmodel.schema.jsonio import check_list, check_object

    for value, kind in ((None, "null (or missing)"), (True, "a boolean"), (3, "a number"), ("x", "a string"),
                        ([1], "a list")):
        with pytest.raises(ConfigError, match=re.escape(f"best: must be a JSON object, got {kind}")):
            check_object("best", value)
    with pytest.raises(ConfigError, match=r"rows: must be a list, got an object$"):
        check_list("rows", {"a": 1})


def test_an_interval_keeps_three_significant_digits():
    from perfmodel.cliutil import fmt_range

    assert fmt_range(4.031, 4.172) == "4.03..4.17"  # not 4..4
    assert fmt_range(12.34, 15.61) == "12.3..15.6"
    assert fmt_range(99.961, 99.989) == "99.961..99.989"  # not 100..100
    assert fmt_range(1287.28, 1530.6) == "1287..1531"
    assert fmt_range(1287.28, 1530.6, "-", thousands=True) == "1,287-1,531"
    assert fmt_range(0.1234, 0.2) == "0.123..0.200"
    assert fmt_range(0.0004, 0.0006) == "0.00040..0.00060"
    assert fmt_range(5.0, 5.0) == "5.00..5.00" and fmt_range(float("nan"), 4.2) == "nan..4.20"


def test_perfmodel_does_not_import_heavy_packages():
    import subprocess
    import sys

    code = ("import sys, perfmodel.cli, perfmodel.simulate, perfmodel.calibration.calibrate; "
            "bad = [m for m in ('torch', 'ray', 'libero', 'mujoco', 'executor', 'analysis') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_one_number_formatter_marks_missing_numbers():
    from perfmodel.cliutil import fmt_number

    assert fmt_number(1234.5678) == "1234.57" and fmt_number(None) == "-"
    assert fmt_number(-3.21, "+.1f", " %") == "-3.2 %" and fmt_number(None, "+.1f", " %") == "-"
