"""perfmodel plan: the chosen plan is the best of the sweep under the objective, it is a valid
runnable plan whose prediction matches, and the explanation names bottleneck and runner-up."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, run_cli, write_json
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import Plan
from perfmodel.planning.choice import choose, chosen_plan, plan_best
from perfmodel.prediction import predict
from perfmodel.planning.sweep import SweepSpec, run_sweep


@pytest.fixture
def sweep_doc(scenario_profile):
    spec = SweepSpec(profile_ref="scenario", modes=("colocated", "disaggregated", "streamer"), gpus=(8, 16, 24),
                     pipeline_stages=(1, 2), gpu_hour_price=2.0)
    return run_sweep(spec, scenario_profile, jobs=2)


@pytest.mark.parametrize("gpus", [8, 16, 24])
def test_throughput_choice_is_max_of_sweep(sweep_doc, gpus):
    choice = choose(sweep_doc, gpus, "throughput")
    at_n = [r for r in sweep_doc["rows"] if r["status"] == "ok" and r["gpus"] == gpus]
    # the maximum, up to a tie (TIE_REL), which goes to the earlier row
    assert choice["best"]["throughput_env_steps_per_s"] == pytest.approx(max(r["throughput_env_steps_per_s"]
                                                                             for r in at_n), rel=1e-4)
    assert choice["best"]["gpus"] == gpus
    ru = choice["runner_up"]
    assert ru is not None and ru["mode"] != choice["best"]["mode"]
    assert ru["throughput_env_steps_per_s"] == max(r["throughput_env_steps_per_s"] for r in at_n
                                                   if r["mode"] != choice["best"]["mode"])


def test_cost_choice_is_max_per_gpu_hour_within_budget(sweep_doc):
    choice = choose(sweep_doc, 16, "cost")
    within = [r for r in sweep_doc["rows"] if r["status"] == "ok" and r["gpus"] <= 16]
    assert choice["best"]["env_steps_per_gpu_hour"] == max(r["env_steps_per_gpu_hour"] for r in within)
    assert choice["best"]["env_steps_per_dollar"] == max(r["env_steps_per_dollar"] for r in within)


def test_explanation_names_bottleneck_and_runner_up(sweep_doc):
    choice = choose(sweep_doc, 16, "throughput")
    text = choice["explanation"]
    best, ru = choice["best"], choice["runner_up"]
    assert f"The bottleneck is {best['bottleneck']}" in text
    assert f"The runner-up, {ru['mode']}" in text
    assert f"{ru['throughput_env_steps_per_s']:.1f} env steps/s" in text
    assert f"{best['throughput_env_steps_per_s']:.1f} env steps/s" in text


def test_no_feasible_plan_is_a_config_error(sweep_doc):
    with pytest.raises(ConfigError) as e:
        choose(sweep_doc, 32, "throughput")
    assert e.value.field == "--gpus"


def test_plan_best_equals_choice_from_full_sweep(sweep_doc, scenario_profile):
    spec = SweepSpec(profile_ref="scenario", modes=("colocated", "disaggregated", "streamer"),
                     pipeline_stages=(1, 2), gpu_hour_price=2.0)
    choice, doc = plan_best(spec, scenario_profile, 16, "throughput", jobs=1)
    assert {r["gpus"] for r in doc["rows"]} == {16}
    assert choice["best"]["plan"] == choose(sweep_doc, 16, "throughput")["best"]["plan"]
    plan = chosen_plan(choice)
    assert predict(plan, scenario_profile)["throughput_env_steps_per_s"] == choice["best"]["throughput_env_steps_per_s"]


def test_cli_plan_writes_runnable_plan(tmp_path, scenario_dict):
    prof = write_json(tmp_path / "p.json", scenario_dict)
    sweep, plan_path, details = tmp_path / "s.json", tmp_path / "plan.json", tmp_path / "choice.json"
    common = ["--profile", str(prof), "--modes", "colocated,streamer", "--quiet"]
    r = run_cli("sweep", *common, "--gpus", "8,16", "-o", str(sweep))
    assert r.returncode == 0, r.stderr
    r = run_cli("plan", *common, "--gpus", "16", "-o", str(plan_path), "--details", str(details))
    assert r.returncode == 0, r.stderr
    doc = json.loads(sweep.read_text())
    best = max((x for x in doc["rows"] if x["status"] == "ok" and x["gpus"] == 16),
               key=lambda x: x["throughput_env_steps_per_s"])
    table = _table(r.stdout)  # the answer is a table: the best first, with its bottleneck
    assert table[1][1] == best["mode"] and table[1][8] == f"{best['throughput_env_steps_per_s']:.1f}"
    assert table[1][11] == best["bottleneck"] and r.stdout.splitlines()[0] == "Best plans for exactly 16 GPUs by throughput:"
    written = json.loads(plan_path.read_text())
    # the profile file is named relative to the plan file (Plan.load resolves it from there)
    assert written == {**best["plan"], "profile": "p.json"}
    Plan.from_dict(written)  # strict schema: what executor run reads
    # choosing from the saved sweep gives the same plan
    plan2 = tmp_path / "plan2.json"
    r = run_cli("plan", "--sweep", str(sweep), "--gpus", "16", "-o", str(plan2))
    assert r.returncode == 0, r.stderr
    assert json.loads(plan2.read_text()) == written
    # the plan predicts what the sweep said
    r = run_cli("predict", "--plan", str(plan_path), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["throughput_env_steps_per_s"] == best["throughput_env_steps_per_s"]
    d = json.loads(details.read_text())
    assert {**d["plan"], "profile": "p.json"} == written and d["best"]["throughput_env_steps_per_s"] == best["throughput_env_steps_per_s"]
    assert "runner-up" in d["explanation"] and d["runner_up"]["mode"] != d["best"]["mode"]


def _table(stdout: str) -> dict[int, list[str]]:
    """The plan table's rows by rank, split on whitespace (only the last cell, the marks, holds spaces)."""
    return {int(t[0]): t for t in (line.split() for line in stdout.splitlines()) if t and t[0].isdigit()}


