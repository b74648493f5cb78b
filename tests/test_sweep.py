"""perfmodel sweep: rows equal single predictions, infeasible combinations are counted, derived
columns follow their definitions, CLI outputs (table, CSV, JSON) and one-line errors."""

from __future__ import annotations

import csv
import json

import pytest

from conftest import run_cli, write_json
from perfmodel.schema.profile import Profile
from perfmodel.calibration.reference import published_plan
from perfmodel.prediction import predict
from perfmodel.planning.sweep import DEFAULT_RATIOS, RLINF_REFUSES, SweepSpec, combinations, run_sweep, runnable_in_rlinf
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import parse_ratio

MODES2 = ("colocated", "streamer")


@pytest.fixture
def small_spec(tmp_path, scenario_dict):
    path = write_json(tmp_path / "scenario.json", scenario_dict)
    return SweepSpec(profile_ref=str(path), modes=MODES2, gpus=(8, 16), gpu_hour_price=2.0)


@pytest.fixture
def small_sweep(small_spec, scenario_profile):
    return run_sweep(small_spec, scenario_profile, jobs=2)


def test_combinations_order_and_count(small_spec):
    combos = combinations(small_spec)
    # per GPU count: colocated once (no ratio) + streamer x 5 ratios
    assert len(combos) == 2 * (1 + len(DEFAULT_RATIOS))
    assert [c.index for c in combos] == list(range(len(combos)))
    assert [(c.gpus, c.mode, c.allocation_ratio) for c in combos[:3]] == [
        (8, "colocated", None), (8, "streamer", "1:1"), (8, "streamer", "3:1")]


def test_rows_equal_single_predictions(small_sweep, small_spec, scenario_profile):
    ok = [r for r in small_sweep["rows"] if r["status"] == "ok"]
    assert len(ok) >= 4
    for r in ok:
        plan = published_plan(scenario_profile, r["mode"], r["gpus"], r["allocation_ratio"],
                        pipeline_stage_num=r["pipeline_stage_num"], b_max=r["b_max"], t_max_s=r["t_max_s"])
        plan, _, refused = runnable_in_rlinf(plan)  # the micro-batch RLinf takes (issue 41)
        single = predict(plan, scenario_profile)
        assert refused is None and r["prediction"] == single
        assert r["throughput_env_steps_per_s"] == single["throughput_env_steps_per_s"]
        assert r["plan"] == plan.with_(profile=small_spec.profile_ref).to_dict()


def test_parallel_equals_serial(small_spec, scenario_profile, small_sweep):
    serial = run_sweep(small_spec, scenario_profile, jobs=1)
    assert serial["rows"] == small_sweep["rows"]
    assert [r["index"] for r in serial["rows"]] == list(range(len(serial["rows"])))


def test_infeasible_counted_not_fatal(small_sweep):
    rows = {(r["gpus"], r["mode"], r["allocation_ratio"]): r for r in small_sweep["rows"]}
    # 2:1 needs a multiple of 3 GPUs
    assert rows[(8, "streamer", "2:1")]["status"] == "infeasible"
    assert rows[(8, "streamer", "2:1")]["reason_kind"] == "ratio does not split the GPUs"
    # 3:1 on 8 GPUs: 6 env workers for 64 envs
    assert rows[(8, "streamer", "3:1")]["reason_kind"] == "envs do not divide over the env workers"
    s = small_sweep["summary"]
    assert s["feasible"] + s["infeasible"] + s["errors"] == s["combinations"] == len(small_sweep["rows"])
    assert s["errors"] == 0
    assert sum(s["not_run_by_reason"].values()) == s["infeasible"] >= 2


def test_ram_refusal_is_infeasible(tmp_path, scenario_dict):
    scenario_dict["node"]["node_ram_gb"] = 20  # 10 envs of 2 GB per node at most
    prof = Profile.from_dict(scenario_dict)
    doc = run_sweep(SweepSpec(profile_ref="x", modes=("colocated",), gpus=(8,)), prof, jobs=1)
    assert [r["status"] for r in doc["rows"]] == ["infeasible"]
    assert doc["rows"][0]["reason_kind"] == "envs do not fit node RAM"


def test_derived_columns(small_sweep):
    ok = [r for r in small_sweep["rows"] if r["status"] == "ok"]
    coloc = {r["gpus"]: r["throughput_env_steps_per_s"] for r in ok if r["mode"] == "colocated"}
    by_cfg = {}
    for r in ok:
        by_cfg.setdefault((r["mode"], r["allocation_ratio"]), {})[r["gpus"]] = r["throughput_env_steps_per_s"]
    for r in ok:
        thr, n = r["throughput_env_steps_per_s"], r["gpus"]
        assert r["gain_over_colocated_pct"] == pytest.approx(100 * (thr / coloc[n] - 1))
        n0 = min(by_cfg[(r["mode"], r["allocation_ratio"])])
        assert r["scaling_baseline_gpus"] == n0
        assert r["scaling_efficiency"] == pytest.approx((thr / n) / (by_cfg[(r["mode"], r["allocation_ratio"])][n0] / n0))
        assert r["env_steps_per_gpu_hour"] == pytest.approx(thr * 3600 / n)
        assert r["env_steps_per_dollar"] == pytest.approx(thr * 3600 / n / 2.0)
    assert all(r["gain_over_colocated_pct"] == 0 for r in ok if r["mode"] == "colocated")
    # best per (mode, gpus) in the summary is the max over the rows
    for b in small_sweep["summary"]["best_per_mode"]:
        assert b["throughput_env_steps_per_s"] == max(
            r["throughput_env_steps_per_s"] for r in ok if (r["mode"], r["gpus"]) == (b["mode"], b["gpus"]))


