"""Wall time of one prediction (simulation only) per mode at 8, 32, 256 and 1024 GPUs.

Target: <= 0.3 s at 32 GPUs; growth no worse than linear in GPUs (ratio time(N)/time(8) <= N/8).
Run: python benchmarks/sim_speed.py [--backbone pi05] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

from perfmodel.schema.modes import MODES
from perfmodel.schema.profile import load_profile
from perfmodel.calibration.reference import published_plan
from perfmodel.simulate import simulate

GPUS = (8, 32, 256, 1024)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backbone", default="pi05")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    prof = load_profile(args.backbone)
    print(f"{'mode':<14}" + "".join(f"{g:>10}" for g in GPUS) + "   growth 8->1024 (linear = 128x)")
    worst32 = 0.0
    for mode in MODES:
        times = []
        for g in GPUS:
            plan = published_plan(prof, mode, g, None if mode == "colocated" else "1:1")
            best = float("inf")
            for _ in range(args.repeats):
                t = time.perf_counter()
                simulate(plan, prof)
                best = min(best, time.perf_counter() - t)
            times.append(best)
        worst32 = max(worst32, times[1])
        print(f"{mode:<14}" + "".join(f"{t:>9.3f}s" for t in times) + f"   {times[-1] / times[0]:.1f}x")
    print(f"slowest at 32 GPUs: {worst32:.3f} s (target <= 0.3 s): {'ok' if worst32 <= 0.3 else 'MISSED'}")


if __name__ == "__main__":
    main()
