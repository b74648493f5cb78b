"""Issue 44 (hostile input, round three): run folders, the API, output paths and the process
around the tool. Each defect the campaign found, as a test that failed before its fix: files that
are not vlaperf's own are never destroyed (devices, read-only files, symlinks, a run's own files),
RLinf run folders lose nothing silently, nonsense timers are refused, counts are bounded, and the
process ends as Unix tools do (EPIPE, a full disk, a closed stdout, Ctrl-C)."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from fuzzing import write_events as _events
from inproc import assert_one_line_error, run_main

PLAN = ROOT / "examples" / "plans" / "pi05_4envs_disaggregated.json"


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


# -- 1: never destroy a file that is not vlaperf's own ---------------------------------------

def _null_copy(d: Path) -> Path:
    """A copy of the null device's node (the real /dev/null is not put at risk)."""
    node = d / "null"
    rdev = os.stat(os.devnull).st_rdev
    os.mknod(node, 0o666 | stat.S_IFCHR, rdev)
    return node


def _outputs(out: str) -> list[tuple[str, ...]]:
    return [("predict", "--plan", str(PLAN), "--no-interval", "--trace", out),
            ("sweep", "--modes", "colocated", "--gpus", "8", "--no-interval", "--no-progress", "--jobs", "1", "-o", out),
            ("plan", "--gpus", "8", "--modes", "colocated", "--no-progress", "--jobs", "1", "-o", out)]


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_node_is_written_through_never_replaced(tmp_path: Path) -> None:
    node = _null_copy(tmp_path)
    for args in _outputs(str(node))[:2]:
        r = run_main(*args)
        assert r.returncode == 0, r.stderr
        assert stat.S_ISCHR(os.lstat(node).st_mode), args  # before: a regular file in its place
    other = tmp_path / "zero"
    os.mknod(other, 0o666 | stat.S_IFCHR, os.stat("/dev/zero").st_rdev)
    line = assert_one_line_error(run_main(*_outputs(str(other))[0]), "--trace")
    assert "character device" in line and stat.S_ISCHR(os.lstat(other).st_mode)


def test_a_fifo_output_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    line = assert_one_line_error(run_main(*_outputs(str(fifo))[1]), "--out")
    assert "named pipe" in line and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_read_only_output_is_refused(tmp_path: Path) -> None:
    ro = tmp_path / "ro.json"
    ro.write_text("mine\n")
    ro.chmod(0o444)
    for args in _outputs(str(ro)):
        line = assert_one_line_error(run_main(*args))
        assert "read-only" in line and ro.read_text() == "mine\n"


def test_a_symlink_output_is_written_through(tmp_path: Path) -> None:
    target = tmp_path / "real" / "out.json"
    target.parent.mkdir()
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    r = run_main(*_outputs(str(link))[1])
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and '"rows"' in target.read_text()  # before: the link replaced by a file


# -- RLinf run folders, written record by record as tensorboard's writer frames them ----------

STEPS = [{"time/step": 9.0}] + [{"time/step": 3.0, "time/actor_training": 1.0}] * 19


def _run(d: Path, rows: list[dict[str, float]] = STEPS) -> Path:
    pytest.importorskip("tensorboard")
    from perfmodel.calibration.reference import published_plan
    from perfmodel.rlinf.emit import emit_yaml
    from perfmodel.schema.profile import load_profile

    d.mkdir(parents=True)
    (d / "config.yaml").write_text(emit_yaml(published_plan(load_profile("pi05"), "colocated", 8, None), "pi05"))
    _events(d / "events.out.tfevents.1000.host.1.0", rows)
    return d


def _read(d: Path):
    from perfmodel.rlinf.logs import read_run

    return read_run(d)


def _refused(d: Path, *extra: str) -> str:
    r = run_main("calibrate", "--from-rlinf-run", str(d), "--out-dir", str(d.parent / "out"), "--no-progress", *extra)
    return assert_one_line_error(r)


