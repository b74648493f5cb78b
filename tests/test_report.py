"""analysis report (issue 11): interactive HTML with plotly.js embedded once, every figure
drawn when its input is given and replaced by one line when not, decision figures (Pareto,
time/cost to a target, intervals, extrapolation), honest validation (in-sample vs
cross-validated, ties), one style per mode, checked inputs; and the report opened in headless
Chromium.

Fixtures: the measured trace and run record in tests/data/executor_tiny_disaggregated/ were
written by the real executor. Hand-written TEST FIXTURES, labelled where built: a run record
10 % slower than its prediction (fields of executor run's record) and a cross-validation
result in the shape of FIELDS.md (`perfmodel validate --cross-validate --json`).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from analysis import decision as dec
from analysis import figures, interactive
from analysis.inputs import detect_kind, load_inputs
from analysis.report import FIGURES, build, comparison_points, num, standalone_html, write_report
from analysis.styles import MODE_STYLES
from conftest import run_cli, write_json
from perfmodel.calibration.reference import published_plan
from perfmodel.planning.choice import choice_summary, choose
from perfmodel.planning.sweep import SweepSpec, run_sweep
from perfmodel.schema.modes import MODES
from perfmodel.prediction import predict

DATA = Path(__file__).parent / "data" / "executor_tiny_disaggregated"
N_FIGURES = len(FIGURES)
REFERENCE_CSV = """mode,backbone,gpus,allocation_ratio,throughput_env_steps_per_s
colocated,pi05,8,,60
disaggregated,pi05,8,1:1,40
streamer,pi05,8,1:1,70
colocated,pi05,16,,90
streamer,pi05,16,1:1,120
"""


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def cv_fixture() -> dict:
    """TEST FIXTURE in the FIELDS.md shape of `perfmodel validate --cross-validate --json`."""
    pts = [{"mode": m, "backbone": "pi05", "gpus": 16, "allocation_ratio": r, "published": pub, "predicted": pred,
            "error_pct": 100 * (pred / pub - 1),
            "baselines": {"linear": {"predicted": 2 * pub * 0.9, "error_pct": 80.0},
                          "growth": {"predicted": pub * 1.1, "error_pct": 10.0}}}
           for m, r, pub, pred in (("colocated", None, 547.55, 520.0), ("streamer", "1:1", 713.38, 690.0))]
    return {"kind": "cross_validation", "folds": [{"fit_gpus": [8], "predict_gpus": [16], "points": pts}],
            "summary": {"model_mape_pct": 4.0, "baseline_mape_pct": {"linear": 80.0, "growth": 10.0},
                        "per_backbone": {}, "per_mode": {}}}


@pytest.fixture
def inputs(tmp_path, scenario_dict, scenario_profile):
    # the scenario profile says it was fitted at 8 GPUs: 16 is beyond its calibrated scale
    scenario_dict["provenance"]["fit"] = {"points": [{"mode": "colocated", "backbone": "pi05", "gpus": 8,
                                                      "allocation_ratio": None}]}
    prof_path = write_json(tmp_path / "scenario.json", scenario_dict)
    spec = SweepSpec(profile_ref=str(prof_path), modes=tuple(MODES), gpus=(8, 16), gpu_hour_price=2.0)
    doc = run_sweep(spec, scenario_profile, jobs=1)
    sweep = write_json(tmp_path / "sweep.json", doc)
    choice = write_json(tmp_path / "choice.json", choice_summary(choose(doc, 16, "throughput")))
    plan = published_plan(scenario_profile, "streamer", 16, "1:1")
    sim_trace = tmp_path / "sim_trace.json"
    pred = predict(plan, scenario_profile, trace_path=sim_trace)
    pred_path = write_json(tmp_path / "pred.json", pred)
    # TEST FIXTURE: a hand-written run record (fields of executor run's record), 10 % slower than predicted
    record = {k: pred[k] for k in ("mode", "gpus", "allocation_ratio", "pipeline_stage_num", "iteration_time_s",
                                   "utilization", "stage_time_s", "counts")}
    record.update(source="executor", status="ok", schema_version=1,
                  throughput_env_steps_per_s=0.9 * pred["throughput_env_steps_per_s"],
                  predicted_throughput_env_steps_per_s=pred["throughput_env_steps_per_s"])
    run_path = write_json(tmp_path / "record.json", record)
    # a second record without a prediction: the report matches it to the sweep row
    rec2 = dict(record, mode="colocated", allocation_ratio=None, gpus=8, throughput_env_steps_per_s=50.0)
    del rec2["predicted_throughput_env_steps_per_s"]
    run2_path = write_json(tmp_path / "record2.json", rec2)
    ref = tmp_path / "ref.csv"
    ref.write_text(REFERENCE_CSV)
    cv = write_json(tmp_path / "cv.json", cv_fixture())
    return {"sweep": sweep, "choice": choice, "prediction": pred_path, "run": run_path, "run2": run2_path,
            "trace": sim_trace, "reference": ref, "profile": prof_path, "doc": doc, "pred": pred, "dir": tmp_path,
            "cv": cv, "plan": write_json(tmp_path / "plan.json", plan.to_dict())}


def full_inputs(i, trace_run=None):
    return load_inputs(sweeps=[str(i["sweep"])], choice=str(i["choice"]), predictions=[str(i["prediction"])],
                       runs=[str(i["run"]), str(i["run2"])], trace_sim=str(i["trace"]),
                       trace_run=str(trace_run or DATA / "trace.json"), references=[str(i["reference"])],
                       reference_profiles=[f"pi05={i['profile']}"], cross_validation=str(i["cv"]))


def visible_text(html_text: str) -> str:
    return re.sub(r"<script.*?</script>", "", html_text, flags=re.S)


def test_html_and_markdown_have_every_figure(inputs):
    out = inputs["dir"] / "out" / "report.html"
    res = write_report(full_inputs(inputs), out)
    assert res["figures"] == [f for f, _ in FIGURES] and res["missing"] == []
    text = out.read_text()
    divs = re.findall(r"<div class='report-figure' data-figure='([a-z_]+)'>", text)
    assert divs == [f for f, _ in FIGURES]
    assert text.count("plotly.js v") >= 1 and len(re.findall(r"<script[^>]*src=", text)) == 0  # embedded, offline
    assert text.count(interactive_bundle_marker()) == 1  # plotly.js embedded exactly once
    md = Path(res["markdown"]).read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
    assert len(links) == N_FIGURES
    for link in links:
        w, h = png_size((Path(res["markdown"]).parent / link).read_bytes())
        assert w > 300 and h > 200
    vis = visible_text(text)
    assert not re.search(r"\d\.\d{6,}", vis), "unrounded numbers in the report's text"
    assert "Chosen plan" in vis and "runner-up" in vis and "```json" not in md
    # honest validation: in-sample and cross-validated, each labelled; the CV numbers are the file's
    assert "In-sample fit" in vis or "not fitted to these points" in vis
    assert "Cross-validated" in vis and "model MAPE 4.0%" in vis and "baseline linear 80.0%" in vis
    # extrapolation: the scenario profile was fitted at 8 GPUs, the chosen plan uses 16
    assert "EXTRAPOLATED: 16 GPUs is beyond the calibrated 8 GPUs" in vis
    # the measured trace is the real executor's, the simulated replicas are named in the Gantt
    assert "tests/data/executor_tiny_disaggregated/trace.json" in vis


def test_cross_validation_shows_its_headline_design(tmp_path):
    """`perfmodel validate --cross-validate --json` keeps the scale design at the top and the
    headline group_out design in its own block: the report shows the headline one, and a result
    with only group_out (``--design group_out``) is accepted."""
    scale = cv_fixture()
    held = cv_fixture()
    held["summary"]["model_mape_pct"] = 1.5
    held.update(design="group_out", folds=[dict(f, label="hold out pi05 at 16 GPUs") for f in held["folds"]])
    # held-out intervals as the cross-validation writes them: the first published point lies outside its own
    from perfmodel.calibration.crossval import interval_coverage

    for r, (lo, hi) in zip(held["folds"][0]["points"], ((500.0, 540.0), (650.0, 730.0))):
        r["interval"] = {"low": lo, "high": hi, "coverage": 0.9, "width_pct": 100 * (hi - lo) / r["predicted"],
                         "inside": lo <= r["published"] <= hi}
    held["summary"]["interval"] = interval_coverage(held["folds"][0]["points"])
    for doc in (dict(scale, headline="group_out", group_out=held),
                {"kind": "cross_validation", "headline": "group_out", "group_out": held}):
        inp = load_inputs(cross_validation=str(write_json(tmp_path / "cv.json", doc)))
        assert inp.cross_validation[1]["summary"]["model_mape_pct"] == 1.5
        b = build(inp)
        assert b.titles["cv"].startswith("Cross-validated (group_out: 1 folds")
        assert "model MAPE 1.5%" in b.titles["cv"]
        assert "1/2 inside their 90 % intervals" in b.titles["cv"]
    # without a headline block: the top-level folds, titled by their scales
    b = build(load_inputs(cross_validation=str(write_json(tmp_path / "cv.json", scale))))
    assert b.titles["cv"].startswith("Cross-validated (fit [8] -> predict [16])")


def interactive_bundle_marker() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()[:200]


def test_missing_inputs_are_one_line_not_a_figure(inputs):
    out = inputs["dir"] / "r.html"
    res = write_report(load_inputs(sweeps=[str(inputs["sweep"])]), out)
    assert res["figures"] == ["decision", "time_cost", "per_gpu", "scaling", "utilization"]
    text = out.read_text()
    missing = re.findall(r"<p class='missing' data-figure='([a-z_]+)'>([^<]+)</p>", text)
    assert [m for m, _ in missing] == ["timeline", "validation", "predicted_vs_measured"]
    assert all("given" in line and len(line) < 250 for _, line in missing)
    md = Path(res["markdown"]).read_text()
    assert len(re.findall(r"!\[", md)) == 5 and md.count("*Not drawn") == 3
    assert sorted(p.name for p in Path(res["figures_dir"]).iterdir()) == sorted(f"{f}.png" for f in res["figures"])


def test_no_input_is_refused(tmp_path):
    r = run_cli("report", "-o", str(tmp_path / "r.html"), module="analysis.cli")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: inputs: no input given")
    assert not (tmp_path / "r.html").exists()


def test_wrong_kind_of_file_is_refused(inputs, tmp_path):
    cases = [("--run", inputs["prediction"], "expected a run record", "got a prediction"),
             ("--sweep", inputs["plan"], "expected a sweep", "got a plan"),
             ("--prediction", DATA / "record.json", "expected a prediction", "got a run record"),
             ("--choice", inputs["sweep"], "expected a plan choice", "got a sweep"),
             ("--trace-run", DATA / "record.json", "expected a Chrome trace", "got a run record"),
             ("--cross-validation", inputs["pred"] and inputs["prediction"], "expected a cross-validation", "got a")]
    for opt, path, want, got in cases:
        r = run_cli("report", opt, str(path), "-o", str(tmp_path / "r.html"), module="analysis.cli")
        assert r.returncode == 2, (opt, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {opt}: {want}") and got in lines[0], lines


def test_kinds_are_recognised(inputs):
    assert detect_kind(json.loads(inputs["sweep"].read_text())) == "sweep"
    assert detect_kind(json.loads(inputs["choice"].read_text())) == "choice"
    assert detect_kind(inputs["pred"]) == "prediction"
    assert detect_kind(json.loads((DATA / "record.json").read_text())) == "run"
    assert detect_kind(json.loads((DATA / "trace.json").read_text())) == "trace"
    assert detect_kind(json.loads(inputs["plan"].read_text())) == "plan"
    assert detect_kind(cv_fixture()) == "cross_validation"


def test_run_records_compare_with_one_error_definition(inputs):
    pts = comparison_points(full_inputs(inputs))
    assert len(pts) == 2
    # prediction / measurement - 1: the record is 10 % slower than predicted -> +11.1 %
    assert pts[0]["error_pct"] == pytest.approx(100 * (1 / 0.9 - 1))
    assert pts[0]["prediction_source"] == "record"
    coloc8 = next(r for r in inputs["doc"]["rows"] if r["mode"] == "colocated" and r["gpus"] == 8)
    assert pts[1]["prediction_source"] == "matched prediction"
    assert pts[1]["predicted"] == coloc8["throughput_env_steps_per_s"]
    assert pts[1]["error_pct"] == pytest.approx(100 * (coloc8["throughput_env_steps_per_s"] / 50.0 - 1))


def test_decision_numbers(inputs):
    inp = full_inputs(inputs)
    b = build(inp)
    assert b.calibrated == [8]
    assert {p.gpus for p in b.points if p.beyond_calibrated} == {16}
    front = dec.pareto_front(b.points)
    # no plan is both cheaper (fewer GPUs) and faster than a point of the front
    for f in front:
        assert not any(p.gpus < f.gpus and p.throughput >= f.throughput for p in b.points)
    assert [p.gpus for p in front] == sorted(p.gpus for p in front)
    c = b.chosen
    assert c.hours_to(1e8) == pytest.approx(1e8 / c.throughput / 3600)
    assert c.cost_to(1e8) == pytest.approx(c.hours_to(1e8) * c.gpus * 2.0)
    # streamer and rollout_async tie here: listed
    assert any(set(ms) >= {"rollout_async", "streamer"} for _, ms, _ in dec.ties(b.points))


def test_a_sweep_rows_interval_is_named_by_its_prediction():
    """`perfmodel sweep` rows carry low/high columns and the prediction's interval: the label
    is the model interval's (coverage, method), not the columns'; bare columns still read."""
    iv = {"low": 8.0, "high": 12.0, "coverage": 0.9, "method": "fixture"}
    row = {"throughput_low": 8.0, "throughput_high": 12.0, "prediction": {"throughput_interval": iv}}
    assert dec.interval_of(row) == (8.0, 12.0, "90% model interval (fixture)")
    assert dec.interval_of({"throughput_low": 8.0, "throughput_high": 12.0}) == \
        (8.0, 12.0, "interval (low-high columns)")


def test_intervals_are_read_and_drawn(inputs):
    """Rows carrying throughput_interval (fid_unc's field) get bands; rows without do not."""
    doc = json.loads(inputs["sweep"].read_text())
    for r in doc["rows"]:
        if r["status"] == "ok":
            t = r["throughput_env_steps_per_s"]
            r["throughput_interval"] = {"low": 0.8 * t, "high": 1.15 * t, "coverage": 0.9, "method": "fixture"}
    path = write_json(inputs["dir"] / "sweep_iv.json", doc)
    with_iv = build(load_inputs(sweeps=[str(path)]))
    without = build(load_inputs(sweeps=[str(inputs["sweep"])]))
    assert all(p.low == pytest.approx(0.8 * p.throughput) for p in with_iv.points)
    assert "90% model interval (fixture)" in dec.hover(with_iv.points[0])
    roles = lambda b: [t.meta.get("role") for t in interactive.throughput_pareto(  # noqa: E731
        b.points, None, b.calibrated, 2.0, 1e8).data if t.meta]
    assert roles(with_iv).count("band") == len(MODES) and "band" not in roles(without)
    assert figures.throughput_pareto(with_iv.points, None, [8], 2.0) != figures.throughput_pareto(
        without.points, None, [8], 2.0)


def test_every_mode_has_its_own_style():
    styles = {(s.color, s.symbol) for s in MODE_STYLES.values()}
    assert len(styles) == len(MODES) == len({s.color for s in MODE_STYLES.values()})
    assert len({s.symbol for s in MODE_STYLES.values()}) == len(MODES)


def test_numbers_are_rounded():
    assert num(5.000000000004229) == "5"
    assert num(0.05) == "0.05"
    assert num(1453.4612) == "1,453"
    assert num(11.525230453412636) == "11.5"
    assert num(None) == "-"


def test_timeline_uses_the_given_traces(inputs):
    trace = json.loads(inputs["trace"].read_text())
    start, end, what = figures.iteration_window(trace)
    assert what == "iteration 2 of 3"
    assert end > start
    lanes = figures.gantt_lanes(trace)
    assert lanes["spans"] and all(0 <= s[2] <= lanes["length_s"] for s in lanes["spans"])
    measured = figures.gantt_lanes(json.loads((DATA / "trace.json").read_text()))
    assert measured["xlabel"] == "seconds into iteration 2 of 2"
    assert {s[1] for s in measured["spans"]} >= {"env_step", "inference", "train"}


def test_timeline_caption_names_the_panels_drawn(inputs):
    """Only a simulated trace: the caption says simulated, not "simulated, then measured"."""
    from analysis.report import caption_of

    caption = dict(FIGURES)["timeline"]
    only_sim = build(load_inputs(trace_sim=str(inputs["trace"])))
    assert caption_of("timeline", caption, only_sim) == "Timeline (Gantt) of one iteration: simulated"
    both = build(load_inputs(trace_sim=str(inputs["trace"]), trace_run=str(DATA / "trace.json"),
                             runs=[str(DATA / "record.json")]))
    assert caption_of("timeline", caption, both) == "Timeline (Gantt) of one iteration: simulated, then measured"


def test_iteration_window_matches_iteration_time(scenario_profile, tmp_path):
    for mode in ("colocated", "disaggregated"):
        path = tmp_path / f"{mode}.json"
        pred = predict(published_plan(scenario_profile, mode, 8, "1:1"), scenario_profile, trace_path=path)
        start, end, _ = figures.iteration_window(json.loads(path.read_text()))
        assert (end - start) / 1e6 == pytest.approx(pred["iteration_time_s"], rel=1e-9)


def test_cli_report(inputs):
    out = inputs["dir"] / "cli" / "report.html"
    r = run_cli("report", "--sweep", str(inputs["sweep"]), "--choice", str(inputs["choice"]), "--run",
                str(inputs["run"]), "--trace-run", str(DATA / "trace.json"), "--target-env-steps", "5e6",
                "-o", str(out), module="analysis.cli")
    assert r.returncode == 0, r.stderr
    assert out.is_file() and out.with_suffix(".md").is_file()
    text = visible_text(out.read_text())
    assert "chosen plan (simulated by the report)" in text  # without --trace-sim it simulates the chosen plan
    assert "to 5,000,000 env steps" in text


@pytest.mark.parametrize("args,field", [
    (["--sweep", "/nonexistent/sweep.json"], "--sweep"),
    (["--run", "{bad}"], "--run"),
    (["--trace-run", "{bad}"], "--trace-run"),
    (["--reference-profile", "pi05", "--reference", "{bad}"], "--reference-profile"),
    (["--gpus", "0"], "--gpus"),
    (["--target-env-steps", "0", "--sweep", "{sweep}"], "--target-env-steps"),
    (["--target-env-steps", "nan", "--sweep", "{sweep}"], "--target-env-steps"),
    (["-o", "/proc/nonexistent/r.html", "--sweep", "{sweep}"], "--out"),
])
def test_cli_report_bad_input(inputs, tmp_path, args, field):
    bad = write_json(tmp_path / "bad.json", {"not": "a record"})
    args = [str(bad) if a == "{bad}" else str(inputs["sweep"]) if a == "{sweep}" else a for a in args]
    out = [] if "-o" in args else ["-o", str(tmp_path / "r.html")]
    r = run_cli("report", *args, *out, module="analysis.cli")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), r.stderr


