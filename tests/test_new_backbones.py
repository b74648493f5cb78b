"""Backbones no published throughput calibrates (issue 31: pi0, OpenVLA-OFT, GR00T N1.6): their
bundled profiles are what perfmodel.calibration.uncalibrated builds, their predictions say they are
not calibrated, and their intervals span the calibrated backbones' per-backbone parameters."""

from __future__ import annotations

import json

import pytest

from perfmodel.backbones import CALIBRATED, FAMILY, LAUNCH_BOUND, get_backbone
from perfmodel.calibration.calibrate import PARAMS
from perfmodel.calibration.reference import published_plan
from perfmodel.calibration.uncalibrated import CALL_COSTS, UNCALIBRATED, uncalibrated_profile
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
        if name in LAUNCH_BOUND and n in CALL_COSTS:  # measured for its stand-in, bracketed up to the calibration's
            assert rec["kind"] == "measured" and rec["bracket"] == [rec["value"], pi05[n]["value"]]
        elif name in LAUNCH_BOUND and n == "obs_cpu_s":  # none of its own, up to the smallest calibrated one's
            assert rec["bracket"][1] == min(pi05[n]["value"], load_profile("gr00t_n15").provenance["parameters"][n]["value"])
            assert rec["value"] == rec["bracket"][0] < rec["bracket"][1] and "calibrated_values" not in rec
        elif n in PER_BACKBONE:  # centred on the family's calibrated value, or the geometric mean
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


def test_mlp_policy_is_rlinfs_shapes_and_its_stand_in_has_them() -> None:
    """RLinf's MLP policy (rlinf 0.3.0 mlp_policy.py at libero_spatial_0_grpo_mlp.yaml's obs_dim 8,
    action_dim 7): trunk 8-256-256-256, action mean, log-std, value head 8-256-256-256-1 without
    its last bias; the torch stand-in has exactly those parameters, every one trained, and its
    counted FLOPs are what torch counts."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from executor.policies import make_policy

    spec = get_backbone("mlp_policy")
    trunk = (8 * 256 + 256) + 2 * (256 * 256 + 256)
    assert spec.params == trunk + (256 * 7 + 7) + 7 + trunk + 256 == spec.trained_params
    assert get_backbone("mlp_policy", "tiny").params == spec.params  # its real shape runs on CPU
    policy = make_policy("mlp_policy", "tiny", "cpu")
    assert policy.param_counts() == {"total": spec.params, "trained": spec.params}
    obs = {"images": None, "state": torch.randn(4, 9).numpy(), "language": [""] * 4}
    with FlopCounterMode(display=False) as fc:
        out = policy.generate(obs)
    assert out.actions.shape == (4, spec.action_chunk, 7)
    assert abs(fc.get_total_flops() / (4 * spec.inference_flops()) - 1) < 0.02


def test_mlp_policy_profiles_say_how_they_were_made() -> None:
    """The CPU profile is the stand-in measured by executor profile (env costs reused from the
    pi05 CPU profile); the GPU one takes that profile's fixed times as its call costs (a
    launch-bound MLP), out of the shared covariance and bracketed up to the calibration's."""
    from pathlib import Path

    cpu = load_profile(str(Path(__file__).resolve().parents[1] / "profiles" / "mlp_policy_tiny_cpu.json"))
    prov = cpu.provenance
    assert prov["kind"] == "measured" and prov["method"].startswith(
        "executor profile --backbone mlp_policy --scale tiny --env-profile profiles/pi05_tiny_cpu.json")
    assert cpu.extra["params"] == {"total": get_backbone("mlp_policy").params} | {"trained": cpu.extra["params"]["total"]}
    assert max(s for s, _ in cpu.costs.train_micro_batch_s.samples) == 1024  # the config's micro_batch_size
    assert LAUNCH_BOUND["mlp_policy"] == "mlp_policy_tiny_cpu"
    gpu = load_profile("mlp_policy")
    pi05 = load_profile("pi05").provenance["parameters"]
    assert gpu.provenance["kind"] == "transferred" and "profiles/mlp_policy_tiny_cpu.json" in gpu.provenance["source"]
    assert gpu.costs.infer_s.intercept == cpu.costs.infer_s.intercept == gpu.costs.infer_latency_s
    assert gpu.costs.train_micro_batch_s.intercept == cpu.costs.train_micro_batch_s.intercept
    assert gpu.costs.optimizer_fixed_s == cpu.costs.optimizer_step_s
    unc = gpu.uncertainty
    assert not set(CALL_COSTS) & set(unc.parameters)
    brackets = {n: (lo, hi) for n, lo, hi in unc.unidentified}
    assert brackets["infer_overhead_s"] == (cpu.costs.infer_s.intercept, pi05["infer_overhead_s"]["value"])
    # the slopes are a GPU's compute per sample from the FLOPs, not the CPU core's: over a whole
    # micro-batch a small part of the fixed per-call time (a launch-bound MLP)
    assert gpu.costs.infer_s.slope < 1e-2 * cpu.costs.infer_s.slope
    assert gpu.costs.infer_s.slope * 1024 < 0.1 * gpu.costs.infer_s.intercept


