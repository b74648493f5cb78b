"""executor run operations (issue 12): output paths, refusals before Ray starts, memory,
signals, stderr, stale temporary directories. Fast: nothing here starts Ray or an env."""

from __future__ import annotations

import copy
import json
import os
import signal
import threading
from pathlib import Path

import pytest
from inproc import run_main

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import Plan
from tests.test_executor_run import TINY, write_plan


def cli(args, env=None):
    return run_main(*args, module="executor.cli", env=env)


def one_error_line(r, field: str) -> str:
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert r.exit_code == 2, r.output
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), r.output
    return lines[0]


# ---------------------------------------------------------------------------------------------
# --out never loses what a user had


def test_bad_suite_with_existing_out_keeps_the_users_files(tmp_path):
    # issue 12's reproduction: --suite bogus --out an existing folder deleted notes.txt
    out = tmp_path / "p"
    out.mkdir()
    (out / "notes.txt").write_text("keep\n")
    r = cli(["run", write_plan(tmp_path, TINY), "--suite", "bogus", "--out", str(out), "--no-progress"])
    line = one_error_line(r, "suite")
    assert "libero_spatial" in line and "libero_10" in line
    assert (out / "notes.txt").read_text() == "keep\n"


def test_existing_out_is_refused_before_anything_starts(tmp_path):
    out = tmp_path / "p"
    out.mkdir()
    (out / "notes.txt").write_text("keep\n")
    r = cli(["run", write_plan(tmp_path, TINY), "--out", str(out), "--no-progress"])
    assert "--overwrite" in one_error_line(r, "out")
    assert (out / "notes.txt").read_text() == "keep\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p", "plan.json"]  # no temp dir left
    f = tmp_path / "file"
    f.write_text("data")
    for extra in ([], ["--overwrite"]):  # a file is never replaced
        r = cli(["run", write_plan(tmp_path, TINY), "--out", str(f), "--no-progress", *extra])
        one_error_line(r, "out")
        assert f.read_text() == "data"


def test_unwritable_out_is_refused_before_ray_starts(tmp_path):
    r = cli(["run", write_plan(tmp_path, TINY), "--out", "/proc/x", "--no-progress"])
    assert "/proc/x" in one_error_line(r, "out")


def test_reserve_overwrite_empty_dir_and_unique_defaults(tmp_path):
    from executor.runtime.rundir import default_out, reserve, tmp_prefix

    (tmp_path / "empty").mkdir()
    rd = reserve(tmp_path / "empty", "disaggregated")  # an empty directory is fine
    assert rd.tmp.parent == tmp_path and rd.tmp.name.startswith(tmp_prefix("empty", os.getpid()))
    rd.discard()
    full = tmp_path / "full"
    full.mkdir()
    (full / "a").write_text("x")
    with pytest.raises(ConfigError):
        reserve(full, "disaggregated")
    reserve(full, "disaggregated", overwrite=True).discard()
    # two runs started in the same second get different default directories
    a = default_out("colocated", tmp_path / "runs")
    a.mkdir(parents=True)
    b = default_out("colocated", tmp_path / "runs")
    assert a != b and not b.exists() and str(os.getpid()) in a.name


def test_stale_temp_dirs_of_killed_runs_are_removed(tmp_path):
    from executor.runtime.rundir import RAY_SESSION_MARKER, reserve, tmp_prefix

    # a pid that is not running: the largest pid + 1 is free on Linux as long as nothing takes it
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) - 1
    while os.path.exists(f"/proc/{dead}"):
        dead -= 1
    stale = tmp_path / f"{tmp_prefix('old', dead)}abc123"
    stale.mkdir()
    (stale / "record.json").write_text("{}")
    fake_session = tmp_path / "ray" / "session_2000-01-01_00-00-00_1_1"
    fake_session.mkdir(parents=True)
    (stale / RAY_SESSION_MARKER).write_text(str(fake_session))
    live = tmp_path / f"{tmp_prefix('mine', os.getpid())}xyz"
    live.mkdir()
    rd = reserve(tmp_path / "new", "colocated")
    assert not stale.exists() and not fake_session.exists()
    assert live.exists()  # a running driver's directory is left alone
    rd.discard()


