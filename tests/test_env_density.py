"""Env costs at the plan's envs per core (issue 9 item 2), the run's per-chunk-step driver cost,
and --compare's diagnosis at the measured CPU share (item 3). Behaviour only, no timings."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from perfmodel.bound import closed_form_iteration_s
from perfmodel.calibration.reference import published_plan
from perfmodel.costs import StageCosts
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import EnvDensityCurve, Profile, load_profile
from perfmodel.simulate import simulate
from perfmodel.prediction import predict
from tests.conftest import run_cli, write_json

DATA = Path(__file__).parent / "data" / "executor_tiny_disaggregated"

CURVES = {
    "step_lockstep": {"points": [[4.0, 0.1], [8.0, 0.15]], "samples": [[4.0, [0.1, 0.1]], [8.0, [0.14, 0.16]]]},
    "step_free": {"points": [[4.0, 0.09], [8.0, 0.12]]},
    "reset": {"points": [[8.0, 1.0]]},
}


def _measured(scenario_dict, curves=CURVES, driver=None, cores=4):
    d = dict(scenario_dict)
    d["provenance"] = dict(d["provenance"], kind="measured")
    d["costs"] = dict(d["costs"], env_density=curves)
    if driver is not None:
        d["costs"]["driver_chunk_step_s"] = driver
    # the node is the measured box: two slots, as the bundled tiny CPU profiles (a plan on fewer GPUs
    # than a node gets only that part of its cores)
    d["node"] = dict(d["node"], cpu_cores_per_node=cores, gpus_per_node=2)
    return Profile.from_dict(d)


def test_curve_reads_the_measured_point_interpolates_or_takes_the_nearest_and_says_so():
    c = EnvDensityCurve.from_dict({"points": [[1, 0.25], [2, 0.22], [4, 0.3]]}, "c")  # not monotone: allowed
    assert c.at(2.0) == (0.22, None)
    assert c.at(2.01) == (0.22, None)  # within 2 %: the measured point
    y, note = c.at(3.0)
    assert y == pytest.approx(0.26) and "interpolated between 2 and 4" in note
    y, note = c.at(8.0)
    assert y == 0.3 and "outside the measured 1, 2, 4" in note and "not extrapolated" in note
    y, note = c.at(0.5)
    assert y == 0.25 and "nearest measured point (1)" in note


@pytest.mark.parametrize("curves,field", [
    ({"step_sideways": {"points": [[1, 0.1]]}}, "profile.costs.env_density.step_sideways"),
    ({"reset": {"points": [[2, 1.0], [1, 1.0]]}}, "profile.costs.env_density.reset.points"),
    ({"reset": {"points": []}}, "profile.costs.env_density.reset.points"),
    ({"reset": {"points": [[1, -1.0]]}}, "profile.costs.env_density.reset.points[0][1]"),
])
def test_bad_curves_name_the_field(scenario_dict, curves, field):
    with pytest.raises(ConfigError) as e:
        _measured(scenario_dict, curves)
    assert e.value.field == field


def test_model_reads_the_curve_at_the_plans_density(scenario_dict):
    """16 envs on 2 cores = 8 envs per core: the lock-step curve's point at 8 (0.15 s, contention
    included, so no efficiency factor), the reset curve's, and the free curve under dynamic batching."""
    prof = _measured(scenario_dict)
    plan = published_plan(prof, "disaggregated", 2, "1:1")
    c = StageCosts(plan, prof)
    assert c.env_density == 8.0
    assert c.env_chunk_s(16) == pytest.approx(0.15 * 5 * 16 / 2)
    assert c.env_reset_s(16) == pytest.approx(1.0 * 16 / 2)
    assert c.warnings == []
    dyn = published_plan(prof, "rollout_async", 2, "1:1")
    assert StageCosts(dyn, prof).env_chunk_s(1, lockstep=False) == pytest.approx(0.12 * 5)
    # the round trip keeps curves and samples
    again = Profile.from_dict(json.loads(json.dumps(prof.to_dict())))
    assert again.costs.env_density == prof.costs.env_density