def test_dynamic_batching_knobs_only_for_dynamic_modes(scenario_profile):
    from perfmodel.schema.plan import DEFAULT_T_MAX_S

    assert DEFAULT_T_MAX_S == 0.02
    spec = SweepSpec(profile_ref="x", modes=("disaggregated", "rollout_async"), gpus=(8,), ratios=("1:1",),
                     b_max=(None, 4), t_max_s=(0.05, 0.2))
    combos = combinations(spec)
    assert [(c.mode, c.b_max, c.t_max_s) for c in combos] == [
        # a mode without dynamic batching runs once, at the plan defaults (RLinf's 20 ms)
        ("disaggregated", None, DEFAULT_T_MAX_S), ("rollout_async", None, 0.05), ("rollout_async", None, 0.2),
        ("rollout_async", 4, 0.05), ("rollout_async", 4, 0.2)]


@pytest.mark.parametrize("text", ["3", "0:1", "1:-2", "a:b", "1:2:3", ""])
def test_sweep_and_plan_read_a_ratio_alike(text):
    # one parser: --ratios and a plan's allocation_ratio refuse the same text with the same words
    with pytest.raises(ConfigError) as from_sweep:
        SweepSpec(profile_ref="x", modes=("streamer",), gpus=(8,), ratios=(text,)).check()
    with pytest.raises(ConfigError) as from_plan:
        parse_ratio(text, 8, "plan.allocation_ratio")
    assert (from_sweep.value.field, from_plan.value.field) == ("--ratios", "plan.allocation_ratio")
    assert from_sweep.value.message == from_plan.value.message and repr(text) in from_plan.value.message


def test_replicated_rows_carry_intervals(scenario_dict):
    scenario_dict["variability"] = {"env_step_cv": 0.2, "infer_cv": 0.1, "train_cv": 0.1}
    prof = Profile.from_dict(scenario_dict)
    doc = run_sweep(SweepSpec(profile_ref="x", modes=("streamer",), gpus=(8,), ratios=("1:1",),
                              replications=3, seed=5), prof, jobs=1)
    (row,) = doc["rows"]
    lo, hi = row["throughput_ci95"]
    assert lo < row["throughput_env_steps_per_s"] < hi
    single = predict(published_plan(prof, "streamer", 8, "1:1"), prof, replications=3, seed=5)
    assert row["throughput_ci95"] == single["throughput_ci95"]


def test_cli_sweep_outputs(tmp_path, scenario_dict):
    prof = write_json(tmp_path / "p.json", scenario_dict)
    out, csv_out = tmp_path / "s.json", tmp_path / "s.csv"
    r = run_cli("sweep", "--profile", str(prof), "--gpus", "8,16", "--modes", "colocated,streamer",
                "--gpu-hour-price", "3", "-o", str(out), "--csv", str(csv_out), "--jobs", "2")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["kind"] == "perfmodel.planning.sweep"
    with csv_out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(doc["rows"]) == 12
    for c, j in zip(rows, doc["rows"]):
        assert c["status"] == j["status"]
        if j["status"] == "ok":
            assert float(c["throughput_env_steps_per_s"]) == pytest.approx(j["throughput_env_steps_per_s"])
            assert float(c["env_steps_per_dollar"]) == pytest.approx(j["env_steps_per_dollar"])
    table = [ln.split() for ln in r.stdout.splitlines() if ln.strip().startswith(("8 ", "16 "))]
    ok = [j for j in doc["rows"] if j["status"] == "ok"]
    assert len(table) == len(ok) == doc["summary"]["feasible"]
    for cols, j in zip(table, ok):
        assert (int(cols[0]), cols[1], cols[2]) == (j["gpus"], j["mode"], j["allocation_ratio"] or "-")
        assert cols[6] == f"{j['throughput_env_steps_per_s']:.2f}"
    assert "scaling efficiency" in r.stdout and "infeasible" in r.stdout


@pytest.mark.parametrize("args,field", [
    (["--modes", "colocated,warp"], "--modes"),
    (["--backbone", "llama"], "--backbone"),
    (["--gpus", "8,0"], "--gpus"),
    (["--gpus", "8,x"], "--gpus"),
    (["--ratios", "1:1,3"], "--ratios"),
    (["--ratios", "0:1"], "--ratios"),
    (["--gpu-hour-price", "-2"], "--gpu-hour-price"),
    (["--pipeline-stages", "0"], "--pipeline-stages"),
    (["-o", "/proc/nonexistent/s.json"], "--out"),
])
def test_cli_sweep_bad_input(tmp_path, scenario_dict, args, field):
    prof = write_json(tmp_path / "p.json", scenario_dict)
    base = [] if "--backbone" in args else ["--profile", str(prof)]
    r = run_cli("sweep", *base, "--gpus", "8", *args, "--quiet") if "--gpus" not in args else \
        run_cli("sweep", *base, *args, "--quiet")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), r.stderr
    assert "Traceback" not in r.stderr


