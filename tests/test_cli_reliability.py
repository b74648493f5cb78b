"""Issue 12 (inputs of perfmodel) and issue 10 item 5 (CLI conventions): each reproduction of the
issue ends in a right answer or one line ``error: <field>: <allowed>`` with exit 2.

Commands run in-process through the real entry point (tests/inproc.py), so these stay fast."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import ROOT, write_json
from inproc import assert_one_line_error, run_main

EXAMPLE = ROOT / "examples" / "plans" / "pi05_4envs_disaggregated.json"


def _plan(scenario_dict, mode="streamer", gpus=8, ratio="1:1", **over):
    from perfmodel.calibration.reference import published_plan
    from perfmodel.schema.profile import Profile

    d = published_plan(Profile.from_dict(scenario_dict), mode, gpus, ratio).to_dict()
    d.update(over)
    return d


def _thr(r) -> float:
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["throughput_env_steps_per_s"]


# -- silently wrong predictions ---------------------------------------------------------------

def test_relative_profile_path_is_read_beside_the_plan(tmp_path, scenario_dict, monkeypatch):
    plans = tmp_path / "plans"
    plans.mkdir()
    write_json(plans / "p.json", scenario_dict)
    slower = json.loads(json.dumps(scenario_dict))
    slower["costs"]["env_step_core_s"] *= 3
    write_json(tmp_path / "p.json", slower)  # a same-named profile in the current directory
    write_json(plans / "plan.json", _plan(scenario_dict, profile="p.json"))
    monkeypatch.chdir(tmp_path)
    from_parent = _thr(run_main("predict", "--plan", "plans/plan.json", "--json"))
    monkeypatch.chdir(plans)
    from_plans = _thr(run_main("predict", "--plan", "plan.json", "--json"))
    monkeypatch.chdir(ROOT)
    absolute = _thr(run_main("predict", "--plan", str(plans / "plan.json"), "--json"))
    assert from_parent == from_plans == absolute
    other = write_json(tmp_path / "other.json", _plan(scenario_dict, profile=str(tmp_path / "p.json")))
    assert _thr(run_main("predict", "--plan", str(other), "--json")) < absolute  # the slower one


def test_cores_below_env_workers_per_node_refused():
    d = json.loads(EXAMPLE.read_text())
    d["cluster"].update(gpus=4, gpus_per_node=4)  # 1:1 -> two env workers on the node
    thr = {}
    for cores in (1, 2, 4):
        d["cluster"]["cpu_cores_per_node"] = cores
        path = write_json(Path(os.environ.get("TMPDIR", "/tmp")) / f"vlaperf_cores_{os.getpid()}_{cores}.json", d)
        try:
            r = run_main("predict", "--plan", str(path), "--json")
        finally:
            path.unlink()
        if cores == 1:
            line = assert_one_line_error(r, "plan.cluster.cpu_cores_per_node")
            assert "2" in line
        else:
            thr[cores] = _thr(r)
    assert thr[4] > thr[2] * 1.5  # env-bound on this tiny plan: more cores, more env steps


def test_backbone_contradicting_profile_refused():
    r = run_main("predict", "--mode", "streamer", "--gpus", "8", "--backbone", "gr00t_n15",
                 "--profile", str(ROOT / "profiles" / "pi05.json"))
    assert_one_line_error(r, "--backbone")
    # the same backbone is no contradiction
    assert _thr(run_main("predict", "--mode", "streamer", "--gpus", "8", "--backbone", "pi05",
                         "--profile", str(ROOT / "profiles" / "pi05.json"), "--json")) > 0


def test_decreasing_table_curve_refused(tmp_path, scenario_dict):
    scenario_dict["costs"]["infer_s"] = {"model": "table", "points": [[1, 0.3], [8, 0.5], [32, 0.2]]}
    prof = write_json(tmp_path / "p.json", scenario_dict)
    assert_one_line_error(run_main("predict", "--mode", "streamer", "--gpus", "8", "--profile", str(prof)),
                          "profile.costs.infer_s.points[2][1]")
    scenario_dict["costs"]["infer_s"] = {"model": "table", "points": [[1, 0.3], [8, 0.5], [32, 0.5]]}
    prof = write_json(tmp_path / "p.json", scenario_dict)
    assert _thr(run_main("predict", "--mode", "streamer", "--gpus", "8", "--profile", str(prof), "--json")) > 0


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory):
    from conftest import SCENARIO_PROFILE

    d = tmp_path_factory.mktemp("sweep")
    prof = write_json(d / "p.json", SCENARIO_PROFILE)
    path = d / "s.json"
    r = run_main("sweep", "--profile", str(prof), "--modes", "colocated,disaggregated,streamer",
                 "--ratios", "1:1,1:3", "--b-max", "null,4", "--gpus", "8", "--jobs", "1", "--no-progress",
                 "-o", str(path))
    assert r.returncode == 0, r.stderr
    return path


def _choice(*args):
    r = run_main("plan", "--gpus", "8", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["best"]


def test_plan_from_sweep_honours_selection(sweep_file):
    s = str(sweep_file)
    assert _choice("--sweep", s, "--modes", "colocated")["mode"] == "colocated"
    best = _choice("--sweep", s, "--modes", "disaggregated", "--ratios", "1:1")
    assert (best["mode"], best["allocation_ratio"]) == ("disaggregated", "1:1")
    # 1:3 on 8 GPUs: the scenario's global batch of 32 over 6 actor GPUs, which RLinf refuses (issue 41)
    r = run_main("plan", "--gpus", "8", "--sweep", s, "--modes", "disaggregated", "--ratios", "1:3")
    assert r.returncode == 2 and r.stderr.startswith("error: actor.global_batch_size: 32 does not split"), r.stderr
    assert _choice("--sweep", s, "--modes", "streamer", "--b-max", "4")["b_max"] == 4
    # the case: colocated has no ratio, as a fresh `perfmodel plan` would answer
    assert _choice("--sweep", s, "--modes", "colocated", "--ratios", "1:3")["mode"] == "colocated"
    # options equal to what the sweep used are no conflict (staleness: the plan default, 1)
    assert _choice("--sweep", s, "--staleness", "1", "--seed", "0") == _choice("--sweep", s)


@pytest.mark.parametrize("args,field", [
    (["--ratios", "5:1"], "--ratios"),          # never swept
    (["--modes", "train_async"], "--modes"),
    (["--staleness", "3"], "--staleness"),      # would change the predictions
    (["--seed", "7"], "--seed"),
    (["--replications", "3"], "--replications"),
    (["--backbone", "gr00t_n15"], "--backbone"),
    (["--gpu-hour-price", "inf"], "--gpu-hour-price"),
    (["--gpu-hour-price", "nan"], "--gpu-hour-price"),
    (["--gpu-hour-price", "-1"], "--gpu-hour-price"),
])
def test_plan_from_sweep_conflicts_refused(sweep_file, args, field):
    assert_one_line_error(run_main("plan", "--gpus", "8", "--sweep", str(sweep_file), *args), field)


def test_plan_from_sweep_with_bad_rows(sweep_file, tmp_path):
    doc = json.loads(sweep_file.read_text())
    ok = next(i for i, r in enumerate(doc["rows"]) if r["status"] == "ok")
    cases = {
        "missing_throughput": (lambda d: d["rows"][ok].pop("throughput_env_steps_per_s"),
                               f"sweep.rows[{ok}].throughput_env_steps_per_s"),
        "nan_throughput": (lambda d: d["rows"][ok].update(throughput_env_steps_per_s=float("nan")),
                           f"sweep.rows[{ok}].throughput_env_steps_per_s"),
        "bad_status": (lambda d: d["rows"][ok].update(status="maybe"), f"sweep.rows[{ok}].status"),
        "row_not_object": (lambda d: d["rows"].__setitem__(ok, [1, 2]), f"sweep.rows[{ok}]"),
        "bad_plan": (lambda d: d["rows"][ok]["plan"].update(mode="warp"), f"sweep.rows[{ok}].plan.mode"),
        "plan_disagrees": (lambda d: d["rows"][ok]["plan"]["cluster"].update(gpus=16), f"sweep.rows[{ok}].plan"),
        "no_utilization": (lambda d: d["rows"][ok]["prediction"].pop("utilization"),
                           f"sweep.rows[{ok}].prediction.utilization"),
        "rows_not_list": (lambda d: d.update(rows={}), "sweep.rows"),
        "wrong_kind": (lambda d: d.update(kind="perfmodel.plan_choice"), "--sweep"),
        "future_version": (lambda d: d.update(schema_version=99), "sweep.schema_version"),
    }
    for name, (edit, field) in cases.items():
        d = json.loads(json.dumps(doc))
        edit(d)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(d))
        assert_one_line_error(run_main("plan", "--gpus", "8", "--sweep", str(path)), field)


def test_plan_out_names_profile_relative_to_itself(sweep_file, tmp_path, monkeypatch):
    out = tmp_path / "deep" / "plan.json"
    r = run_main("plan", "--gpus", "8", "--sweep", str(sweep_file), "-o", str(out))
    assert r.returncode == 0, r.stderr
    ref = json.loads(out.read_text())["profile"]
    assert not Path(ref).is_absolute() and (out.parent / ref).resolve() == (sweep_file.parent / "p.json").resolve()
    monkeypatch.chdir(tmp_path)
    assert _thr(run_main("predict", "--plan", str(out), "--json")) > 0


# -- huge sizes and deep inputs ---------------------------------------------------------------

@pytest.mark.parametrize("where,value,field", [
    (("cluster", "gpus"), 10**7, "plan.cluster.gpus"),
    (("workload", "max_episode_steps"), 10**9, "plan.workload.max_episode_steps"),
    (("workload", "rollout_epoch"), 10**7, "plan.workload.rollout_epoch"),
    (("workload", "rollout_epoch"), 6000, "plan.workload.rollout_epoch"),  # within its field range, too much work
    (("workload", "total_num_envs"), 10**12, "plan.workload.total_num_envs"),
    (("max_staleness",), 10**9, "plan.max_staleness"),
])
def test_huge_sizes_refused_with_range(tmp_path, scenario_dict, where, value, field):
    d = _plan(scenario_dict, profile=str(write_json(tmp_path / "p.json", scenario_dict)))
    obj = d
    for k in where[:-1]:
        obj = obj[k]
    obj[where[-1]] = value
    line = assert_one_line_error(run_main("predict", "--plan", str(write_json(tmp_path / "plan.json", d))), field)
    assert any(ch.isdigit() for ch in line.split(field, 1)[1])  # the allowed range is in the message


def test_huge_integer_and_deep_nesting(tmp_path):
    big = tmp_path / "big.json"
    big.write_text('{"mode": "streamer", "cluster": {"gpus": ' + "9" * 5000 + "}}")
    assert_one_line_error(run_main("predict", "--plan", str(big)), "plan")
    deep = tmp_path / "deep.json"
    deep.write_text('{"mode": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert_one_line_error(run_main("predict", "--plan", str(deep)), "plan")
    assert_one_line_error(run_main("predict", "--mode", "streamer", "--gpus", "8", "--profile", str(deep)),
                          "profile")
    assert_one_line_error(run_main("predict", "--mode", "streamer", "--gpus", "99999999999"), "--gpus")


# -- one error path ---------------------------------------------------------------------------

@pytest.mark.parametrize("args,field", [
    (["predict", "--plan", "/proc/self/mem"], "plan"),
    (["predict", "--plan", "/dev/zero"], "plan"),
    (["predict", "--plan", "/"], "--plan"),
    (["predict", "--mode", "streamer", "--gpus", "8", "--profile", "/proc/self/mem"], "profile"),
    (["predict", "--mode", "streamer", "--gpus", "8", "--profile", "/"], "--profile"),
    (["validate", "--reference", "/proc/self/mem"], "reference"),
    (["validate", "--reference", "/"], "--reference"),
    (["plan", "--gpus", "8", "--sweep", "/proc/self/mem"], "--sweep"),
    (["plan", "--gpus", "8", "--sweep", "/"], "--sweep"),
    (["calibrate", "--reference", "/proc/self/mem"], "reference"),
])
def test_unreadable_inputs_one_line(args, field):
    assert_one_line_error(run_main(*args), field)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_permission_denied_one_line(tmp_path):
    p = write_json(tmp_path / "plan.json", {})
    p.chmod(0)
    assert_one_line_error(run_main("predict", "--plan", str(p)), "plan")


def test_trace_path_checked_before_simulating(tmp_path, monkeypatch):
    import perfmodel.prediction

    def must_not_run(*a, **k):
        raise AssertionError("simulated before checking --trace")

    monkeypatch.setattr(perfmodel.prediction, "predict", must_not_run)
    assert_one_line_error(run_main("predict", "--mode", "streamer", "--gpus", "8", "--trace", str(tmp_path)),
                          "--trace")
    assert_one_line_error(run_main("predict", "--mode", "streamer", "--gpus", "8", "--trace",
                                   "/proc/nonexistent/t.json"), "--trace")
    afile = tmp_path / "afile"
    afile.write_text("")
    line = assert_one_line_error(run_main("predict", "--mode", "streamer", "--gpus", "8", "--trace",
                                          str(afile / "sub" / "t.json")), "--trace")
    assert line.endswith(f"{afile} is a file, not a directory")


def test_validate_one_row(tmp_path):
    ref = tmp_path / "one.csv"
    ref.write_text("mode,backbone,gpus,allocation_ratio,throughput_env_steps_per_s\nstreamer,pi05,8,1:1,300\n")
    r = run_main("validate", "--reference", str(ref), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["points"]) == 1 and out["spearman"] is None
    r = run_main("validate", "--reference", str(ref))
    assert r.returncode == 0 and "Spearman n/a" in r.stdout, r.stderr


@pytest.mark.parametrize("body,field", [
    ("streamer,pi05\n", "reference line 2"),
    ("streamer,pi05,8,1:1,inf\n", "reference line 2.throughput_env_steps_per_s"),
    ("streamer,pi05,0,1:1,3\n", "reference line 2.gpus"),
    ("streamer,llama,8,1:1,3\n", "reference line 2.backbone"),
    ("streamer,pi05,8,1:1,3\nstreamer,pi05,8,1:1,4\n", "reference line 3"),  # one value per setup
    ("streamer,pi05,8,7:1,3\n", "reference (pi05 streamer 8 GPUs 7:1)"),
    ("streamer,pi05," + "9" * 5000 + ",1:1,3\n", "reference line 2.gpus"),
])
def test_bad_reference_rows(tmp_path, body, field):
    ref = tmp_path / "r.csv"
    ref.write_text("mode,backbone,gpus,allocation_ratio,throughput_env_steps_per_s\n" + body)
    assert_one_line_error(run_main("validate", "--reference", str(ref)), field)


def test_negative_seed_with_replications(tmp_path, scenario_dict):
    scenario_dict["variability"] = {"env_step_cv": 0.1}
    prof = write_json(tmp_path / "p.json", scenario_dict)
    assert_one_line_error(run_main("predict", "--mode", "streamer", "--gpus", "8", "--profile", str(prof),
                                   "--replications", "2", "--seed", "-1"), "--seed")


def test_unexpected_failure_is_one_line_and_verbose_shows_traceback(monkeypatch):
    import perfmodel.prediction

    def broken(*a, **k):
        raise RuntimeError("simulated internal failure")

    monkeypatch.setattr(perfmodel.prediction, "predict", broken)
    r = run_main("predict", "--mode", "streamer", "--gpus", "8")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and "RuntimeError" in lines[0] and "--verbose" in lines[0], r.stderr
    r = run_main("predict", "--mode", "streamer", "--gpus", "8", "--verbose")
    assert r.returncode == 1 and "Traceback" in r.stderr and r.stderr.strip().splitlines()[-1].startswith("error:")


# -- CLI conventions (issue 10 item 5) --------------------------------------------------------

def test_version_and_bare_help():
    for module in ("perfmodel.cli", "analysis.cli", "executor.cli"):
        r = run_main("--version", module=module)
        assert r.returncode == 0 and "vlaperf" in r.stdout, (module, r.stderr)
    r = run_main()
    assert r.returncode == 0 and "Usage: perfmodel" in r.stdout and r.stderr == ""
    r = run_main(module="analysis.cli")
    assert r.returncode == 0 and "Usage: analysis" in r.stdout


@pytest.mark.parametrize("args,field,hint", [
    (["predict", "--mode", "stream", "--gpus", "8"], "--mode", "streamer"),
    (["predict", "--mode", "STREAMER", "--gpus", "8"], "--mode", "did you mean 'streamer'"),
    (["predict", "--mode", "streamer", "--gpus", "8", "--backbone", "gr00t"], "--backbone", "gr00t_n15"),
    (["plan", "--gpus", "8", "--objective", "throughput_"], "--objective", "throughput"),
    (["predict", "--mdoe", "streamer"], "--mdoe", "--mode"),
])
def test_choices_suggest_near_misses(args, field, hint):
    line = assert_one_line_error(run_main(*args), field)
    assert hint in line


def test_no_progress_everywhere_and_json_on_calibrate(tmp_path, monkeypatch):
    monkeypatch.setenv("VLAPERF_PROFILE_DIR", str(tmp_path / "home" / "profiles"))
    bundled = {p: p.stat().st_mtime_ns for p in (ROOT / "profiles").glob("*.json")}
    r = run_main("calibrate", "--max-evals", "2", "--no-progress", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["kind"] == "perfmodel.calibration" and len(out["points"]) == 30
    written = [Path(p) for p in out["wrote"]]
    assert written and all(p.parent == tmp_path / "home" / "profiles" and p.is_file() for p in written)
    assert {p: p.stat().st_mtime_ns for p in (ROOT / "profiles").glob("*.json")} == bundled
    for cmd in ("predict", "validate", "calibrate", "sweep", "plan"):
        assert "--json" in run_main(cmd, "--help").stdout, cmd
    # --no-progress is a shared convention (docs/guide.md): every command takes it, with a bar or not.
    for cmd in ("predict", "validate", "calibrate", "sweep", "plan"):
        assert "--no-progress" in run_main(cmd, "--help").stdout, cmd
    # and validate --cross-validate then prints no progress lines; without it, only to a terminal
    # (as the bars: a log or a pipe gets none)
    # (the refits replaced by one that reports progress as they do: this checks the switch only)
    import inproc
    import perfmodel.calibration.crossval as crossval

    def refits(points, *, progress=None, **kw):
        progress("hold out pi05 at 8 GPUs", 10, 0.01)
        progress("hold out pi05 at 8 GPUs: prediction intervals of the held-out points", -1, float("nan"))
        return {"kind": "cross_validation"}

    monkeypatch.setattr(crossval, "cross_validate", refits)
    cv = ("validate", "--cross-validate", "--json")
    assert run_main(*cv).stderr == ""
    monkeypatch.setattr(inproc._Tee, "isatty", lambda self: True)
    assert run_main(*cv, "--no-progress").stderr == ""
    assert run_main(*cv).stderr.splitlines() == [
        "hold out pi05 at 8 GPUs: 10 evaluations, rms log error 0.0100",
        "hold out pi05 at 8 GPUs: prediction intervals of the held-out points"]


def test_outputs_honour_umask(sweep_file, tmp_path):
    old = os.umask(0o022)
    try:
        out, details = tmp_path / "plan.json", tmp_path / "choice.json"
        r = run_main("plan", "--gpus", "8", "--sweep", str(sweep_file), "-o", str(out), "--details", str(details))
        assert r.returncode == 0, r.stderr
        trace = tmp_path / "trace.json"
        r = run_main("predict", "--plan", str(out), "--trace", str(trace))
        assert r.returncode == 0, r.stderr
        for p in (out, details, trace):
            assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    finally:
        os.umask(old)


def test_shell_completion_of_choices():
    import subprocess
    import sys

    env = {**os.environ, "_PERFMODEL_COMPLETE": "bash_complete", "COMP_WORDS": "perfmodel predict --mode s",
           "COMP_CWORD": "3", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "perfmodel.cli"], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0 and "streamer" in r.stdout and "colocated" not in r.stdout, r.stdout + r.stderr


def test_executor_without_its_extras_says_how_to_install_them():
    """`pip install -e .` installs the planner only: a command that needs torch (or Ray, LIBERO,
    MuJoCo) says what to install, one line, exit 2, not an internal error."""
    from perfmodel.cliutil import error_line

    line, code = error_line(ModuleNotFoundError("No module named 'torch'", name="torch"))
    assert code == 2 and ".[executor]" in line and "'torch'" in line and "\n" not in line
    line, code = error_line(ModuleNotFoundError("No module named 'ray.util'", name="ray.util"))
    assert code == 2 and ".[executor]" in line
    line, code = error_line(ModuleNotFoundError("No module named 'nothing_of_ours'", name="nothing_of_ours"))
    assert code == 1 and "internal" in line  # a module we do not expect missing is a bug, said so


@pytest.mark.parametrize("option, value", [("--staleness", "-1"), ("--b-max", "0"), ("--t-max", "-1"),
                                           ("--pipeline-stages", "0")])
def test_a_bad_option_value_is_named_by_its_option(option, value):
    """The error names what the user typed (--staleness), not the plan field it sets."""
    r = run_main("predict", "--mode", "rollout_async", "--gpus", "8", option, value)
    assert r.returncode == 2 and r.stderr.startswith(f"error: {option}: "), r.stderr


@pytest.mark.parametrize("value", ["-1", "20000"])
def test_staleness_out_of_range_gives_one_message_in_every_command(value):
    """predict, sweep and plan refuse an out-of-range --staleness with the same allowed range
    (a sweep once accepted 20000 and then reported 'no feasible plan')."""
    lines = set()
    for args in (("predict", "--mode", "rollout_async", "--gpus", "8", "--no-interval"),
                 ("sweep", "--gpus", "8", "--no-interval"), ("plan", "--gpus", "8")):
        r = run_main(*args, "--staleness", value)
        assert r.returncode == 2, (args, r.stderr)
        lines.add(r.stderr.strip())
    assert lines == {f"error: --staleness: must be an integer in 0..10000, got {value}"}


def test_an_option_the_mode_ignores_says_so():
    """--staleness on a synchronous mode, --b-max / --t-max without dynamic batching: one warning
    each on stderr (and in --json), and the prediction is the mode's; used options say nothing."""
    r = run_main("predict", "--mode", "colocated", "--gpus", "8", "--staleness", "3", "--t-max", "1",
                 "--no-interval")
    assert r.exit_code == 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: ")]
    assert lines == ["warning: --staleness: no effect in mode colocated (synchronous)",
                     "warning: --t-max: no effect in mode colocated (no dynamic batching)"]
    r = run_main("predict", "--mode", "rollout_async", "--gpus", "8", "--staleness", "2", "--b-max", "4",
                 "--no-interval", "--json")
    assert r.exit_code == 0 and "warning: " not in r.stderr
    assert not any("no effect" in w for w in json.loads(r.stdout).get("warnings", []))