# ---------------------------------------------------------------------------------------------
# Options and addresses refused in seconds, before Ray starts


def test_executor_verbose_is_rays_messages_not_tracebacks(tmp_path):
    """executor run's own --verbose lets Ray's messages through; a refusal stays one line."""
    r = cli(["run", str(tmp_path / "nosuch.json"), "--verbose", "--out", str(tmp_path / "o")])
    one_error_line(r, "plan")
    assert "Traceback" not in r.stderr


def test_image_size_zero_is_refused(tmp_path):
    r = cli(["run", write_plan(tmp_path, TINY), "--image-size", "0", "--out", str(tmp_path / "o")])
    one_error_line(r, "image-size")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("address,env,field", [
    ("127.0.0.1:1", None, "address"),  # nothing listens on port 1
    ("not-an-address", None, "address"),
    ("ray://127.0.0.1:10001", None, "address"),
    (None, {"RAY_ADDRESS": "127.0.0.1:1"}, "RAY_ADDRESS"),  # as after ray start --head elsewhere
])
def test_bad_ray_address_is_one_line(tmp_path, address, env, field):
    args = ["run", write_plan(tmp_path, TINY), "--out", str(tmp_path / "o"), "--no-progress"]
    if address:
        args += ["--address", address]
    r = cli(args, env=env)
    one_error_line(r, field)
    assert not (tmp_path / "o").exists()


def test_resolve_address_accepts_a_grpc_server_and_refuses_what_only_listens():
    """The address must speak gRPC (HTTP/2), as a Ray head's GCS does: a port that accepts the
    connection and says nothing, or answers HTTP/1, is refused in seconds (ray.init would retry it
    for many minutes, silently)."""
    import socket
    import threading

    from executor.runtime.preflight import resolve_address
    from perfmodel.schema.errors import ConfigError

    def serve(reply: bytes | None) -> tuple[socket.socket, int]:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)

        def answer() -> None:
            conn, _ = srv.accept()
            with conn:
                conn.recv(64)
                if reply is not None:
                    conn.sendall(reply)
                else:
                    conn.recv(64)  # silent until the client gives up

        threading.Thread(target=answer, daemon=True).start()
        return srv, srv.getsockname()[1]

    settings = bytes([0, 0, 6, 4, 0, 0, 0, 0, 0]) + bytes([0, 3, 0, 0, 0, 100])  # a server's SETTINGS frame
    srv, port = serve(settings)
    with srv:
        assert resolve_address(f"127.0.0.1:{port}")[0] == f"127.0.0.1:{port}"
    for reply in (b"HTTP/1.0 400 Bad request\r\n\r\n", None):
        srv, port = serve(reply)
        with srv, pytest.raises(ConfigError, match=r"^address: something answers at .* but not a Ray head's GCS"):
            resolve_address(f"127.0.0.1:{port}")
    assert resolve_address("local")[0] is None


# ---------------------------------------------------------------------------------------------
# Memory: what a run really holds


def test_memory_check_counts_env_processes_actors_and_ray():
    from executor.runtime.preflight import ACTOR_GB, RAY_BASE_GB, check_plan_fits, memory_need

    d = copy.deepcopy(TINY)
    d["cluster"].update(gpus=1, gpus_per_node=1)
    d["mode"], d["allocation_ratio"] = "colocated", None
    d["workload"].update(total_num_envs=11, global_batch_size=22, micro_batch_size=2)
    plan = Plan.from_dict(d)
    need, actors = memory_need(plan, 1.92)
    assert actors == 3  # env worker + generator + one trainer rank on the one slot
    assert need.total_gb == pytest.approx(11 * 1.92 + (actors + 1) * ACTOR_GB + RAY_BASE_GB)
    # this machine's 25.3 GB (24 GiB) all available still does not hold 11 rendered envs
    with pytest.raises(ConfigError) as e:
        check_plan_fits(plan, "pi05", "tiny", 1.92, local=True, ram_gb=25.28)
    assert e.value.field == "plan.workload.total_num_envs" and "Ray" in e.value.message
    d["workload"].update(total_num_envs=2, global_batch_size=4)
    check_plan_fits(Plan.from_dict(d), "pi05", "tiny", 1.92, local=True, ram_gb=25.28)