def test_plan_table_rows_are_the_choice(tmp_path, scenario_dict):
    """``perfmodel plan`` prints the leading candidates as a table whose cells are the choice's
    numbers (--details): mode, split, throughput, interval, env steps per GPU-hour, dollars per
    million env steps at the given price, bottleneck, and the tie mark where one ties the best."""
    prof = write_json(tmp_path / "p.json", scenario_dict)
    details = tmp_path / "d.json"
    r = run_cli("plan", "--profile", str(prof), "--modes", "colocated,rollout_async,streamer", "--gpus", "8",
                "--gpu-hour-price", "2", "--details", str(details), "--quiet")
    assert r.returncode == 0, r.stderr
    d = json.loads(details.read_text())
    table = _table(r.stdout)
    header = r.stdout.splitlines()[1].split("  ")
    assert [h.strip() for h in header if h.strip()][-4:] == ["env steps/GPU-h", "$/M env steps", "bottleneck", "marks"]
    assert d["top_candidates"] and sorted(table) == [c["rank"] for c in d["top_candidates"]]
    assert table[1][1] == d["best"]["mode"]
    for c in d["top_candidates"]:
        row = table[c["rank"]]
        assert row[1] == c["mode"] and row[2] == str(c["gpus"])
        assert row[3] == ("shared" if c["allocation_ratio"] is None else f"{c['rollout_gpus']}:{c['actor_gpus']}")
        assert row[8] == f"{c['throughput_env_steps_per_s']:.1f}"
        assert row[9] == ("-" if c["throughput_low"] is None else f"{c['throughput_low']:.1f}..{c['throughput_high']:.1f}")
        assert row[10] == f"{c['env_steps_per_gpu_hour']:.0f}"
        assert row[11] == f"{2 * 1e6 / c['env_steps_per_gpu_hour']:.2f}"
        assert row[12] == c["bottleneck"]
        assert ("=" in row[13:]) == c["tie_with_best"]
    # rollout_async and streamer tie on this profile (no trainer idle time to fill): marked, and said
    ties = [c["mode"] for c in d["top_candidates"] if c["tie_with_best"]]
    if ties:
        assert "= marks a tie:" in r.stdout
    infeasible = sum(d["infeasible_reasons"].values())
    assert infeasible == d["infeasible"] and (f"Not feasible: {infeasible} more" in r.stdout) == (infeasible > 0)


@pytest.mark.parametrize("args,field", [
    (["--gpus", "0"], "--gpus"),
    (["--gpus", "8", "--objective", "speed"], "--objective"),
    (["--gpus", "8", "--ratios", "a:b"], "--ratios"),
    (["--gpus", "8", "--gpu-hour-price", "-1"], "--gpu-hour-price"),
    (["--gpus", "8", "-o", "/proc/nonexistent/plan.json"], "--out"),
    (["--gpus", "9", "--modes", "streamer", "--ratios", "1:1"], "--gpus"),  # nothing feasible
])
def test_cli_plan_bad_input(tmp_path, scenario_dict, args, field):
    prof = write_json(tmp_path / "p.json", scenario_dict)
    r = run_cli("plan", "--profile", str(prof), "--quiet", *args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), r.stderr


def test_a_tie_goes_to_the_earlier_row_not_to_float_rounding():
    """Two modes whose predictions differ in the last bits (the same timeline summed in another
    order) tie: the plan and the sweep's summary both take the earlier row of the sweep (the
    simpler mode), whichever float came out larger; a gap beyond the tie is still a gap."""
    from perfmodel.planning.choice import candidates
    from perfmodel.planning.sweep import TIE_REL, summarize

    def row(index: int, mode: str, thr: float, gpus: int = 8) -> dict:
        return {"index": index, "status": "ok", "mode": mode, "gpus": gpus, "allocation_ratio": "1:1",
                "throughput_env_steps_per_s": thr, "env_steps_per_gpu_hour": thr * 3600 / gpus}

    ra, st = 145.51054437579367, 145.5105443757937  # as measured: streamer above by one ulp
    doc = {"rows": [row(0, "rollout_async", ra), row(1, "streamer", st)], "spec": {}}
    for objective in ("throughput", "cost"):
        assert candidates(doc["rows"], 8, objective)[0]["mode"] == "rollout_async"  # choose's best
    assert summarize(doc["rows"])["best_per_gpus"][0]["mode"] == "rollout_async"
    doc["rows"][1]["throughput_env_steps_per_s"] = ra * (1 + 3 * TIE_REL)  # a real gap, however small
    doc["rows"][1]["env_steps_per_gpu_hour"] = doc["rows"][1]["throughput_env_steps_per_s"] * 450
    assert candidates(doc["rows"], 8, "throughput")[0]["mode"] == "streamer"
    assert summarize(doc["rows"])["best_per_gpus"][0]["mode"] == "streamer"
    # chained near ties: the plan and the summary apply the same rule (one function)
    chain = [row(0, "train_async", 100.0), row(1, "rollout_async", 100.009), row(2, "streamer", 100.018)]
    assert candidates(chain, 8, "throughput")[0]["mode"] == summarize(chain)["best_per_gpus"][0]["mode"] \
        == "rollout_async"