def test_missing_density_is_a_warning_in_json_and_text(scenario_dict, tmp_path):
    prof = _measured(scenario_dict, {"step_lockstep": {"points": [[1.0, 0.1], [2.0, 0.12]]},
                                     "reset": {"points": [[1.0, 0.5]]}})
    path = write_json(tmp_path / "p.json", prof.to_dict())
    plan = published_plan(prof, "disaggregated", 2, "1:1")  # 8 envs per core, measured 1 and 2
    out = predict(plan, prof, interval=False)
    assert len(out["warnings"]) == 2
    assert all("outside the measured" in w and "8 envs per core" in w for w in out["warnings"])
    plan_path = write_json(tmp_path / "plan.json", plan.to_dict())
    r = run_cli("predict", "--plan", str(plan_path), "--profile", str(path), "--json", "--no-interval")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["warnings"] == out["warnings"]
    r = run_cli("predict", "--plan", str(plan_path), "--profile", str(path), "--no-interval")
    assert sum(line.startswith("warning ") and "outside the measured" in line for line in r.stdout.splitlines()) == 2


def test_old_profiles_load_and_fall_back_to_their_scalar():
    """Bundled fitted profiles have no curve: their scalar, no warning. A measured profile
    without curves read at another density than one env per core says so."""
    fitted = load_profile("pi05")
    assert fitted.costs.env_density == {}
    plan = published_plan(fitted, "disaggregated", 8, "1:1")
    c = StageCosts(plan, fitted)
    assert c.warnings == []
    assert c.env_reset_s(1) == pytest.approx(fitted.costs.env_reset_s)
    measured = load_profile(str(DATA.parent.parent.parent / "profiles" / "pi05_tiny_cpu.json"))
    measured = replace(measured, costs=replace(measured.costs, env_density={}))
    plan = Plan.load(DATA / "plan.json")  # 2 envs on 2 cores: one env per core
    assert StageCosts(plan, measured).warnings == []
    dense = plan.with_(workload=replace(plan.workload, total_num_envs=4))
    (w,) = StageCosts(dense, measured).warnings
    assert "no curve over envs per core" in w and "2 envs per core" in w


def test_driver_cost_per_chunk_step_is_charged_exactly(scenario_dict):
    """A lock-step worker pays the measured driver cost once per chunk step: the closed form and
    the simulation agree, and the iteration grows by exactly chunks x epochs x the cost."""
    base = _measured(scenario_dict, cores=8)
    prof = _measured(scenario_dict, driver={"lockstep": 0.25, "dynamic": 0.5}, cores=8)
    for mode in ("colocated", "disaggregated"):
        plan = published_plan(prof, mode, 2, None if mode == "colocated" else "1:1")
        w = plan.workload
        with_driver = simulate(plan, prof, iterations=3, warmup=1).iteration_time_s
        without = simulate(plan, base, iterations=3, warmup=1).iteration_time_s
        assert with_driver == pytest.approx(closed_form_iteration_s(StageCosts(plan, prof)), rel=1e-12)
        assert with_driver - without == pytest.approx(w.chunk_steps_per_epoch * w.rollout_epoch * 0.25)
    dyn = published_plan(prof, "rollout_async", 2, "1:1")
    assert StageCosts(dyn, prof).driver_chunk_s() == 0.5
    assert (simulate(dyn, prof, iterations=3, warmup=1).iteration_time_s
            > simulate(dyn, base, iterations=3, warmup=1).iteration_time_s)


