"""executor run under faults, as a user's process (slow: real Ray, real LIBERO scenes): SIGTERM
followed by a second Ctrl-C still writes the partial record and cleans up; a SIGTERM to the whole
process group (what `timeout`, a job scheduler and a terminal send: Ray's GCS and raylet get it
too) at start-up and mid-run ends the run promptly with a partial record; kill -9 of the driver
leaves a temporary directory and a Ray session that the next run removes, with the processes left.
No process the run started (listed while it ran: ``RunProcesses``) is alive 10 s after the driver
exits, or after the next run's clean-up for a kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from quick_envs import QUICK_ENV_FLAGS
from run_processes import RunProcesses, finish, kill_pids, outlasting

from executor.runtime.rundir import ITERATIONS_DONE_MARKER, RAY_SESSION_MARKER, tmp_prefix
from tests.test_executor_run import ROOT, output_lines, tiny_plan, write_plan

pytestmark = pytest.mark.slow


def start_run(tmp_path: Path, out: Path, iterations: int = 3, own_group: bool = False) -> subprocess.Popen:
    pytest.importorskip("ray")
    pytest.importorskip("libero")
    plan = write_plan(tmp_path, tiny_plan("disaggregated"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen([sys.executable, "-m", "executor.cli", "run", plan, "--out", str(out),
                             "--iterations", str(iterations), "--image-size", "64", *QUICK_ENV_FLAGS, "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            start_new_session=own_group)


def wait_for_marker(proc: subprocess.Popen, parent: Path, name: str, marker: str, what: str) -> str:
    """The text of ``marker`` in the run's temporary run directory once it has some, polled
    while the run goes on; ``what`` names it in the failure."""
    deadline = time.time() + 300  # a bound on a hang, not a measurement
    while time.time() < deadline:
        for path in parent.glob(f"{tmp_prefix(name, '*')}*/{marker}"):
            try:
                text = path.read_text().strip()
            except OSError:  # not there, or being replaced
                continue
            if text:
                return text
        if proc.poll() is not None:
            pytest.fail(f"run ended early: {proc.communicate()}")
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"no {what} in {parent}")


def wait_for_ray_session(proc: subprocess.Popen, parent: Path, name: str) -> str:
    """The run's Ray session directory, from the marker its temporary run directory holds."""
    return wait_for_marker(proc, parent, name, RAY_SESSION_MARKER, "Ray session (Ray never started)")


def wait_for_first_iteration(proc: subprocess.Popen, parent: Path, name: str) -> None:
    """Until the run's actor has finished an iteration (the count the run keeps in its temporary
    directory, RunDir.note_iteration, is written from 1): the run is past start-up, mid-run."""
    wait_for_marker(proc, parent, name, ITERATIONS_DONE_MARKER, "iteration done")


def wait_for_ray_init(proc: subprocess.Popen) -> str:
    """This run's Ray session directory as soon as ray.init has made it (Ray names it after the
    driver's pid), while ray.init goes on starting Ray's processes."""
    from ray._common.utils import get_default_ray_temp_dir

    temp = Path(get_default_ray_temp_dir())
    deadline = time.time() + 300  # a bound on a hang, not a measurement
    while time.time() < deadline:
        made = [d for d in temp.glob(f"session_*_{proc.pid}") if not d.is_symlink()]
        if made:
            return str(made[0])
        if proc.poll() is not None:
            pytest.fail(f"run ended early: {proc.communicate()}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no Ray session of pid {proc.pid} in {temp}")


def session_processes(session_dir: str) -> list[int]:
    """Pids of processes whose command line names this run's Ray session (Ray's own processes):
    the scan executor run itself uses to end them (session.session_pids)."""
    from executor.runtime.session import session_pids

    return session_pids(session_dir)


def session_left_behind(session_dir: str, exited_at: float) -> list[int]:
    """This run's Ray session processes still alive ``LEFT_BEHIND_AFTER_S`` after the driver exited
    (the grace ``RunProcesses.left_behind`` gives its own: a process the driver killed last may
    still be exiting when it returns); any left are SIGKILLed (a test leaves nothing behind)."""
    left = outlasting(lambda: session_processes(session_dir), exited_at)
    kill_pids(left)
    return left


# Iterations that outlast the signals below (a quick-envs iteration takes under a second here):
# the run is always stopped, never finished, whatever this machine's speed.
LONG_RUN = 1000


