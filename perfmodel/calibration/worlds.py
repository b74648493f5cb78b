"""One interval mechanism: the envelope over alternative worlds (issue 40 item 3).

A *world* is one way the truth may differ from the fitted model, with the log change of the
plan's throughput it implies. Each source of doubt is a *generator* of worlds; the interval is
computed from the worlds by one function (``envelope``), whatever generated them:

- the fit's parameters at each end of a principal direction of their covariance (simulated, or by
  the analytic bound for the directions that move it least; ``uncertainty.direction_worlds``);
- a parameter no calibrated point moves, at each of its bounds (``uncertainty.unidentified_worlds``);
- the residual model error and the error per doubling beyond the calibrated GPU counts, each at
  its 90 % ends (statistical: nothing is simulated; ``uncertainty.spread_worlds``);
- another GPU type: the plan with only the measured GPU compute carried (``uncertainty.gpu_type_worlds``);
- each structural member the calibration admits (``structural.member_worlds``);
- an uncalibrated backbone's per-backbone parameters at each calibrated backbone's values
  (``uncalibrated.backbone_worlds``);
- the measured error of predicting another workload, per axis (``perfmodel.extrapolation.workload_widths``,
  ``uncertainty.workload_worlds``).

Worlds of one *group* are alternatives of one doubt (a direction's two ends, a parameter's two
bounds, the members of one ensemble): a group moves each end of the interval by its most extreme
world that way, none if every world moves the other way (the fit is a world of every group). How
groups combine is the world's *rule*, set by what kind of doubt it is:

- ``spread``: a statistical 90 % end (a direction's end, the model error, the extrapolation and
  workload errors): groups add in quadrature;
- ``bracket``: an alternative nothing in the data weighs (a parameter at a bound, another GPU
  type's other end, a structural member): groups add linearly, since nothing says they cancel;
- ``reach``: a joint end of parameters already bracketed one at a time (an uncalibrated
  backbone's corners): the interval reaches it, no more (adding it would count them twice);
- ``recorded``: kept in the record, moving nothing (a structural member that parts from the fit by
  less than the model error inside the calibrated counts: the fits' own scatter, which the model
  error already holds).

So low = point x exp(-sqrt(sum of spread groups' low ends squared) + sum of bracket groups' low
ends), then reached down to any ``reach`` world below it; high alike. Every world is recorded
(``throughput_interval.worlds``) with its throughput and log change, and ``ends`` names the world
that moves each end most (the one ``predict`` names).

The ratio of two plans' throughputs uses the same worlds, each simulated for both plans
(``paired``): its change in a world is the difference of the two plans' changes, so what moves
both alike cancels; the statistical ones say how they combine across two plans (``ratio``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile

RULES = ("spread", "bracket", "reach", "recorded")
# The kinds of doubt, in the order the method names them; each has its component in components_pct.
KINDS = ("parameters", "model", "extrapolation", "workload", "unidentified", "gpu_type", "structural", "backbone")
# The components every fitted profile's interval states, moved or not (a reader compares them).
FITTED_COMPONENTS = ("parameters", "model", "extrapolation")


@dataclass(frozen=True)
class World:
    """One alternative world and the plan's log-throughput change in it (``log_change``).

    ``group``: worlds of one group are alternatives of one doubt. ``rule``: how the group enters
    the interval (module docstring). ``throughput``: the plan's throughput in it where it was
    computed (``how``: "simulated", or "bound" for a direction screened by the analytic bound),
    None for a statistical world. ``ratio``: how the world combines across the two plans of a
    ratio: "difference" (simulated for both: the ratio moves by the difference), "independent"
    (the two plans' errors independent: in quadrature), or "pair" (``pair_change`` is the
    measured change of a ratio at one GPU count; across counts, independent). ``detail``:
    what the record keeps of its source (a member's mechanism and end, a parameter's bound)."""

    name: str
    kind: str
    group: str
    rule: str
    log_change: float
    throughput: float | None = None
    how: str = "simulated"
    ratio: str = "difference"
    pair_change: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def record(self, centre: float, value: str = "throughput") -> dict[str, Any]:
        """The world as the interval records it; ``value`` names its centre's quantity (a ratio's
        worlds record the throughput ratio in them)."""
        thr = self.throughput if self.throughput is not None else (centre * math.exp(self.log_change) if centre > 0 else 0.0)
        return {"name": self.name, "kind": self.kind, "group": self.group, "rule": self.rule, "how": self.how,
                value: thr, "log_change": self.log_change, **({"detail": self.detail} if self.detail else {})}


def _groups(worlds: Iterable[World]) -> dict[tuple[str, str], list[World]]:
    out: dict[tuple[str, str], list[World]] = {}
    for w in worlds:
        if w.rule not in RULES:
            raise ValueError(f"world {w.name!r}: rule must be one of {', '.join(RULES)}; got {w.rule!r}")
        out.setdefault((w.rule, w.group), []).append(w)
    return out


def log_ends(worlds: Sequence[World]) -> tuple[float, float, World | None, World | None]:
    """(low, high) log offsets of the interval from the worlds, and the world that moves each end
    most (None where nothing moves it): the one rule of the module docstring."""
    spread_lo = spread_hi = bracket_lo = bracket_hi = 0.0
    lo_w = hi_w = None
    lo_move = hi_move = 0.0  # the largest single move of each end, for naming it

    def note(w: World, move: float, low_side: bool) -> None:
        nonlocal lo_w, hi_w, lo_move, hi_move
        if low_side and move < lo_move:
            lo_w, lo_move = w, move
        if not low_side and move > hi_move:
            hi_w, hi_move = w, move

    for (rule, _), ws in _groups(worlds).items():
        if rule in ("reach", "recorded"):
            continue
        least = min(ws, key=lambda w: w.log_change)
        most = max(ws, key=lambda w: w.log_change)
        lo, hi = min(0.0, least.log_change), max(0.0, most.log_change)
        if rule == "spread":
            spread_lo += lo * lo
            spread_hi += hi * hi
        else:
            bracket_lo += lo
            bracket_hi += hi
        note(least, lo, True)
        note(most, hi, False)
    low = -math.sqrt(spread_lo) + bracket_lo
    high = math.sqrt(spread_hi) + bracket_hi
    for w in worlds:
        if w.rule == "reach":
            if w.log_change < low:
                low, lo_w, lo_move = w.log_change, w, -math.inf
            if w.log_change > high:
                high, hi_w, hi_move = w.log_change, w, math.inf
    return low, high, lo_w, hi_w


def components(worlds: Sequence[World], fitted: bool) -> dict[str, float]:
    """Each kind's 90 % term alone, in percent of log throughput (``components_pct``): a spread
    kind's wider side (its groups in quadrature), a bracket or reach kind's whole span. Where
    a fitted profile's interval has no world of a fitted component, it is stated as 0."""
    by_kind: dict[str, list[World]] = {}
    for w in worlds:
        if w.rule != "recorded":
            by_kind.setdefault(w.kind, []).append(w)
    out: dict[str, float] = {}
    for kind in sorted(by_kind, key=lambda k: KINDS.index(k) if k in KINDS else len(KINDS)):
        ws = by_kind[kind]
        lo, hi, _, _ = log_ends(ws)
        spread = all(w.rule == "spread" for w in ws)
        out[f"{kind}_pct"] = round(100.0 * (max(-lo, hi) if spread else hi - lo), 3) + 0.0  # never -0.0
    if fitted:
        for kind in FITTED_COMPONENTS:
            out.setdefault(f"{kind}_pct", 0.0)
    else:
        out.setdefault("parameters_pct", 0.0)
    return out