# -- found by fuzzing the CLIs (2026-12-04) ------------------------------------------------------

def test_a_key_twice_in_one_object_is_refused(tmp_path):
    """JSON keeps the last of two equal keys silently; a plan saying mode twice is refused."""
    p = tmp_path / "dup.json"
    p.write_text('{"mode": "colocated", "mode": "streamer", "cluster": {"gpus": 8}}')
    assert "key 'mode' appears twice" in assert_one_line_error(run_main("predict", "--plan", str(p)), "plan")


@pytest.mark.parametrize("args, field", [
    (("predict", "--mode", "streamer", "--gpus", "8", "--plan", ""), "--plan"),
    (("predict", "--rlinf-config", "."), "--rlinf-config"),
    (("validate", "--record"), "--record"),
    (("predict", "--mode", "colocated", "--gpus", "8", "--profile", "/nonexistent/p.json"), "--profile"),
])
def test_options_given_wrong_are_named(args, field):
    assert_one_line_error(run_main(*args), field)


def test_report_inputs_are_checked_on_reading(tmp_path, sweep_file):
    """What the report reads of a sweep, prediction, choice or trace is checked as plan --sweep
    checks a sweep: a hand-edited value is one line naming the field, never a traceback or a
    report drawn from it."""
    sweep = json.loads(Path(sweep_file).read_text())
    ok = next(i for i, r in enumerate(sweep["rows"]) if r["status"] == "ok")
    sweep["rows"][ok]["throughput_env_steps_per_s"] = "fast"
    bad_sweep = write_json(tmp_path / "s.json", sweep)
    pred = json.loads(run_main("predict", "--mode", "colocated", "--gpus", "8", "--json", "--no-interval").stdout)
    pred["throughput_env_steps_per_s"] = -5
    bad_pred = write_json(tmp_path / "p.json", pred)
    trace = {"traceEvents": [{"ph": "X", "name": "train", "ts": 0, "pid": 1, "tid": 1}]}
    bad_trace = write_json(tmp_path / "t.json", trace)
    out = str(tmp_path / "r.html")
    for args, field in (((("--sweep", str(bad_sweep)), f"sweep.rows[{ok}].throughput_env_steps_per_s")),
                        (("--prediction", str(bad_pred)), "prediction.throughput_env_steps_per_s"),
                        (("--trace-sim", str(bad_trace)), "traceEvents[0].dur"),
                        (("--run", str(tmp_path)), "--run"),
                        (("--reference", str(ROOT / "profiles" / "reference" / "rl_vla3_libero.csv"),
                          "--reference-profile", "pi05=missing.json"), "--reference-profile")):
        assert_one_line_error(run_main("report", *args, "-o", out, module="analysis.cli"), field)
    assert not Path(out).exists()