def test_a_tie_is_called_a_tie_and_a_small_gap_unresolved():
    """rollout_async and streamer predict the same throughput in the published setup (the
    rollout is the bottleneck): the explanation says the order is the sweep's, and why, instead of
    presenting one as better. A gap below the model's residual error is said to be unresolved."""
    from perfmodel.calibration.uncertainty import Z
    from perfmodel.planning.choice import STREAMING_TIE, runner_up_margin
    from perfmodel.schema.profile import load_profile

    spec = SweepSpec(profile_ref="pi05", modes=("rollout_async", "streamer"), gpus=(16,), ratios=("1:1",))
    choice, _ = plan_best(spec, load_profile("pi05"), 16, "throughput", jobs=1)
    best, ru = choice["best"], choice["runner_up"]
    assert {best["mode"], ru["mode"]} == {"rollout_async", "streamer"}
    assert best["throughput_env_steps_per_s"] == ru["throughput_env_steps_per_s"]
    assert choice["runner_up_margin"]["tie"] and not choice["runner_up_margin"]["resolvable"]
    assert "The two tie" in choice["explanation"] and STREAMING_TIE in choice["explanation"]

    def row(thr: float, model_pct: float | None) -> dict:
        iv = {"components_pct": {"model_pct": model_pct}} if model_pct is not None else None
        return {"throughput_env_steps_per_s": thr, "prediction": {"throughput_interval": iv}}

    s = 0.02  # residual model error, one sd (log)
    near = runner_up_margin(row(100.0, 100 * Z * s), row(99.0, None))
    assert not near["tie"] and not near["resolvable"] and near["model_error_pct"] == pytest.approx(2.0)
    far = runner_up_margin(row(100.0, 100 * Z * s), row(90.0, None))
    assert far["resolvable"] and far["gap_pct"] == pytest.approx(100 * (100 / 90 - 1))
    assert runner_up_margin(row(100.0, None), row(99.9, None))["resolvable"]  # no model error known


def test_best_over_runner_up_and_colocated_as_intervals_of_the_ratio():
    """With the profile, the plan says how sure the model is of its order: the interval of the
    best's throughput over the runner-up's and over colocated's, where what moves both cancels."""
    from perfmodel.calibration.uncertainty import ratio_interval
    from perfmodel.schema.profile import load_profile
    from perfmodel.simulate import simulate

    prof = load_profile("pi05")
    spec = SweepSpec(profile_ref="pi05", modes=("colocated", "rollout_async"), gpus=(16,), ratios=("1:1",))
    choice, doc = plan_best(spec, prof, 16, "throughput", jobs=1)
    best, ru = choice["best"], choice["runner_up"]
    assert (best["mode"], ru["mode"]) == ("rollout_async", "colocated")
    r = choice["runner_up_ratio"]
    a, b = chosen_plan(choice), Plan.from_dict(ru["plan"], "plan")
    run = lambda pl, pr: simulate(pl, pr).throughput_env_steps_per_s  # noqa: E731
    want, _ = ratio_interval(a, b, prof, run(a, prof), run(b, prof), run)
    assert r == {**want, "measure": "throughput"} and r["low"] < r["ratio"] < r["high"]
    assert r["resolved"] == (r["low"] > 1)  # (the 30-point fit's 9.8 % residual scatter leaves it unresolved)
    assert choice["colocated_ratio"] == r  # here the runner-up is colocated
    assert ("the model orders the two" if r["resolved"] else "the model cannot order") in choice["explanation"]
    assert f"{100 * (r['low'] - 1):+.1f}%..{100 * (r['high'] - 1):+.1f}%" in choice["explanation"]
    # the plain-text plan says 'interval includes 0' as the emitted header does (issue 41 item 9)
    from perfmodel.commands.plan import plan_lines
    from perfmodel.planning.choice import choice_summary

    over = [ln for ln in plan_lines(choice_summary(choice)) if ln.startswith("Over the runner-up")]
    assert len(over) == 1 and ("the interval includes 0" in over[0]) == (r["resolved"] is False), over
    # From a sweep file alone (no profile) there is no ratio, and nothing claims one.
    assert choose(doc, 16, "throughput")["runner_up_ratio"] is None


