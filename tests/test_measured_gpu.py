"""Measured GPU costs (profiles/*_full_gpu.json, one H200): how the calibration reads them
(marginal seconds per sample at the largest sizes), what of the fitted slopes they pin down, and
the GPU-type bracket they give a prediction on another GPU (perfmodel/gpu.py, uncertainty)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from perfmodel.calibration.measured import gpu_seconds_per_sample, marginal_per_sample_s, measured_gpu
from perfmodel.calibration.reference import published_plan
from perfmodel.calibration.worlds import World, envelope
from perfmodel.gpu import cluster_on, profile_on
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.hardware import accelerator_of_device
from perfmodel.schema.profile import Costs, Curve, load_profile
from perfmodel.prediction import predict


def test_marginal_seconds_per_sample_reads_the_two_largest_sizes() -> None:
    c = Curve("linear", intercept=0.0, slope=1.0, samples=((1.0, (0.05, 0.07)), (12.0, (0.08,)),
                                                            (48.0, (0.27, 0.28, 0.29)), (96.0, (0.55, 0.57))))
    assert marginal_per_sample_s(c) == pytest.approx((0.56 - 0.28) / 48)
    with pytest.raises(ConfigError, match="x.samples: a measured curve needs raw samples at two sizes"):
        marginal_per_sample_s(Curve("linear", intercept=0.0, slope=1.0, samples=((1.0, (0.1,)),)), "x.samples")
    flat = Curve("linear", intercept=0.0, slope=1.0, samples=((12.0, (0.2,)), (48.0, (0.19,))))
    with pytest.raises(ConfigError, match="does not grow from size 12 to 48"):
        marginal_per_sample_s(flat)


def test_calibration_reads_only_a_full_scale_action_expert_measurement(tmp_path, monkeypatch) -> None:
    import perfmodel.calibration.measured as measured

    src = json.loads(measured.measured_gpu_profile_path("pi05").read_text())
    for change, field in (({"provenance": {**src["provenance"], "scale": "tiny"}}, "provenance.scale"),
                          ({"node": {k: v for k, v in src["node"].items() if k != "gpu"}}, "node.gpu"),
                          ({"costs": {**src["costs"], "trained_parts": {"full": src["costs"]["trained_parts"]["action_expert"]}}},
                           "costs.trained_parts")):
        (tmp_path / "pi05_full_gpu.json").write_text(json.dumps({**src, **change}))
        monkeypatch.setattr(measured, "BUNDLED_DIR", tmp_path)
        measured.gpu_seconds_per_sample.cache_clear()
        try:
            with pytest.raises(ConfigError, match=f"pi05_full_gpu.json: {field}: must be"):
                gpu_seconds_per_sample("pi05", "infer_s")
        finally:
            measured.gpu_seconds_per_sample.cache_clear()
    monkeypatch.undo()
    assert measured_gpu("no_such_backbone").compute_s == {}  # nothing measured: nothing stored


def test_measured_profiles_say_their_gpu_and_what_trained() -> None:
    for name, trained_all in (("pi05_full_gpu", False), ("gr00t_n15_full_gpu", False), ("pi05_full_gpu_trained_full", True),
                              ("gr00t_n15_full_gpu_trained_full", True)):
        p = load_profile(name)
        assert p.provenance["kind"] == "measured" and p.node["gpu"] == "h200"
        params = p.extra["params"]
        assert (params["trained"] == params["total"]) is trained_all
    assert accelerator_of_device("NVIDIA H200") == "h200" and accelerator_of_device("NVIDIA A100-SXM4-80GB") == "a100"
    assert accelerator_of_device("NVIDIA H100 80GB HBM3") == "h100"
    # not the table's parts: other chips whose names contain a table name, PCIe / NVL variants
    for other in ("NVIDIA GeForce RTX 4090", "NVIDIA GH200 480GB", "NVIDIA RTX A1000", "NVIDIA H100 PCIe",
                  "NVIDIA H100 NVL", ""):
        assert accelerator_of_device(other) is None, other


def test_bundled_fits_carry_the_measured_compute_below_their_slopes() -> None:
    for b in ("pi05", "gr00t_n15"):
        c = load_profile(b).costs
        assert c.gpu_compute_per_sample_s == measured_gpu(b).compute_s
        # H200 -> H100: the same bf16 peak, so the measured seconds carry unchanged
        assert c.gpu_compute_per_sample_s["infer_s"] == gpu_seconds_per_sample(b, "infer_s", "h200")
        # what the fit calls per-sample inference is mostly not the architecture's GPU compute
        assert c.gpu_compute_per_sample_s["infer_s"] < 0.2 * c.infer_s.slope
        # at most the slope: GR00T's train_mfu sits on its cap in the fit on all 30 points, where the
        # slope is the measured compute (calibrate.param_bounds)
        assert c.gpu_compute_per_sample_s["train_micro_batch_s"] <= c.train_micro_batch_s.slope * (1 + 1e-12)


def test_schema_checks_the_measured_compute() -> None:
    d = load_profile("pi05").costs.to_dict()
    table = {"model": "table", "points": [[1, 2.0], [64, 4.0]]}
    for bad, match in (({"infer": 0.1}, "unknown field"), ({"infer_s": -1.0}, "infer_s"),
                       ({"infer_s": 1.0}, r"gpu_compute_per_sample_s.infer_s: must be part of a linear infer_s's slope")):
        with pytest.raises(ConfigError, match=match):
            Costs.from_dict({**d, "gpu_compute_per_sample_s": bad}, "costs")
    with pytest.raises(ConfigError, match="on a table curve"):
        Costs.from_dict({**d, "train_micro_batch_s": table, "gpu_compute_per_sample_s": {"train_micro_batch_s": 0.001}},
                        "costs")
    assert "gpu_compute_per_sample_s" not in Costs.from_dict({**d, "gpu_compute_per_sample_s": {}}, "costs").to_dict()


def test_measured_compute_only_scales_just_that_part_of_each_slope() -> None:
    prof = load_profile("pi05")
    h, g = prof.costs, prof.costs.gpu_compute_per_sample_s
    ratio = 989 / 312  # H100 -> A100 bf16 dense
    whole = profile_on(prof, "a100").costs
    part = profile_on(prof, "a100", measured_compute_only=True).costs
    assert whole.infer_s.slope == pytest.approx(h.infer_s.slope * ratio)
    assert part.infer_s.slope == pytest.approx(g["infer_s"] * ratio + h.infer_s.slope - g["infer_s"])
    assert part.train_micro_batch_s.slope == pytest.approx(
        g["train_micro_batch_s"] * ratio + h.train_micro_batch_s.slope - g["train_micro_batch_s"])
    assert part.infer_s.intercept == whole.infer_s.intercept  # the fixed parts carry alike
    assert part.gpu_compute_per_sample_s["infer_s"] == pytest.approx(g["infer_s"] * ratio)  # A100 seconds now
    assert profile_on(prof, "h100", measured_compute_only=True) is prof


def _base(low: float, high: float, centre: float) -> list[World]:
    """An interval's spread worlds with these ends around ``centre`` (one group, as the model error)."""
    return [World("model error -", "model", "model error", "spread", math.log(low / centre), None, "statistical"),
            World("model error +", "model", "model error", "spread", math.log(high / centre), None, "statistical")]