def test_diagnoses_are_the_prediction_at_the_measured_cpu_share_and_env_costs():
    """A real run's record (tests/data, the envs got about a third of their cores): the first
    diagnosis predicts with env costs / share, the second also with the CPU seconds per step and
    reset the envs used over the profile's; --compare's table shows both."""
    from executor.cli import comparison_table
    from executor.runtime.record import compare, diagnoses, profile_env_cost_s

    record = json.loads((DATA / "record.json").read_text())
    plan = Plan.load(DATA / "plan.json")
    prof = load_profile(str(DATA.parent.parent.parent / "profiles" / "pi05_tiny_cpu.json"))
    pred = predict(plan, prof, iterations=2, warmup=1, interval=False)
    record.update(compare(record, pred))
    record["prediction"] = pred
    diag = diagnoses(record, plan, prof, 2, 1)
    at_share, at_costs = diag["diagnosis_at_measured_cpu_share"], diag["diagnosis_at_measured_env_costs"]
    env = record["env_cpu"]
    share = {s: env[s]["cpu_share"] for s in ("env_reset", "env_step")}
    assert at_share["cpu_share"] == {s: pytest.approx(v) for s, v in share.items()}
    slow = replace(prof, costs=prof.costs.env_scaled(1 / share["env_step"], 1 / share["env_reset"]))
    expect = predict(plan, slow, iterations=2, warmup=1, interval=False)["throughput_env_steps_per_s"]
    assert at_share["predicted_throughput_env_steps_per_s"] == pytest.approx(expect)
    assert at_share["predicted_throughput_env_steps_per_s"] < pred["throughput_env_steps_per_s"]
    assert abs(at_share["error_pct"]) < abs(record["error_pct"])  # the busy machine explains most of the miss
    # the second: the env CPU seconds per unit the run used over the profile's, and the share
    ratio = {"env_reset": env["env_reset"]["cpu_s_per_env"] / profile_env_cost_s(plan, prof, "env_reset"),
             "env_step": env["env_step"]["cpu_s_per_env_step"] / profile_env_cost_s(plan, prof, "env_step")}
    assert at_costs["env_cost_ratio"] == {s: pytest.approx(v) for s, v in ratio.items()}
    used = replace(prof, costs=prof.costs.env_scaled(ratio["env_step"] / share["env_step"],
                                                     ratio["env_reset"] / share["env_reset"]))
    expect = predict(plan, used, iterations=2, warmup=1, interval=False)["throughput_env_steps_per_s"]
    assert at_costs["predicted_throughput_env_steps_per_s"] == pytest.approx(expect)
    record.update(diag)
    table = comparison_table(record)
    first, second = [x for x in table.splitlines() if x.startswith("diagnosis:")]
    assert f"step {share['env_step']:.2f}" in first
    assert f"{at_share['predicted_throughput_env_steps_per_s']:.2f} env steps/s" in first
    assert f"step x{ratio['env_step']:.2f}" in second
    assert f"{at_costs['predicted_throughput_env_steps_per_s']:.2f} env steps/s" in second
    # a full share and the profile's own costs give the prediction itself
    full = dict(record, env_cpu={"env_reset": dict(env["env_reset"], cpu_share=1.0,
                                                   cpu_s_per_env=profile_env_cost_s(plan, prof, "env_reset")),
                                 "env_step": dict(env["env_step"], cpu_share=1.0,
                                                  cpu_s_per_env_step=profile_env_cost_s(plan, prof, "env_step"))})
    for d in diagnoses(full, plan, prof, 2, 1).values():
        assert d["predicted_throughput_env_steps_per_s"] == pytest.approx(pred["throughput_env_steps_per_s"])
    # a profile that charges nothing for a reset has no env-cost ratio: the second diagnosis is
    # left out, the first stays (no division by zero after a finished run)
    free = replace(prof, costs=prof.costs.env_scaled(1.0, 0.0))
    got = diagnoses(record, plan, free, 2, 1)
    assert set(got) == {"diagnosis_at_measured_cpu_share"}


def test_load_warning_rule():
    from executor.runtime.preflight import load_warning

    assert load_warning(0.4, 2) is None
    assert load_warning(0.5, 2) is None
    w = load_warning(3.2, 2)
    assert "3.20 on 2 cores" in w
    assert load_warning(3.2, 16) is None


def test_record_compares_env_cpu_with_the_curve_at_the_plans_density(scenario_dict):
    from types import SimpleNamespace

    from executor.runtime.record import env_cpu_diagnostics
    from perfmodel.schema.timeline import Recorder

    prof = _measured(scenario_dict)
    plan = published_plan(prof, "disaggregated", 2, "1:1")  # 8 envs per core
    ctx = SimpleNamespace(env_cpu={"env_reset": [16.0, 0.0, 16], "env_step": [2.4, 0.0, 16]})
    d = env_cpu_diagnostics(plan, ctx, Recorder(keep_spans=True), prof)
    assert d["env_reset"]["profile_s"] == 1.0 and d["env_step"]["profile_s"] == 0.15
    assert d["env_step"]["cpu_s_per_env_step"] == pytest.approx(0.15)