def test_sigterm_then_second_ctrl_c_still_write_the_partial_record(tmp_path):
    out = tmp_path / "run"
    proc = start_run(tmp_path, out, iterations=LONG_RUN)
    procs = RunProcesses(proc.pid)
    session = wait_for_ray_session(proc, tmp_path, "run")
    wait_for_first_iteration(proc, tmp_path, "run")  # the actors up, the rollout going on
    proc.send_signal(signal.SIGTERM)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)  # the impatient second Ctrl-C: during teardown, the record's writing or the exit
    # a run that ignored the signals would otherwise go on for LONG_RUN iterations
    _, err, exited_at = finish(proc, 300)
    assert procs.left_behind(exited_at) == []
    assert proc.returncode == 130, err
    lines = output_lines(err)
    assert len(lines) == 1 and lines[0].startswith("error: run: interrupted"), err  # Ray kept off stderr
    assert "partial record" in lines[0]
    record = json.loads((out / "record.json").read_text())
    assert record["status"] == "interrupted" and record["env_steps_match"] is False
    assert record["counts"]["iterations"] >= 1  # stopped mid-run
    assert (out / "trace.json").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp dir left
    assert not Path(session).exists()  # this run's Ray session directory removed
    assert session_left_behind(session, exited_at) == []


# A bound on a hang, not a measurement: before the fix the driver lingered 60-100 s (until Ray's
# core worker gave up on the dead GCS and ended the process) and wrote no record. The stop
# itself is measured and kept in the record (wall_clock.stop_s).
GROUP_SIGTERM_HANG_S = 45


@pytest.mark.parametrize("moment", ["ray-init", "start-up", "mid-run"])
def test_sigterm_to_the_process_group_ends_the_run_with_a_partial_record(tmp_path, moment):
    """At three moments: while ray.init starts Ray's processes (its session directory made; the
    driver abandons it: ray.init runs in a thread of its own), while the actors start (Ray up),
    and mid-run (an iteration done)."""
    out = tmp_path / "run"
    proc = start_run(tmp_path, out, iterations=LONG_RUN, own_group=True)
    procs = RunProcesses(proc.pid)
    if moment == "ray-init":
        session = wait_for_ray_init(proc)
    else:
        session = wait_for_ray_session(proc, tmp_path, "run")  # Ray is up; the actors are starting
    if moment == "mid-run":
        wait_for_first_iteration(proc, tmp_path, "run")  # the actors up, the rollout going on
    os.killpg(proc.pid, signal.SIGTERM)  # every process of the run (Ray's block it: the driver stops them)
    _, err, exited_at = finish(proc, GROUP_SIGTERM_HANG_S, kill_group=True)
    # Ray's DashboardAgent and RuntimeEnvAgent, which block SIGTERM, outlived such runs for minutes
    assert procs.left_behind(exited_at) == []
    assert proc.returncode == 130, err
    lines = output_lines(err)
    assert len(lines) == 1 and lines[0].startswith("error: run: interrupted (SIGTERM)"), err
    record = json.loads((out / "record.json").read_text())
    assert record["status"] == "interrupted" and record["env_steps_match"] is False
    assert record["wall_clock"]["stop_s"] is not None and record["wall_clock"]["stop_s"] >= 0
    assert (record["counts"]["iterations"] >= 1) == (moment == "mid-run")
    assert (out / "trace.json").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing hidden left
    assert not Path(session).exists()
    assert session_left_behind(session, exited_at) == []


def test_kill_9_leaves_nothing_the_next_run_does_not_clean(tmp_path):
    from executor.runtime.rundir import reserve

    out = tmp_path / "run"
    proc = start_run(tmp_path, out)
    procs = RunProcesses(proc.pid)
    session = wait_for_ray_session(proc, tmp_path, "run")
    proc.kill()
    proc.communicate(timeout=60)
    assert [p.name for p in tmp_path.glob(tmp_prefix("run", "*") + "*")]  # the killed run's hidden directory
    rd = reserve(tmp_path / "next", "disaggregated")  # what the next run does first
    try:
        assert list(tmp_path.glob(tmp_prefix("run", "*") + "*")) == []
        assert not Path(session).exists()
        # Ray's own processes of the killed run are gone too (ended by the next run's cleanup):
        # its agents, re-parented to init, used to stay
        assert procs.left_behind(time.time()) == []
        assert session_processes(session) == []
    finally:
        rd.discard()
        kill_pids(session_processes(session))  # never leave a test's processes behind
