"""``executor profile``: a measured profile that perfmodel reads; bad input is one line, exit 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from executor.profiling.fit import fit_linear
from perfmodel.schema.profile import Profile

ROOT = Path(__file__).resolve().parent.parent


def _run(*args, module="executor.cli", timeout=600):
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


def _predict_accepts(path: Path) -> None:
    for extra in (("--mode", "colocated"), ("--mode", "disaggregated", "--ratio", "1:1")):
        r = _run("predict", "--profile", str(path), "--gpus", "2", "--json", *extra, module="perfmodel.cli")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)


def test_fit_linear_recovers_a_line():
    c = fit_linear([(1.0, [3.0, 3.0]), (2.0, [5.0]), (4.0, [9.0, 9.0])])
    assert abs(c["slope"] - 2) < 1e-9 and abs(c["intercept"] - 1) < 1e-9 and c["fit_error_pct"] < 1e-6
    assert c["samples"][0] == [1.0, [3.0, 3.0]]


def test_fit_linear_never_returns_a_cost_that_falls_with_size():
    # under load a small batch can time slower than a large one: a profile slope must stay >= 0
    c = fit_linear([(1.0, [2.0]), (2.0, [1.9]), (4.0, [1.8])])
    assert c["slope"] == 0.0 and 1.8 < c["intercept"] < 2.0


def test_fit_linear_never_returns_a_negative_fixed_cost():
    # A noisy small size tilts the line below 0 at size 0 (CI once got -8.3e-05 s from timings on
    # a busy machine, which the profile schema rightly refuses): the fixed cost is at its bound 0.
    from perfmodel.schema.profile import Curve

    c = fit_linear([(1.0, [0.0009]), (2.0, [0.0021])])
    assert c["intercept"] == 0.0 and c["slope"] > 0
    Curve.from_dict(c, "costs.infer_s")  # a valid profile curve


@pytest.mark.parametrize("args, field", [
    (("--backbone", "pi06"), "backbone"),
    (("--backbone", "pi05", "--scale", "huge"), "scale"),
    (("--backbone", "pi05", "--suite", "libero_100"), "suite"),
    (("--backbone", "pi05", "--batch-sizes", "1,0"), "batch-sizes"),
    (("--backbone", "pi05", "--env-counts", "-1"), "env-counts"),
    (("--backbone", "pi05", "--repeats", "0"), "repeats"),
    (("--backbone", "pi05", "--image-size", "0"), "image-size"),
    (("--backbone", "pi05", "--reset-repeats", "0"), "reset-repeats"),
    (("--backbone", "pi05", "--env-counts", "2,4"), "env-counts"),
    (("--backbone", "pi05", "--device", "cuda:7"), "device"),
    (("--backbone", "pi05", "--device", "tpu"), "device"),
])
def test_bad_input_is_one_line_exit_2(args, field, tmp_path):
    r = _run("profile", *args, "--out", str(tmp_path / "p.json"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "p.json").exists()


def test_missing_option_is_one_line_exit_2():
    r = _run("profile", "--backbone", "pi05")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == ["error: --out: is required"]


def test_committed_cpu_profiles_are_measured_and_accepted():
    paths = sorted((ROOT / "profiles").glob("*_tiny_cpu.json"))
    assert paths, "profiles/pi05_tiny_cpu.json is committed"
    for path in paths:
        p = Profile.from_dict(json.loads(path.read_text()))
        assert p.provenance["kind"] == "measured" and p.provenance["method"].startswith("executor profile")
        assert p.node["gpus_per_node"] >= 1 and p.node["cpu_cores_per_node"] >= 1
        assert p.costs.infer_s.samples and p.costs.infer_s.fit_error_pct is not None
        _predict_accepts(path)


@pytest.mark.slow
def test_profile_tiny_writes_a_valid_profile(tmp_path):
    out = tmp_path / "pi05_tiny_test.json"
    r = _run("profile", "--backbone", "pi05", "--scale", "tiny", "--suite", "libero_10", "--out", str(out),
             "--image-size", "32", "--env-counts", "1,2", "--env-repeats", "1", "--reset-repeats", "1",
             "--repeats", "2", "--batch-sizes", "1,2", "--train-sizes", "1,2", "--sync-mb", "1",
             "--driver-chunk-steps", "1", "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(out.read_text())
    p = Profile.from_dict(d)
    c = p.costs
    assert p.backbone == "pi05" and p.provenance["kind"] == "measured"
    assert "--scale tiny" in p.provenance["method"] and p.provenance["hardware"]["torch"]
    assert 0.001 < c.env_step_core_s < 5 and 0 < c.env_core_efficiency <= 1
    assert c.env_reset_s > c.env_step_core_s and 0.1 < c.env_memory_gb < 10
    assert c.infer_s(1) > 0 and c.train_micro_batch_s(2) > c.train_micro_batch_s(1) * 0.5
    assert len(c.infer_s.samples) == 2 and all(len(ys) == 2 for _, ys in c.infer_s.samples)
    # the published trained part by default: the action expert's gradients, the whole policy synced
    assert 0 < c.grad_allreduce_bytes < c.weight_sync_bytes and set(c.trained_parts) == {"action_expert"}
    assert c.trained_parts["action_expert"]["train_state_gb"] > 0
    assert c.offload_s == 0 == c.reload_s
    assert p.node["intra_node_bw_GBps"] > 0 and p.node["cpu_cores_per_node"] >= 1
    assert p.default_workload["num_action_chunks"] == 10
    assert set(p.extra["env_cpu_cores_used_vs_envs"]) == {"1", "2"}
    assert p.variability.env_step_cv >= 0 and p.variability.infer_cv >= 0
    # env costs as curves over envs per core, with their raw samples: the counts that fill the cores
    cores = len(p.extra["worker_cores"])
    dens = sorted(n / cores for n in (1, 2) if n >= cores)
    assert set(c.env_density) == {"step_lockstep", "step_free", "reset"}
    for curve in c.env_density.values():
        assert list(curve.densities) == dens and all(len(ys) >= 1 for _, ys in curve.samples)
    # the driver's cost per chunk step, from one real run per stepping kind
    assert set(c.driver_chunk_step_s) == {"lockstep", "dynamic"}
    from executor.profiling.driver import driver_plan

    groups = len(driver_plan("rollout_async", cores, 10, 1).placement.group_sizes)
    assert p.extra["driver_samples"]["dynamic"]["chunk_steps"] == 1 * groups
    _predict_accepts(out)


def test_missing_env_profile_is_one_line_exit_2(tmp_path):
    r = _run("profile", "--backbone", "pi05", "--env-profile", str(tmp_path / "none.json"), "--out",
             str(tmp_path / "p.json"))
    assert r.returncode == 2 and r.stderr.startswith("error: env-profile: ")


@pytest.mark.parametrize("backbone, trained", [("pi0", "action_expert"), ("openvla_oft", "full"),
                                               ("gr00t_n16", "action_expert")])
def test_profile_tiny_measures_the_new_backbones(tmp_path, backbone, trained):
    """Each stand-in of issue 31 (random weights, the backbone's layer shapes at tiny scale) is
    measured on CPU: inference and training curves, its parameter counts; env costs taken from the
    committed CPU profile (measuring LIBERO again is the pi05 test's job). OpenVLA-OFT has no
    action expert: it measures training of the whole policy, what RLinf trains."""
    from perfmodel.backbones import get_backbone

    src = ROOT / "profiles" / "pi05_tiny_cpu.json"
    out = tmp_path / f"{backbone}_tiny.json"
    r = _run("profile", "--backbone", backbone, "--scale", "tiny", "--env-profile", str(src), "--out", str(out),
             "--batch-sizes", "1,2", "--train-sizes", "1,2", "--repeats", "2", "--sync-mb", "1",
             "--driver-chunk-steps", "0", "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    p = Profile.from_dict(json.loads(out.read_text()))
    assert p.backbone == backbone and p.provenance["kind"] == "measured"
    assert set(p.costs.trained_parts) == {trained}
    assert p.costs.infer_s.samples and p.costs.train_micro_batch_s.samples
    assert p.costs.infer_s(2) > 0 and p.costs.train_micro_batch_s(2) > 0
    spec = get_backbone(backbone, "tiny")
    assert abs(p.extra["params"]["total"] / spec.params - 1) < 0.10
    _predict_accepts(out)
    if backbone == "openvla_oft":  # no action expert to train alone: one line, exit 2
        r = _run("profile", "--backbone", backbone, "--scale", "tiny", "--trained-part", "action_expert",
                 "--env-profile", str(src), "--out", str(tmp_path / "x.json"))
        assert r.returncode == 2 and r.stderr.startswith("error: trained-part: ") and r.stderr.count("\n") == 1