# --- headless Chromium ---------------------------------------------------------------------------

def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--hide-scrollbars", "--virtual-time-budget=15000"]


def run_chromium(args: list[str], url: str) -> subprocess.CompletedProcess:
    exe = chromium()
    if exe is None:
        pytest.skip("chromium not found (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as profile_dir:
        r = subprocess.run([exe, *CHROME_FLAGS, f"--user-data-dir={profile_dir}", *args, url],
                           capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


def test_report_renders_in_headless_chromium(inputs):
    out = inputs["dir"] / "report.html"
    write_report(full_inputs(inputs), out)
    r = run_chromium(["--dump-dom"], out.resolve().as_uri())
    body = re.search(r"<body[^>]*>", r.stdout)
    assert body, r.stdout[:500]
    attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', body.group(0)))
    assert attrs["data-figures-total"] == str(N_FIGURES)
    assert attrs["data-figures-rendered"] == str(N_FIGURES)  # plotly drew every figure
    assert attrs["data-figures-missing"] == "0"  # no input was missing, so no "not drawn" line
    rendered = re.findall(r'<div class="report-figure" data-figure="([a-z_]+)" data-rendered="(yes|no)"', r.stdout)
    assert rendered == [(f, "yes") for f, _ in FIGURES]
    # the five modes: each figure that shows modes shows all five, each in its own colour and marker,
    # and a mode looks the same in every figure
    import html as _html

    styles = json.loads(_html.unescape(attrs["data-mode-styles"]))
    for fid in ("decision", "time_cost", "scaling"):
        assert set(styles[fid]) == set(MODES), fid
        assert len({tuple(v[:2]) for v in styles[fid].values()}) == len(MODES), fid
    seen: dict[str, list] = {}
    for fig_styles in styles.values():
        for mode, st in fig_styles.items():
            assert seen.setdefault(mode, st[:2]) == st[:2], mode


def _pixels_near(png: bytes, color: str, tol: int = 40) -> int:
    import io

    from PIL import Image

    import numpy as np

    im = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    target = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(im - target) <= tol).all(axis=2).sum())


