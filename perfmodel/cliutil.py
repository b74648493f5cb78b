"""The one way every vlaperf command line ends: a result, or one line on stderr.

``run_click`` is the wrapper every CLI (perfmodel, analysis, executor) runs its click group
through. Exit codes: 0 done, 2 bad input (``error: <field>: <what is allowed>``), 1 an
unexpected failure (still one line; the traceback only with ``--verbose`` anywhere on the
command line or ``VLAPERF_TRACEBACK=1``), 130 interrupted. Bare ``perfmodel`` prints its help
with exit 0.

Also here: the progress-bar convention (``--no-progress``; bars only when stderr is a terminal),
``version_option`` and ``fmt_number`` (``-`` for a missing number in every table).
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import traceback
from typing import Any, Callable

import click

from perfmodel.schema.errors import ConfigError

TRACEBACK_ENV = "VLAPERF_TRACEBACK"
# Top-level modules of the ``executor`` extra (pyproject.toml): missing means not installed.
EXECUTOR_EXTRAS = ("torch", "ray", "libero", "mujoco", "robosuite", "bddl")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def os_error_message(e: OSError) -> str:
    """``<file>: <what was wrong>`` for an OSError, e.g. ``/proc/self/mem: Input/output error``."""
    what = e.strerror or type(e).__name__
    name = e.filename if e.filename is not None else ""
    return _one_line(f"{name}: {what}" if name else what)


def usage_field(e: click.UsageError) -> str:
    """The option (or argument) a click usage error is about, as the ``<field>`` of the line."""
    param = getattr(e, "param", None)
    opts = getattr(param, "opts", None) if param is not None else None
    if opts:
        return max(opts, key=len) if all(o.startswith("-") for o in opts) else opts[0]
    if getattr(e, "option_name", None):  # NoSuchOption, BadOptionUsage
        return e.option_name
    return "usage"


def usage_message(e: click.UsageError) -> str:
    """click's message without its "Invalid value for '--x':" prefix (the field says it)."""
    if isinstance(e, click.MissingParameter):
        return "is required"
    if isinstance(e, click.BadParameter) and getattr(e, "param", None) is not None:
        return e.message
    return e.format_message()


def error_line(e: BaseException) -> tuple[str, int]:
    """The single stderr line and the exit code for an exception escaping a command."""
    if isinstance(e, ConfigError):
        return f"error: {_one_line(f'{e.field}: {e.message}')}", 2
    if isinstance(e, click.UsageError):
        return f"error: {usage_field(e)}: {_one_line(usage_message(e))}", 2
    if isinstance(e, OSError):
        return f"error: {os_error_message(e)}", 2
    if isinstance(e, (json.JSONDecodeError, UnicodeDecodeError, csv.Error)):
        return f"error: input: {_one_line(str(e))}", 2
    if isinstance(e, RecursionError):
        return "error: input: nested too deeply", 2
    if isinstance(e, ValueError) and "embedded null byte" in str(e):  # os.stat's, in click's path check
        return "error: path: must not contain a NUL character", 2
    if isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] in EXECUTOR_EXTRAS:
        # `pip install -e .` (the planner) leaves the real components out: not a bug, a choice
        return (f"error: install: the executor's real components are not installed (no module {e.name!r}); "
                "install them with: pip install -e \".[executor]\" (torch, LIBERO, MuJoCo, Ray)"), 2
    return f"error: internal: {type(e).__name__}: {_one_line(str(e))} (rerun with --verbose, or {TRACEBACK_ENV}=1, for the traceback)", 1


def _verbose(argv: list[str]) -> bool:
    return "--verbose" in argv or os.environ.get(TRACEBACK_ENV, "") not in ("", "0")


def _declares_verbose(group: click.Group, args: list[str]) -> bool:
    """Whether the command being run has its own ``--verbose`` option (then it is left to it)."""
    cmd: click.Command = group
    for a in args:
        if not isinstance(cmd, click.Group):
            break
        sub = cmd.commands.get(a)
        if sub is not None:
            cmd = sub
    return any("--verbose" in getattr(p, "opts", ()) for p in cmd.params)


