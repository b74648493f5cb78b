"""Run a vlaperf command line in this process, through its real entry point (``main(argv)``,
which goes through ``perfmodel.cliutil.run_click``), and capture what a user would see."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import signal
from dataclasses import dataclass


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    output: str = ""  # stdout and stderr interleaved, as a terminal shows them

    @property
    def exit_code(self) -> int:  # click.testing.Result's name for it
        return self.returncode


class _Tee(io.StringIO):
    """A stream that also writes into ``both`` (the interleaved output)."""

    def __init__(self, both: io.StringIO) -> None:
        super().__init__()
        self.both = both

    def write(self, s: str) -> int:
        self.both.write(s)
        return super().write(s)


class Hang(Exception):
    pass


def run_main(*args: str, module: str = "perfmodel.cli", limit_s: int = 300,
             env: dict[str, str] | None = None) -> Result:
    """``python -m <module> *args`` in-process, with ``env`` added to the environment meanwhile.
    ``limit_s`` is a watchdog against hangs (a command that has not ended by then raises
    ``Hang``), not a speed requirement."""
    main = importlib.import_module(module).main
    both = io.StringIO()
    out, err = _Tee(both), _Tee(both)
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})

    def alarm(signum, frame):  # noqa: ARG001
        raise Hang(f"{module} {' '.join(args)} did not end within {limit_s} s")

    old = signal.signal(signal.SIGALRM, alarm)
    # a command's signal dispositions are its process's: an interrupted run leaves Ctrl-C and
    # SIGTERM ignored for its exit (executor.runtime.session.Signals.ignore_from_now); here the
    # process goes on, so they are restored
    stops = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.alarm(limit_s)
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        for s, handler in stops.items():
            signal.signal(s, handler)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return Result(code, out.getvalue(), err.getvalue(), both.getvalue())


def assert_one_line_error(r: Result, field: str | None = None) -> str:
    """Exit 2 and exactly one ``error: ...`` line on stderr, no traceback."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    if field is not None:
        assert field in lines[0], lines[0]
    return lines[0]
