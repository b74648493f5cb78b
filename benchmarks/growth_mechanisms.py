"""Which mechanism that grows with the cluster's workers or nodes do the published points admit?

Issue 28: inside the calibrated 8/16-GPU range the model cross-validates at about 1 %, but the
points cannot tell apart mechanisms whose cost differs only on more nodes. Each alternative
adds one physical parameter to the bundled fit (``calibrate.GROWTH_PARAMS``):

- ``channel``: RLinf's data channels are one process on node 0; every inference request of an
  env worker off node 0 makes two round trips to it, served one message at a time
  (``Costs.channel_hop_s``, ``StageCosts.channel_s``);
- ``sync_fanout``: actor rank 0 sends the weights to each generator in turn over host paths
  (``Costs.sync_per_generator_s``);
- ``ring``: a fixed time per ring step of each actor collective (``Costs.ring_step_s``);
- ``intake``: the actor's trajectories through the node-0 channel, one message after another
  for the ranks off node 0, once per global batch (``Costs.intake_per_sample_s``,
  ``StageCosts.intake_s``).

Each is fitted on every published point (what it would ship as) and judged by cross-validation,
both designs, at the same budget as the bundled model (``none``). Writes one JSON per
alternative (``--out DIR/<name>.json``: the full fit's values, in-sample error and both designs'
summaries) and prints one line each. About 2.5 minutes per alternative on 2 cores (intake, 2026-12-05, under load).

    python benchmarks/growth_mechanisms.py --out benchmarks/results/growth [--only channel ring]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import perfmodel.calibration.calibrate as calibrate
from perfmodel.calibration.crossval import DEFAULT_FOLD_EVALS, cross_validate
from perfmodel.calibration.reference import load_reference
from perfmodel.schema.jsonio import write_json_atomic
from perfmodel.schema.profile import BUNDLED_REFERENCE


# Readings of the published setup judged the same way (plan fields, no parameter): a weight
# version per optimizer step instead of per iteration (plan.version_granularity).
SETUPS = {"version_step": {"version_granularity": "optimizer_step"}}


def run(name: str, max_evals: int, fit_evals: int) -> dict:
    points = load_reference(BUNDLED_REFERENCE)
    bundled, setup = calibrate.PARAMS, dict(calibrate.SETUP_OVERRIDES)
    mech = None if name in ("none", *SETUPS) else name
    calibrate.PARAMS = calibrate.params_with(mech)
    calibrate.SETUP_OVERRIDES.update(SETUPS.get(name, {}))
    t0 = time.time()
    try:
        fit = calibrate.fit(points, max_evals=fit_evals)
        doc = cross_validate(points, max_evals=max_evals, intervals=False)
    finally:
        calibrate.PARAMS = bundled
        calibrate.SETUP_OVERRIDES.clear()
        calibrate.SETUP_OVERRIDES.update(setup)
    g, s = doc["group_out"]["summary"], doc["summary"]
    return {"mechanism": name, "values": fit.values, "on_bound": fit.on_bound, "not_identified": fit.not_identified,
            "fit_median_abs_error_pct": statistics.median(abs(e) for e in fit.errors_pct),
            "fit_errors_pct": fit.errors_pct, "fit_evals": fit_evals, "max_evals_per_fold": max_evals,
            "group_out": {"model_mape_pct": g["model_mape_pct"], "per_backbone": g["per_backbone"],
                          "per_mode": g.get("per_mode")},
            "scale": {"model_mape_pct": s["model_mape_pct"], "per_backbone": s["per_backbone"],
                      "per_mode": s.get("per_mode")},
            "extrapolate": {"model_mape_pct": doc["extrapolate"]["summary"]["model_mape_pct"],
                            "per_backbone": doc["extrapolate"]["summary"]["per_backbone"],
                            "folds": [{"label": f["label"], "model_mape_pct": f["summary"]["model_mape_pct"],
                                       "errors_pct": {f"{r['backbone']}/{r['mode']}": r["error_pct"] for r in f["points"]}}
                                      for f in doc["extrapolate"]["folds"]]},
            "fold_values": {"group_out": [f["fit"]["values"] for f in doc["group_out"]["folds"]],
                            "scale": [f["fit"]["values"] for f in doc["folds"]]},
            "seconds": time.time() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory for <mechanism>.json")
    ap.add_argument("--only", nargs="*", default=None, help="mechanisms to run (default: none and all)")
    ap.add_argument("--max-evals", type=int, default=DEFAULT_FOLD_EVALS, help="fit evaluations per fold")
    ap.add_argument("--fit-evals", type=int, default=calibrate.BUNDLED_FIT_EVALS, help="evaluations of the full fit")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.only or ("none", *calibrate.GROWTH_MECHANISMS):
        r = run(name, args.max_evals, args.fit_evals)
        write_json_atomic(out / f"{name}.json", r)
        per = lambda d: " ".join(f"{b} {v['model_mape_pct']:.2f}" for b, v in sorted(d["per_backbone"].items()))  # noqa: E731
        extra = {k: round(v, 5) for k, v in r["values"].items() if k in {p.name for p in calibrate.GROWTH_PARAMS.values()}}
        print(f"{name:<12} fit median {r['fit_median_abs_error_pct']:.2f} %  group_out {r['group_out']['model_mape_pct']:.2f} % "
              f"({per(r['group_out'])})  scale {r['scale']['model_mape_pct']:.2f} % ({per(r['scale'])})  "
              f"extrapolate {' '.join(f['label'] + ': ' + format(f['model_mape_pct'], '.2f') + ' %' for f in r['extrapolate']['folds'])}  {extra} "
              f"on_bound {r['on_bound']}  {r['seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