def test_the_cost_objective_compares_env_steps_per_gpu_hour():
    """Chosen by env steps per GPU-hour, possibly on fewer GPUs than the runner-up: the ratio
    interval is of that measure (the throughput ratio x the GPU counts' ratio, exactly)."""
    from perfmodel.schema.profile import load_profile

    prof = load_profile("pi05")
    spec = SweepSpec(profile_ref="pi05", modes=("colocated", "rollout_async"), gpus=(8, 16), ratios=("1:1",))
    choice, doc = plan_best(spec, prof, 16, "cost", jobs=1)
    best, ru, r = choice["best"], choice["runner_up"], choice["runner_up_ratio"]
    assert r["measure"] == "env steps per GPU-hour"
    assert r["ratio"] == pytest.approx(best["env_steps_per_gpu_hour"] / ru["env_steps_per_gpu_hour"], rel=1e-9)
    assert r["low"] < r["ratio"] < r["high"] and "% env steps per GPU-hour (90% interval" in choice["explanation"]
    assert plan_best(spec, prof, 16, "throughput", jobs=1)[0]["runner_up_ratio"]["measure"] == "throughput"


def test_a_measured_profile_does_not_claim_an_order():
    """A measured profile's interval is its measurement spread only (no model error): the ratio
    is printed but not as the model ordering two plans; predictions within rounding are a tie."""
    from perfmodel.schema.profile import load_profile

    prof = load_profile(str(ROOT / "profiles" / "pi05_tiny_cpu.json"))
    spec = SweepSpec(profile_ref="pi05_tiny_cpu", modes=("colocated", "rollout_async", "streamer"), gpus=(2,),
                     ratios=("1:1",))
    choice, _ = plan_best(spec, prof, 2, "throughput", jobs=1)
    assert choice["runner_up_margin"]["tie"]  # rollout_async and streamer, 1e-6 apart
    assert choice["colocated_ratio"]["resolved"] is None
    assert "measurement spread only)" in choice["explanation"].split("Colocated on")[1]


def test_plan_from_a_sweep_file_gives_the_ratio_intervals(tmp_path):
    """`plan --sweep` (the walkthrough's path) loads the sweep's profile for the ratio intervals
    and gives what `plan` without a sweep file gives; a sweep file whose numbers the profile no
    longer gives gets none, and says why, instead of intervals around other numbers."""
    sweep, direct, via = tmp_path / "s.json", tmp_path / "direct.json", tmp_path / "via.json"
    common = ["--modes", "colocated,rollout_async", "--ratios", "1:1", "--quiet"]
    assert run_cli("sweep", *common, "--gpus", "16", "--no-interval", "-o", str(sweep)).returncode == 0
    assert run_cli("plan", *common, "--gpus", "16", "--details", str(direct)).returncode == 0
    r = run_cli("plan", "--sweep", str(sweep), "--gpus", "16", "--details", str(via))
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr
    a, b = json.loads(direct.read_text()), json.loads(via.read_text())
    assert b["runner_up_ratio"] is not None and b["runner_up_ratio"] == a["runner_up_ratio"]
    assert b["colocated_ratio"] == a["colocated_ratio"] and b["ratio_unavailable"] is None
    c = b["colocated_ratio"]
    assert f"(90% interval {100 * (c['low'] - 1):+.1f}%..{100 * (c['high'] - 1):+.1f}%)" in b["explanation"].split("over colocated")[-1]
    doc = json.loads(sweep.read_text())
    best = max((x for x in doc["rows"] if x["status"] == "ok"), key=lambda x: x["throughput_env_steps_per_s"])
    best["throughput_env_steps_per_s"] *= 1.01  # as if the profile had changed since the sweep
    write_json(sweep, doc)
    r = run_cli("plan", "--sweep", str(sweep), "--gpus", "16", "--details", str(via))
    assert r.returncode == 0, r.stderr
    c = json.loads(via.read_text())
    assert c["runner_up_ratio"] is None and c["colocated_ratio"] is None
    assert "changed since the sweep" in c["ratio_unavailable"] and "note: profile pi05 now gives" in r.stderr
    for fmt in (["--json"], ["--emit", "rlinf"]):  # the note goes to stderr whatever stdout carries
        r = run_cli("plan", "--sweep", str(sweep), "--gpus", "16", *fmt)
        assert r.returncode == 0 and "note: profile pi05 now gives" in r.stderr, (fmt, r.stderr)


def test_plan_from_a_sweep_file_finds_and_checks_its_profile(tmp_path, scenario_dict):
    """The sweep's profile for the ratio intervals: a relative file path is also looked for beside
    the sweep file; a sweep that names none gets no ratios and says so; a deterministic profile is
    checked against the sweep's numbers whatever the replications (their mean is the number)."""
    import shutil

    prof = write_json(tmp_path / "p.json", scenario_dict)
    sweep, via = tmp_path / "s.json", tmp_path / "via.json"
    common = ["--modes", "colocated,rollout_async", "--ratios", "1:1", "--gpus", "8", "--quiet", "--no-interval"]
    assert run_cli("sweep", "--profile", str(prof), *common, "--replications", "2", "-o", str(sweep)).returncode == 0
    doc = json.loads(sweep.read_text())
    doc["spec"]["profile_ref"] = "p.json"  # as a sweep made in tmp_path with a relative path records it
    write_json(sweep, doc)
    other = tmp_path / "elsewhere"
    other.mkdir()
    r = run_cli("plan", "--sweep", str(sweep), "--gpus", "8", "--details", str(via), cwd=other)
    # (the one note: the chosen plan's micro-batch lowered so that RLinf accepts its split)
    assert r.returncode == 0 and [ln for ln in r.stderr.splitlines() if "micro_batch_size" not in ln] == [], r.stderr
    # the scenario profile has no calibration uncertainty: the ratios say why, but it was found and checked
    assert json.loads(via.read_text())["ratio_unavailable"] is None
    best = max((x for x in doc["rows"] if x["status"] == "ok"), key=lambda x: x["throughput_env_steps_per_s"])
    best["throughput_env_steps_per_s"] *= 1.3  # two replications of a deterministic profile: still exact
    write_json(sweep, doc)
    r = run_cli("plan", "--sweep", str(sweep), "--gpus", "8", "--details", str(via), cwd=other)
    assert "changed since the sweep" in json.loads(via.read_text())["ratio_unavailable"], r.stderr
    del doc["spec"]["profile_ref"]
    write_json(sweep, doc)
    r = run_cli("plan", "--sweep", str(sweep), "--gpus", "8", "--details", str(via), cwd=other)
    assert r.returncode == 0 and "names no profile" in r.stderr, r.stderr
    shutil.rmtree(other)


