"""Predicted vs published: per-point error, MAPE, best-mode agreement, Spearman rank correlation."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.metrics import error_pct
from perfmodel.schema.profile import Profile
from perfmodel.calibration.reference import ReferencePoint, published_plan
from perfmodel.simulate import simulated_throughput


def _best(rows: list[dict[str, Any]], key: str) -> list[str]:
    """The best mode(s): ties (equal throughput to 1e-9) are all listed, since the model, like
    the published table, can give two modes the same throughput (streamer and rollout_async tie
    when the rollout bounds both)."""
    top = max(r[key] for r in rows)
    return [r["mode"] for r in rows if r[key] >= top * (1 - 1e-9)]


def agreement_of(published_best: list[str], predicted_best: list[str]) -> str:
    """'agree': the model names the published best (one mode of a published tie, or the same
    tied set); 'tie': the model predicts a tie that includes the published best but more modes
    besides, so it does not name it (counted apart, never as agreeing); 'mismatch' otherwise."""
    pub, pred = set(published_best), set(predicted_best)
    if pred == pub or (len(pred) == 1 and pred <= pub):
        return "agree"
    return "tie" if pred & pub else "mismatch"


def validate(points: list[ReferencePoint], profiles: dict[str, Profile]) -> dict[str, Any]:
    rows = []
    for pt in points:
        prof = profiles[pt.backbone]
        try:
            plan = published_plan(prof, pt.mode, pt.gpus, pt.allocation_ratio)
            pred = simulated_throughput(plan, prof)
        except ConfigError as e:  # name the reference point, not only the plan field
            raise ConfigError(f"reference ({pt.backbone} {pt.mode} {pt.gpus} GPUs {pt.allocation_ratio or ''})".replace(" )", ")"),
                              f"{e.field}: {e.message}") from None
        rows.append({
            "mode": pt.mode,
            "backbone": pt.backbone,
            "gpus": pt.gpus,
            "allocation_ratio": pt.allocation_ratio,
            "published": pt.throughput_env_steps_per_s,
            "predicted": pred,
            "error_pct": error_pct(pred, pt.throughput_env_steps_per_s),
        })
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["backbone"], r["gpus"])].append(r)
    agreement = []
    for (backbone, gpus), rs in sorted(groups.items()):
        best_pub = _best(rs, "published")
        best_pred = _best(rs, "predicted")
        outcome = agreement_of(best_pub, best_pred)
        agreement.append({"backbone": backbone, "gpus": gpus, "published_best": best_pub,
                          "predicted_best": best_pred, "match": outcome == "agree", "outcome": outcome})
    abs_err = [abs(r["error_pct"]) for r in rows]
    spearman = None
    if len(rows) >= 2:
        from scipy.stats import spearmanr

        spearman = float(spearmanr([r["published"] for r in rows], [r["predicted"] for r in rows]).statistic)
        if spearman != spearman:  # NaN: a constant column has no rank order; JSON has no NaN
            spearman = None
    return {
        "points": rows,
        "mape_pct": float(np.mean(abs_err)),
        "median_abs_error_pct": float(np.median(abs_err)),
        "max_abs_error_pct": float(max(abs_err)),
        # a predicted tie that includes the published best is counted apart, not as a match
        "best_mode_agreement": {"matches": sum(a["match"] for a in agreement),
                                "predicted_ties": sum(a["outcome"] == "tie" for a in agreement),
                                "groups": len(agreement), "per_group": agreement},
        "spearman": spearman,
    }