def _other_end(value: float, centre: float) -> World:
    return World("a100: only the measured GPU compute carried", "gpu_type", "gpu type", "bracket",
                 math.log(value / centre), value)


def test_bracket_carries_the_interval_around_the_other_end() -> None:
    """The GPU type's other end is a world of the interval (a bracket): the interval is carried
    around it with its own log offsets, and the other end names the end it moves."""
    out = envelope(100.0, _base(100 / 1.1, 110.0, 100.0) + [_other_end(150.0, 100.0)], coverage=0.9, method="m",
                   fitted=True)
    assert (out["low"], out["high"]) == (pytest.approx(100 / 1.1), pytest.approx(165.0))
    assert out["width_pct"] == pytest.approx(165.0 - 100 / 1.1)
    assert out["components_pct"]["gpu_type_pct"] == pytest.approx(40.547, abs=1e-3)
    assert out["ends"]["high"]["kind"] == "gpu_type" and out["ends"]["low"]["name"] == "model error -"
    # An asymmetric interval keeps its own log offsets around the other end (low -5 %, high +20 %).
    out = envelope(100.0, _base(95.0, 120.0, 100.0) + [_other_end(50.0, 100.0)], coverage=0.9, method="m", fitted=True)
    assert (out["low"], out["high"]) == (pytest.approx(47.5), pytest.approx(120.0))
    assert out["half_width_log"] == pytest.approx(0.5 * math.log(120.0 / 47.5))
    low = envelope(100.0, _base(100 / 1.1, 110.0, 100.0) + [_other_end(80.0, 100.0)], coverage=0.9, method="m",
                   fitted=True)  # a faster GPU's other end lies below the point
    assert (low["low"], low["high"]) == (pytest.approx(80 / 1.1), pytest.approx(110.0))
    # a ratio: resolved only if the interval around its other end orders the plans alike
    same = envelope(1.2, _base(1.2 / 1.1, 1.32, 1.2) + [_other_end(1.25, 1.2)], coverage=0.9, method="m", fitted=True,
                    ratio=True)
    assert same["resolved"] is True
    flipped = envelope(1.2, _base(1.2 / 1.1, 1.32, 1.2) + [_other_end(0.9, 1.2)], coverage=0.9, method="m",
                       fitted=True, ratio=True)
    assert flipped["resolved"] is False and flipped["low"] == pytest.approx(0.9 / 1.1)