def test_a_three_way_tie_names_every_tied_mode():
    """Where the actor is the bottleneck (pi05 at 128 GPUs in the bundled model) train_async,
    rollout_async and streamer predict the same throughput: the plan names all three, and why."""
    from perfmodel.schema.profile import load_profile

    prof = load_profile("pi05")
    doc = run_sweep(SweepSpec(profile_ref="pi05", modes=("train_async", "rollout_async", "streamer"), gpus=(128,),
                              ratios=("1:1",), intervals=False), prof, jobs=1)
    choice = choose(doc, 128, "throughput")
    assert sorted(choice["runner_up_margin"]["tied_modes"]) == ["rollout_async", "streamer", "train_async"]
    assert "tie (the same predicted throughput)" in choice["explanation"]
    assert "the actor is the bottleneck" in choice["explanation"] and "The two tie" not in choice["explanation"]


def test_a_plan_far_below_its_bound_says_waiting_limits_it(tmp_path):
    """The RLinf example (128 envs on 16 GPUs) predicts half its analytic bound with no resource
    saturated: the answer says how far below and that waiting, not a resource, limits it; a plan
    on its bound (the published setup) does not."""
    details = tmp_path / "d.json"
    # at the config's own 8 envs per GPU (the planner's search of more envs per GPU fills the gaps:
    # tests/test_node.py)
    # (2 per GPU: at its own 8 the 30-point profiles put it 17 % below its bound, under the 20 % mark)
    r = run_cli("plan", "--rlinf-config", str(ROOT / "examples/rlinf/libero_10_ppo_openpi_pi05.yaml"), "--gpus", "16",
                "--quiet", "--details", str(details), "--envs-per-gpu", "2")
    assert r.returncode == 0, r.stderr
    best = json.loads(details.read_text())["best"]
    below = 100 * (1 - best["throughput_env_steps_per_s"] / best["bound_env_steps_per_s"])
    assert below > 20
    assert f"#1 is {below:.0f}% below that bound with no resource saturated: waiting" in r.stdout
    assert "below that bound with no resource saturated: waiting" in json.loads(details.read_text())["explanation"]
    r = run_cli("plan", "--gpus", "16", "--modes", "rollout_async", "--quiet")
    assert r.returncode == 0 and "below that bound" not in r.stdout, r.stderr


def test_a_batch_split_rlinf_refuses_is_said_by_predict_and_never_ranked(tmp_path):
    """RLinf asserts global_batch_size % (micro_batch_size x actor GPUs) == 0: the published
    1024 / 128 fails on 16 actor GPUs. predict warns with what it costs instead; plan and sweep
    rank only plans RLinf runs as emitted (issue 41): the micro-batch lowered to the share (the
    same cost), or the row refused and counted where no micro-batch splits the batch (12, 24 actors)."""
    from perfmodel.calibration.reference import published_plan
    from perfmodel.costs import StageCosts
    from perfmodel.schema.profile import load_profile
    from perfmodel.schema.rules import batch_split_is_whole

    pi05 = load_profile("pi05")
    at32 = StageCosts(published_plan(pi05, "rollout_async", 32, "1:1"), pi05).warnings
    assert any(w.startswith("workload.global_batch_size: 1024 is not a multiple of micro_batch_size x actor GPUs "
                            "(128 x 16)") and "1 micro-batch of 64 per rank" in w for w in at32)
    assert not any("global_batch_size" in w for w in StageCosts(published_plan(pi05, "rollout_async", 16, "1:1"),
                                                                 pi05).warnings)
    r = run_cli("plan", "--gpus", "32", "--modes", "rollout_async", "--ratios", "1:1", "--quiet", "--json")
    assert r.returncode == 0 and "RLinf refuses" not in r.stderr, r.stderr
    assert "note: chosen plan: micro_batch_size 128 -> 64: global batch 1024 splits whole over 16" in r.stderr
    summary = json.loads(r.stdout)
    assert "scaling_efficiency" not in summary["best"]  # one GPU count swept: 1 by definition, not shown
    assert summary["plan"]["workload"]["micro_batch_size"] == 64
    assert not any("global_batch_size" in w for w in summary["best"]["prediction"]["warnings"])
    out = tmp_path / "s.json"
    r = run_cli("sweep", "--gpus", "16,32", "--modes", "rollout_async", "--ratios", "1:1,1:3", "--quiet",
                "--no-interval", "-o", str(out))
    assert r.returncode == 0 and "unevenly" not in r.stdout
    assert "note: 1 row(s) run a smaller micro_batch_size" in r.stdout  # 1:1 on 32 GPUs
    assert "2 RLinf refuses the batch split" in r.stdout  # 1:3: 1024 over 12 and over 24 actor GPUs
    rows = json.loads(out.read_text())["rows"]
    ok = [x for x in rows if x["status"] == "ok"]
    assert len(ok) == 2 and all(batch_split_is_whole(x["plan"]["workload"]["global_batch_size"], x["actor_gpus"],
                                                     x["plan"]["workload"]["micro_batch_size"]) for x in ok)
    refused = [x for x in rows if x["status"] != "ok"]
    assert [x["reason"].split(":")[0] for x in refused] == ["actor.global_batch_size"] * 2


