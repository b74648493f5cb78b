from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The test files that took longest in a full run (seconds of their tests as `--durations` measured
# them: 2026-12-06, 3 workers on the shared 2 cores, the whole suite 573.9 s alone after the
# own-runs end to end and the tiny profile were cut; files below 10 s not listed), longest first.
# The suite spreads whole files over its workers (pyproject addopts:
# --dist loadfile); xdist's default order starts files with the most tests first, which left these
# few-test, long files to the end, where one worker could run a long file alone while the others
# had finished. They start first instead (the longest job first), and the short files fill in
# around them (--no-loadscope-reorder keeps this order). A file's tests keep their own order.
LONGEST_FILES = {
    "test_executor_profile.py": 224, "test_own_runs_e2e.py": 214, "test_executor_run.py": 165,
    "test_executor_probe.py": 133, "test_executor_multihost.py": 107, "test_workload_grid.py": 100,
    "test_executor_faults.py": 69, "test_executor_profile_script.py": 43, "test_executor_multinode.py": 29,
    "test_executor_update.py": 27, "test_executor_comm.py": 27, "test_docs_examples.py": 27,
    "test_executor_envs.py": 24, "test_report.py": 22, "test_run_share.py": 17, "test_rlinf.py": 16,
    "test_rlinf_fork.py": 13, "test_cli_reliability.py": 13, "test_traces.py": 11, "test_speed.py": 10,
}


def pytest_configure(config):
    """Let the suite's processes write bytecode. Where the environment sets PYTHONDONTWRITEBYTECODE
    (these machines do), no process writes it, so each of the suite's several hundred processes
    (workers, command lines, Ray actors, env processes) compiled every module it imported that had
    none: the repository's own always (pip compiles the installed packages as it installs them,
    the README's install does not pass --no-compile). With writing on, the first process to import
    a module compiles it once for all. Stale files are never read: bytecode records its source's
    time and size. Done by the controller before the workers start, which inherit it."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller did it
        return
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: -LONGEST_FILES.get(item.path.name, 0))  # stable: the rest keep their order

@pytest.fixture(scope="module")
def ray_session():
    """One local Ray session for a test file's executor runs (``executor.runtime.session`` uses a
    caller's session and leaves it running): each run then skips Ray's start-up and shutdown."""
    import os

    ray = pytest.importorskip("ray")
    pytest.importorskip("libero")
    ray.init(address="local", num_cpus=max(2, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield ray
    ray.shutdown()

# A hand-made profile for scenario tests: round numbers so that timelines can be checked by hand.
# (Tests only; shipped profiles are measured or fitted.)
SCENARIO_PROFILE: dict[str, Any] = {
    "schema_version": 1,
    "name": "scenario",
    "backbone": "pi05",
    "node": {"gpus_per_node": 8, "cpu_cores_per_node": 16, "node_ram_gb": 1024,
             "intra_node_bw_GBps": 100, "inter_node_bw_GBps": 10,
             "actor_cpu_cores_per_gpu": 2, "p2p": True},
    "provenance": {"kind": "fitted", "date": "2026-12-02", "method": "hand-made test scenario"},
    "envs_per_gpu": 8,
    "default_workload": {"max_episode_steps": 20, "num_action_chunks": 5, "rollout_epoch": 2,
                         "update_epoch": 2, "micro_batch_size": 8, "global_batch_size": 32},
    "costs": {
        "env_step_core_s": 0.1,
        "env_core_efficiency": 1.0,
        "env_reset_s": 0.5,
        "env_memory_gb": 2.0,
        "infer_s": {"model": "linear", "intercept": 0.2, "slope": 0.05},
        "train_micro_batch_s": {"model": "linear", "intercept": 0.1, "slope": 0.02},
        "optimizer_step_s": 0.3,
        "grad_allreduce_bytes": 1e9,
        "weight_sync_bytes": 2e9,
        "offload_s": 1.0,
        "reload_s": 0.5,
    },
}


@pytest.fixture
def scenario_dict() -> dict[str, Any]:
    return copy.deepcopy(SCENARIO_PROFILE)


@pytest.fixture
def scenario_profile(scenario_dict):
    from perfmodel.schema.profile import Profile

    return Profile.from_dict(scenario_dict)


def run_cli(*args: str, module: str = "perfmodel.cli", cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=600)


def write_json(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj))
    return path