def test_overlapping_modes_stay_visible_in_chromium(inputs, tmp_path):
    """rollout_async and streamer predict the same throughput here; the screenshot of the
    decision figure must still show every mode's colour."""
    b = build(load_inputs(sweeps=[str(inputs["sweep"])]))
    per = dec.best_per_mode_gpus(b.points)
    assert [p.throughput for p in per["rollout_async"]] == pytest.approx([p.throughput for p in per["streamer"]],
                                                                         rel=1e-9)  # drawn on top of each other
    fig = interactive.throughput_pareto(b.points, None, b.calibrated, 2.0, 1e8)
    fig.update_layout(showlegend=False, width=900, height=600)  # only the plot area's marks count
    page = tmp_path / "fig.html"
    page.write_text(standalone_html({"decision": fig}))
    shot = tmp_path / "fig.png"
    run_chromium([f"--screenshot={shot}", "--window-size=900,600"], page.resolve().as_uri())
    png = shot.read_bytes()
    counts = {m: _pixels_near(png, s.color) for m, s in MODE_STYLES.items()}
    assert all(n >= 30 for n in counts.values()), counts


def test_chosen_plan_shows_the_ratio_intervals_of_perfmodel_plan(inputs):
    """`perfmodel plan` with a profile gives best / runner-up and best / colocated as intervals;
    the chosen-plan table quotes them and whether the model orders the two plans."""
    from analysis.report import chosen_rows

    from perfmodel.schema.profile import load_profile

    pi05 = load_profile("pi05")  # a fitted profile: it has the uncertainty the ratios need
    doc = run_sweep(SweepSpec(profile_ref="pi05", modes=("colocated", "disaggregated", "rollout_async"), gpus=(16,),
                              ratios=("1:1",), intervals=False), pi05, jobs=1)
    choice = choose(doc, 16, "throughput", profile=pi05)
    assert choice["runner_up_ratio"] is not None and choice["runner_up"]["mode"] == "colocated"
    path = write_json(inputs["dir"] / "choice_ratio.json", choice_summary(choice))
    inp = load_inputs(sweeps=[str(write_json(inputs["dir"] / "sweep_pi05.json", doc))], choice=str(path))
    rows = dict(chosen_rows(inp, build(inp)))
    r = choice["runner_up_ratio"]
    assert f"{100 * (r['low'] - 1):+.1f}%..{100 * (r['high'] - 1):+.1f}%" in rows["runner-up"]
    assert ("the model orders the two" if r["resolved"] else "cannot order") in rows["runner-up"]
    c = choice["colocated_ratio"]  # here the runner-up is colocated: the same ratio
    assert c == r and f"{100 * (c['low'] - 1):+.1f}%..{100 * (c['high'] - 1):+.1f}%" in rows["vs colocated"]
    assert "% throughput, 90% interval" in rows["runner-up"]
    # without the ratios (a plan chosen from a sweep file alone) the rows say nothing of them
    rows = dict(chosen_rows(full_inputs(inputs), build(full_inputs(inputs))))
    assert "interval" not in rows["runner-up"]


