"""Do the structural members fitted on 8 and 16 GPUs reach the published 32-GPU points?

For each growth mechanism (``calibrate.GROWTH_PARAMS``) fitted on the 8- and 16-GPU points only,
at its fit and at its profile-likelihood upper end (``structural.growth_upper_end``, as the
bundled ensemble stores it), the predicted 32-GPU points' errors against the published ones: the
held-out four-node points judge each member of the ensemble that the one- and two-node points
admitted (issue 40). Writes JSON (``--out``); about 10 minutes on 2 quiet cores.

    python benchmarks/members_beyond.py --out benchmarks/results/members_beyond_32.json
"""

from __future__ import annotations

import argparse
import math

import perfmodel.calibration.calibrate as calibrate
from perfmodel.calibration.crossval import alternative
from perfmodel.calibration.reference import load_reference
from perfmodel.calibration.structural import growth_upper_end
from perfmodel.schema.jsonio import write_json_atomic
from perfmodel.schema.profile import BUNDLED_REFERENCE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", type=int, default=32)
    ap.add_argument("--fit-evals", type=int, default=140)
    args = ap.parse_args()
    points = load_reference(BUNDLED_REFERENCE)
    train = [p for p in points if p.gpus < args.target]
    test = [p for p in points if p.gpus == args.target]
    bundled = calibrate.PARAMS

    def errors(values: dict[str, float], params: tuple) -> dict[str, float]:
        with alternative(PARAMS=params):
            pred = calibrate.predict_points(calibrate.profiles_from_values(values, sorted({p.backbone for p in test})), test)
        return {f"{p.backbone}/{p.mode}": round(100 * (q / p.throughput_env_steps_per_s - 1), 2) for p, q in zip(test, pred)}

    base = calibrate.fit(train, max_evals=args.fit_evals)
    s = math.sqrt(sum(math.log(q / p.throughput_env_steps_per_s) ** 2 for q, p in zip(base.predicted, train))
                  / max(1, len(train) - len(base.values)))
    doc = {"fit_gpus": sorted({p.gpus for p in train}), "predict_gpus": args.target, "residual_sd_log": s,
           "none": {"fit": errors(base.values, bundled)}}
    for name, param in calibrate.GROWTH_PARAMS.items():
        params = bundled + (param,)
        with alternative(PARAMS=params):
            res = calibrate.fit(train, max_evals=args.fit_evals)
        up, _ = growth_upper_end(name, train, res.values, s, max_evals=60)
        doc[name] = {"value_fit": res.values[param.name], "value_upper": up[param.name],
                     "fit": errors(res.values, params), "upper": errors(up, params)}
        print(name, doc[name]["value_fit"], doc[name]["value_upper"], flush=True)
    write_json_atomic(args.out, doc)


if __name__ == "__main__":
    main()