# ---------------------------------------------------------------------------------------------
# Signals, stderr, faults in the measured window


def test_signals_stop_the_run_instead_of_raising():
    from executor.runtime.session import Signals

    stop = threading.Event()
    before = signal.getsignal(signal.SIGTERM)  # SIG_DFL, or Ray's if an earlier test started Ray here
    with Signals(stop) as sig:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.is_set() and sig.reason == "SIGTERM"
        os.kill(os.getpid(), signal.SIGINT)  # a second one: still only the flag, never an exception
        signal.signal(signal.SIGTERM, lambda *a: None)  # as ray.init replaces it
        sig.install()
        os.kill(os.getpid(), signal.SIGTERM)
        assert sig.count == 3 and sig.reason == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before


def test_interrupted_start_up_is_waited_for_and_errors_come_back():
    from executor.runtime.session import Signals, _interruptible

    stop = threading.Event()
    sig = Signals(stop)
    go = threading.Event()

    def slow_start():
        go.wait(10)
        return "wiring"
    sig._handle(signal.SIGINT, None)  # Ctrl-C before start-up ends
    threading.Timer(0.5, go.set).start()
    assert _interruptible(slow_start, sig) == "wiring"  # waited for: it can be torn down
    with pytest.raises(ValueError):
        _interruptible(lambda: (_ for _ in ()).throw(ValueError("x")), Signals(threading.Event()))


def test_quiet_output_sends_fds_1_and_2_to_the_log(tmp_path, capfd):
    import sys

    from executor.runtime.session import quiet_output

    log = tmp_path / "ray.log"
    with quiet_output(log) as real:
        os.write(2, b"Token authentication is enabled\n")
        os.write(1, b"[info] Applying task order index 0\n")  # LIBERO's print, in an env process
        # what Ray's error-listener thread does with a dead node's messages (print_to_stdstream)
        t = threading.Thread(target=lambda: print("(raylet) The node with node id: 1a2b has been marked dead",
                                                  file=sys.stdout))
        t.start()
        t.join()
        print("raylet last 20 lines", file=sys.stderr)
        real.write("progress\n")
    print("after")
    out = capfd.readouterr()
    assert "Token" not in out.err and "progress" in out.err and "raylet" not in out.err
    assert "marked dead" not in out.out and out.out == "after\n"
    text = log.read_text()
    assert "[info] Applying" not in out.out and "[info] Applying" in text
    assert "Token authentication" in text and "marked dead" in text and "raylet last 20 lines" in text


def test_env_restart_inside_the_measured_window_is_flagged():
    from executor.runtime.record import faults_in_window

    faults = [{"time_s": 1.0}, {"time_s": 5.0}, {"time_s": 12.0}]
    assert faults_in_window(faults, [4.0, 10.0]) == [{"time_s": 5.0}]
    assert faults_in_window(faults, None) == []


def test_actor_lost_names_actor_and_node():
    from executor.runtime.session import ActorLost, _death_cause, _node_name

    info = {"Address": {"IPAddress": "10.0.0.2", "NodeID": "abcdef0123456789"},
            "DeathCause": 'actor_died_error_context {\n  error_message: "The actor died because its node has died."\n}'}
    e = ActorLost("trainer_rank_0", _node_name(info), _death_cause(info))
    assert str(e) == ("trainer_rank_0 on node 10.0.0.2 (node id abcdef012345) died: "
                      "The actor died because its node has died.")
    assert json.dumps(str(e)).count("\\n") == 0