class Terminated(BaseException):
    """SIGTERM, raised where the process stands (see run_click)."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


def raises_on_sigterm(handler: Any) -> bool:
    """Whether ``handler`` is the one raise_on_sigterm installs."""
    return handler is _terminate


def raise_on_sigterm() -> Any:
    """SIGTERM unwinds like Ctrl-C (finally blocks run: a sweep's worker pool is terminated, an
    output file is never left half-written) instead of killing the process where it stands.
    Returns the previous handler (None off the main thread, where signals are left alone); a
    library that installs its own (Ray's init) is followed by a second call."""
    import signal

    try:
        return signal.signal(signal.SIGTERM, _terminate)
    except ValueError:
        return None


def run_click(group: click.Group, prog_name: str, argv: list[str] | None = None) -> None:
    """Run a click group so that no traceback reaches a user (see the module docstring).

    ``--verbose`` is taken out of the arguments here (any position), so commands need not
    declare it; a command that declares its own ``--verbose`` still receives it."""
    args = list(sys.argv[1:] if argv is None else argv)
    if _declares_verbose(group, args):  # its own --verbose means something else (executor run: Ray's messages)
        verbose = _verbose([])
    else:
        verbose = _verbose(args)
        args = [a for a in args if a != "--verbose"]
    completing = f"_{prog_name.upper().replace('-', '_')}_COMPLETE" in os.environ  # click's shell completion
    if not args and not completing:
        with click.Context(group, info_name=prog_name, **group.context_settings) as ctx:
            click.echo(ctx.get_help())
        sys.exit(0)
    import signal

    if sys.stdout is None or _closed(sys.stdout):  # `>&-`: the result would be lost (or a file opened as fd 1)
        click.echo("error: stdout: is closed; the result has nowhere to go (redirect it to a file or /dev/null)",
                   err=True)
        sys.exit(2)
    import perfmodel

    if signal.getsignal(signal.SIGINT) is perfmodel.early_interrupt:  # from here on Ctrl-C says "aborted"
        signal.signal(signal.SIGINT, signal.default_int_handler)
    previous = raise_on_sigterm()
    try:
        _run(group, prog_name, args, verbose)
    finally:  # in-process callers (tests) get their handler back
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _closed(stream: Any) -> bool:
    try:
        os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return not hasattr(stream, "getvalue")  # an in-memory stream (a test's capture) is open
    return False


def _stdout_done(code: int) -> None:
    """Flush the result before exit, so that a write that fails is said here, once: a closed
    pipe (`| head -1`) ends quietly with 141 as Unix tools do, a full disk (`> /dev/full`) in one
    line with exit 2, never as Python's 'Exception ignored' at exit."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()
        os._exit(141)
    except OSError as e:
        _stdout_to_devnull()
        click.echo(f"error: stdout: cannot write the result: {e.strerror or type(e).__name__}", err=True)
        sys.exit(2)
    sys.exit(code)


def _stdout_to_devnull() -> None:
    """What is left in stdout's buffer goes nowhere (the interpreter's flush at exit must not fail)."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _run(group: click.Group, prog_name: str, args: list[str], verbose: bool) -> None:
    try:
        rc = group.main(args=args, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Exit as e:
        _stdout_done(e.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("error: aborted", err=True)
        sys.exit(130)
    except SystemExit as e:
        if type(sys.stdout).__name__ == "_PacifyFlushWrapper":  # click's own EPIPE handler ran (exit 1)
            _stdout_to_devnull()
            sys.exit(141)
        if e.code is not None and not isinstance(e.code, int):
            raise
        _stdout_done(e.code or 0)
    except BrokenPipeError:
        # The reader went away (`perfmodel sweep --json | head`): stop quietly, as Unix tools do.
        _stdout_to_devnull()
        sys.exit(141)
    except OSError as e:
        if e.filename is None:  # a write that names no file: stdout's (> /dev/full), or an output's
            _stdout_to_devnull()  # what stdout still buffers must not fail again at exit
        line, code = error_line(e)
        if verbose:
            traceback.print_exc()
        click.echo(line if e.filename is not None else f"error: output: cannot write the result: {e.strerror or e}",
                   err=True)
        sys.exit(code)
    except BaseException as e:  # noqa: BLE001 - the one place every failure becomes one line
        cause: BaseException | None = e  # Terminated itself, or wrapped by C code (Ray's wait)
        while cause is not None and not isinstance(cause, Terminated):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            click.echo("error: terminated", err=True)
            sys.exit(143)
        if type(e).__name__ == "NoArgsIsHelpError" and getattr(e, "ctx", None) is not None:
            click.echo(e.ctx.get_help())  # a bare subgroup: its help, like bare `perfmodel`
            sys.exit(0)
        line, code = error_line(e)
        if verbose:
            traceback.print_exc()
        click.echo(line, err=True)
        sys.exit(code)
    _stdout_done(rc if isinstance(rc, int) else 0)


class Choice(click.Choice):
    """``click.Choice`` that suggests the nearest allowed value for a near miss
    (``--mode stream``: did you mean 'streamer'?)."""

    def fail(self, message: str, param: Any = None, ctx: Any = None):  # type: ignore[override]
        from perfmodel.schema.errors import did_you_mean

        value = getattr(self, "_value", None)
        if value is not None:
            tail = did_you_mean(value, [str(c) for c in self.choices])
            message = message.rstrip(".") + tail if tail else message
        super().fail(message, param, ctx)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        self._value = value
        return super().convert(value, param, ctx)


def fmt_number(v: float | None, spec: str = ".2f", suffix: str = "") -> str:
    """A number in a table or summary line: ``format(v, spec) + suffix``, or ``-`` when missing."""
    return "-" if v is None else format(v, spec) + suffix


def fmt_range(low: float, high: float, sep: str = "..", thousands: bool = False) -> str:
    """An interval in a table, with the decimals that show two significant digits of its width
    (4.03..4.17 and 99.96..99.99, not 4..4 or 100..100), whole numbers for a width from 10 up."""
    width = high - low
    if width > 0 and math.isfinite(width):
        digits = min(6, max(0, 1 - math.floor(math.log10(width))))
    else:  # a point or a NaN: three significant digits of the larger end
        size = max(abs(low), abs(high)) if math.isfinite(low) and math.isfinite(high) else 0.0
        digits = 0 if size >= 100 else 1 if size >= 10 else 2
    spec = ("," if thousands else "") + f".{digits}f"
    return f"{low:{spec}}{sep}{high:{spec}}"


def version_option() -> Callable:
    """``--version``: the installed vlaperf version."""
    return click.version_option(package_name="vlaperf", message="%(prog)s (vlaperf) %(version)s")


def shows_progress(no_progress: bool, stream: Any = None) -> bool:
    """Whether progress (a bar or lines) goes to ``stream`` (default stderr): not with
    ``--no-progress``, and never into a log or a pipe, only to a terminal."""
    return not no_progress and (stream or sys.stderr).isatty()


def progress_bar(total: int, desc: str, unit: str, no_progress: bool) -> Any:
    """A tqdm bar on stderr, or ``None`` when progress is not shown (``shows_progress``): one
    switch name, ``--no-progress``, in every vlaperf CLI."""
    if not shows_progress(no_progress):
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)


# ``--quiet`` stays accepted as the old spelling; the parameter is named ``quiet``.
no_progress_option = click.option(
    "--no-progress", "--quiet", "quiet", is_flag=True,
    help="no progress bar (bars are also off when stderr is not a terminal)")


def check_writable(option: str, path: str | None) -> None:
    """Refuse an output path that cannot be written, before any work (every vlaperf CLI checks its
    outputs this way): create its directory and a scratch file there (then remove it)."""
    import tempfile
    from pathlib import Path

    from perfmodel.schema.jsonio import output_target

    if path is None:
        return
    if Path(path).is_dir():
        raise ConfigError(option, f"must be a file path, {path} is a directory")
    p, through = output_target(path, option)  # a NUL, a device, a pipe, a read-only file: refused; a symlink: followed
    if through:
        return
    parent = p.parent if str(p.parent) else Path(".")
    blocking = next((a for a in (parent, *parent.parents) if a.exists()), None)
    if blocking is not None and not blocking.is_dir():  # mkdir would say only "File exists"
        raise ConfigError(option, f"must be a writable path; cannot write {path}: {blocking} is a file, not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=parent, prefix=f".{p.name}.", suffix=".probe"):
            pass
    except OSError as e:
        raise ConfigError(option, f"must be a writable path; cannot write {path}: {e.strerror or type(e).__name__}") from None


def check_name(option: str, name: str) -> None:
    """A name that becomes a file name and is printed (a profile's): not empty, no '/', not
    hidden, no control character (a newline or carriage return would forge a printed line)."""
    if not name or "/" in name or name.startswith(".") or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        raise ConfigError(option, f"must be a file name without '/' or control characters (the profile's name), "
                                  f"got {name!r}")


def _same_path(a: str, b: str) -> bool:
    """Whether two paths name one file: the same inode when both exist (hard links too),
    else the same resolved path (symlinks followed, ``..`` removed)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def _within(path: str, directory: str) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(directory)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


PathOptions = dict[str, "str | None | tuple[str | None, ...] | list[str | None]"]


def _flat(options: PathOptions) -> list[tuple[str, str]]:
    out = []
    for option, paths in options.items():
        for p in (paths if isinstance(paths, (list, tuple)) else (paths,)):
            if p is not None and str(p).strip():
                out.append((option, str(p)))
    return out


def check_outputs_apart(inputs: PathOptions, outputs: PathOptions, output_dirs: PathOptions | None = None) -> None:
    """No output of a command may be one of its inputs (every vlaperf command that reads and
    writes files calls this before any work): writing it would destroy the input the output is
    made from. Paths are compared resolved, symlinks and hard links included; two outputs must
    differ too (the second would replace the first). ``output_dirs``: directories a command
    fills (or replaces), which must not hold an input."""
    ins, outs = _flat(inputs), _flat(outputs)
    for out_option, out in outs:
        for in_option, src in ins:
            if _same_path(out, src):
                raise ConfigError(out_option, f"must not be an input of this command: {out} is {in_option} {src}; "
                                              "write elsewhere")
    for i, (a_option, a) in enumerate(outs):
        for b_option, b in outs[i + 1:]:
            if _same_path(a, b):
                raise ConfigError(b_option, f"must differ from {a_option} ({a}): one would replace the other")
    for dir_option, d in _flat(output_dirs or {}):
        for in_option, src in ins:
            if _within(src, d):
                raise ConfigError(dir_option, f"must not hold an input of this command: {in_option} {src} is in {d}; "
                                              "write elsewhere")
