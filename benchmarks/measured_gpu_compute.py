"""Does the measured GPU compute of inference predict better than a fitted MFU?

The bundled calibration reads each backbone's inference time per sample as FLOPs / (peak x
``infer_mfu``), one MFU fitted per backbone. The stand-ins measured on an H200
(``profiles/<backbone>_full_gpu.json``) give the architecture's GPU seconds per sample instead,
and the fitted times are far above them, for GR00T as much as for pi0.5 though GR00T has 4x fewer
FLOPs. Two readings, each judged as the model is (cross-validated, ``group_out`` and ``scale``),
both fitted from the same start:

- ``mfu`` (the bundled one): per-backbone ``infer_mfu``;
- ``measured``: measured GPU seconds per sample + ``infer_host_sample_s``, one host cost per
  sample shared by both backbones (one parameter fewer): the rest is host work;
- ``slowed``: measured GPU seconds per sample x ``infer_gpu_slowdown``, one factor shared by both
  backbones (one parameter fewer): the rest is GPU work of a slower implementation.

Prints one line per reading with the fitted values. About 2 minutes on 2 cores.

Measured 2026-12-04 (120 evaluations per fold): mfu fit 0.62 %, group_out 1.12 %, scale 4.24 %;
measured fit 0.76 %, group_out 1.48 %, scale 3.25 % (host 46.8 ms per sample); slowed fit 1.04 %,
group_out 2.52 %, scale 4.62 % (factor 1.13).

    python benchmarks/measured_gpu_compute.py [--max-evals 120]
"""

from __future__ import annotations

import argparse
import statistics

import perfmodel.calibration.calibrate as calibrate
from perfmodel.calibration.crossval import alternative, judge
from perfmodel.calibration.measured import gpu_seconds_per_sample
from perfmodel.calibration.reference import load_reference
from perfmodel.schema.profile import BUNDLED_REFERENCE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-evals", type=int, default=120, help="fit evaluations per fold (default 120)")
    args = ap.parse_args()
    points = load_reference(BUNDLED_REFERENCE)
    for b in ("pi05", "gr00t_n15"):
        print(f"measured GPU compute per sample, {b}: inference {1e3 * gpu_seconds_per_sample(b, 'infer_s'):.2f} ms, "
              f"training {1e3 * gpu_seconds_per_sample(b, 'train_micro_batch_s'):.2f} ms (H200 carried to H100)")
    for name, params in (("mfu", calibrate.PARAMS), ("measured", calibrate.PARAMS_MEASURED_INFER),
                         ("slowed", calibrate.PARAMS_SLOWED_INFER)):
        with alternative(PARAMS=params):
            fit, g, s = judge(points, fit_evals=args.max_evals, max_evals=args.max_evals)
        per_b = " ".join(f"{b} {v['model_mape_pct']:.2f}" for b, v in sorted(g["per_backbone"].items()))
        vals = {k: round(v, 4) for k, v in fit.values.items() if "infer" in k}
        vals["on_bound"] = fit.on_bound
        med = statistics.median(abs(e) for e in fit.errors_pct)
        print(f"{name:<9} fit median |err| {med:.2f} %  group_out {g['model_mape_pct']:.2f} % "
              f"({per_b})  scale {s['model_mape_pct']:.2f} %  {vals}", flush=True)


if __name__ == "__main__":
    main()