def test_calibrate_never_writes_over_the_runs_own_files(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _run(run / "tensorboard")
    (run / "record.json").write_text('{"options": {}}\n')
    before = _digest(run / "record.json")
    line = _refused(run, "--out-dir", str(run), "--name", "record")
    assert "must not be an input" in line and _digest(run / "record.json") == before
    ev = run / "tensorboard" / "events.out.tfevents.1000.host.1.0.json"
    _events(ev, STEPS[-1:], first_step=20)
    os.replace(ev, run / "tensorboard" / "events.out.tfevents.2.json")
    line = _refused(run, "--out-dir", str(run / "tensorboard"), "--name", "events.out.tfevents.2")
    assert "must not be an input" in line


def test_a_corrupt_record_is_refused_not_the_rest_dropped(tmp_path: Path) -> None:
    d = _run(tmp_path / "run")
    f = next(d.glob("events.*"))
    data = bytearray(f.read_bytes())
    data[len(data) // 5] ^= 0xFF  # a record near the start: before, 3 of 20 steps were read
    f.write_bytes(bytes(data))
    assert "fails its checksum" in _refused(d) and f.name in _refused(d)


def test_an_incomplete_last_record_is_said(tmp_path: Path) -> None:
    d = _run(tmp_path / "run", [*STEPS, {"time/step": 3.0}])
    f = next(d.glob("events.*"))
    f.write_bytes(f.read_bytes()[:-7])  # step 20's only record, cut
    r = _read(d)
    assert len(r.steps) == 20 and r.truncated and "incomplete" in r.truncated[0]
    # calibrate warns for it before fitting (issue 41 item 8: it was used silently); stopped there
    from perfmodel.calibration.from_runs import calibrate_command

    class Warned(Exception):
        pass

    def echo(message: str = "", err: bool = False) -> None:
        if message.startswith("warning:"):
            raise Warned(message)

    with pytest.raises(Warned, match="incomplete") as w:
        calibrate_command([str(d)], "--from-rlinf-run", out_dir=str(tmp_path / "p"), cpu_cores_per_node=None,
                          max_evals=1, as_json=False, quiet=False, name=None, command="test", echo=echo)
    assert f.name in str(w.value) and "the steps before it are used" in str(w.value)


def test_two_runs_in_one_folder_are_refused(tmp_path: Path) -> None:
    d = _run(tmp_path / "run")
    _events(d / "events.out.tfevents.2000.host.2.0", STEPS)
    assert "two runs in one folder" in _refused(d)
    _events(d / "events.out.tfevents.2000.host.2.0", STEPS[:5], first_step=18)  # a resumed run: its last write wins
    assert len(_read(d).steps) == 23


def test_only_event_files_are_read(tmp_path: Path) -> None:
    d = _run(tmp_path / "run")
    before = _read(d).step_s
    _events(d / "old.events.out.tfevents.1", [{"time/step": 100.0}] * 20)
    assert _read(d).step_s == before


def test_refusals_name_the_right_file(tmp_path: Path) -> None:
    d = _run(tmp_path / "run")
    (d / "events.out.tfevents.3000.dir").mkdir()
    line = _refused(d)
    assert "events.out.tfevents.3000.dir" in line and "directory" in line
    (d / "events.out.tfevents.3000.dir").rmdir()
    os.mkfifo(d / "events.out.tfevents.3000.fifo")  # before: a hang
    line = _refused(d)
    assert "events.out.tfevents.3000.fifo" in line and "named pipe" in line


def test_too_many_event_files_are_refused_before_reading(tmp_path: Path) -> None:
    from perfmodel.rlinf.logs import MAX_EVENT_FILES

    d = _run(tmp_path / "run")
    for i in range(MAX_EVENT_FILES):
        (d / f"events.out.tfevents.{5000 + i}.h").write_bytes(b"")
    assert f"{MAX_EVENT_FILES + 1} event files" in _refused(d)


@pytest.mark.parametrize("bad", [1e-45, 1e-3, 86_401.0, 3.4e38])
def test_nonsense_iteration_times_are_refused(tmp_path: Path, bad: float) -> None:
    d = _run(tmp_path / "run", [*STEPS[:5], {"time/step": bad}, *STEPS[5:]])
    assert "time/step: step 5 has" in _refused(d)


def test_a_stage_longer_than_its_iteration_is_refused(tmp_path: Path) -> None:
    d = _run(tmp_path / "run", [*STEPS[:5], {"time/step": 3.0, "time/actor_training": 4.0}, *STEPS[5:]])
    assert "longer than its iteration" in _refused(d)


def test_a_timer_both_tensor_and_scalar_is_refused(tmp_path: Path) -> None:
    d = _run(tmp_path / "run")
    _events(d / "events.out.tfevents.2000.host.2.0", STEPS[:3], first_step=20, tensor={"time/step"})
    assert "both as a scalar and as a tensor" in _refused(d)


def test_validate_bounds_max_evals() -> None:
    line = assert_one_line_error(run_main("validate", "--cross-validate", "--max-evals", "2147483648"), "--max-evals")
    assert "1..100000" in line


# -- 7: the process around the tool -----------------------------------------------------------

def _script(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _entry(*args: str, stdout=subprocess.PIPE, env: dict | None = None, cwd: Path | None = None):
    return subprocess.run([_script("perfmodel"), *args], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_a_closed_pipe_exits_141_quietly() -> None:
    r, w = os.pipe()
    os.close(r)  # the reader went away (`| head -1`) before the result was written
    try:
        p = _entry("gpus", stdout=w)
    finally:
        os.close(w)
    assert p.returncode == 141 and p.stderr == "", (p.returncode, p.stderr)  # before: exit 1


def test_a_full_stdout_is_one_line_exit_2() -> None:
    with open("/dev/full", "w") as full:
        p = _entry("gpus", stdout=full)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "No space left on device" in lines[0], p.stderr  # before: traceback


def test_a_closed_stdout_is_refused() -> None:
    p = subprocess.run([_script("perfmodel"), "gpus"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       preexec_fn=lambda: os.close(1), timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("error: stdout: is closed"), p.stderr  # before: exit 0


def test_home_unset_without_passwd_entry(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_DATA_HOME", "VLAPERF_PROFILE_DIR")}
    # a uid with no passwd entry: Python's home lookup fails as it does in such a container
    code = ("import os, pwd, sys; pwd.getpwuid = lambda uid: (_ for _ in ()).throw(KeyError(uid)); "
            "sys.argv = ['perfmodel'] + sys.argv[1:]; from perfmodel.cli import main; main()")
    p = subprocess.run([sys.executable, "-c", code, "predict", "--mode", "colocated", "--gpus", "8", "--no-interval"],
                       capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr  # before: RuntimeError at import
    p = subprocess.run([sys.executable, "-c", code, "calibrate", "--max-evals", "1"], capture_output=True, text=True,
                       env=env, timeout=120, cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().startswith("error: HOME: is not set"), p.stderr


def test_ctrl_c_while_importing_is_130_without_traceback() -> None:
    # the console script imports the package first; a SIGINT during the commands' imports
    code = ("import os, signal, sys, threading; sys.argv = ['perfmodel', 'gpus']; import perfmodel; "
            "threading.Timer(0.002, os.kill, (os.getpid(), signal.SIGINT)).start(); "
            "import perfmodel.cli, perfmodel.commands.predict, perfmodel.simulate; threading.Event().wait(5); "
            "perfmodel.cli.main()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 130 and "Traceback" not in p.stderr, (p.returncode, p.stderr)


# -- 8: names and text -------------------------------------------------------------------------

def test_a_file_named_like_a_bundled_profile_does_not_shadow_it(tmp_path: Path) -> None:
    (tmp_path / "pi05").mkdir()
    p = _entry("predict", "--mode", "colocated", "--gpus", "8", "--no-interval", "--backbone", "pi05", cwd=tmp_path)
    assert p.returncode == 0, p.stderr  # before: "pi05 is a directory"


@pytest.mark.parametrize("name", ["a\nerror: forged", "a\rb", "a\x1b[2Jb"])
def test_calibrate_name_refuses_control_characters(tmp_path: Path, name: str) -> None:
    d = _run(tmp_path / "run")
    assert "--name: must be a file name without '/' or control characters" in _refused(d, "--name", name)


def test_out_dir_empty_is_refused(tmp_path: Path) -> None:
    assert_one_line_error(run_main("calibrate", "--out-dir", "", "--max-evals", "1"), "--out-dir")
    d = _run(tmp_path / "run")
    assert "--out-dir: must be a directory path" in assert_one_line_error(
        run_main("calibrate", "--from-rlinf-run", str(d), "--out-dir", ""))


def test_a_profile_name_with_a_newline_is_refused(tmp_path: Path) -> None:
    import json

    doc = json.loads((ROOT / "profiles" / "pi05.json").read_text())
    doc["name"] = "pi05\nerror: forged"
    (tmp_path / "p.json").write_text(json.dumps(doc))
    line = assert_one_line_error(run_main("predict", "--profile", str(tmp_path / "p.json"), "--mode", "colocated",
                                          "--gpus", "8", "--no-interval"), "--profile.name")
    assert "control characters" in line


def test_a_time_target_is_bounded_never_inf_hours() -> None:
    line = assert_one_line_error(run_main("plan", "--gpus", "8", "--modes", "colocated", "--objective", "time",
                                          "--env-steps", "1e300", "--within-hours", "1", "--no-progress", "--jobs",
                                          "1"), "--env-steps")
    assert "inf" not in line


# -- 6: executor records with wrong types ------------------------------------------------------

@pytest.mark.parametrize("record, field", [
    ('{"options": "x"}', "record.json:options"),
    ('{"options": ["--soft-reset"]}', "record.json:options"),
    ('{"options": {"env_not_as_rlinf": 5}}', "record.json:options.env_not_as_rlinf"),
    ('{"options": {"env_not_as_rlinf": [5]}}', "record.json:options.env_not_as_rlinf"),
    ('{"options": {}, "throughput_env_steps_per_s": NaN}', "record.json.throughput_env_steps_per_s"),
    ('[1, 2]', "record.json"),
])
def test_a_record_of_wrong_types_is_refused_naming_its_field(tmp_path: Path, record: str, field: str) -> None:
    run = tmp_path / "run"
    _run(run / "tensorboard")
    (run / "record.json").write_text(record)
    r = run_main("calibrate", "--from-run", str(run), "--out-dir", str(tmp_path / "out"), "--no-progress")
    line = assert_one_line_error(r)  # before: exit 1 "internal" (AttributeError), or the NaN record read
    assert f"{run}/{field}" in line, line


def test_every_single_bit_flip_of_an_event_file_is_refused(tmp_path: Path) -> None:
    """Found by the campaign: a cached header verdict let a flipped header CRC pass."""
    pytest.importorskip("tensorboard")
    from perfmodel.rlinf.logs import read_scalars
    from perfmodel.schema.errors import ConfigError

    ev = _events(tmp_path / "events.out.tfevents.1", [{"time/step": 1.0 + i} for i in range(3)])
    raw = ev.read_bytes()
    accepted = []
    for pos in range(len(raw)):  # every byte, one bit of each (every bit: 8 times the time)
        flipped = bytearray(raw)
        flipped[pos] ^= 1 << (pos % 8)
        ev.write_bytes(bytes(flipped))
        try:
            read_scalars(tmp_path)
            accepted.append(pos)
        except ConfigError:
            pass
    assert not accepted


def test_tensorboards_own_warnings_stay_out(tmp_path: Path) -> None:
    """Steps going back in a file and two graph events: tensorboard's reader logged warnings
    ("out of order event.step", "more than one graph event") into the command's output."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2

    from fuzzing import _event, _frame

    d = _run(tmp_path / "run")
    f = next(d.glob("events.*"))
    graph = _frame(event_pb2.Event(wall_time=2.0, graph_def=b"\x0a\x00").SerializeToString())
    f.write_bytes(f.read_bytes() + graph + graph + b"".join(_frame(_event(s, "time/step", 3.0)) for s in (5, 6)))
    r = run_main("calibrate", "--from-rlinf-run", str(d), "--out-dir", str(tmp_path / "out"), "--no-progress",
                 "--max-evals", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert "out of order" not in r.output and "graph event" not in r.output


# -- found by the stored campaign (benchmarks/fuzz.py --seed 4400) ------------------------------

@pytest.mark.parametrize("edit, field", [
    (lambda row: row.update(throughput_high=None), "throughput_high"),
    (lambda row: row.update(interval_structural=5), "interval_structural"),
])
def test_a_sweep_row_of_wrong_shape_is_refused(tmp_path: Path, edit, field: str) -> None:
    import json

    path = tmp_path / "s.json"
    r = run_main("sweep", "--modes", "colocated,streamer", "--ratios", "1:1", "--gpus", "8", "--jobs", "1",
                 "--no-progress", "-o", str(path))
    assert r.returncode == 0, r.stderr
    doc = json.loads(path.read_text())
    for row in doc["rows"]:
        if row["status"] == "ok" and row.get("throughput_low") is not None:
            edit(row)
    path.write_text(json.dumps(doc))
    line = assert_one_line_error(run_main("plan", "--gpus", "8", "--sweep", str(path)))  # before: exit 1 internal
    assert field in line
