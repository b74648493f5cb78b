"""analysis report: every figure is in the HTML (base64 PNG) and the Markdown (PNG files), the
figures load in a real headless browser, missing inputs give placeholders, run records compare
with predictions, and bad input is one line with exit code 2.

The run record here is a hand-written TEST FIXTURE with the fields executor run writes (the
prediction's fields plus predicted_throughput_env_steps_per_s and error_pct); the "measured"
trace is a simulated trace standing in for a measured one, and the report is checked to say so.
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

from analysis import figures
from analysis.report import FIGURES, comparison_points, load_inputs, write_report
from conftest import run_cli, write_json
from perfmodel.planning.choice import choice_summary, choose
from perfmodel.calibration.reference import published_plan
from perfmodel.simulate import predict
from perfmodel.planning.sweep import SweepSpec, run_sweep

N_FIGURES = 7
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


@pytest.fixture
def inputs(tmp_path, scenario_dict, scenario_profile):
    prof_path = write_json(tmp_path / "scenario.json", scenario_dict)
    spec = SweepSpec(profile_ref=str(prof_path), modes=("colocated", "disaggregated", "streamer"), gpus=(8, 16),
                     gpu_hour_price=2.0)
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
    record["throughput_env_steps_per_s"] = 0.9 * pred["throughput_env_steps_per_s"]
    record["predicted_throughput_env_steps_per_s"] = pred["throughput_env_steps_per_s"]
    record["error_pct"] = 100 * (1 / 0.9 - 1)
    run_path = write_json(tmp_path / "record.json", record)
    # a second record without a prediction: the report matches it to the sweep row
    rec2 = dict(record, mode="colocated", allocation_ratio=None, gpus=8, throughput_env_steps_per_s=50.0)
    del rec2["predicted_throughput_env_steps_per_s"], rec2["error_pct"]
    run2_path = write_json(tmp_path / "record2.json", rec2)
    ref = tmp_path / "ref.csv"
    ref.write_text(REFERENCE_CSV)
    return {"sweep": sweep, "choice": choice, "prediction": pred_path, "run": run_path, "run2": run2_path,
            "trace": sim_trace, "reference": ref, "profile": prof_path, "doc": doc, "pred": pred, "dir": tmp_path}


def full_inputs(i):
    return load_inputs(sweeps=[str(i["sweep"])], choice=str(i["choice"]), predictions=[str(i["prediction"])],
                       runs=[str(i["run"]), str(i["run2"])], trace_sim=str(i["trace"]), trace_run=str(i["trace"]),
                       references=[str(i["reference"])], reference_profiles=[f"pi05={i['profile']}"])


def test_html_and_markdown_have_every_figure(inputs):
    out = inputs["dir"] / "out" / "report.html"
    res = write_report(full_inputs(inputs), out)
    text = out.read_text()
    imgs = re.findall(r"<img class='report-figure' id='fig-([a-z_]+)'[^>]*src='data:image/png;base64,([^']+)'", text)
    assert len(imgs) == N_FIGURES == len(FIGURES)
    assert [fid for fid, _ in imgs] == [fid for fid, _ in FIGURES]
    for fid, b64 in imgs:
        w, h = png_size(base64.b64decode(b64))
        assert w > 200 and h > 100, fid
    assert "http://" not in text and "https://" not in text  # self-contained
    md = Path(res["markdown"]).read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
    assert len(links) == N_FIGURES
    for link in links:
        png_size((Path(res["markdown"]).parent / link).read_bytes())
    # the stand-in measured trace is called what it is, and the validation numbers are in
    assert "simulated stand-in" in text
    assert "MAPE" in text and "best mode agrees" in text
    assert "Chosen plan" in text and "runner-up" in text


def test_placeholders_when_inputs_are_missing(tmp_path):
    out = tmp_path / "r.html"
    write_report(load_inputs(), out)
    text = out.read_text()
    assert len(re.findall(r"<img class='report-figure'", text)) == N_FIGURES
    assert "measured trace: none given" in text


def test_timeline_uses_the_given_traces(inputs):
    trace = json.loads(inputs["trace"].read_text())
    start, end, what = figures.iteration_window(trace)
    assert what == "iteration 2 of 3"
    assert end > start
    with_traces = figures.timeline(trace, trace)
    assert with_traces != figures.timeline(trace, None) != figures.timeline(None, None)
    png_size(with_traces)


def test_iteration_window_matches_iteration_time(scenario_profile, tmp_path):
    for mode in ("colocated", "disaggregated"):
        path = tmp_path / f"{mode}.json"
        pred = predict(published_plan(scenario_profile, mode, 8, "1:1"), scenario_profile, trace_path=path)
        start, end, _ = figures.iteration_window(json.loads(path.read_text()))
        assert (end - start) / 1e6 == pytest.approx(pred["iteration_time_s"], rel=1e-9)


def test_run_records_compare_with_predictions(inputs):
    pts = comparison_points(full_inputs(inputs))
    assert len(pts) == 2
    assert pts[0]["error_pct"] == pytest.approx(100 * (1 / 0.9 - 1))
    assert pts[0]["prediction_source"] == "record"
    coloc8 = next(r for r in inputs["doc"]["rows"] if r["mode"] == "colocated" and r["gpus"] == 8)
    assert pts[1]["prediction_source"] == "matched prediction"
    assert pts[1]["predicted"] == coloc8["throughput_env_steps_per_s"]


def test_intervals_are_drawn(scenario_dict):
    from perfmodel.schema.profile import Profile

    scenario_dict["variability"] = {"env_step_cv": 0.2, "infer_cv": 0.1, "train_cv": 0.1}
    prof = Profile.from_dict(scenario_dict)
    doc = run_sweep(SweepSpec(profile_ref="x", modes=("colocated", "streamer"), gpus=(8, 16), ratios=("1:1",),
                              replications=3), prof, jobs=1)
    assert all(e["throughput_ci95"] for e in doc["summary"]["best_per_mode"])
    no_ci = json.loads(json.dumps(doc))
    for e in no_ci["summary"]["best_per_mode"]:
        e["throughput_ci95"] = None
    assert figures.throughput_vs_gpus([doc]) != figures.throughput_vs_gpus([no_ci])


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def test_figures_render_in_headless_chromium(inputs):
    exe = chromium()
    if exe is None:
        pytest.skip("chromium not found (apt-get install -y chromium)")
    out = inputs["dir"] / "report.html"
    write_report(full_inputs(inputs), out)
    with tempfile.TemporaryDirectory() as profile_dir:
        r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                            "--disable-background-networking", "--disable-component-update", "--disable-sync",
                            f"--user-data-dir={profile_dir}", "--virtual-time-budget=10000", "--dump-dom",
                            out.resolve().as_uri()], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    body = re.search(r"<body[^>]*>", r.stdout)
    assert body, r.stdout[:500]
    assert f'data-figures-total="{N_FIGURES}"' in body.group(0)
    assert f'data-figures-rendered="{N_FIGURES}"' in body.group(0)
    rendered = re.findall(r'<img[^>]*class="report-figure"[^>]*>', r.stdout)
    assert len(rendered) == N_FIGURES
    assert all('data-rendered="yes"' in tag for tag in rendered)


def test_cli_report(inputs):
    out = inputs["dir"] / "cli" / "report.html"
    r = run_cli("report", "--sweep", str(inputs["sweep"]), "--choice", str(inputs["choice"]), "--run",
                str(inputs["run"]), "--trace-run", str(inputs["trace"]), "-o", str(out), module="analysis.cli")
    assert r.returncode == 0, r.stderr
    assert out.is_file() and out.with_suffix(".md").is_file()
    text = out.read_text()
    assert len(re.findall(r"<img class='report-figure'", text)) == N_FIGURES
    # without --trace-sim the report simulates the chosen plan itself
    assert "chosen plan (simulated by the report)" in text


@pytest.mark.parametrize("args,field", [
    (["--sweep", "/nonexistent/sweep.json"], "--sweep"),
    (["--run", "{bad}"], "--run"),
    (["--trace-run", "{notrace}"], "--trace-run"),
    (["--reference-profile", "pi05"], "--reference-profile"),
    (["--gpus", "0"], "--gpus"),
    (["-o", "/proc/nonexistent/r.html"], "--out"),
])
def test_cli_report_bad_input(tmp_path, args, field):
    bad = write_json(tmp_path / "bad.json", {"not": "a record"})
    args = [str(bad) if a in ("{bad}", "{notrace}") else a for a in args]
    out = [] if "-o" in args else ["-o", str(tmp_path / "r.html")]
    r = run_cli("report", *args, *out, module="analysis.cli")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), r.stderr
