"""Issue 33 (hostile and careless input): each of the fourteen defects found by fuzzing, refused in
one line ``error: <field>: <allowed>`` with exit 2 (or answered right where the input is valid),
and no command ever writing over one of its own inputs.

In-process through the real entry points (tests/inproc.py; its watchdog turns a hang into a
failure), with one subprocess test per CLI where the wiring matters (the same-path refusal and a
named pipe as input)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SCENARIO_PROFILE, write_json
from inproc import assert_one_line_error, run_main
from test_rlinf import write_config

PI05 = ROOT / "profiles" / "pi05.json"
EXAMPLE = ROOT / "examples" / "plans" / "pi05_4envs_disaggregated.json"


def _plan(**over):
    from perfmodel.calibration.reference import published_plan
    from perfmodel.schema.profile import Profile

    d = published_plan(Profile.from_dict(SCENARIO_PROFILE), "streamer", 8, "1:1").to_dict()
    d.update(over)
    return d


def _strict(text: str):
    """JSON as a strict reader takes it: NaN and Infinity are not JSON."""
    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    prof = write_json(d / "p.json", SCENARIO_PROFILE)
    path = d / "s.json"
    r = run_main("sweep", "--profile", str(prof), "--modes", "colocated,streamer", "--ratios", "1:1",
                 "--gpus", "8", "--jobs", "1", "--no-progress", "--no-interval", "-o", str(path))
    assert r.returncode == 0, r.stderr
    return path


# -- 1: counts with no upper bound hung ------------------------------------------------------

@pytest.mark.parametrize("args, field", [
    (("predict", "--mode", "rollout_async", "--gpus", "16", "--pipeline-stages", "2147483648", "--no-interval"),
     "--pipeline-stages"),
    (("sweep", "--modes", "rollout_async", "--gpus", "16", "--pipeline-stages", "2147483648", "--no-progress"),
     "--pipeline-stages"),
])
def test_absurd_pipeline_stages_are_refused_with_the_range(args, field):
    line = assert_one_line_error(run_main(*args, limit_s=60), field)
    assert "1..10000000" in line


@pytest.mark.parametrize("stages", [2**31, 1e30])
def test_absurd_pipeline_stages_in_a_plan_are_refused(tmp_path, stages):
    plan = write_json(tmp_path / "p.json", _plan(pipeline_stage_num=stages, profile=str(
        write_json(tmp_path / "prof.json", SCENARIO_PROFILE))))
    assert "1..10000000" in assert_one_line_error(run_main("predict", "--plan", str(plan), limit_s=60),
                                                  "plan.pipeline_stage_num")


def test_stages_that_do_not_divide_the_envs_are_refused_before_the_placement():
    line = assert_one_line_error(run_main("predict", "--mode", "rollout_async", "--gpus", "16", "--pipeline-stages",
                                          "9999999", "--no-interval", limit_s=60), "--pipeline-stages")
    assert "do not divide" in line


# -- 2: a named pipe (or a device) as an input blocked ---------------------------------------

def test_a_named_pipe_as_plan_is_refused_before_opening_it(tmp_path):
    """Subprocess: opening a FIFO for reading blocks the whole process until a writer comes."""
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "perfmodel.cli", "predict", "--plan", str(fifo)], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == f"error: plan: must be a regular file; {fifo} is a named pipe"


@pytest.mark.parametrize("make", ["fifo", "device", "directory"])
def test_inputs_that_are_not_regular_files_are_refused(tmp_path, make):
    if make == "fifo":
        path = tmp_path / "x.csv"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero") if make == "device" else tmp_path
    kind = {"fifo": "a named pipe", "device": "a character device", "directory": "a directory"}[make]
    for args, field in ((("validate", "--reference", str(path)), "reference"),
                        (("predict", "--mode", "colocated", "--gpus", "8", "--profile", str(path)), "--profile")):
        assert kind in assert_one_line_error(run_main(*args, limit_s=60), field)
    r = run_main("report", "--sweep", str(path), "-o", str(tmp_path / "r.html"), module="analysis.cli", limit_s=60)
    assert kind in assert_one_line_error(r, "--sweep")


def test_a_named_pipe_as_rlinf_config_or_its_defaults_file_is_refused(tmp_path):
    cfg = write_config(tmp_path)
    (tmp_path / "model" / "pi0_5.yaml").unlink()
    os.mkfifo(tmp_path / "model" / "pi0_5.yaml")
    line = assert_one_line_error(run_main("predict", "--rlinf-config", str(cfg), limit_s=60), "--rlinf-config")
    assert "pi0_5.yaml is a named pipe" in line
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    assert "named pipe" in assert_one_line_error(run_main("predict", "--rlinf-config", str(fifo), limit_s=60),
                                                 "--rlinf-config")


# -- 3: a YAML alias bomb hung Hydra ----------------------------------------------------------

BOMB = "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
               for p, c in zip([None, *"abcdefgh"], "abcdefghi"))


def test_a_yaml_alias_bomb_is_refused(tmp_path):
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text() + "bomb:\n" + "".join("  " + line + "\n" for line in BOMB.splitlines()))
    line = assert_one_line_error(run_main("predict", "--rlinf-config", str(cfg), limit_s=60), "--rlinf-config")
    assert "expands to more than 100000 YAML nodes" in line


def test_an_alias_bomb_in_a_defaults_file_and_a_recursive_alias_are_refused(tmp_path):
    cfg = write_config(tmp_path)
    model = tmp_path / "model" / "pi0_5.yaml"
    model.write_text(model.read_text() + "bomb:\n" + "".join("  " + ln + "\n" for ln in BOMB.splitlines()))
    line = assert_one_line_error(run_main("predict", "--rlinf-config", str(cfg), limit_s=60), "--rlinf-config")
    assert "pi0_5.yaml" in line and "YAML nodes" in line
    rec = tmp_path / "rec.yaml"
    rec.write_text("a: &a [*a]\n")
    assert "recursive" in assert_one_line_error(run_main("predict", "--rlinf-config", str(rec), limit_s=60),
                                                "--rlinf-config")


def test_an_oversized_yaml_is_refused(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("x: " + "a" * (2 << 20) + "\n")
    assert "larger than 1024 KiB" in assert_one_line_error(run_main("predict", "--rlinf-config", str(big)),
                                                           "--rlinf-config")


def test_the_shipped_rlinf_configs_pass_the_yaml_bounds():
    from perfmodel.rlinf.compose import check_yaml_files

    for cfg in (ROOT / "examples" / "rlinf").glob("*.yaml"):
        check_yaml_files(cfg)


# -- 4: num_nodes of 2**40 ran out of memory ---------------------------------------------------

def test_a_huge_num_nodes_is_refused_with_the_range(tmp_path):
    line = assert_one_line_error(run_main("predict", "--rlinf-config", str(write_config(tmp_path, nodes=2**40))),
                                 "cluster.num_nodes")
    assert "1..2048" in line


# -- 5: plan --sweep rows without allocation_ratio: KeyError -----------------------------------

@pytest.mark.parametrize("key", ["allocation_ratio", "pipeline_stage_num", "b_max", "t_max_s"])
def test_sweep_rows_without_a_combination_field_are_refused(sweep_file, tmp_path, key):
    doc = json.loads(sweep_file.read_text())
    for row in doc["rows"]:
        del row[key]
    r = run_main("plan", "--gpus", "8", "--sweep", str(write_json(tmp_path / "s.json", doc)), "--json")
    assert "missing required field" in assert_one_line_error(r, f"sweep.rows[0].{key}")


def test_a_disaggregated_sweep_row_needs_a_ratio(sweep_file, tmp_path):
    doc = json.loads(sweep_file.read_text())
    i = next(i for i, r in enumerate(doc["rows"]) if r["mode"] == "streamer")
    doc["rows"][i]["allocation_ratio"] = None
    r = run_main("plan", "--gpus", "8", "--sweep", str(write_json(tmp_path / "s.json", doc)), "--json")
    assert_one_line_error(r, f"sweep.rows[{i}].allocation_ratio")


# -- 6: an output path that is an input path ---------------------------------------------------

def test_predict_never_writes_its_trace_over_an_input(tmp_path):
    plan = write_json(tmp_path / "p.json", _plan(profile="prof.json"))
    prof = write_json(tmp_path / "prof.json", SCENARIO_PROFILE)
    before = plan.read_text(), prof.read_text()
    link = tmp_path / "link.json"
    link.symlink_to(plan)
    for trace, field in ((plan, "--plan"), (link, "--plan"), (tmp_path / "sub" / ".." / "p.json", "--plan"),
                         (prof, "plan.profile")):
        (tmp_path / "sub").mkdir(exist_ok=True)
        line = assert_one_line_error(run_main("predict", "--plan", str(plan), "--trace", str(trace)), "--trace")
        assert field in line
    assert (plan.read_text(), prof.read_text()) == before


def test_same_path_is_refused_by_every_cli_in_a_subprocess(tmp_path, sweep_file):
    """The CLI wiring: perfmodel, analysis and executor each call the one check."""
    sweep = tmp_path / "s.json"
    sweep.write_text(sweep_file.read_text())
    before = sweep.read_text()
    pred = tmp_path / "pred.json"
    pred.write_text(run_main("predict", "--mode", "colocated", "--gpus", "8", "--json", "--no-interval").stdout)
    base = write_json(tmp_path / "base.json", json.loads(PI05.read_text()))
    cases = [
        ("perfmodel.cli", ("plan", "--gpus", "8", "--sweep", str(sweep), "-o", str(sweep)), "--out"),
        ("perfmodel.cli", ("plan", "--gpus", "8", "--sweep", str(sweep), "--details", str(sweep)), "--details"),
        ("analysis.cli", ("report", "--sweep", str(sweep), "-o", str(sweep)), "--out"),
        ("analysis.cli", ("report", "--prediction", str(pred), "-o", str(tmp_path / "r.html"), "--md", str(pred)),
         "--md"),
        ("executor.cli", ("profile", "--comm", "--base-profile", str(base), "--out", str(base)), "--out"),
    ]
    for module, args, field in cases:
        r = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=ROOT,
                           timeout=300)
        assert r.returncode == 2, (args, r.stderr[-1000:])
        assert r.stderr.startswith(f"error: {field}: must not be an input of this command"), r.stderr
    assert sweep.read_text() == before and json.loads(pred.read_text())["mode"] == "colocated"


def test_sweep_outputs_must_differ_and_calibrate_keeps_its_reference(tmp_path):
    out = tmp_path / "x.json"
    r = run_main("sweep", "--modes", "colocated", "--gpus", "8", "-o", str(out), "--csv", str(out))
    assert "must differ from --out" in assert_one_line_error(r, "--csv")
    ref = tmp_path / "pi05.json"
    ref.write_text((ROOT / "profiles" / "reference" / "rl_vla3_libero.csv").read_text()
                   .split("\n", 1)[0] + "\nstreamer,pi05,8,1:1,100\n")
    before = ref.read_text()
    r = run_main("calibrate", "--reference", str(ref), "--out-dir", str(tmp_path), "--max-evals", "1")
    assert_one_line_error(r, "--out-dir")
    assert ref.read_text() == before


def test_executor_run_refuses_an_out_dir_that_holds_its_plan(tmp_path):
    pytest.importorskip("torch")
    plan = tmp_path / "plan.json"
    plan.write_text(EXAMPLE.read_text())
    r = run_main("run", str(plan), "--out", str(tmp_path), "--overwrite", module="executor.cli")
    assert "must not hold an input" in assert_one_line_error(r, "--out")
    assert plan.read_text() == EXAMPLE.read_text()


# -- 7: a cost of 1e308 made the throughput NaN ------------------------------------------------

@pytest.mark.parametrize("key, value, bound", [
    ("env_step_core_s", 1e308, "86400 s"), ("env_reset_s", 1e308, "86400 s"), ("optimizer_step_s", 1e308, "86400 s"),
    ("weight_sync_bytes", 1e308, "1e+15 bytes"), ("env_memory_gb", 1e300, "100000 GB"),
    ("infer_s", {"model": "linear", "intercept": 0.2, "slope": 1e308}, "86400 s"),
])
def test_costs_beyond_their_physical_bound_are_refused(tmp_path, scenario_dict, key, value, bound):
    scenario_dict["costs"][key] = value
    prof = write_json(tmp_path / "p.json", scenario_dict)
    line = assert_one_line_error(run_main("predict", "--mode", "streamer", "--gpus", "8", "--profile", str(prof)),
                                 f"costs.{key}")
    assert f"at most {bound}" in line


def test_a_large_but_bounded_cost_gives_a_finite_prediction(tmp_path, scenario_dict):
    scenario_dict["costs"]["env_step_core_s"] = 80_000.0
    prof = write_json(tmp_path / "p.json", scenario_dict)
    r = run_main("predict", "--mode", "streamer", "--gpus", "8", "--profile", str(prof), "--json")
    assert r.returncode == 0, r.stderr
    assert 0 < _strict(r.stdout)["throughput_env_steps_per_s"] < 1


# -- 8: sweep --gpus 1000000 said "envs do not divide" ------------------------------------------

@pytest.mark.parametrize("command", ["predict", "sweep"])
def test_a_gpu_count_beyond_the_bound_is_refused_alike(command):
    args = ("--mode", "colocated") if command == "predict" else ("--modes", "colocated", "--no-progress")
    line = assert_one_line_error(run_main(command, *args, "--gpus", "1000000"), "--gpus")
    assert "1..16384" in line


# -- 9, 10: RLinf values that were accepted or ignored ---------------------------------------

@pytest.mark.parametrize("adv, loss, group", [("grpo", "actor", 0), ("grpo", "actor", -2), ("gae", "actor_critic", 0),
                                              ("gae", "actor_critic", -2)])
def test_a_group_size_below_one_is_refused_for_every_algorithm(tmp_path, adv, loss, group):
    cfg = write_config(tmp_path, adv=adv, loss=loss, group=group)
    assert "1..10000" in assert_one_line_error(run_main("predict", "--rlinf-config", str(cfg)), "algorithm.group_size")


def test_a_ppo_group_size_is_said_to_have_no_effect(tmp_path):
    from perfmodel.rlinf.importer import load_rlinf

    im = load_rlinf(write_config(tmp_path, group=8))
    assert im.plan.workload.group_size == 1
    assert any(w.startswith("algorithm.group_size: 8 has no effect with PPO") for w in im.warnings)


def test_negative_denoising_steps_are_refused(tmp_path):
    cfg = write_config(tmp_path)
    model = tmp_path / "model" / "pi0_5.yaml"
    text = model.read_text()
    assert "num_steps" in text
    import re

    model.write_text(re.sub(r"(?m)^num_steps: .*$", "num_steps: -5", text))
    assert_one_line_error(run_main("predict", "--rlinf-config", str(cfg)), "actor.model.num_steps")


def test_an_allocation_ratio_for_a_colocated_config_is_refused(tmp_path):
    cfg = write_config(tmp_path, extra='vlaperf:\n  allocation_ratio: "0:1"')
    line = assert_one_line_error(run_main("predict", "--rlinf-config", str(cfg)), "vlaperf.allocation_ratio")
    assert "colocated" in line


# -- 11: actor cores beyond the node ----------------------------------------------------------

@pytest.mark.parametrize("cores", [1000, 1e30])
def test_actor_cores_beyond_the_node_are_refused(tmp_path, cores):
    d = json.loads(EXAMPLE.read_text())
    d["cluster"].update(cpu_cores_per_node=128, actor_cpu_cores_per_gpu=cores)
    line = assert_one_line_error(run_main("predict", "--plan", str(write_json(tmp_path / "p.json", d))),
                                 "cluster.actor_cpu_cores_per_gpu")
    assert "0..128" in line


def test_actor_cores_above_a_gpu_share_warn_even_on_unshared_nodes(tmp_path):
    d = json.loads(EXAMPLE.read_text())
    d["profile"] = str(ROOT / "profiles" / "pi05.json")
    d["cluster"].update(gpus=16, gpus_per_node=8, cpu_cores_per_node=128, actor_cpu_cores_per_gpu=100, node_ram_gb=2048)
    d["workload"]["total_num_envs"] = 16
    d["allocation_ratio"] = "1:1"
    d["placement_strategy"] = "packed"
    r = run_main("predict", "--plan", str(write_json(tmp_path / "p.json", d)), "--json", "--no-interval")
    assert r.returncode == 0, r.stderr
    assert any(w.startswith("cluster.actor_cpu_cores_per_gpu: 100 is more than one GPU's share")
               for w in _strict(r.stdout)["warnings"])


# -- 12: --json printed Infinity --------------------------------------------------------------

@pytest.mark.parametrize("command", ["predict", "sweep", "plan"])
def test_a_gpu_hour_price_beyond_the_bound_is_refused(command):
    args = {"predict": ("--mode", "colocated", "--gpus", "8"), "sweep": ("--modes", "colocated", "--gpus", "8"),
            "plan": ("--modes", "colocated", "--gpus", "8")}[command]
    line = assert_one_line_error(run_main(command, *args, "--gpu-hour-price", "1e308", "--json"), "--gpu-hour-price")
    assert "(0, 1000]" in line


def test_report_price_bound_is_the_same(tmp_path):
    r = run_main("report", "--gpu-hour-price", "1e308", "-o", str(tmp_path / "r.html"), module="analysis.cli")
    assert "(0, 1000]" in assert_one_line_error(r, "--gpu-hour-price")


def test_json_output_is_strict_and_refuses_a_non_finite_number():
    from perfmodel.schema.errors import ConfigError
    from perfmodel.schema.jsonio import dumps

    r = run_main("predict", "--mode", "colocated", "--gpus", "8", "--gpu-hour-price", "1000", "--json")
    assert r.returncode == 0, r.stderr
    assert _strict(r.stdout)["dollars_per_million_env_steps"] > 0
    with pytest.raises(ConfigError) as e:
        dumps({"a": [1.0, {"b": float("nan")}]})
    assert e.value.field == "output.a[1].b"


# -- 13: options silently unused --------------------------------------------------------------

@pytest.mark.parametrize("args, field, says", [
    (("validate", "--design", "bogus"), "--design", "must be one of group_out, scale, extrapolate, both"),
    (("validate", "--design", "scale"), "--design", "only with --cross-validate"),
    (("validate", "--cross-validate", "--design", "bogus"), "--design", "must be one of"),
    # a near miss is named, as a click choice's is (cliutil.Choice)
    (("validate", "--cross-validate", "--design", "group-out"), "--design",
     "must be one of group_out, scale, extrapolate, both; got 'group-out'; did you mean 'group_out'?"),
    (("validate", "--design", "SCALE"), "--design", "did you mean 'scale'?"),
])
def test_validate_design_is_checked_whether_or_not_it_is_used(args, field, says):
    assert says in assert_one_line_error(run_main(*args), field)


@pytest.mark.parametrize("args, field", [
    (("--comm", "--backbone", "pi05"), "--backbone"),
    (("--comm", "--env-counts", "1,2"), "--env-counts"),
    (("--backbone", "pi05", "--comm-ranks", "2"), "--comm-ranks"),
])
def test_executor_profile_refuses_options_of_the_other_kind(tmp_path, args, field):
    r = run_main("profile", *args, "--out", str(tmp_path / "p.json"), module="executor.cli")
    assert_one_line_error(r, field)
    assert not (tmp_path / "p.json").exists()


def test_report_iteration_beyond_the_trace_or_without_one_is_refused(tmp_path):
    trace = tmp_path / "t.json"
    r = run_main("predict", "--mode", "colocated", "--gpus", "8", "--no-interval", "--trace", str(trace))
    assert r.returncode == 0, r.stderr
    out = str(tmp_path / "r.html")
    line = assert_one_line_error(run_main("report", "--trace-sim", str(trace), "--iteration", "1000000", "-o", out,
                                          module="analysis.cli"), "--iteration")
    assert "must be an integer in 1.." in line
    assert_one_line_error(run_main("report", "--reference", str(ROOT / "profiles" / "reference" / "rl_vla3_libero.csv"),
                                   "--iteration", "2", "-o", out, module="analysis.cli"), "--iteration")
    r = run_main("report", "--trace-sim", str(trace), "--iteration", "1", "-o", out, module="analysis.cli")
    assert r.returncode == 0, r.stderr


def test_a_choice_with_an_unknown_objective_is_refused(tmp_path, sweep_file):
    details = tmp_path / "c.json"
    r = run_main("plan", "--gpus", "8", "--sweep", str(sweep_file), "--details", str(details))
    assert r.returncode == 0, r.stderr
    doc = json.loads(details.read_text())
    doc["objective"] = "bogus"
    r = run_main("report", "--choice", str(write_json(tmp_path / "bad.json", doc)), "-o", str(tmp_path / "r.html"),
                 module="analysis.cli")
    assert "must be one of throughput, cost, time" in assert_one_line_error(r, "objective")


# -- 14: a model_revision that is no revision --------------------------------------------------

@pytest.mark.parametrize("revision", ["x", 0, 99, True, 1.5])
def test_a_sweep_model_revision_that_is_no_revision_is_refused(sweep_file, tmp_path, revision):
    doc = json.loads(sweep_file.read_text())
    doc["model_revision"] = revision
    r = run_main("plan", "--gpus", "8", "--sweep", str(write_json(tmp_path / "s.json", doc)))
    from perfmodel.planning.sweepfile import MODEL_REVISION

    assert f"must be an integer in 1..{MODEL_REVISION}" in assert_one_line_error(r, "sweep.model_revision")


# -- found by the campaign that stays (benchmarks/fuzz.py) -------------------------------------

def test_a_nan_in_a_field_no_reader_checks_is_refused_not_copied_out(sweep_file, tmp_path):
    doc = json.loads(sweep_file.read_text())
    doc["rows"][0]["y"] = [1, 2, float("nan")]
    r = run_main("plan", "--gpus", "8", "--sweep", str(write_json(tmp_path / "s.json", doc)), "--json")
    assert "must be a finite number, got nan" in assert_one_line_error(r, "sweep.rows[0].y[2]")


def test_an_algorithm_that_is_a_mapping_is_refused(tmp_path):
    cfg = write_config(tmp_path, adv="{a: 1}")
    assert_one_line_error(run_main("predict", "--rlinf-config", str(cfg)), "algorithm.loss_type")


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.pop("objective"), "objective"),
    (lambda d: d["best"].pop("bottleneck"), "best.bottleneck"),
    (lambda d: d["best"].update(iteration_time_s=-1), "best.iteration_time_s"),
    (lambda d: d.update(explanation=3), "explanation"),
])
def test_a_choice_missing_what_the_report_reads_is_refused(tmp_path, sweep_file, edit, field):
    details = tmp_path / "c.json"
    assert run_main("plan", "--gpus", "8", "--sweep", str(sweep_file), "--details", str(details)).returncode == 0
    doc = json.loads(details.read_text())
    edit(doc)
    r = run_main("report", "--choice", str(write_json(tmp_path / "bad.json", doc)), "-o", str(tmp_path / "r.html"),
                 module="analysis.cli")
    assert_one_line_error(r, field)


def test_a_record_with_a_stage_utilization_that_is_no_number_is_refused(tmp_path):
    rec = json.loads((ROOT / "tests" / "data" / "executor_tiny_disaggregated" / "record.json").read_text())
    rec["utilization"]["stages"]["train"] = [1]
    r = run_main("report", "--run", str(write_json(tmp_path / "r.json", rec)), "-o", str(tmp_path / "r.html"),
                 module="analysis.cli")
    assert_one_line_error(r, "utilization.stages.train")


def test_a_choice_ratio_interval_without_its_verdict_is_refused(tmp_path, sweep_file):
    details = tmp_path / "c.json"
    assert run_main("plan", "--gpus", "8", "--sweep", str(sweep_file), "--details", str(details)).returncode == 0
    doc = json.loads(details.read_text())
    doc["colocated_ratio"] = {"ratio": 1.2, "low": 1.1, "high": 1.3, "coverage": 0.9}
    r = run_main("report", "--choice", str(write_json(tmp_path / "bad.json", doc)), "-o", str(tmp_path / "r.html"),
                 module="analysis.cli")
    assert_one_line_error(r, "colocated_ratio.resolved")


@pytest.mark.parametrize("edit, field", [
    (lambda b: b.update(extrapolation={"calibrated_gpus": 8}), "best.extrapolation.calibrated_gpus"),
    (lambda b: b["prediction"].update(throughput_interval={"low": "x", "high": 2}),
     "best.prediction.throughput_interval.low"),
    (lambda b: b.update(throughput_ci95=[1]), "best.throughput_ci95"),
])
def test_a_choice_interval_or_extrapolation_of_the_wrong_shape_is_refused(tmp_path, sweep_file, edit, field):
    details = tmp_path / "c.json"
    assert run_main("plan", "--gpus", "8", "--sweep", str(sweep_file), "--details", str(details)).returncode == 0
    doc = json.loads(details.read_text())
    edit(doc["best"])
    r = run_main("report", "--choice", str(write_json(tmp_path / "bad.json", doc)), "-o", str(tmp_path / "r.html"),
                 module="analysis.cli")
    assert_one_line_error(r, field)


def test_warnings_and_a_margin_of_the_wrong_shape_are_refused(tmp_path, sweep_file):
    doc = json.loads(sweep_file.read_text())
    doc["rows"][0]["prediction"]["warnings"] = [0.5]
    r = run_main("plan", "--gpus", "8", "--sweep", str(write_json(tmp_path / "s.json", doc)))
    assert_one_line_error(r, "sweep.rows[0].prediction.warnings")
    details = tmp_path / "c.json"
    assert run_main("plan", "--gpus", "8", "--sweep", str(sweep_file), "--details", str(details)).returncode == 0
    choice = json.loads(details.read_text())
    choice["runner_up_margin"] = 0.5
    r = run_main("report", "--choice", str(write_json(tmp_path / "bad.json", choice)), "-o", str(tmp_path / "r.html"),
                 module="analysis.cli")
    assert_one_line_error(r, "runner_up_margin")


def test_a_measured_nan_is_written_as_null_not_refused():
    """A run record is written after minutes of work: a diverged loss (NaN) becomes null there,
    while a prediction's non-finite number is refused (the inputs' bounds keep it from happening)."""
    from perfmodel.schema.jsonio import dumps

    assert _strict(dumps({"loss": float("nan"), "x": [float("inf"), 1.0]}, measured=True)) == \
        {"loss": None, "x": [None, 1.0]}