def test_rlinfs_mlp_grpo_config_predicts_env_bound_and_says_what_stands_in() -> None:
    """libero_spatial_0_grpo_mlp.yaml: with the MLP's own call costs the env binds (not the
    inference calls' host path), and the interval reaches the world where it pays the
    calibration's per-call host path after all; docs/backbones.md gives these numbers."""
    from pathlib import Path

    from perfmodel.rlinf.catalogue import REFERENCE
    from perfmodel.rlinf.importer import load_rlinf

    path = REFERENCE / "rlinf-configs" / "libero_spatial_0_grpo_mlp.yaml"
    if not path.is_file():
        pytest.skip(f"RLinf reference configs not found at {path.parent}")
    im = load_rlinf(path)
    assert im.backbone == "mlp_policy" and im.plan.trained_part == "full"
    assert im.plan.workload.algorithm == "grpo" and im.plan.workload.num_action_chunks == 1
    note = next(w for w in im.warnings if w.startswith("actor.model.model_type: RLinf's MLP policy"))
    prof = load_profile("mlp_policy")
    assert f"{prof.costs.infer_s.intercept * 1e3:.2f} ms per inference call" in note
    assert "the env renders both cameras" in note
    d = predict(im.plan, prof)
    assert d["extrapolation"]["backbone_not_calibrated"] is True
    assert d["bottleneck"] == "env" and not d["bound_gap"]["rest"]  # nothing but the env: no wait on calls
    iv = d["throughput_interval"]
    assert iv["ends"]["low"]["name"] == "infer_overhead_s at its high bound"
    doc = " ".join((Path(__file__).resolve().parents[1] / "docs" / "backbones.md").read_text().split())
    assert (f"predicts {d['throughput_env_steps_per_s']:.1f} env steps/s (90 % interval {iv['low']:.1f}-"
            f"{iv['high']:.1f}) on an H100, at its bound, the env's ({d['bound_env_steps_per_s']:.1f} env steps/s)") in doc


def test_docs_give_the_mlp_stand_ins_measured_costs() -> None:
    from pathlib import Path

    k = load_profile("mlp_policy_tiny_cpu").costs
    doc = " ".join((Path(__file__).resolve().parents[1] / "docs" / "backbones.md").read_text().split())
    assert (f"inference {k.infer_s.intercept * 1e3:.2f} ms + {k.infer_s.slope * 1e6:.1f} us per sample, training "
            f"{k.train_micro_batch_s.intercept * 1e3:.2f} ms + {k.train_micro_batch_s.slope * 1e6:.1f} us per sample, "
            f"optimizer step {k.optimizer_step_s * 1e3:.2f} ms") in doc
