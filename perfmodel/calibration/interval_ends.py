"""An interval's ends and the plan a perturbed profile predicts: the small rules that the
parameter intervals (uncertainty) and the structural envelope (structural) share, apart from
both so that neither imports the other."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile


def plan_for(plan: Plan, old: Profile, new: Profile) -> Plan:
    """The plan on the perturbed profile: cluster fields that came from the profile's node (equal
    to it) follow the perturbation; fields the user set stay fixed."""
    changes = {}
    for k, v in new.node.items():
        if hasattr(plan.cluster, k) and k in old.node and old.node[k] != v and getattr(plan.cluster, k) == old.node[k]:
            changes[k] = v
    if not changes:
        return plan
    return plan.with_(cluster=replace(plan.cluster, **changes))


def with_ends(iv: dict[str, Any], centre: float, low: float, high: float) -> dict[str, Any]:
    """``iv`` (around ``centre``: a throughput or a ratio) with new ends, and what they imply
    recomputed: ``half_width_log``, ``width_pct`` where it has one, ``resolved`` where it has
    one (a ratio of a fitted profile: the interval excludes 1)."""
    out = {**iv, "low": low, "high": high, "half_width_log": half_log(low, high)}
    if "width_pct" in iv:
        out["width_pct"] = 100.0 * (high - low) / centre if centre > 0 else 0.0
    if iv.get("resolved") is not None:
        out["resolved"] = bool(low > 1.0 or high < 1.0)
    return out


def joined(iv: dict[str, Any], centre: float, other: float) -> tuple[float, float]:
    """(low, high) of ``iv`` (around ``centre``) joined with the same interval, its log offsets
    kept, around ``other``."""
    if centre <= 0:
        return min(iv["low"], other), max(iv["high"], other)
    return min(iv["low"], other * iv["low"] / centre), max(iv["high"], other * iv["high"] / centre)


def half_log(low: float, high: float) -> float:
    """An interval's mean log half-width (``half_width_log``)."""
    return 0.5 * math.log(high / low) if low > 0 and high > 0 else 0.0
