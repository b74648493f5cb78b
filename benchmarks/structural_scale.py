"""What the model expects from 8 to 256 GPUs, per structural member (docs/metrics.md "Between 32
and 256 GPUs"): for each backbone, rollout_async 1:1 (or --mode), at the published workload
(global batch 1024 at every size) and with --scale-global-batch, the point prediction, its 90 %
interval (the envelope of the members), the bottleneck, per-GPU throughput and each structural
member's throughput. Writes the rows as JSON with --json FILE.

    python benchmarks/structural_scale.py [--mode rollout_async] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

from perfmodel.calibration.reference import published_plan
from perfmodel.schema.profile import load_profile
from perfmodel.prediction import predict

GPUS = (8, 16, 24, 32, 64, 128, 256)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="rollout_async")
    ap.add_argument("--gpus", default=",".join(map(str, GPUS)))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for backbone in ("pi05", "gr00t_n15"):
        prof = load_profile(backbone)
        for scaled in (False, True):
            for g in map(int, args.gpus.split(",")):
                plan = published_plan(prof, args.mode, g, None if args.mode == "colocated" else "1:1", max_staleness=1)
                if scaled:
                    plan = plan.with_whole_global_batch()
                t0 = time.time()
                p = predict(plan, prof)
                dt = time.time() - t0
                iv = p["throughput_interval"] or {}
                s = iv.get("structural") or {}
                row = {"backbone": backbone, "gpus": g, "scale_global_batch": scaled,
                       "global_batch_size": plan.workload.global_batch_size,
                       "throughput": p["throughput_env_steps_per_s"], "per_gpu": p["throughput_env_steps_per_s"] / g,
                       "low": iv.get("low"), "high": iv.get("high"), "width_pct": iv.get("width_pct"),
                       "components_pct": iv.get("components_pct"), "bottleneck": p["bottleneck"],
                       "members": {f"{m['mechanism']}:{m['end']}": m["throughput"] for m in s.get("members", [])},
                       "drives_width": s.get("drives_width"),
                       # the world that moves each end most (perfmodel.calibration.worlds)
                       "ends": {k: e["name"] for k, e in (iv.get("ends") or {}).items()}, "seconds": dt}
                rows.append(row)
                mem = " ".join(f"{k} {v:.0f}" for k, v in row["members"].items())
                print(f"{backbone:<9} {g:>4} {'scaled' if scaled else 'fixed ':<6} gb {row['global_batch_size']:>5} "
                      f"{row['throughput']:9.1f} ({row['low']:.0f}..{row['high']:.0f}, {row['width_pct']:.1f} %) "
                      f"{row['per_gpu']:6.1f}/GPU {row['bottleneck']:<9} | {mem} | {dt:.2f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