def test_chosen_plan_calls_a_tie_what_the_planner_calls_one(inputs):
    """The chosen-plan row says 'tie' only when `perfmodel plan` did (runner_up_margin.tie: the
    same number up to simulation rounding), not for the report's looser near ties."""
    from analysis.report import chosen_rows

    inp = full_inputs(inputs)
    c = inp.choice[1]
    assert c.get("runner_up") and "runner_up_margin" in c
    b = build(inp)
    for tie in (True, False):
        c["runner_up_margin"]["tie"] = tie
        row = dict(chosen_rows(inp, b))["mode"]
        assert row == (f"{c['best']['mode']} (tie: {c['runner_up']['mode']} predicts the same throughput)" if tie
                       else c["best"]["mode"])


def test_a_run_directory_is_read_through_its_record(tmp_path):
    """Issue 41: --run takes an executor run directory (its record.json); a directory without one
    (an RLinf log directory) is refused in one line saying what reads it."""
    from analysis.inputs import load_kind
    from perfmodel.schema.errors import ConfigError

    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(DATA / "record.json", run / "record.json")
    assert load_kind("--run", str(run)) == json.loads((DATA / "record.json").read_text())
    (run / "record.json").unlink()
    with pytest.raises(ConfigError) as e:
        load_kind("--run", str(run))
    assert e.value.field == "--run" and "neither an executor record" in e.value.message
    assert "an RLinf run" in e.value.message