def test_the_sweep_marks_a_plan_limited_by_waiting():
    """The bottleneck column is the analytic bound's resource; a row far below its bound with no
    resource busy is marked +wait, by the same rule the plan's explanation uses."""
    from perfmodel.planning.sweep import format_table, waiting_limited

    def row(thr: float, busiest: float) -> dict:
        return {"index": 0, "status": "ok", "mode": "train_async", "gpus": 16, "allocation_ratio": "1:1",
                "pipeline_stage_num": 1, "b_max": None, "t_max_s": 0.02, "throughput_env_steps_per_s": thr,
                "bound_env_steps_per_s": 698.3, "bottleneck": "env", "scaling_efficiency": 1.0,
                "gain_over_colocated_pct": None, "env_steps_per_gpu_hour": thr * 225, "env_steps_per_dollar": None,
                "actor_gpus": 8, "plan": {"workload": {"global_batch_size": 1024, "micro_batch_size": 128}},
                "prediction": {"utilization": {"resources": {"env_cpu": busiest, "actor_gpu": 0.43}}, "warnings": []}}

    assert waiting_limited(row(440.9, 0.60)) and not waiting_limited(row(440.9, 0.85))
    assert not waiting_limited(row(600.0, 0.60))
    doc = {"spec": {"gpu_hour_price": None, "modes": ["train_async"]}, "rows": [row(440.9, 0.60)],
           "summary": {"feasible": 1, "combinations": 1, "infeasible": 0, "errors": 0, "not_run_by_reason": {},
                       "best_per_gpus": []}}
    assert " env+wait" in format_table(doc).splitlines()[1]


def test_scale_global_batch_makes_every_split_whole():
    """--scale-global-batch raises the global batch to the smallest whole split over the actor
    GPUs (the per-rank batch stays), so no plan of the sweep is one RLinf refuses, and the
    actor takes fewer optimizer steps where the fixed batch made it the bottleneck."""
    from perfmodel.calibration.reference import published_plan
    from perfmodel.costs import StageCosts
    from perfmodel.schema.profile import load_profile
    from perfmodel.schema.rules import batch_split_is_whole, whole_global_batch
    from perfmodel.prediction import predict

    assert [whole_global_batch(1024, r, 128) for r in (1, 3, 8, 16)] == [1024, 1152, 1024, 2048]
    pi05 = load_profile("pi05")
    at8 = published_plan(pi05, "rollout_async", 8, "1:1")
    assert at8.with_whole_global_batch() is at8  # already whole: unchanged
    fixed = published_plan(pi05, "rollout_async", 64, "1:1")
    scaled = fixed.with_whole_global_batch()
    assert scaled.workload.global_batch_size == 4096 and scaled.workload.micro_batch_size == 128
    assert not any("global_batch_size" in w for w in StageCosts(scaled, pi05).warnings)
    thr = {name: predict(p, pi05, interval=False)["throughput_env_steps_per_s"] for name, p in
           (("fixed", fixed), ("scaled", scaled))}
    assert thr["scaled"] > thr["fixed"]  # 64 GPUs at 1:1: actor-bound with the fixed batch
    spec = SweepSpec(profile_ref="pi05", modes=("colocated", "rollout_async"), gpus=(24, 32), ratios=("1:1", "3:1"),
                     scale_global_batch=True, intervals=False)
    rows = [r for r in run_sweep(spec, pi05, jobs=1)["rows"] if r["status"] == "ok"]
    assert rows and all(batch_split_is_whole(r["plan"]["workload"]["global_batch_size"], r["actor_gpus"],
                                             r["plan"]["workload"]["micro_batch_size"]) for r in rows)