def _end_record(w: World | None, offset: float, centre: float) -> dict[str, Any]:
    if w is None:
        return {"name": "the fit", "kind": "fit", "log_change": 0.0, "log_offset": offset}
    return {"name": w.name, "kind": w.kind, "log_change": w.log_change, "log_offset": offset}


def envelope(centre: float, worlds: Sequence[World], *, coverage: float, method: str, fitted: bool,
             ratio: bool = False) -> dict[str, Any]:
    """The interval around ``centre`` (a throughput, or a ratio of two with ``ratio``) from the
    worlds: ``low``, ``high``, ``coverage``, ``method``, ``half_width_log`` (the mean of the two
    log half-widths), ``components_pct``, ``worlds`` (each one's record) and ``ends`` (the world
    that moves each end most); a throughput's ``width_pct``; a ratio's ``ratio`` and ``resolved``
    (the interval excludes 1: the model orders the two plans; None where no model error is known,
    a measured profile's, whose interval cannot say that)."""
    lo, hi, lo_w, hi_w = log_ends(worlds)
    low, high = centre * math.exp(lo), centre * math.exp(hi)
    out: dict[str, Any] = {"low": low, "high": high, "coverage": coverage, "method": method,
                           "half_width_log": 0.5 * (hi - lo), "components_pct": components(worlds, fitted),
                           "ends": {"low": _end_record(lo_w, lo, centre), "high": _end_record(hi_w, hi, centre)},
                           "worlds": [w.record(centre, "throughput_ratio" if ratio else "throughput") for w in worlds]}
    if ratio:
        out = {"ratio": centre, **out, "resolved": bool(low > 1.0 or high < 1.0) if fitted else None}
    else:
        out["width_pct"] = 100.0 * (high - low) / centre if centre > 0 else 0.0
    return out