def _rlinf_run(folder: Path, thr: float) -> Path:
    """A run folder in RLinf's layout (config.yaml and tensorboard timers, written with torch's
    SummaryWriter as RLinf does): pi0.5 colocated on 8 GPUs at ``thr`` env steps/s, a slow first
    step (warm-up). Returns the folder read_run reads (its tensorboard/)."""
    pytest.importorskip("tensorboard")
    pytest.importorskip("torch")
    from executor.runtime.rlinf_log import write_run
    from perfmodel.rlinf.emit import emit_yaml
    from perfmodel.rlinf.logs import STEP_KEY
    from perfmodel.schema.profile import load_profile

    plan = published_plan(load_profile("pi05"), "colocated", 8, None)
    it = plan.workload.env_steps_per_iteration / thr
    return write_run(folder / "tensorboard", emit_yaml(plan, "pi05"), [{STEP_KEY: 3 * it}] + [{STEP_KEY: it}] * 3)


def _runs_profile(tmp_path: Path, run_dir: Path, measured: float, fitted: float) -> Path:
    """TEST FIXTURE: the bundled pi0.5 profile with a provenance as calibrate --from-rlinf-run
    writes one (the run it was fitted to, its fit points): hand-written numbers, no fit."""
    from perfmodel.schema.profile import load_profile

    d = json.loads(json.dumps(load_profile("pi05").to_dict()))
    d["name"] = "pi05_cluster"
    steps = 384 * 480
    d["provenance"]["runs"] = [{"path": str(run_dir), "mode": "colocated", "gpus": 8,
                                "env_steps_per_iteration": steps}]
    d["provenance"]["fit"] = {"points": [
        {"run": 0, "kind": "throughput", "mode": "colocated", "gpus": 8, "measured": measured, "predicted": fitted,
         "error_pct": 100 * (fitted / measured - 1)},
        {"run": 0, "kind": "actor_training", "mode": "colocated", "gpus": 8, "measured": 2 * measured,
         "predicted": 2 * fitted, "error_pct": 100 * (fitted / measured - 1)}]}
    return write_json(tmp_path / "pi05_cluster.json", d)


