"""What a test needs to check that a run leaves nothing behind: every process it started, listed
while it runs, and how to wait for the driver without leaving it running either."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

# After the driver exits, its processes must be gone within this (issue 43: nothing left behind)
LEFT_BEHIND_AFTER_S = 10.0


class RunProcesses:
    """Every process a run started: the driver's descendants, listed every 0.1 s while it runs
    (a killed raylet's children are re-parented to init, so they are listed before). Each is
    kept with its start time, so that a pid the system reuses later is not taken for it."""

    def __init__(self, driver: int) -> None:
        self.driver, self.seen = driver, {}
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from executor.runtime.session import process_tree

        while not self._halt.is_set():
            for pid in process_tree([self.driver]):
                if pid != self.driver and pid not in self.seen:
                    info = _proc_info(pid)
                    if info is not None:
                        self.seen[pid] = info
            self._halt.wait(0.1)

    def alive(self) -> list[str]:
        """The run's processes alive now, as 'pid command line'."""
        return [f"{pid} {cmd}" for pid, (start, cmd) in self.seen.items() if _proc_info(pid) == (start, cmd)]

    def left_behind(self, exited_at: float) -> list[str]:
        """Those still alive LEFT_BEHIND_AFTER_S after the driver exited (``exited_at``: time.time());
        any left are SIGKILLed (a test leaves nothing behind either)."""
        self._halt.set()
        self._thread.join()
        left = outlasting(self.alive, exited_at)
        kill_pids(int(entry.split()[0]) for entry in left)
        return left


def outlasting(alive: Callable[[], list], exited_at: float) -> list:
    """What ``alive()`` still lists LEFT_BEHIND_AFTER_S after ``exited_at`` (time.time() the driver
    exited), polled until then or until it lists nothing."""
    while alive() and time.time() < exited_at + LEFT_BEHIND_AFTER_S:
        time.sleep(0.2)
    return alive()


def kill_pids(pids: Iterable[int]) -> None:
    """SIGKILL each of ``pids`` (a test leaves nothing behind); one already gone is skipped."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _proc_info(pid: int) -> tuple[str, str] | None:
    """(start time, command line) of a live, non-zombie process; None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, IndexError):
        return None
    return None if stat[0] == "Z" else (stat[19], cmd[:160])


def finish(proc: subprocess.Popen, timeout: float, kill_group: bool = False) -> tuple[str, str, float]:
    """Wait for the driver (a bound on a hang), killing it and its group if it outlasts
    ``timeout``; (stdout, stderr, time.time() it exited)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            if kill_group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
            proc.communicate()
    return out, err, time.time()
