"""Backbones no published throughput calibrates (issue 31: pi0, OpenVLA-OFT, GR00T N1.6): their
bundled profiles are what perfmodel.calibration.uncalibrated builds, their predictions say they are
not calibrated, and their intervals span the calibrated backbones' per-backbone parameters."""

from __future__ import annotations

import json

import pytest

from perfmodel.backbones import CALIBRATED, FAMILY, get_backbone
from perfmodel.calibration.calibrate import PARAMS
from perfmodel.calibration.reference import published_plan
from perfmodel.calibration.uncalibrated import UNCALIBRATED, uncalibrated_profile
from perfmodel.prediction import predict
from perfmodel.schema.profile import load_profile
from tests.conftest import run_cli

PER_BACKBONE = [p.name for p in PARAMS if not p.shared]


@pytest.mark.parametrize("name", UNCALIBRATED)
def test_bundled_profile_is_what_the_builder_makes(name: str) -> None:
    """profiles/<name>.json is reproducible from its provenance.method (the shared parameters of
    the bundled calibration and the backbone's shapes)."""
    bundled, built = load_profile(name), uncalibrated_profile(name)
    assert bundled.costs == built.costs and bundled.node == built.node
    assert bundled.provenance["kind"] == "transferred" and bundled.provenance["backbone_calibrated"] is False
    pi05 = load_profile("pi05").provenance["parameters"]
    for n, rec in bundled.provenance["parameters"].items():
        if n in PER_BACKBONE:  # centred on the family's calibrated value, or the geometric mean
            lo, hi = rec["bracket"]
            assert lo <= rec["value"] <= hi and set(rec["calibrated_values"]) == set(CALIBRATED)
            if FAMILY[name]:
                assert rec["value"] == rec["calibrated_values"][FAMILY[name]]
        else:  # shared: the calibration's own value
            assert rec["value"] == pi05[n]["value"]
    # the costs follow the backbone's shapes: weights and FLOPs of its own spec
    spec = get_backbone(name)
    assert bundled.costs.weight_sync_bytes == spec.weight_bytes()
    assert bundled.extra["flops_per_sample"]["inference"] == spec.inference_flops()


@pytest.mark.parametrize("name", UNCALIBRATED)
@pytest.mark.parametrize("mode, gpus, ratio", [("colocated", 8, None), ("disaggregated", 8, "1:1")])
def test_interval_spans_the_calibrated_backbones_parameters(name: str, mode: str, gpus: int, ratio: str | None) -> None:
    prof = load_profile(name)
    d = predict(published_plan(prof, mode, gpus, ratio), prof)
    assert d["extrapolation"]["backbone_not_calibrated"] is True
    iv = d["throughput_interval"]
    corners = iv["backbone_not_calibrated"]["corners"]
    assert set(corners) == set(CALIBRATED)
    assert all(iv["low"] <= t <= iv["high"] for t in corners.values())
    assert iv["low"] < d["throughput_env_steps_per_s"] < iv["high"]
    # the per-backbone parameters are bracketed too, each over the calibrated spread (those that move
    # this plan are listed: an MFU always does)
    assert {"infer_mfu", "train_mfu"} & set(iv.get("unidentified_parameters", []))


def test_calibrated_backbones_carry_no_flag() -> None:
    prof = load_profile("pi05")
    d = predict(published_plan(prof, "colocated", 8, None), prof)
    assert "backbone_not_calibrated" not in d["extrapolation"]
    assert "backbone_not_calibrated" not in d["throughput_interval"]


def test_oft_trains_the_whole_policy_and_costs_more_than_pi0() -> None:
    """OFT has no action expert: its plans train the whole 7.5B policy (RLinf's configs), and the
    training slope is the full model's."""
    oft, pi0 = load_profile("openvla_oft"), load_profile("pi0")
    plan = published_plan(oft, "colocated", 8, None)
    assert plan.trained_part == "full" and set(oft.costs.trained_parts) == {"full"}
    assert published_plan(pi0, "colocated", 8, None).trained_part == "action_expert"
    assert oft.costs.train_micro_batch_s.slope > pi0.costs.train_micro_batch_s.slope


@pytest.mark.parametrize("name", UNCALIBRATED)
def test_predict_cli_takes_the_new_backbones(name: str) -> None:
    r = run_cli("predict", "--backbone", name, "--mode", "colocated", "--gpus", "8", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["backbone"] == name and d["extrapolation"]["backbone_not_calibrated"] is True
    assert d["throughput_interval"]["low"] < d["throughput_env_steps_per_s"] < d["throughput_interval"]["high"]


def test_predict_text_says_the_backbone_is_not_calibrated() -> None:
    r = run_cli("predict", "--backbone", "gr00t_n16", "--mode", "colocated", "--gpus", "8")
    assert r.returncode == 0, r.stderr
    assert "no published throughput calibrates gr00t_n16" in r.stdout
    r = run_cli("predict", "--backbone", "gr00t_n15", "--mode", "colocated", "--gpus", "8")
    assert "no published throughput calibrates" not in r.stdout


def test_plan_and_sweep_take_them_and_mark_them() -> None:
    r = run_cli("plan", "--backbone", "openvla_oft", "--gpus", "8", "--modes", "colocated,disaggregated",
                "--ratios", "1:1")
    assert r.returncode == 0, r.stderr
    assert "? backbone not calibrated" in r.stdout
    r = run_cli("sweep", "--backbone", "pi0", "--gpus", "8", "--modes", "colocated", "--json")
    assert r.returncode == 0, r.stderr
    rows = [x for x in json.loads(r.stdout)["rows"] if x["status"] == "ok"]
    assert rows and all(x["backbone_not_calibrated"] for x in rows)