def test_an_rlinf_run_directory_is_a_run_compared_with_its_prediction(tmp_path):
    """Issue 41 item 6: --run takes an RLinf run directory (perfmodel.rlinf.logs reads it, as
    calibrate does): its measured throughput against its plan predicted on the report's profile
    (here the bundled one); a directory that is neither kind is one line naming --run."""
    from analysis.inputs import Inputs, load_kind

    run = _rlinf_run(tmp_path / "r", 200.0)
    doc = load_kind("--run", str(tmp_path / "r"))
    assert doc["source"] == "rlinf" and (doc["mode"], doc["gpus"]) == ("colocated", 8)
    assert doc["throughput_env_steps_per_s"] == pytest.approx(200.0) and doc["run_dir"] == str(run)
    pts = comparison_points(Inputs(runs=[(str(tmp_path / "r"), doc)]))
    from perfmodel.schema.plan import Plan

    want = predict(Plan.from_dict(doc["plan"]), load_profile_("pi05"), interval=False)["throughput_env_steps_per_s"]
    assert len(pts) == 1 and pts[0]["prediction_source"] == "profile pi05"
    assert pts[0]["predicted"] == pytest.approx(want, rel=1e-6)
    assert pts[0]["error_pct"] == pytest.approx(100 * (want / 200.0 - 1), rel=1e-6)