def test_ratios_all_is_every_split_in_sixteenths(scenario_profile):
    """``--ratios all``: every rollout:actor split of each GPU count with shares in sixteenths or
    coarser (every split of up to 16 GPUs), each split once, and only splits that exist."""
    from perfmodel.planning.sweep import splitting_ratios
    from perfmodel.schema.plan import parse_ratio

    assert splitting_ratios(8) == ["1:7", "1:3", "3:5", "1:1", "5:3", "3:1", "7:1"]  # all 7 splits of 8 GPUs
    for g in (8, 12, 16, 24, 4096):
        ratios = splitting_ratios(g)
        rollout = []
        for text in ratios:
            r, a = (int(x) for x in text.split(":"))
            assert g % (r + a) == 0 and (r + a) <= 16
            rollout.append(g * r // (r + a))
            parse_ratio(text, g)  # the plan accepts it
        assert len(set(rollout)) == len(ratios) and rollout == sorted(rollout)
    assert len(splitting_ratios(16)) == 15 and len(splitting_ratios(4096)) == 15
    spec = SweepSpec(profile_ref="x", modes=("colocated", "disaggregated"), gpus=(8, 12), ratios=("all", "1:1"),
                     intervals=False)
    combos = combinations(spec)
    assert [c.allocation_ratio for c in combos if c.gpus == 8 and c.mode == "disaggregated"] == splitting_ratios(8)
    assert len(combos) == 2 + len(splitting_ratios(8)) + len(splitting_ratios(12))
    doc = run_sweep(spec, scenario_profile, jobs=1)
    # (the scenario's global batch of 32 splits over few actor counts: the others are run, and refused)
    assert doc["summary"]["errors"] == 0
    assert doc["summary"]["feasible"] + doc["summary"]["not_run_by_reason"].get(RLINF_REFUSES, 0) >= 10
    assert all("throughput_interval" not in (r.get("prediction") or {}) for r in doc["rows"])


def test_cli_sweep_ratios_all_without_intervals(tmp_path, scenario_dict):
    prof = write_json(tmp_path / "p.json", scenario_dict)
    r = run_cli("sweep", "--profile", str(prof), "--modes", "disaggregated", "--gpus", "8", "--ratios", "all",
                "--no-interval", "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [row["allocation_ratio"] for row in doc["rows"]] == ["1:7", "1:3", "3:5", "1:1", "5:3", "3:1", "7:1"]
    assert doc["spec"]["intervals"] is False and doc["rows"][3]["throughput_low"] is None


def test_best_per_gpu_count_names_the_modes_it_ties_with():
    """rollout_async and streamer predict the same throughput in the published setup: the
    summary line says so instead of naming one as best by row order."""
    from perfmodel.planning.sweep import format_table
    from perfmodel.schema.profile import load_profile

    spec = SweepSpec(profile_ref="pi05", modes=("colocated", "rollout_async", "streamer"), gpus=(16,),
                     ratios=("1:1",), intervals=False)
    doc = run_sweep(spec, load_profile("pi05"), jobs=1)
    line = next(l for l in format_table(doc).splitlines() if l.startswith("best at"))
    assert "rollout_async" in line and "tied with streamer" in line and "colocated" not in line


def test_envs_that_do_not_divide_are_rounded_with_a_note():
    """Issue 32 item 6: 8 envs per GPU on 32 GPUs at 3:1 are 256 envs over 24 env workers, which do
    not divide: the row runs the nearest count that does (264), says so, and is predicted; a
    count far from any whole split (beyond 10 %) stays infeasible."""
    from perfmodel.commands.sweep import sweep
    from perfmodel.planning.sweep import whole_envs
    from perfmodel.calibration.reference import published_plan
    from perfmodel.schema.profile import load_profile
    from dataclasses import replace

    doc = sweep("32", modes="rollout_async", ratios="3:1", envs_per_gpu="8", interval=False, jobs=1,
                say=lambda _: None)
    (r,) = doc["rows"]
    assert r["status"] == "ok" and r["total_num_envs"] == 264 and r["plan"]["workload"]["total_num_envs"] == 264
    assert r["note"].startswith("total_num_envs 256 -> 264")
    prof = load_profile("pi05")
    plan = published_plan(prof, "rollout_async", 32, "3:1")
    few = plan.with_(workload=replace(plan.workload, total_num_envs=12))  # 12 over 24 workers: 24 is +100%
    import pytest as _pytest
    from perfmodel.schema.errors import ConfigError

    with _pytest.raises(ConfigError):
        whole_envs(few)
    assert whole_envs(plan) == (plan, None)