def test_executor_profile_checks_its_output_before_measuring(tmp_path):
    r = run_main("profile", "--comm", "--comm-ranks", "2", "--out", str(tmp_path), module="executor.cli")
    assert "is a directory" in assert_one_line_error(r, "--out")


def test_sigterm_stops_a_sweep_in_one_line_and_keeps_the_old_output(tmp_path):
    """SIGTERM unwinds like Ctrl-C: the worker pool is terminated without tracebacks of its
    own, exit 143, and the -o file from before is untouched (written atomically or not at all)."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "keep.json"
    out.write_text('{"before": true}')
    proc = subprocess.Popen([sys.executable, "-m", "perfmodel.cli", "sweep", "--gpus", "8,16,32,64,128,256,512,1024",
                             "--ratios", "all", "--pipeline-stages", "1,2,3,4", "--b-max", "null,64,256",
                             "--quiet", "-o", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:  # until the worker pool runs
        if children.exists() and children.read_text().split():
            break
        time.sleep(0.2)
    time.sleep(1)  # the workers are at work (the whole sweep takes minutes)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and err.strip() == "error: terminated", err[-2000:]
    assert json.loads(out.read_text()) == {"before": True}


def test_report_takes_the_shared_conventions(tmp_path):
    """--json and --no-progress, as on every vlaperf command that prints a result."""
    pred = write_json(tmp_path / "p.json", json.loads(run_main("predict", "--mode", "colocated", "--gpus", "8",
                                                                "--json", "--no-interval").stdout))
    r = run_main("report", "--prediction", str(pred), "-o", str(tmp_path / "r.html"), "--json", "--no-progress",
                 module="analysis.cli")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert Path(out["html"]).is_file() and "utilization" in out["figures"] and "validation" in out["not_drawn"]


def test_a_sweep_from_an_older_model_says_so(sweep_file, tmp_path):
    """plan --sweep chooses from the file's numbers; a file written before a model change that
    moves them (MODEL_REVISION) is flagged, a current one is not."""
    r = run_main("plan", "--gpus", "8", "--sweep", str(sweep_file), "--no-progress")
    assert r.returncode == 0 and "older model" not in r.stderr, r.stderr
    old = json.loads(Path(sweep_file).read_text())
    del old["model_revision"]
    r = run_main("plan", "--gpus", "8", "--sweep", str(write_json(tmp_path / "old.json", old)), "--no-progress")
    assert r.returncode == 0 and "was written by an older model (revision 1" in r.stderr, r.stderr


@pytest.mark.parametrize("rows", [
    "colocated,pi05,8,,100\ncolocated,pi05,8,1:1,110\n",  # colocated has no split: the same setup
    "rollout_async,pi05,8,1:1,100\nrollout_async,pi05,8,2:2,110\n",  # 2:2 is 1:1
    "rollout_async,pi05,8,,100\nrollout_async,pi05,8,1:1,110\n",  # no ratio reads as 1:1
])
def test_one_published_value_per_setup_as_a_plan_reads_it(tmp_path, rows):
    ref = tmp_path / "r.csv"
    ref.write_text("mode,backbone,gpus,allocation_ratio,throughput_env_steps_per_s\n" + rows)
    assert "repeats line 2's setup" in assert_one_line_error(run_main("validate", "--reference", str(ref)),
                                                             "reference line 3")
