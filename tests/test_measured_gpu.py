"""Measured GPU costs (profiles/*_full_gpu.json, one H200): how the calibration reads them
(marginal seconds per sample at the largest sizes), what of the fitted slopes they pin down, and
the GPU-type bracket they give a prediction on another GPU (perfmodel/gpu.py, uncertainty)."""

from __future__ import annotations

import json

import pytest

from perfmodel.calibration.measured import gpu_seconds_per_sample, marginal_per_sample_s, measured_gpu_compute
from perfmodel.calibration.reference import published_plan
from perfmodel.calibration.uncertainty import with_gpu_type_bracket
from perfmodel.gpu import cluster_on, profile_on
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.hardware import accelerator_of_device
from perfmodel.schema.profile import Costs, Curve, load_profile
from perfmodel.simulate import predict


def test_marginal_seconds_per_sample_reads_the_two_largest_sizes() -> None:
    c = Curve("linear", intercept=0.0, slope=1.0, samples=((1.0, (0.05, 0.07)), (12.0, (0.08,)),
                                                            (48.0, (0.27, 0.28, 0.29)), (96.0, (0.55, 0.57))))
    assert marginal_per_sample_s(c) == pytest.approx((0.56 - 0.28) / 48)
    with pytest.raises(ConfigError, match="two sizes"):
        marginal_per_sample_s(Curve("linear", intercept=0.0, slope=1.0, samples=((1.0, (0.1,)),)))


def test_measured_profiles_say_their_gpu_and_what_trained() -> None:
    for name, trained_all in (("pi05_full_gpu", False), ("gr00t_n15_full_gpu", False), ("pi05_full_gpu_trained_full", True)):
        p = load_profile(name)
        assert p.provenance["kind"] == "measured" and p.node["gpu"] == "h200"
        params = p.extra["params"]
        assert (params["trained"] == params["total"]) is trained_all
    assert accelerator_of_device("NVIDIA H200") == "h200" and accelerator_of_device("NVIDIA A100-SXM4-80GB") == "a100"
    assert accelerator_of_device("NVIDIA GeForce RTX 4090") is None


def test_bundled_fits_carry_the_measured_compute_below_their_slopes() -> None:
    for b in ("pi05", "gr00t_n15"):
        c = load_profile(b).costs
        assert c.gpu_compute_per_sample_s == measured_gpu_compute(b)
        # H200 -> H100: the same bf16 peak, so the measured seconds carry unchanged
        assert c.gpu_compute_per_sample_s["infer_s"] == gpu_seconds_per_sample(b, "infer_s", "h200")
        # what the fit calls per-sample inference is mostly not the architecture's GPU compute
        assert c.gpu_compute_per_sample_s["infer_s"] < 0.2 * c.infer_s.slope
        assert c.gpu_compute_per_sample_s["train_micro_batch_s"] < c.train_micro_batch_s.slope


def test_schema_checks_the_measured_compute() -> None:
    d = load_profile("pi05").costs.to_dict()
    for bad, match in (({"infer": 0.1}, "unknown field"), ({"infer_s": -1.0}, "infer_s")):
        with pytest.raises(ConfigError, match=match):
            Costs.from_dict({**d, "gpu_compute_per_sample_s": bad}, "costs")
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
    assert profile_on(prof, "h100", measured_compute_only=True) is prof


def test_bracket_stretches_the_interval_to_the_other_end() -> None:
    iv = {"low": 90.0, "high": 110.0, "method": "m", "components_pct": {"model_pct": 3.0}, "width_pct": 20.0}
    out = with_gpu_type_bracket(iv, 100.0, 150.0)
    assert (out["low"], out["high"], out["width_pct"]) == (90.0, 150.0, 60.0)
    assert out["gpu_type_other_end"] == 150.0 and out["components_pct"]["gpu_type_pct"] > 40
    assert with_gpu_type_bracket(iv, 100.0, 105.0)["high"] == 110.0  # inside: unchanged edges


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
    json.dumps(out)
