"""benchmarks/profile_gpu.sh on CPU (slow): the script that measures the GPU profiles runs end to
end at tiny scale, and takes its env costs from a measured CPU profile. A file of its own, so that
the suite's workers run it beside tests/test_executor_profile.py (files, not tests, are spread over
the workers: pyproject addopts, tests/conftest.py LONGEST_FILES)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfmodel.schema.profile import Profile

ROOT = Path(__file__).resolve().parent.parent

# benchmarks/profile_gpu.sh on CPU (slow): one run of the script serves both tests (``dry_run``);
# its pi0.5 profile is the env-costs test's
SCRIPT = ROOT / "benchmarks" / "profile_gpu.sh"


def _script(out_dir: Path, **env: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEVICE="cpu", SCALE="tiny", OUT_DIR=str(out_dir), PYTHON=sys.executable,
               BATCH_SIZES="1,2", TRAIN_SIZES="1,2", SYNC_MB="1", REPEATS="2", **env)
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> Path:
    """The script's default run (both backbones, the published trained part) on CPU."""
    out = tmp_path_factory.mktemp("dry_run")
    r = _script(out)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.mark.slow
def test_gpu_script_dry_run_on_cpu(dry_run, tmp_path):
    """benchmarks/profile_gpu.sh runs end to end (on CPU, tiny scale, small sizes)."""
    for bb in ("pi05", "gr00t_n15"):
        p = Profile.from_dict(json.loads((dry_run / f"{bb}_tiny_cpu_dryrun.json").read_text()))
        assert set(p.costs.trained_parts) == {"action_expert"}
    # TRAINED_PART=full: its own file name, so calibration never reads it as the published part
    r = _script(tmp_path, TRAINED_PART="full", BACKBONES="pi05")
    assert r.returncode == 0, r.stderr[-3000:]
    p = Profile.from_dict(json.loads((tmp_path / "pi05_tiny_cpu_dryrun_trained_full.json").read_text()))
    assert set(p.costs.trained_parts) == {"full"} and p.extra["params"]["trained"] == p.extra["params"]["total"]
    assert not (tmp_path / "gr00t_n15_tiny_cpu_dryrun_trained_full.json").exists()  # BACKBONES=pi05: one


@pytest.mark.slow
def test_env_costs_from_a_cpu_profile(dry_run):
    """What the GPU run does: envs stay on CPU, their costs come from a measured CPU profile
    (the script passes --env-profile profiles/<backbone>_tiny_cpu.json --gpus-per-node 8)."""
    src = ROOT / "profiles" / "pi05_tiny_cpu.json"
    p = Profile.from_dict(json.loads((dry_run / "pi05_tiny_cpu_dryrun.json").read_text()))
    s = Profile.from_dict(json.loads(src.read_text()))
    assert p.costs.env_step_core_s == s.costs.env_step_core_s and p.costs.env_memory_gb == s.costs.env_memory_gb
    assert p.costs.env_density == s.costs.env_density and p.costs.driver_chunk_step_s == s.costs.driver_chunk_step_s
    # the path as the script gave it, relative to the repository root it runs in
    assert (ROOT / p.extra["env_costs_from"]["path"]).resolve() == src.resolve() and "env_costs" in p.assumptions
    assert p.node["gpus_per_node"] == 8
