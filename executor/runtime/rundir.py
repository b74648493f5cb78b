"""The run directory of ``executor run``: chosen and checked before any work starts, written
atomically at the end, never over something a user had.

- ``--out PATH`` that exists and is not an empty directory is refused (``ConfigError``, exit 2)
  unless ``overwrite``; a file at PATH is never replaced, even with ``overwrite``.
- The default (``runs/<mode>_<UTC time>_<pid>``) gets a numeric suffix when taken, so two runs
  started in the same second never share a directory.
- ``reserve`` creates the hidden temporary directory beside PATH at once: an unwritable PATH
  (``/proc/x``, a read-only folder) is refused before Ray starts. Its name carries the driver's
  pid; a later run removes the ones whose driver is gone (killed with -9).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.jsonio import dumps as strict_json

# The notes a running run keeps in its temporary directory, removed before it is renamed into
# place (the running run's, not the run's output):
RAY_SESSION_MARKER = ".ray_session"  # its local Ray session directory, for clean_stale after a kill -9
ITERATIONS_DONE_MARKER = ".iterations_done"  # how many iterations the actor has finished
MARKERS = (RAY_SESSION_MARKER, ITERATIONS_DONE_MARKER)


def tmp_prefix(name: str, pid: int | str) -> str:
    """The start of the hidden temporary directory's name of a run directory ``name`` whose
    driver is ``pid``, before mkdtemp's random suffix (``pid="*"``: a glob for any driver's)."""
    return f".{name}.run-{pid}-"


_TMP_RE = re.compile(r"^\.(?P<name>.+)\.run-(?P<pid>\d+)-[A-Za-z0-9_]+$")  # tmp_prefix's names, read back


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def clean_stale(parent: Path) -> list[Path]:
    """Remove hidden temporary run directories in ``parent`` whose driver process is dead (a
    previous run killed with -9). Returns what was removed."""
    removed = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for p in entries:
        m = _TMP_RE.match(p.name)
        if m and p.is_dir() and not _pid_alive(int(m["pid"])):
            marker = p / RAY_SESSION_MARKER
            try:  # the dead run's local Ray session directory, if it started one
                session = Path(marker.read_text().strip()) if marker.exists() else None
            except OSError:
                session = None
            if session is not None and session.name.startswith("session_") and session.parent.name == "ray":
                # what of that run is still alive: Ray's agents block SIGTERM and outlive their
                # raylet (re-parented to init), found by the session's files they hold open
                from executor.runtime.session import kill_all, session_pids

                kill_all(session_pids(str(session)))
                shutil.rmtree(session, ignore_errors=True)
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def default_out(mode: str, root: Path = Path("runs")) -> Path:
    """``runs/<mode>_<UTC second>_<pid>``, with ``-2``, ``-3``, ... when that is taken."""
    base = f"{mode}_{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}_{os.getpid()}"
    out, n = root / base, 1
    while out.exists() or out.is_symlink():
        n += 1
        out = root / f"{base}-{n}"
    return out


@dataclass
class RunDir:
    """A run directory reserved before the run: ``out`` is where it goes, ``tmp`` is where it
    is built (beside ``out``, same file system, so the final rename is atomic)."""

    out: Path
    tmp: Path
    overwrite: bool = False
    written: bool = False

    def note_ray_session(self, session_dir: str | None) -> None:
        """Remember this run's local Ray session so a later run can remove it if this driver
        is killed with -9 before it cleans up."""
        if session_dir:
            try:
                (self.tmp / RAY_SESSION_MARKER).write_text(session_dir + "\n")
            except OSError:
                pass

    def note_iteration(self, iteration: int) -> None:
        """Say in the run's temporary directory how many iterations the actor has finished
        (ITERATIONS_DONE_MARKER, replaced atomically): how far a running run is, from outside."""
        try:
            part = self.tmp / f"{ITERATIONS_DONE_MARKER}.part"
            part.write_text(f"{iteration + 1}\n")
            os.replace(part, self.tmp / ITERATIONS_DONE_MARKER)
        except OSError:
            pass

    def write(self, plan: Any, record: dict[str, Any], rec: Any, profile: Any) -> None:
        """plan.json, profile.json (if any), record.json, trace.json, tensorboard/ (RLinf's layout:
        config.yaml and the per-iteration timers); then rename into place."""
        t = self.tmp
        for marker in MARKERS:  # the running run's notes: not the run's output
            (t / marker).unlink(missing_ok=True)
        (t / "plan.json").write_text(strict_json(plan.to_dict()) + "\n")
        if profile is not None:
            (t / "profile.json").write_text(strict_json(profile.to_dict()) + "\n")
        (t / "record.json").write_text(strict_json(record, measured=True) + "\n")  # a NaN loss: null, not lost
        rec.write_trace(t / "trace.json", {"source": "executor", "plan": plan.to_dict(),
                                           "profile": record["profile"], "status": record["status"],
                                           "mode": plan.mode})
        # The per-iteration timers as RLinf logs them (tensorboard/: config.yaml + events), for
        # perfmodel calibrate --from-run.
        from executor.runtime import rlinf_log

        rlinf_log.write(t, plan, record.get("backbone"), list(getattr(rec, "spans", [])),
                        list(record.get("iteration_done_s") or []))
        os.chmod(t, 0o755)
        if self.out.is_dir() and not self.out.is_symlink():
            if any(self.out.iterdir()) and not self.overwrite:  # appeared during the run
                self.written = True  # keep the temporary directory: it holds the record
                raise ConfigError("out", f"{self.out} was filled by something else during the run; "
                                  f"the run directory is left in {t}")
            old = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.old-", dir=self.out.parent))
            os.rename(self.out, old / "x")
            os.rename(t, self.out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(t, self.out)
        self.written = True

    def discard(self) -> None:
        if not self.written:
            shutil.rmtree(self.tmp, ignore_errors=True)


def reserve(out: str | Path | None, mode: str, overwrite: bool = False) -> RunDir:
    """Check ``out`` (or choose the default) and create its temporary directory now, so every
    problem with the output path is a one-line refusal before any work starts."""
    path = Path(out) if out else default_out(mode)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise ConfigError("out", f"{path} exists and is not a directory; choose a new path "
                          "(executor run never replaces a file)")
    if path.is_dir():
        try:
            nonempty = any(path.iterdir())
        except OSError as e:
            raise ConfigError("out", f"{path} cannot be read ({e.strerror}); choose another path") from None
        if nonempty and not overwrite:
            raise ConfigError("out", f"{path} exists and is not empty; choose a new path, or pass "
                              "--overwrite to replace it")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        clean_stale(parent)
        tmp = Path(tempfile.mkdtemp(prefix=tmp_prefix(path.name, os.getpid()), dir=parent))
    except OSError as e:
        raise ConfigError("out", f"cannot write a run directory at {path} ({e.strerror or e}); "
                          "choose a writable path") from None
    return RunDir(path, tmp, overwrite)