def paired(a: Sequence[World], b: Sequence[World], same_scale: bool) -> list[World]:
    """The worlds of the ratio of plan a's throughput over plan b's, from each plan's worlds (by
    name; a world one plan lacks moves it by nothing): a simulated world moves the ratio by the
    difference of the two changes (what moves both alike cancels); a statistical one by its
    ``ratio`` rule."""
    by_b = {w.name: w for w in b}
    names = [w.name for w in a] + [w.name for w in b if w.name not in {x.name for x in a}]
    by_a = {w.name: w for w in a}
    out = []
    for n in names:
        wa, wb = by_a.get(n), by_b.get(n)
        w = wa or wb
        assert w is not None
        ca = wa.log_change if wa else 0.0
        cb = wb.log_change if wb else 0.0
        if w.ratio == "difference":
            change = ca - cb
        elif w.ratio == "pair" and same_scale and wa is not None and wb is not None and w.pair_change is not None:
            pa = wa.pair_change if wa.pair_change is not None else 0.0
            pb = wb.pair_change if wb.pair_change is not None else 0.0
            change = pa if abs(pa) >= abs(pb) else pb
        else:  # independent: in quadrature, on the world's own side
            sign = -1.0 if (ca + cb) < 0 else 1.0
            change = sign * math.sqrt(ca * ca + cb * cb)
        out.append(World(n, w.kind, w.group, w.rule, change, None, "ratio", w.ratio, None, dict(w.detail)))
    return out


def plan_on(plan: Plan, old: Profile, new: Profile) -> Plan:
    """The plan in a world whose profile is ``new`` instead of ``old``: cluster fields that came
    from the profile's node (equal to it) follow the world; fields the user set stay fixed."""
    changes = {}
    for k, v in new.node.items():
        if hasattr(plan.cluster, k) and k in old.node and old.node[k] != v and getattr(plan.cluster, k) == old.node[k]:
            changes[k] = v
    if not changes:
        return plan
    return plan.with_(cluster=replace(plan.cluster, **changes))


def describe_end(iv: dict[str, Any], side: str) -> str | None:
    """'<world> (<kind>, <signed percent>)' for the world that moves an interval's ``side`` end
    most, or None where the fit itself sets it (no world moves it)."""
    e = (iv.get("ends") or {}).get(side)
    if not e or e.get("kind") == "fit":
        return None
    return f"{e['name']} ({e['kind']}, {100.0 * (math.exp(e['log_change']) - 1.0):+.1f} %)"