def test_env_cores_are_positions_resolved_on_the_env_workers_node():
    from executor.runtime.actors import node_cores
    from executor.runtime.modes import layout

    d = copy.deepcopy(TINY)
    d["workload"]["total_num_envs"] = 4
    d["cluster"].update(gpus=4, gpus_per_node=2, cpu_cores_per_node=2)
    lay = layout(Plan.from_dict(dict(d, allocation_ratio="1:1")))
    assert lay.rollout_slots == [0, 1] and lay.env_cores == [[0], [1]]  # one node, a core each
    d["cluster"].update(gpus_per_node=1)
    lay = layout(Plan.from_dict(dict(d, allocation_ratio="1:1")))
    # nodes of one slot: each env worker gets its own node's first two cores (positions, not ids)
    assert lay.rollout_slots == [0, 1] and lay.env_cores == [[0, 1], [0, 1]]
    avail = sorted(os.sched_getaffinity(0))
    assert node_cores([0, 1]) == [avail[0], avail[1 % len(avail)]]
    assert node_cores([len(avail)]) == [avail[0]]  # more positions than cores wrap around
    assert node_cores(None) is None and node_cores([]) is None


def test_plan_nodes_must_each_fit_on_a_ray_node():
    from executor.runtime.modes import node_bundles
    from executor.runtime.session import fits_on_nodes

    d = copy.deepcopy(TINY)
    d["workload"]["total_num_envs"] = 4
    d["cluster"].update(gpus=4, gpus_per_node=2, cpu_cores_per_node=2)
    plan = Plan.from_dict(d)
    assert node_bundles(plan, cuda=False) == [[{"CPU": 1}] * 2] * 2
    assert node_bundles(plan, cuda=True)[1] == [{"GPU": 1, "CPU": 1}] * 2
    assert fits_on_nodes(plan, [2, 2]) and fits_on_nodes(plan, [4, 0]) and fits_on_nodes(plan, [0, 3, 2])
    assert not fits_on_nodes(plan, [1, 1, 1, 1])  # enough slots in all, but no node holds two
    assert not fits_on_nodes(plan, [3, 1])
    d["cluster"].update(gpus=3)  # the last node holds what is left
    d["workload"].update(total_num_envs=3, global_batch_size=6)
    assert [len(b) for b in node_bundles(Plan.from_dict(dict(d, mode="colocated", allocation_ratio=None)),
                                         cuda=False)] == [2, 1]


def test_executor_refuses_a_version_granularity_it_does_not_run():
    from executor.runtime.preflight import check_plan_fits
    from perfmodel.schema.errors import ConfigError
    from perfmodel.schema.plan import Plan

    plan = Plan.from_dict({"mode": "rollout_async", "cluster": {"gpus": 2}, "workload": {"total_num_envs": 4},
                           "version_granularity": "optimizer_step"})
    with pytest.raises(ConfigError, match="plan.version_granularity"):
        check_plan_fits(plan, "pi05", "tiny", 1.92, local=False)


def test_the_stored_group_sigterm_runs_each_stopped_with_a_record_and_left_nothing():
    # benchmarks/group_sigterm.py's stored results, which docs/executor.md points to: five group
    # SIGTERMs in a row at each moment (issue 43's "done when": within 10 s, a record, nothing
    # left 10 s later), read as measured; during ray.init in a file of its own
    root = Path(__file__).resolve().parent.parent / "benchmarks/results"
    rows = json.loads((root / "group_sigterm.json").read_text())["runs"]
    assert {r["moment"] for r in rows} == {"mid-run", "start-up"}
    init = json.loads((root / "group_sigterm_ray_init.json").read_text())["runs"]
    assert {r["moment"] for r in init} == {"ray-init"}
    rows += init
    assert all(sum(r["moment"] == m for r in rows) >= 5 for m in ("ray-init", "start-up", "mid-run"))
    for r in rows:
        assert r["exit_code"] == 130 and r["record_status"] == "interrupted", r
        assert r["exit_after_signal_s"] <= 10 and r["left_after_10s"] == [] and not r["session_dir_left"], r
        # the run was watched (during ray.init the signal may come before Ray's first process); its load kept
        assert (r["processes_seen"] > 0 or r["moment"] == "ray-init") and r["loadavg_1min"] >= 0
