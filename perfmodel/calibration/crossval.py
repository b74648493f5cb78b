"""Honest calibration: fit on one GPU scale, predict the other, beside two naive baselines.

A model is only useful where it was not fitted. ``cross_validate`` refits the physical
parameters (``calibrate.fit``) on the published points of one GPU count (both backbones,
every mode) and predicts the points of each other GPU count, per point. Two baselines get
exactly the same question:

- ``linear``: the same mode and backbone at the nearest calibrated GPU count, times the GPU
  ratio (throughput x predict_gpus / fit_gpus): "it scales linearly".
- ``growth``: the same mode and backbone at the nearest calibrated GPU count, times that
  mode's published growth between the two GPU counts *for the other backbone*
  (T_other(mode, predict) / T_other(mode, fit)): "it grows like the other model did". It sees
  published numbers at the predicted scale (the other backbone's), which the model never does,
  so it is a demanding baseline; it exists only where a second backbone has both scales.

Error everywhere: prediction / measurement - 1 (in percent). MAPE = mean |error|.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable

import numpy as np

from perfmodel.calibration.reference import ReferencePoint

# Evaluations per fold: enough for the fit to converge from the hand-solved start on 10 points
# (two backbones x five modes), few enough that both folds run in a few minutes on 2 cores.
DEFAULT_FOLD_EVALS = 120


def _key(p: ReferencePoint) -> tuple[str, str, str | None]:
    return (p.mode, p.backbone, p.allocation_ratio)


def _nearest(scales: list[int], gpus: int) -> int:
    return min(scales, key=lambda s: (abs(np.log(gpus / s)), s))


def baselines(train: list[ReferencePoint], test: ReferencePoint,
              everything: list[ReferencePoint]) -> dict[str, dict[str, float] | None]:
    """The two naive predictions of ``test`` (see the module docstring); ``None`` where a
    baseline cannot be formed (no calibrated point of that mode, or no other backbone)."""
    by = {(p.mode, p.backbone, p.allocation_ratio, p.gpus): p.throughput_env_steps_per_s for p in everything}
    scales = sorted({p.gpus for p in train if _key(p) == _key(test)})
    out: dict[str, dict[str, float] | None] = {"linear": None, "growth": None}
    if not scales:
        return out
    s = _nearest(scales, test.gpus)
    base = by[(test.mode, test.backbone, test.allocation_ratio, s)]
    meas = test.throughput_env_steps_per_s

    def entry(pred: float) -> dict[str, float]:
        return {"predicted": pred, "error_pct": 100.0 * (pred / meas - 1.0)}

    out["linear"] = entry(base * test.gpus / s)
    growths = [by[(test.mode, b, test.allocation_ratio, test.gpus)] / by[(test.mode, b, test.allocation_ratio, s)]
               for b in sorted({p.backbone for p in everything}) if b != test.backbone
               and (test.mode, b, test.allocation_ratio, test.gpus) in by
               and (test.mode, b, test.allocation_ratio, s) in by]
    if growths:
        out["growth"] = entry(base * float(np.mean(growths)))
    return out


def _mape(errors: list[float]) -> float | None:
    return float(np.mean(np.abs(errors))) if errors else None


def summarise(points: list[dict[str, Any]]) -> dict[str, Any]:
    """MAPE of the model and of each baseline, overall, per backbone and per mode (over the
    points where every baseline exists, so the numbers compare like with like)."""
    names = sorted({k for p in points for k in p["baselines"]})
    usable = [p for p in points if all(p["baselines"].get(n) for n in names)]

    def block(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {"points": len(rows),
                "model_mape_pct": _mape([r["error_pct"] for r in rows]),
                "baseline_mape_pct": {n: _mape([r["baselines"][n]["error_pct"] for r in rows]) for n in names},
                "model_mean_error_pct": float(np.mean([r["error_pct"] for r in rows])) if rows else None}

    out = block(usable)
    for field, label in (("backbone", "per_backbone"), ("mode", "per_mode")):
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in usable:
            groups[r[field]].append(r)
        out[label] = {k: block(v) for k, v in sorted(groups.items())}
    out["beats_both_baselines_per_backbone"] = {
        b: all(v["model_mape_pct"] < m for m in v["baseline_mape_pct"].values() if m is not None)
        for b, v in out["per_backbone"].items()}
    return out


def cross_validate(points: list[ReferencePoint], *, max_evals: int = DEFAULT_FOLD_EVALS,
                   progress: Callable[[str, int, float], None] | None = None,
                   fit_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Leave-one-GPU-scale-out: one fold per GPU count, fitted on it, predicting the others."""
    from perfmodel.calibration.calibrate import fit, predict_points, profiles_from_values

    scales = sorted({p.gpus for p in points})
    if len(scales) < 2:
        from perfmodel.schema.errors import ConfigError

        raise ConfigError("reference", f"cross-validation needs points at two GPU counts or more; got {scales}")
    folds = []
    all_rows: list[dict[str, Any]] = []
    for s in scales:
        train = [p for p in points if p.gpus == s]
        test = [p for p in points if p.gpus != s]
        cb = (lambda n, rms, s=s: progress(f"fit on {s} GPUs", n, rms)) if progress else None
        res = fit(train, max_evals=max_evals, progress=cb, **(fit_kwargs or {}))
        # Backbones absent from the training scale cannot be predicted; skip their points.
        test = [p for p in test if p.backbone in {q.backbone for q in train}]
        profiles = profiles_from_values(res.values, sorted({p.backbone for p in train}))
        predicted = predict_points(profiles, test)
        rows = []
        for pt, pred in zip(test, predicted):
            meas = pt.throughput_env_steps_per_s
            rows.append({"mode": pt.mode, "backbone": pt.backbone, "gpus": pt.gpus,
                         "allocation_ratio": pt.allocation_ratio, "published": meas, "predicted": pred,
                         "error_pct": 100.0 * (pred / meas - 1.0),
                         "baselines": baselines(train, pt, points)})
        all_rows += rows
        folds.append({"fit_gpus": [s], "predict_gpus": sorted({p.gpus for p in test}), "points": rows,
                      "fit": {"evaluations": res.evaluations, "seconds": round(res.seconds, 1),
                              "in_sample_mape_pct": _mape(res.errors_pct),
                              "values": res.values,
                              "on_bound": res.on_bound, "not_identified": res.not_identified},
                      "summary": summarise(rows)})
    return {"kind": "cross_validation", "max_evals_per_fold": max_evals,
            "error": "prediction / published - 1 (percent); MAPE = mean |error|",
            "baselines": {
                "linear": "same mode and backbone at the nearest calibrated GPU count x (GPU ratio)",
                "growth": "same mode and backbone at the nearest calibrated GPU count x the other backbone's "
                          "published growth of that mode between the two GPU counts",
            },
            "folds": folds, "summary": summarise(all_rows)}