def test_plan_searches_envs_per_gpu_and_says_the_gain(tmp_path):
    """Issue 32: the RLinf example runs 8 envs per GPU; plan tries more (2, 4, 6 times, within 4 per
    core), picks more where they predict more, says what that gains, and emits them."""
    cfg = str(ROOT / "examples/rlinf/libero_10_ppo_openpi_pi05.yaml")
    r = run_cli("plan", "--rlinf-config", cfg, "--gpus", "32", "--modes", "colocated,rollout_async",
                "--ratios", "1:1", "--quiet", "--details", str(tmp_path / "d.json"))
    assert r.returncode == 0, r.stderr
    d = json.loads((tmp_path / "d.json").read_text())
    envs = d["plan"]["workload"]["total_num_envs"] // 32
    assert envs > 8
    knob = next(k for k in d["config_gains"]["knobs"] if k["knob"] == "envs_per_gpu")
    assert (knob["config"], knob["chosen"]) == (8, envs) and knob["gain_pct"] > 0
    assert f"envs per GPU 8 -> {envs} ({knob['gain_pct']:+.1f}% env steps/s" in r.stdout
    r = run_cli("plan", "--rlinf-config", cfg, "--gpus", "32", "--modes", "colocated,rollout_async",
                "--ratios", "1:1", "--quiet", "--emit", "rlinf")
    assert r.returncode == 0, r.stderr
    import yaml

    assert yaml.safe_load(r.stdout)["env"]["train"]["total_num_envs"] == envs * 32


def test_sweep_axes_envs_micro_batch_and_staleness():
    """--envs-per-gpu, --micro-batch-sizes and --staleness take lists: one row per value (staleness
    for the asynchronous modes only); a micro-batch that does not divide the global batch is an
    infeasible row, never an error."""
    from perfmodel.commands.sweep import sweep

    doc = sweep("16", modes="disaggregated,rollout_async", ratios="1:1", envs_per_gpu="24,48",
                micro_batch_sizes="64,100", staleness="1,2", interval=False, jobs=1, say=lambda _: None)
    ok = [r for r in doc["rows"] if r["status"] == "ok"]
    bad = [r for r in doc["rows"] if r["status"] != "ok"]
    assert {r["micro_batch_size"] for r in bad} == {100}
    assert {r["reason_kind"] for r in bad} == {"micro-batch does not divide the global batch"}
    assert {(r["mode"], r["envs_per_gpu"], r.get("max_staleness")) for r in ok} == {
        ("disaggregated", 24, None), ("disaggregated", 48, None), ("rollout_async", 24, 1), ("rollout_async", 24, 2),
        ("rollout_async", 48, 1), ("rollout_async", 48, 2)}
    for r in ok:
        assert r["plan"]["workload"]["total_num_envs"] == 16 * r["envs_per_gpu"]
        assert r["plan"]["workload"]["micro_batch_size"] == 64
        if r["mode"] == "rollout_async":
            assert r["plan"]["max_staleness"] == r["max_staleness"]


def test_sample_efficiency_changes_time_and_cost_to_target():
    """Issue 32 item 5: --sample-efficiency MODE=FACTOR says an asynchronous mode needs FACTOR times
    the env steps; the time objective's hours, GPU-hours and dollars count them, and a plan that no
    longer finishes in time is not chosen."""
    from perfmodel.commands.plan import plan

    kw = dict(backbone="pi05", objective="time", env_steps=2e8, within_hours=75, price=2.5, modes="colocated,rollout_async",
              ratios="1:1,3:1", jobs=1, say=lambda _: None)
    plain = plan(64, **kw).summary
    assert plain["best"]["mode"] == "rollout_async" and plain["best"]["gpus"] == 32
    # 32 GPUs need 66.7 h at their interval's low end; 1.3 times the env steps 86.7 h, past the 75 h
    # deadline, and no other plan is in time at its low end either: refused, naming the deadline
    with pytest.raises(ConfigError) as e:
        plan(64, **kw, sample_efficiency=("rollout_async=1.3",))
    assert e.value.field == "--within-hours" and "86.7 h" in e.value.message
    # with room for it, the chosen plan's hours, GPU-hours and dollars count 1.3 times the env steps
    slow = plan(64, **dict(kw, within_hours=100), sample_efficiency=("rollout_async=1.3",)).summary
    assert slow["sample_efficiency"] == {"rollout_async": 1.3}
    t = slow["goal"]["best"]
    assert t["env_steps"] == pytest.approx(2.6e8)
    assert t["hours"] == pytest.approx(2.6e8 / slow["best"]["throughput_env_steps_per_s"] / 3600)
    assert t["dollars"] == pytest.approx(t["hours"] * slow["best"]["gpus"] * 2.5)
    with pytest.raises(ConfigError) as e:
        plan(64, **kw, sample_efficiency=("fast=2",))
    assert e.value.field == "--sample-efficiency"


def test_within_model_error_the_simpler_mode_is_chosen():
    """Issue 32 item 5: train_async 0.3 % below rollout_async, well inside the model's residual
    error, is chosen (stock RLinf's simpler runner); 10 % below it is not."""
    from perfmodel.planning.choice import candidates

    def row(i, mode, thr):
        return {"index": i, "status": "ok", "mode": mode, "gpus": 32, "throughput_env_steps_per_s": thr,
                "env_steps_per_gpu_hour": thr * 3600 / 32,
                "prediction": {"throughput_interval": {"components_pct": {"model_pct": 4.6}}}}

    near = [row(0, "train_async", 1000.0), row(1, "rollout_async", 1003.0), row(2, "streamer", 1003.0)]
    assert candidates(near, 32, "throughput")[0]["mode"] == "train_async"
    far = [row(0, "train_async", 1000.0), row(1, "rollout_async", 1100.0)]
    assert candidates(far, 32, "throughput")[0]["mode"] == "rollout_async"
    # without a model-error estimate (no intervals) only a tie goes to the simpler mode
    bare = [{**r, "prediction": {}} for r in near]
    assert candidates(bare, 32, "throughput")[0]["mode"] == "rollout_async"


