"""Which batch split did the published runs use where RLinf's whole-split assert fails?

The published workload (global batch 1024, micro-batch 128) is not a whole split over 16 actor
GPUs, which stock RLinf refuses (docs/metrics.md, "The split must be whole"); among the
calibration points that is the colocated 16-GPU runs. Two readings:

- ``kept`` (the model's): the global batch stays 1024, each rank takes 64 samples (micro-batch 64);
- ``whole``: the global batch was raised to a whole split (2048 there; ``--scale-global-batch``).

Each is judged as the model is: cross-validated (``group_out`` and ``scale`` designs), both fitted
from the same start. Prints one line per reading. Takes a few minutes on 2 cores.

    python benchmarks/batch_split_reading.py [--max-evals 120]

Measured 2026-12-04 (120 evaluations per fold): kept group_out 1.12 % (colocated 1.12 %), scale
4.24 %; whole group_out 2.16 % (colocated 5.34 %), scale 5.33 %.
"""

from __future__ import annotations

import argparse

import perfmodel.calibration.calibrate as calibrate
from perfmodel.calibration.crossval import alternative, cross_validate
from perfmodel.calibration.reference import load_reference
from perfmodel.schema.profile import BUNDLED_REFERENCE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-evals", type=int, default=120, help="fit evaluations per fold (default 120)")
    args = ap.parse_args()
    points = load_reference(BUNDLED_REFERENCE)
    kept = calibrate.reference_plan
    for name, plan_of in (("kept", kept), ("whole", lambda prof, pt: kept(prof, pt).with_whole_global_batch())):
        with alternative(reference_plan=plan_of):  # the plan of each published point, as calibration builds it
            doc = cross_validate(points, max_evals=args.max_evals, intervals=False)
        g, s = doc["group_out"]["summary"], doc["summary"]
        print(f"{name:<6} group_out {g['model_mape_pct']:.2f} % (colocated {g['per_mode']['colocated']['model_mape_pct']:.2f} %)"
              f"  scale {s['model_mape_pct']:.2f} %")


if __name__ == "__main__":
    main()