def test_prediction_on_another_gpu_holds_both_ends() -> None:
    prof = load_profile("pi05")
    plan = published_plan(prof, "colocated", 8, None)
    on_a100 = plan.with_(cluster=cluster_on(plan.cluster, "a100"))
    out = predict(on_a100, prof)
    iv = out["throughput_interval"]
    assert out["extrapolation"]["beyond_calibrated_gpu_type"]
    assert iv["low"] <= out["throughput_env_steps_per_s"] <= iv["high"]
    assert iv["low"] <= iv["gpu_type_other_end"] <= iv["high"]
    # slower compute, and most of the fitted slope not compute: the other end is faster
    assert iv["gpu_type_other_end"] > out["throughput_env_steps_per_s"]
    assert "gpu_type_other_end" not in predict(plan, prof)["throughput_interval"]  # its own GPU
    # without measured compute: the extrapolation is still stated, the interval has no other end
    bare = replace(prof, costs=replace(prof.costs, gpu_compute_per_sample_s={}))
    out_bare = predict(on_a100, bare)
    assert out_bare["extrapolation"]["beyond_calibrated_gpu_type"]
    assert "gpu_type_other_end" not in out_bare["throughput_interval"]
    assert out_bare["throughput_interval"]["high"] < iv["high"]
    json.dumps(out)


def test_cli_names_the_other_end_or_says_there_is_none() -> None:
    from click.testing import CliRunner

    from perfmodel.cli import cli

    r = CliRunner().invoke(cli, ["predict", "--mode", "colocated", "--gpus", "8", "--gpu", "a100"])
    assert r.exit_code == 0 and "the interval holds" in r.output and "only the measured GPU compute scaled" in r.output
    r = CliRunner().invoke(cli, ["predict", "--mode", "colocated", "--gpus", "8", "--gpu", "h100"])
    assert r.exit_code == 0 and "the interval holds" not in r.output


def test_measured_part_counts_the_measured_policy() -> None:
    from executor.profiling.run import measured_part
    from perfmodel.backbones import get_backbone

    b = get_backbone("gr00t_n15")
    assert measured_part({"total": b.params, "trained": b.trained_params}) == {
        "train_flops_scale": 1.0, "trained_bytes_scale": 1.0, "train_state_gb": b.train_state_bytes() / 1e9}
    for name in ("pi05_tiny_cpu", "gr00t_n15_tiny_cpu", "pi05_full_gpu", "pi05_full_gpu_trained_full",
                 "gr00t_n15_full_gpu_trained_full"):
        p = load_profile(name)
        ((part, entry),) = p.costs.trained_parts.items()
        assert entry == measured_part(p.extra["params"])
    # a measured profile costs only the part it measured
    prof = load_profile("pi05_tiny_cpu")
    plan = published_plan(prof, "disaggregated", 2, "1:1").with_(trained_part="full")
    with pytest.raises(ConfigError, match="plan.trained_part: profile pi05_tiny_cpu has costs for action_expert"):
        predict(plan, prof)


def test_median_is_statistics_median():
    """The measured curves' medians (computed without importing statistics) are statistics.median's."""
    import random
    import statistics

    from perfmodel.calibration.measured import _median

    rng = random.Random(5)
    for n in range(1, 40):
        ys = [rng.lognormvariate(0, 1) for _ in range(n)]
        assert _median(ys) == statistics.median(ys)
