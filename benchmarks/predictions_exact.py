"""Every prediction a speed change must leave unchanged (issue 27), written once and compared.

Predicts every bundled profile x mode x 8/16/32/64/256 GPUs x ratio (1:1, 3:1, 1:3 where the
mode splits its GPUs), and pi0.5's modes at 8 and 32 GPUs with each of ``KNOBS`` and with
variable costs (3 replications), prediction interval included, and writes the JSON-ready dicts (or the
ConfigError of a plan that cannot run) to a file; ``--compare`` predicts again with the code as it
is now and compares every number to ``--rel`` (default 1e-12 relative), every other field exactly.

Run before a change: python benchmarks/predictions_exact.py --write /tmp/before.json
and after it:       python benchmarks/predictions_exact.py --compare /tmp/before.json
(about 3 minutes each on one idle core). Nothing here is a test: the tests pin single cases.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from typing import Any

from perfmodel.calibration.reference import published_plan
from perfmodel.prediction import predict
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.modes import MODE_TABLE, MODES
from perfmodel.schema.profile import Variability, bundled_profiles, load_profile

GPUS = (8, 16, 32, 64, 256)
RATIOS = ("1:1", "3:1", "1:3")
KNOBS = {"stages2": {"pipeline_stage_num": 2}, "b_max64": {"b_max": 64, "t_max_s": 0.02},
         "per_step": {"version_granularity": "optimizer_step"}, "staleness2": {"max_staleness": 2}}


def predictions() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in bundled_profiles():
        prof = load_profile(name)
        for mode in MODES:
            for gpus in GPUS:
                for ratio in RATIOS if MODE_TABLE[mode].disaggregated else (None,):
                    key = f"{name} {mode} {gpus} {ratio}"
                    try:
                        out[key] = predict(published_plan(prof, mode, gpus, ratio), prof)
                    except ConfigError as e:
                        out[key] = {"error": str(e)}
    # the knobs' paths (pipeline stages, dynamic batching, a version per optimizer step) and
    # variable costs (seeded draws, replications), on pi0.5
    prof = load_profile("pi05")
    varied = replace(prof, variability=Variability(env_step_cv=0.2, infer_cv=0.1, train_cv=0.2))
    for mode in MODES:
        for gpus in (8, 32):
            ratio = "1:1" if MODE_TABLE[mode].disaggregated else None
            for name, knobs in KNOBS.items():
                key = f"pi05 {mode} {gpus} {ratio} {name}"
                try:
                    out[key] = predict(published_plan(prof, mode, gpus, ratio, **knobs), prof)
                except ConfigError as e:
                    out[key] = {"error": str(e)}
            key = f"pi05+variability {mode} {gpus} {ratio}"
            out[key] = predict(published_plan(varied, mode, gpus, ratio), varied, replications=3, seed=1)
    return out


def differences(a: Any, b: Any, rel: float, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a.keys() ^ b.keys())}"]
        return [d for k in a for d in differences(a[k], b[k], rel, f"{path}/{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: lengths {len(a)} vs {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, rel, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        if math.isclose(a, b, rel_tol=rel, abs_tol=1e-300) or (math.isnan(a) and math.isnan(b)):
            return []
        return [f"{path}: {a!r} vs {b!r}"]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def main() -> int:
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", help="write the predictions to this file")
    g.add_argument("--compare", help="compare the predictions with those in this file")
    ap.add_argument("--rel", type=float, default=1e-12)
    args = ap.parse_args()
    now = predictions()
    if args.write:
        with open(args.write, "w") as f:
            json.dump(now, f)
        print(f"{len(now)} predictions written to {args.write}")
        return 0
    with open(args.compare) as f:
        before = json.load(f)
    now = json.loads(json.dumps(now))  # the same JSON round trip as the file's
    diffs = differences(before, now, args.rel)
    worst = 0.0
    for key in before.keys() & now.keys():
        for field in ("throughput_env_steps_per_s",):
            a, b = before[key].get(field), now[key].get(field)
            if isinstance(a, float) and isinstance(b, float) and a:
                worst = max(worst, abs(b - a) / abs(a))
    errors = sum(1 for v in now.values() if "error" in v)
    print(f"{len(now)} predictions ({errors} plans that cannot run) compared with {args.compare}: "
          f"{len(diffs)} differences beyond {args.rel:g} relative; largest throughput change {worst:.2e}")
    for d in diffs[:20]:
        print("  " + d)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