def load_profile_(name):
    from perfmodel.schema.profile import load_profile

    return load_profile(name)


def test_a_runs_profile_is_checked_against_its_own_runs(tmp_path):
    """Issue 41 item 6: a sweep made with a profile fitted to the user's runs is checked against
    those runs (its provenance's fit points: in-sample, said so), not against the published
    points of another workload unless --reference-profile asks; an RLinf run it was fitted to is
    compared with the fit's own prediction, once."""
    from analysis.inputs import Inputs, load_kind
    from analysis.report import Built, calibration_rows, run_validation, tables, validation_notes

    run = _rlinf_run(tmp_path / "r", 200.0)
    path = _runs_profile(tmp_path, run, 200.0, 210.0)
    sweep = ("s.json", {"backbone": "pi05", "spec": {"profile_ref": str(path)}})
    (tmp_path / "ref.csv").write_text(REFERENCE_CSV)  # pi0.5 points only: a few simulations
    ref = [str(tmp_path / "ref.csv")]
    v, _, why = run_validation(Inputs(sweeps=[sweep], references=ref))
    assert v is None and "pi05_cluster was fitted to your runs" in why
    v, used, _ = run_validation(Inputs(sweeps=[sweep], references=ref, reference_profiles={"pi05": str(path)}))
    assert v is not None and used["pi05"].name == "pi05_cluster"  # asked for: compared, not in-sample
    assert not dec.in_sample(v, used)
    # its own calibration data: the run it was fitted to, in seconds and as a comparison point
    inp = Inputs(predictions=[("p.json", {"profile": str(path)})])
    rows = calibration_rows(load_profile_(str(path)))
    assert [r["timer"] for r in rows] == ["time/step", "time/actor_training"]
    assert rows[0]["error_pct"] == pytest.approx(100 * (200.0 / 210.0 - 1))  # seconds: fitted / measured - 1
    b = Built()
    b.comparison = comparison_points(inp)
    assert len(b.comparison) == 1 and b.comparison[0]["prediction_source"].startswith("in-sample")
    assert b.comparison[0]["error_pct"] == pytest.approx(5.0)
    assert any(t.startswith("Calibration data of profile pi05_cluster") for t, *_ in tables(inp, b))
    notes = " ".join(validation_notes(inp, b))
    assert "fitted to 1 run of yours" in notes and "fitted to these" not in notes
    # the same run given with --run: the fit's prediction, in-sample, and the point once
    doc = load_kind("--run", str(tmp_path / "r"))
    pts = comparison_points(Inputs(predictions=[("p.json", {"profile": str(path)})], runs=[("r", doc)]))
    assert len(pts) == 1 and pts[0]["predicted"] == pytest.approx(210.0)
    assert pts[0]["prediction_source"] == "in-sample: profile pi05_cluster was fitted to this run"


