"""The test suite's wall time on this machine, recorded where docs/guide.md reads it.

    python benchmarks/suite_time.py --kind warm -- python -m pytest
    python benchmarks/suite_time.py --kind "fresh clone" --cwd /tmp/clone -- bash -c '<README test command>'

Runs the command (its output goes to the terminal as usual and is scanned for pytest's summary
line), times it, and replaces the entry of that kind in benchmarks/results/suite_time.json
(atomically): wall seconds, pytest's own seconds and counts, the load average before and after,
the CPU count, the date and the command. A run whose command fails is not recorded. The guide's
sentence (``guide_sentence``) is made from the file; tests/test_docs_examples.py checks the guide
says it."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "suite_time.json"
SUMMARY = re.compile(r"=+ (?P<counts>.*?) in (?P<seconds>[0-9.]+)s")
TARGET_S = 600.0  # the guide's target: the whole suite under 10 minutes on the 2-core machine


def parse_summary(output: str) -> dict[str, object] | None:
    """pytest's last summary line -> {"pytest_s": ..., "passed": n, "skipped": n, ...}."""
    found = None
    for line in output.splitlines():
        m = SUMMARY.search(line)
        if m and ("passed" in m["counts"] or "failed" in m["counts"]):
            found = m
    if found is None:
        return None
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|warnings?)",
                                               found["counts"])}
    return {"pytest_s": float(found["seconds"]), **counts}


def guide_sentence(doc: dict) -> str:
    """What docs/guide.md says about the suite's time, from the stored runs."""
    runs = {r["kind"]: r for r in doc["runs"]}
    parts = []
    for kind, what in (("warm", "alone on a warm venv"), ("fresh clone", "a fresh clone's first run in a fresh venv")):
        r = runs.get(kind)
        if r:
            parts.append(f"{r['pytest_s']:.1f} s {what} ({r['date'][:10]}: {r['passed']} passed, load average "
                         f"{r['loadavg_1min_before']:.2f} before)")
    return "The suite took " + "; ".join(parts) + f" on {doc['cpu_count']} CPU cores and {doc['workers']} workers."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", required=True, choices=("warm", "fresh clone"))
    ap.add_argument("--cwd", default=str(ROOT))
    ap.add_argument("--workers", type=int, default=3, help="pytest-xdist workers the command runs (pyproject addopts)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        print("error: command: give the command after --", file=sys.stderr)
        return 2
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=a.cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    for line in proc.stdout:
        sys.stdout.write(line)
        out.append(line)
    rc = proc.wait()
    wall = time.monotonic() - t0
    summary = parse_summary("".join(out))
    if rc != 0 or summary is None:
        print(f"error: command: exit {rc}, {'no pytest summary' if summary is None else 'failed'}: not recorded",
              file=sys.stderr)
        return 1
    from perfmodel.schema.jsonio import write_json_atomic

    doc = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {"runs": []}
    doc.update(cpu_count=os.cpu_count(), workers=a.workers, target_s=TARGET_S)
    entry = {"kind": a.kind, "wall_s": round(wall, 1), **summary, "loadavg_1min_before": round(load0, 2),
             "loadavg_1min_after": round(os.getloadavg()[0], 2), "command": " ".join(cmd),
             "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    doc["runs"] = [r for r in doc["runs"] if r["kind"] != a.kind] + [entry]
    write_json_atomic(RESULTS, doc)
    print(guide_sentence(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
