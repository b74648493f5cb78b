"""The fuzz campaign on demand (issue 33): thousands of generated inputs across every surface a
user hands input to, with the counts per surface, as issue 33's table gives them.

The surfaces and the classification are tests/fuzzing.py's (shared with tests/test_fuzz.py, the
bounded set CI runs): handled = answered (exit 0, strict JSON) or refused in one line (exit 2);
unhandled = a traceback, exit 1 'internal' (or any other code), more than one line, a hang
(the watchdog, --limit-s), NaN/Infinity in the output, an input file modified, invalid JSON.
Each unhandled input is printed with what it did; the exit code is 1 when there is any.

Run (it is CPU-bound; be nice on a shared machine):
    nice python benchmarks/fuzz.py                  # 2,000+ inputs, a fresh random campaign
    nice python benchmarks/fuzz.py --examples 50 --seed 1 --surface "plan JSON"
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]  # tests/fuzzing.py and what it imports

from fuzzing import HANDLED, SURFACES, UNHANDLED, Bases, campaign  # noqa: E402

# Inputs per surface by default: about 4,100 in all (paths has 42 distinct inputs, output paths
# 180); the report surfaces draw figures for an input that passes (about a second each), a run
# folder that passes is calibrated (about 0.5 s) and a process is a Python start-up, so they get
# fewer; an API call refused before any work costs milliseconds, so it gets more.
DEFAULT_EXAMPLES = 200
FEWER = {"options: report": 60, "choice file": 80, "record file": 80, "options: executor run": 100,
         "RLinf run folder": 400, "executor record": 250, "output paths": 300, "Python API": 1000, "process": 150}
# The stored campaign that docs/reliability.md quotes (tests/test_fuzz.py checks the two agree).
STORED = ROOT / "benchmarks" / "results" / "fuzz_campaign.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, help=f"inputs per surface (default {DEFAULT_EXAMPLES}; fewer for the "
                                                 "report and executor surfaces)")
    ap.add_argument("--seed", type=int, help="hypothesis seed (default: a fresh one, printed)")
    ap.add_argument("--surface", action="append", choices=sorted(SURFACES), help="only these surfaces (repeatable)")
    ap.add_argument("--limit-s", type=int, default=60, help="watchdog per command: past it, a hang")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/reliability.md)")
    ap.add_argument("--store", action="store_true", help=f"write the counts to {STORED.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    import random

    seed = args.seed if args.seed is not None else random.randrange(2**32)
    names = args.surface or list(SURFACES)
    tmp = Path(tempfile.mkdtemp(prefix="vlaperf_fuzz_"))
    counts: dict[str, collections.Counter] = {}
    bad: list[tuple[str, str, str]] = []
    t0 = time.monotonic()
    try:
        bases = Bases(tmp / "bases")
        for name in names:
            c = counts.setdefault(name, collections.Counter())

            def record(o, name=name, c=c):
                c[o.kind] += 1
                if o.kind not in HANDLED:
                    bad.append((name, o.kind, o.detail))

            n = args.examples or FEWER.get(name, DEFAULT_EXAMPLES)
            s0 = time.monotonic()
            campaign(name, bases, tmp / "work", n, record, seed=seed, limit_s=args.limit_s)
            print(f"{name}: {sum(c.values())} inputs in {time.monotonic() - s0:.0f} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(counts, markdown=args.markdown)
    total = sum(sum(c.values()) for c in counts.values())
    wall = time.monotonic() - t0
    print(f"\n{total} inputs, seed {seed}, {wall:.0f} s; unhandled: {len(bad)}")
    if args.store:
        import json
        import os

        STORED.write_text(json.dumps({
            "command": "nice python benchmarks/fuzz.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "seed": seed, "date": time.strftime("%Y-%m-%d", time.gmtime()), "wall_s": round(wall),
            "load_average_at_end": [round(x, 1) for x in os.getloadavg()], "limit_s": args.limit_s,
            "counts": {name: {k: c[k] for k in ("answered", "refused", *UNHANDLED)} for name, c in counts.items()},
            "unhandled": [{"surface": n, "kind": k, "detail": d} for n, k, d in bad]}, indent=1) + "\n")
    for name, kind, detail in bad:
        print(f"  {name}: {kind}: {detail}")
    return 1 if bad else 0


def print_table(counts: dict[str, collections.Counter], markdown: bool = False) -> None:
    print(table(counts, markdown))


def table(counts: dict[str, Any], markdown: bool = False) -> str:
    """The counts per surface as a table (Markdown: docs/reliability.md's)."""
    cols = ["inputs", "answered", "refused", "unhandled", *UNHANDLED]
    rows = []
    for name, c in counts.items():
        unhandled = sum(c[k] for k in UNHANDLED)
        rows.append([name, sum(c.values()), c["answered"], c["refused"], unhandled, *(c[k] for k in UNHANDLED)])
    rows.append(["all", *(sum(r[i] for r in rows) for i in range(1, len(cols) + 1))])
    if markdown:
        lines = ["| surface | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
        return "\n".join(lines + ["| " + " | ".join(str(x) for x in r) + " |" for r in rows])
    width = max(len(r[0]) for r in rows)
    lines = [f"{'surface':<{width}}  " + "  ".join(f"{c:>9}" if len(c) <= 9 else c for c in cols)]
    lines += [f"{r[0]:<{width}}  " + "  ".join(f"{x:>{max(9, len(c))}}" for x, c in zip(r[1:], cols)) for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