def test_a_profile_fitted_to_runs_is_not_in_sample_on_the_published_points():
    """Issue 41: validation against the published points with a profile fitted to the user's runs
    is not 'fitted to these points' (its fit points are runs), even at the same modes and sizes."""
    from types import SimpleNamespace

    from analysis.decision import in_sample

    points = [{"backbone": "pi05", "mode": "colocated", "gpus": 8, "allocation_ratio": None}]
    published = {"fit": {"points": [{"backbone": "pi05", "mode": "colocated", "gpus": 8, "allocation_ratio": None}]}}
    runs = {"fit": {"points": [{"run": 0, "kind": "throughput", "backbone": "pi05", "mode": "colocated", "gpus": 8,
                                "allocation_ratio": None}]}}
    assert in_sample({"points": points}, {"pi05": SimpleNamespace(provenance=published)})
    assert not in_sample({"points": points}, {"pi05": SimpleNamespace(provenance=runs)})


def test_the_reference_is_validated_with_the_profile_the_sweep_used(tmp_path):
    """Issue 41: a sweep made with a profile file validates the published reference with that
    profile, not the bundled one (unless --reference-profile names another)."""
    from analysis.inputs import Inputs
    from analysis.report import run_validation
    from perfmodel.schema.profile import BUNDLED_REFERENCE, load_profile

    prof = load_profile("pi05")
    slow = json.loads(json.dumps(prof.to_dict()))
    slow["name"] = "pi05_mine"
    slow["costs"]["env_step_core_s"] = 2 * slow["costs"]["env_step_core_s"]
    path = write_json(tmp_path / "pi05_mine.json", slow)
    sweep = {"backbone": "pi05", "spec": {"profile_ref": str(path)}}
    ref = [str(BUNDLED_REFERENCE)]
    plain, bundled, _ = run_validation(Inputs(references=ref))
    mine, used, _ = run_validation(Inputs(sweeps=[("s.json", sweep)], references=ref))
    assert bundled["pi05"].name == "pi05" and used["pi05"].name == "pi05_mine"
    assert mine["mape_pct"] != plain["mape_pct"]
    chosen, used, _ = run_validation(Inputs(sweeps=[("s.json", sweep)], references=ref,
                                            reference_profiles={"pi05": "pi05"}))
    assert used["pi05"].name == "pi05" and chosen["mape_pct"] == plain["mape_pct"]


def test_the_interval_cell_names_the_method_without_its_paragraph():
    """Issue 41: the report's interval cell is a range and the method's name, not the method's
    whole description."""
    row = {"throughput_interval": {"low": 8.0, "high": 12.0, "coverage": 0.9,
                                   "method": "principal directions: 6 principal directions of the fit's covariance"}}
    assert dec.interval_of(row) == (8.0, 12.0, "90% model interval (principal directions)")