@pytest.mark.parametrize("gpus,config,lists", [
    (32, None, {}), (64, None, {}),
    # an RLinf config: its envs per GPU searched (8, 16, 32, 48); two modes and one split keep it cheap
    (32, "examples/rlinf/libero_10_ppo_openpi_pi05.yaml", {"modes": "colocated,rollout_async", "ratios": "1:1"})])
def test_plan_and_sweep_search_the_same_space_and_name_the_same_best(gpus, config, lists):
    """Issue 41: for the same inputs, plan and sweep search the same combinations (the workload
    axes too: plan used to search envs per GPU alone) and name the same best plan, by one rule
    (planning.sweep.best_of); both say what they searched."""
    from perfmodel.commands.plan import format_plan, plan
    from perfmodel.commands.sweep import sweep
    from perfmodel.planning.choice import SEARCHED
    from perfmodel.planning.sweep import format_table

    def quiet(line: str) -> None:
        pass

    answer = plan(gpus, rlinf_config=config, say=quiet, jobs=1, **lists)
    doc = sweep(str(gpus), rlinf_config=config, say=quiet, jobs=1, **lists)
    assert answer.summary["searched"] == {k: doc["spec"][k] for k in SEARCHED}
    (best,) = doc["summary"]["best_per_gpus"]
    assert answer.choice["best"]["plan"] == doc["rows"][best["index"]]["plan"]
    assert answer.choice["best"]["throughput_env_steps_per_s"] == best["throughput_env_steps_per_s"]
    assert answer.choice["candidates"] == doc["summary"]["feasible"]
    said = [ln for ln in format_plan(answer.summary).splitlines() if ln.startswith("Searched envs per GPU")]
    noted = [ln for ln in format_table(doc).splitlines() if ln.startswith("note: searched envs per GPU")]
    assert (len(said), len(noted)) == ((1, 1) if config else (0, 0))
    from perfmodel.costs import batch_split_warning

    assert batch_split_warning(answer.plan) is None  # #1 is a plan RLinf runs as emitted
    assert not [w for w in answer.choice["best"]["prediction"]["warnings"] if "RLinf refuses" in w]


def test_the_time_objective_judges_a_deadline_at_the_interval_low_end():
    """Issue 41: a plan meets --within-hours only if it does at its interval's low end (the
    conservative end), and the answer says both times; a deadline only the points meet is refused
    naming the time at that end."""
    from perfmodel.planning.choice import hours_at_low_end, hours_to
    from perfmodel.schema.profile import load_profile

    pi05 = load_profile("pi05")
    doc = run_sweep(SweepSpec(profile_ref="pi05", modes=("colocated",), gpus=(8, 16)), pi05, jobs=1)
    rows = [r for r in doc["rows"] if r["status"] == "ok"]
    assert all(r["throughput_low"] < r["throughput_env_steps_per_s"] for r in rows)
    steps = 1e7
    fast = max(rows, key=lambda r: r["throughput_env_steps_per_s"])
    between = (hours_to(fast, steps) + hours_at_low_end(fast, steps)) / 2  # the point meets it, the low end not
    assert all(hours_at_low_end(r, steps) > between for r in rows)
    with pytest.raises(ConfigError) as e:
        choose(doc, 16, "time", (steps, between))
    assert e.value.field == "--within-hours" and "at its interval's low end" in e.value.message
    ok = hours_at_low_end(fast, steps) * 1.01
    choice = choose(doc, 16, "time", (steps, ok))
    assert choice["goal"]["best"]["hours_at_low_end"] <= ok < choice["goal"]["best"]["hours"] * 2


def test_the_config_as_written_does_not_move_with_scale_global_batch_and_gains_name_the_change():
    """Issue 41: --scale-global-batch changes the algorithm (global batch 2048 -> 4096 for
    colocated on 32 GPUs): the baseline 'your config as written' stays the config's own, and every
    line that reports a gain names the change (the algorithm-change note too)."""
    from perfmodel.commands.plan import format_plan, plan

    notes: list[str] = []
    kw = dict(rlinf_config="examples/rlinf/libero_10_ppo_openpi_pi05.yaml", modes="colocated", envs_per_gpu="8,16",
              jobs=1)
    plain = plan(32, say=lambda _: None, **kw).summary
    scaled = plan(32, say=notes.append, scale_global_batch=True, **kw).summary
    written = scaled["config_gains"]["over_config"]
    assert written["throughput_env_steps_per_s"] == plain["config_gains"]["over_config"]["throughput_env_steps_per_s"]
    assert scaled["plan"]["workload"]["global_batch_size"] == 4096
    assert "global_batch_size 2048 -> 4096" in written["changes"]
    gain_lines = [ln for ln in format_plan(scaled).splitlines() if ln.startswith("Over your config")]
    assert gain_lines and all("global_batch_size 2048 -> 4096" in ln for ln in gain_lines), gain_lines
    assert any(n.startswith("note: algorithm change:") and "global_batch_size 2048 -> 4096 (--scale-global-batch)"
               in n for n in notes), notes
