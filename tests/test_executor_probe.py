"""executor run --compare on a host slowed on purpose (slow: real Ray, real rendered LIBERO scenes):
a CPU hog on the run's core, started and stopped by the test. The pre-run host probe times its envs by
the wall clock, so it sees the cores the hog takes, and the prediction it scales comes closer to
the measurement than the one at the host's CPU speed alone (what the probe measured before, blind
to the hog). The same run checks that ``--json`` prints one JSON document and nothing else: LIBERO's
``[info] ...`` line and robosuite's macro warnings, printed by the probe's env processes, go to the
run's log; and that the record keeps the load average before and after the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from run_processes import RunProcesses, finish

from tests.test_executor_run import ROOT, tiny_plan, write_plan

pytestmark = pytest.mark.slow

HOG = "while True: pass"


# The run and one hog share one core (CPU 0, taskset): the host is slowed for the run as a hog
# per core would slow it, while the suite's other workers keep the other core (a hog on every
# core slowed every test running beside this one about threefold).
ONE_CORE = ["taskset", "-c", "0"]


@pytest.fixture
def cpu_hog():
    """One busy process on the run's core, for the test's duration only."""
    hogs = [subprocess.Popen([*ONE_CORE, sys.executable, "-c", HOG])]
    try:
        yield hogs
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def test_probe_sees_a_cpu_hog_and_json_stdout_is_one_document(tmp_path, cpu_hog):
    pytest.importorskip("ray")
    pytest.importorskip("libero")
    from perfmodel.prediction import predict
    from perfmodel.schema.metrics import error_pct
    from perfmodel.schema.plan import Plan
    from perfmodel.schema.profile import load_profile

    out = tmp_path / "run"
    # one env on one device slot: the run and its probe on the hog's core, at half the env work of
    # the 2-env plan (the probe steps the run's layout: the same one env)
    plan = tiny_plan("colocated")
    plan["workload"].update(total_num_envs=1, global_batch_size=2)
    plan["cluster"].update(gpus=1, gpus_per_node=1)
    plan_path = write_plan(tmp_path, plan)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    # rendered scenes (the env step is most of the run, so the hog's share shows in it); soft resets
    # without settle steps keep the test short
    cmd = (f"{' '.join(ONE_CORE)} {sys.executable} -m executor.cli run {plan_path} --out {out} --compare --json --iterations 2 "
           "--image-size 32 --soft-reset --settle-steps 0 --no-progress | python -m json.tool")
    proc = subprocess.Popen(["bash", "-o", "pipefail", "-c", cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    procs = RunProcesses(proc.pid)
    stdout, err, exited_at = finish(proc, 900)  # a bound on a hang
    assert procs.left_behind(exited_at) == []
    assert proc.returncode == 0, err  # json.tool parsed stdout: one JSON document, nothing else
    record = json.loads(stdout)
    assert record["status"] == "ok"
    assert "[info]" not in err and "robosuite" not in err, err
    log = (out / "ray.log").read_text()
    assert "[info] Applying task order" in log and "No private macro file" in log

    host = record["host"]
    assert host["loadavg_1min_before"] >= 0 and host["loadavg_1min_after"] >= 0
    probe = record["host_probe"]
    # the hog held the probe's core about half the time (noisy: a bound far from 1.0 and 0.5)
    assert probe["core_share"]["env_step"] < 0.8, probe
    measured = record["throughput_env_steps_per_s"]
    with_probe = record["prediction"]["throughput_env_steps_per_s"]
    # the prediction at the host's CPU speed alone: the profile scaled by the probe's CPU seconds
    plan = Plan.from_dict(json.loads((out / "plan.json").read_text()))
    profile = load_profile("pi05_tiny_cpu")
    r = probe["cpu_ratio"]
    from dataclasses import replace

    blind = predict(plan, replace(profile, costs=profile.costs.env_scaled(r["env_step"], r["env_reset"])),
                    iterations=2, warmup=1, interval=False)["throughput_env_steps_per_s"]
    assert abs(error_pct(with_probe, measured)) < abs(error_pct(blind, measured)), (with_probe, blind, measured)
    print(f"{len(cpu_hog)} hog on the run's core, load {host['loadavg_1min_before']:.2f} -> {host['loadavg_1min_after']:.2f}: "
          f"measured {measured:.3f} env steps/s; with the probe {with_probe:.3f} "
          f"({error_pct(with_probe, measured):+.1f} %), at CPU speed alone {blind:.3f} "
          f"({error_pct(blind, measured):+.1f} %); probe core share {probe['core_share']['env_step']:.2f}")
