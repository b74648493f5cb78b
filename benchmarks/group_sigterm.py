"""A SIGTERM to the whole process group of ``executor run`` (what ``timeout``, Slurm and a terminal
send), N times in a row during ray.init, at start-up (Ray up, actors starting) and mid-run (an
iteration done): how long the driver takes to exit after the signal, whether it wrote its partial
record, which of the processes it started (listed while it ran, tests/run_processes.py) are alive
10 s after it exited, and whether its Ray session directory is left. The tiny disaggregated plan
with the quick envs of the fault tests (tests/test_executor_faults.py, which checks one run of
each). Prints one row per run and the 1-minute load average beside each (the stop time is noisy on
a shared machine).

    python benchmarks/group_sigterm.py                 # 5 runs at each moment
    python benchmarks/group_sigterm.py --moments ray-init --json benchmarks/results/group_sigterm_ray_init.json
    python benchmarks/group_sigterm.py --moments start-up,mid-run --json benchmarks/results/group_sigterm.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from run_processes import LEFT_BEHIND_AFTER_S, RunProcesses, finish  # noqa: E402

from tests.test_executor_faults import (  # noqa: E402
    LONG_RUN, start_run, wait_for_first_iteration, wait_for_ray_init, wait_for_ray_session)


def one(moment: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="group_sigterm_") as d:
        tmp = Path(d)
        out = tmp / "run"
        proc = start_run(tmp, out, iterations=LONG_RUN, own_group=True)
        procs = RunProcesses(proc.pid)
        if moment == "ray-init":  # Ray's session directory exists, ray.init has not returned
            session = wait_for_ray_init(proc)
        else:
            session = wait_for_ray_session(proc, tmp, "run")
        if moment == "mid-run":
            wait_for_first_iteration(proc, tmp, "run")
        load = os.getloadavg()[0]
        t0 = time.time()
        os.killpg(proc.pid, signal.SIGTERM)
        _, err, exited_at = finish(proc, 120, kill_group=True)
        left = procs.left_behind(exited_at)
        record = json.loads((out / "record.json").read_text()) if (out / "record.json").exists() else {}
        return {"moment": moment, "exit_code": proc.returncode, "exit_after_signal_s": exited_at - t0,
                "record_status": record.get("status"), "stop_s": (record.get("wall_clock") or {}).get("stop_s"),
                "iterations": (record.get("counts") or {}).get("iterations"), "processes_seen": len(procs.seen),
                f"left_after_{LEFT_BEHIND_AFTER_S:g}s": left, "session_dir_left": Path(session).exists(),
                "loadavg_1min": load,
                "stderr_last": (err.strip().splitlines() or [""])[-1][:200]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--moments", default="ray-init,start-up,mid-run",
                    help="when to send the signal: ray-init (Ray's session directory made, ray.init not "
                         "returned), start-up (Ray up, the actors starting), mid-run (an iteration done)")
    a = ap.parse_args()
    rows = []
    print(f"{'moment':9} {'exit':>4} {'exit s':>7} {'stop_s':>7} {'record':12} {'procs':>5} {'left':>4} {'load':>5}")
    for moment in a.moments.split(","):
        for _ in range(a.runs):
            r = one(moment)
            rows.append(r)
            left = r[f"left_after_{LEFT_BEHIND_AFTER_S:g}s"]
            print(f"{moment:9} {r['exit_code']:>4} {r['exit_after_signal_s']:7.2f} "
                  f"{r['stop_s'] if r['stop_s'] is None else round(r['stop_s'], 2)!s:>7} {r['record_status']!s:12} "
                  f"{r['processes_seen']:>5} {len(left):>4} {r['loadavg_1min']:5.2f}", flush=True)
    worst = max(r["exit_after_signal_s"] for r in rows)
    ok = all(r["exit_code"] == 130 and r["record_status"] == "interrupted" for r in rows)
    clean = all(not r[f"left_after_{LEFT_BEHIND_AFTER_S:g}s"] and not r["session_dir_left"] for r in rows)
    print(f"{len(rows)} runs: every one exit 130 with a record: {ok}; slowest exit {worst:.2f} s after the "
          f"signal; no process {LEFT_BEHIND_AFTER_S:g} s after, no session directory: {clean}")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"runs": rows, "argv": sys.argv[1:]}, indent=1) + "\n")


if __name__ == "__main__":
    main()
