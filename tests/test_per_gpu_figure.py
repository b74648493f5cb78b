"""The report's per-GPU figure (issue 28, item 4): per-GPU throughput against GPU count for each
backbone swept, a line per mode with its interval shaded, the published 8- and 16-GPU points
overlaid; drawn from real sweeps of the bundled profiles (matplotlib Agg)."""

from __future__ import annotations

import pytest
from matplotlib.collections import PolyCollection

from analysis import decision as dec
from analysis import figures
from analysis.inputs import load_inputs
from analysis.report import write_report
from conftest import write_json
from perfmodel.calibration.reference import load_reference
from perfmodel.planning.sweep import SweepSpec, run_sweep
from perfmodel.schema.profile import BUNDLED_REFERENCE, load_profile

MODES = ("colocated", "rollout_async")
GPUS = (8, 16, 32)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    d = tmp_path_factory.mktemp("per_gpu")
    out = {}
    for b in ("pi05", "gr00t_n15"):
        doc = run_sweep(SweepSpec(profile_ref=b, modes=MODES, gpus=GPUS, ratios=("1:1",)), load_profile(b), jobs=1)
        out[b] = (write_json(d / f"sweep_{b}.json", doc), doc)
    return d, out


def test_series_are_per_gpu_with_intervals_and_the_published_points(sweeps):
    _, out = sweeps
    series = dec.per_gpu_series([doc for _, doc in out.values()], [BUNDLED_REFERENCE])
    assert [s.backbone for s in series] == ["pi05", "gr00t_n15"]
    published = load_reference(BUNDLED_REFERENCE)
    for s in series:
        doc = out[s.backbone][1]
        assert list(s.modes) == list(MODES)
        for mode, pts in s.modes.items():
            assert [g for g, *_ in pts] == list(GPUS)
            for g, y, lo, hi in pts:
                row = next(e for e in doc["summary"]["best_per_mode"] if e["mode"] == mode and e["gpus"] == g)
                assert y == pytest.approx(row["throughput_env_steps_per_s"] / g)
                assert lo is not None and hi is not None and lo < y < hi
        # every point carries its interval (GPUS are all calibrated now: 8, 16, 32)
        assert all(lo < y < hi for _, y, lo, hi in s.modes["rollout_async"])
        # every published mode of the backbone, at the published GPU counts only, per GPU
        mine = [p for p in published if p.backbone == s.backbone]
        assert set(s.published) == {p.mode for p in mine}
        for p in mine:
            assert (p.gpus, pytest.approx(p.throughput_env_steps_per_s / p.gpus)) in s.published[p.mode]
        assert {g for pts in s.published.values() for g, _ in pts} == {8, 16, 32}


def test_figure_has_a_panel_per_backbone_a_line_and_band_per_mode_and_the_published_points(sweeps):
    _, out = sweeps
    series = dec.per_gpu_series([doc for _, doc in out.values()], [BUNDLED_REFERENCE])
    fig = figures.per_gpu_figure(series, [8, 16])
    axes = fig.axes
    assert len(axes) == 2
    for ax, s in zip(axes, series):
        assert ax.get_title().startswith(s.backbone)
        lines = {ln.get_label(): ln for ln in ax.get_lines()}
        for mode in MODES:
            assert list(lines[mode].get_xdata()) == list(GPUS)
            assert list(lines[mode].get_ydata()) == pytest.approx([y for _, y, *_ in s.modes[mode]])
        for mode, pts in s.published.items():
            assert list(lines[f"published {mode}"].get_xdata()) == [g for g, _ in pts]
        bands = [c for c in ax.collections if isinstance(c, PolyCollection) and c.get_label().endswith("interval")]
        assert len(bands) == len(MODES)
    figures.plt.close(fig)


def test_report_writes_the_per_gpu_figure(sweeps):
    d, out = sweeps
    inp = load_inputs(sweeps=[str(p) for p, _ in out.values()])
    res = write_report(inp, d / "report" / "report.html")
    assert "per_gpu" in res["figures"]
    png = (d / "report" / "report_figures" / "per_gpu.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert "data-figure='per_gpu'" in (d / "report" / "report.html").read_text()


def test_published_points_of_another_workload_are_labelled_so(sweeps):
    """Issue 41: a sweep at 8 envs per GPU beside the published 48: the published points are
    labelled as another workload (in the figure's title and legend), not drawn as if comparable;
    the bundled sweeps (the published workload) carry no such label."""
    import copy

    _, out = sweeps
    doc = copy.deepcopy(out["pi05"][1])
    assert dec.per_gpu_series([doc], [BUNDLED_REFERENCE])[0].published_other_workload is None
    for r in doc["rows"]:
        if r["status"] == "ok":
            r["plan"]["workload"]["total_num_envs"] = 8 * r["plan"]["cluster"]["gpus"]
    (s,) = dec.per_gpu_series([doc], [BUNDLED_REFERENCE])
    assert s.published_other_workload == "published points: another workload (48 envs per GPU; this sweep 8)"
    fig = figures.per_gpu_figure([s], [8, 16])
    ax = fig.axes[0]
    assert "another workload" in ax.get_title()
    assert any(t.endswith("(another workload)") for t in (line.get_label() for line in ax.get_lines()))