def format_report(doc: dict[str, Any]) -> str:
    lines = []
    for f in doc["folds"]:
        lines.append(f"fit on {f['fit_gpus']} GPUs -> predict {f['predict_gpus']} GPUs "
                     f"(in-sample MAPE {f['fit']['in_sample_mape_pct']:.2f}%, {f['fit']['evaluations']} evaluations)")
        lines.append(f"  {'backbone':<10} {'mode':<14} {'gpus':>4} {'published':>10} {'model':>9} {'err':>7} "
                     f"{'linear':>7} {'growth':>7}")
        for r in f["points"]:
            bl = r["baselines"]

            def e(name: str) -> str:
                return f"{bl[name]['error_pct']:>+6.1f}%" if bl.get(name) else "      -"
            lines.append(f"  {r['backbone']:<10} {r['mode']:<14} {r['gpus']:>4} {r['published']:>10.2f} "
                         f"{r['predicted']:>9.2f} {r['error_pct']:>+6.1f}% {e('linear')} {e('growth')}")
        for kind in ("on_bound", "not_identified"):
            if f["fit"][kind]:
                lines.append(f"  {kind.replace('_', ' ')}: {', '.join(f['fit'][kind])}")
    s = doc["summary"]

    def row(label: str, b: dict[str, Any]) -> str:
        bl = "  ".join(f"{k} {v:.2f}%" for k, v in b["baseline_mape_pct"].items() if v is not None)
        return f"  {label:<22} model {b['model_mape_pct']:.2f}%  {bl}  (n={b['points']})"
    lines.append("cross-validated MAPE (both folds):")
    lines.append(row("all", s))
    for k, v in s["per_backbone"].items():
        lines.append(row(f"backbone {k}", v))
    for k, v in s["per_mode"].items():
        lines.append(row(f"mode {k}", v))
    beats = s["beats_both_baselines_per_backbone"]
    lines.append("beats both baselines: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in beats.items()))
    return "\n".join(lines)


def provenance_record(doc: dict[str, Any], backbone: str) -> dict[str, Any]:
    """What a fitted profile keeps of a cross-validation: its backbone's MAPE beside the
    baselines', per fold and overall (the per-point table is in the command's --json)."""
    def pick(summary: dict[str, Any]) -> dict[str, Any] | None:
        b = summary["per_backbone"].get(backbone)
        if b is None:
            return None
        return {"points": b["points"], "model_mape_pct": round(b["model_mape_pct"], 3),
                "baseline_mape_pct": {k: None if v is None else round(v, 3) for k, v in b["baseline_mape_pct"].items()}}
    return {"method": "perfmodel validate --cross-validate: refit on one GPU count, predict the other",
            "max_evals_per_fold": doc["max_evals_per_fold"], "baselines": doc["baselines"],
            "folds": [{"fit_gpus": f["fit_gpus"], "predict_gpus": f["predict_gpus"], **(pick(f["summary"]) or {})}
                      for f in doc["folds"]],
            "overall": pick(doc["summary"])}
