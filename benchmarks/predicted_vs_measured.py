"""Predicted vs measured throughput for every mode on this machine.

Runs ``executor run PLAN --compare --json`` for each plan (one fresh process and local Ray
session per plan, so runs do not share warm state), then prints one row per plan: predicted and
measured env steps/s, error (prediction / measurement - 1, docs/metrics.md), iteration times,
per-stage measured vs predicted, the env processes' CPU share, their CPU seconds per reset and
step over the profile's (``env cost``), the two diagnoses (``diag1``: at that share; ``diag2``:
also at those env costs, docs/metrics.md), and the 1-minute load average
before and after the run (other tenants on the cores bias the measurement: read it with them).

    python benchmarks/predicted_vs_measured.py                        # the five pi05_4envs_* plans
    python benchmarks/predicted_vs_measured.py my_plans/              # every *.json in a directory
    python benchmarks/predicted_vs_measured.py a.json 'dir/*.json' --iterations 3 --json bench.json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from perfmodel.cliutil import fmt_number

ROOT = Path(__file__).resolve().parent.parent
MODES = ("colocated", "disaggregated", "train_async", "rollout_async", "streamer")


def run_one(plan: str, out: Path, iterations: int, warmup: int, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "executor.cli", "run", plan, "--out", str(out), "--iterations", str(iterations),
           "--warmup-iterations", str(warmup), "--compare", "--json", "--no-progress", *extra]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"plan": plan, "status": "failed", "error": (p.stderr.strip().splitlines() or ["?"])[-1],
                "wall_s": time.time() - t0}
    rec = json.loads(lines[-1])
    rec["plan_file"] = plan
    rec["wall_s"] = time.time() - t0
    return rec


def share(r: dict) -> str:
    """CPU seconds the env processes got / wall seconds x cores the plan gives them (reset, step):
    below 1, other processes on the machine took the env cores."""
    e = r.get("env_cpu") or {}
    vals = [(e.get(s) or {}).get("cpu_share") for s in ("env_reset", "env_step")]
    return "/".join(fmt_number(v) for v in vals)


def find_plans(specs: list[str]) -> list[str]:
    """Plan files from directories (their *.json), files and glob patterns, in mode order."""
    out: list[str] = []
    for spec in specs:
        p = Path(spec)
        out += sorted(str(x) for x in p.glob("*.json")) if p.is_dir() else sorted(glob.glob(spec))
    return sorted(dict.fromkeys(out), key=lambda p: (next((i for i, m in enumerate(MODES) if m in Path(p).stem), 9), p))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plans", nargs="*", help="plan directories, files or glob patterns "
                    "(default: examples/plans/pi05_4envs_*.json)")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--warmup-iterations", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench"))
    ap.add_argument("--json", default=None, help="write all records here")
    ap.add_argument("--extra", default="", help="more options for executor run, one string")
    a = ap.parse_args()
    specs = a.plans or [str(ROOT / "examples" / "plans" / "pi05_4envs_*.json")]
    plans = find_plans(specs)
    if not plans:
        print(f"error: plans: no plan file in {' '.join(specs)}", file=sys.stderr)
        return 2
    a.extra = a.extra.split()
    print(f"{len(plans)} plan(s), {os.cpu_count()} CPUs, 1-min load average now {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for plan in plans:
        name = Path(plan).stem
        rec = run_one(plan, Path(a.out) / name, a.iterations, a.warmup_iterations, a.extra)
        rec["loadavg_1min_after"] = os.getloadavg()[0]
        rec["name"] = name
        rows.append(rec)
        if rec.get("status") != "ok":
            print(f"{name}: failed: {rec.get('error')}", flush=True)
            continue
        print(f"{name}: predicted {rec['predicted_throughput_env_steps_per_s']:.3f}  measured "
              f"{rec['throughput_env_steps_per_s']:.3f} env steps/s  error {rec['error_pct']:+.1f} %  "
              f"(load {rec['host']['loadavg_1min_before']:.2f} -> {rec['loadavg_1min_after']:.2f}, "
              f"{rec['wall_s']:.0f} s)", flush=True)
    print()
    hdr = f"{'plan':<30} {'mode':<14} {'pred':>7} {'meas':>7} {'err %':>7} {'it pred':>8} {'it meas':>8} " \
          f"{'reset p/m':>11} {'step p/m':>11} {'drv ms p/m':>11} {'cpu share':>9} {'diag1 %':>7} " \
          f"{'env cost':>9} {'diag2 %':>7} {'probe s/r':>10} {'unscaled %':>10} {'load b/a':>10}"
    print("(reset, step: predicted/measured s per iteration per worker's cores; drv: the driver's own ms per "
          "chunk step; cpu share: reset/step; diag1: error of the prediction at that CPU share; env cost: CPU s "
          "per reset/step the envs used over the profile's; diag2: error at that share and those env costs, "
          "what the model's composition and non-env costs leave; diagnoses, not predictions; probe s/r: the host "
          "probe's env step/reset CPU s over the profile's, measured before the run and used by the prediction; "
          "unscaled: the error of the prediction from the profile as it is)")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        if r.get("status") != "ok":
            print(f"{Path(r['plan']).stem:<30} failed: {r.get('error')}")
            continue
        st = r["stages"]

        def pm(s):
            v = st.get(s)
            return f"{v['predicted_s']:.1f}/{v['measured_s']:.1f}" if v else "-"
        load = f"{r['host']['loadavg_1min_before']:.2f}/{r['loadavg_1min_after']:.2f}"
        drv = r.get("driver_chunk_step") or {}
        drv_s = (f"{1e3 * drv['predicted_s']:.0f}/{1e3 * drv['measured_s']:.0f}"
                 if drv.get("measured_s") is not None else "-")
        diag = (r.get("diagnosis_at_measured_cpu_share") or {}).get("error_pct")
        d2 = r.get("diagnosis_at_measured_env_costs") or {}
        ratio = "/".join(fmt_number(d2["env_cost_ratio"][s]) for s in ("env_reset", "env_step")) if d2 else "-"
        print(f"{r['name']:<30} {r['mode']:<14} {r['predicted_throughput_env_steps_per_s']:>7.3f} {r['throughput_env_steps_per_s']:>7.3f} "
              f"{r['error_pct']:>+7.1f} {r['predicted_iteration_time_s']:>8.2f} {r['iteration_time_s']:>8.2f} "
              f"{pm('env_reset'):>11} {pm('env_step'):>11} {drv_s:>11} {share(r):>9} "
              f"{'-' if diag is None else format(diag, '+.1f'):>7} {ratio:>9} "
              f"{format(d2['error_pct'], '+.1f') if d2 else '-':>7} {probe_ratio(r):>10} "
              f"{unscaled_error(r):>10} {load:>10}")
        for w in (r.get("prediction") or {}).get("warnings", []):
            print(f"{'':<30} warning: {w}")
    ok = [r for r in rows if r.get("status") == "ok"]
    if ok:
        worst = max(abs(r["error_pct"]) for r in ok)
        own = [abs(r["diagnosis_at_measured_env_costs"]["error_pct"]) for r in ok
               if r.get("diagnosis_at_measured_env_costs")]
        print(f"\nmax |error| {worst:.1f} % over {len(ok)} plan(s)"
              + (f", max |diag2| {max(own):.1f} %" if own else "")
              + "; target 10 % on a quiet machine; error = prediction / measurement - 1; load b/a: 1-min load "
              f"average before/after each run ({os.cpu_count()} CPUs)")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if len(ok) == len(rows) else 1


def probe_ratio(r: dict) -> str:
    p = r.get("host_probe")
    return f"{p['ratio']['env_step']:.2f}/{p['ratio']['env_reset']:.2f}" if p else "-"


def unscaled_error(r: dict) -> str:
    u = r.get("prediction_unscaled") or {}
    return format(u["error_pct"], "+.1f") if u.get("error_pct") is not None else "-"


if __name__ == "__main__":
    sys.exit(main())
