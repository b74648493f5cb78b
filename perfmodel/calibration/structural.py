"""Structural intervals: what the calibration cannot tell apart, carried into every interval.

The published 8- and 16-GPU points cannot separate mechanisms whose cost differs only on more
nodes (issue 28; docs/metrics.md "Between 32 and 256 GPUs"). Each such mechanism that the points
admit, fitted as the bundled model is and cross-validated within ``TOLERANCE_PP`` of the best
(``benchmarks/growth_mechanisms.py``), is a *member* of an ensemble stored with the profile
(``provenance.structural``: each member's mechanism, its fitted values, its cross-validated
errors and what measurement would pin it). The point prediction stays the profile's own (the
best member's); each member is a world of the interval (``member_worlds``,
perfmodel.calibration.worlds): the plan simulated on a profile rebuilt from its values. A
bracket, like the GPU-type one: the members are alternatives, not a spread, so the interval is
carried around the member that moves each end most (the parameter, model and extrapolation
widths of the best member: the members' own covariances are not stored; an approximation)
instead of adding them in quadrature.

At the calibrated GPU counts every member fits the same points, so their predictions there
differ by about the fits' own scatter; beyond them they part as their mechanisms grow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

from perfmodel.calibration.worlds import World
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile

# A member is admitted when its group_out cross-validated MAPE is within this many percentage
# points of the best alternative's. Why 0.5: the bundled model's own group_out MAPE moves by
# about that much with the fit budget and start alone (1.12 % at 120 evaluations per fold; the
# measured-compute readings, one parameter apart, 1.48 % and 2.52 %), and the residual scatter of
# the calibrated points is about 1 %: a difference below half a point is not evidence between
# two mechanisms that agree on every calibrated point.
TOLERANCE_PP = 0.5

# What would pin each mechanism: a measurement the published points lack (across two nodes),
# or runs of the user's own that span nodes.
SETTLE_MEASURE = {
    "channel": "time a channel put/get of one observation batch between two nodes (executor profile --comm across "
               "two nodes)",
    "sync_fanout": "time one weight sync to 2, 4 and 8 generators across two nodes with NCCL_P2P_DISABLE=1 "
                   "(executor profile --comm across two nodes)",
    "intake": "time an actor rank on a second node getting one global batch of trajectories from the node-0 "
              "channel (executor profile --comm across two nodes)",
    "ring": "time an all-gather over 8 and 16 ranks across two nodes with NCCL_P2P_DISABLE=1 "
            "(executor profile --comm --comm-ranks 8,16 across two nodes)",
}
SETTLE_RUNS = {
    "channel": "fit your own multi-node runs (perfmodel calibrate --from-rlinf-run)",
    "sync_fanout": "your own multi-node runs",
    "intake": "your own runs with the actor on two nodes",
    "ring": "your own multi-node runs",
}
SETTLE = {k: f"{SETTLE_MEASURE[k]}, or {SETTLE_RUNS[k]}" for k in SETTLE_MEASURE}


def runs_nodes_of(profile: Profile) -> list[int]:
    """The node counts of the runs a profile was fitted to (calibrate --from-rlinf-run), or []
    for a profile fitted to the published points (or measured)."""
    prov = profile.provenance if isinstance(profile.provenance, dict) else {}
    stored = (prov.get("structural") or {}).get("runs_nodes") if isinstance(prov.get("structural"), dict) else None
    if isinstance(stored, list) and stored:
        return sorted({int(n) for n in stored})
    runs = prov.get("runs") if isinstance(prov.get("runs"), list) else []
    per_node = int((prov.get("node_facts") or {}).get("gpus_per_node") or profile.node.get("gpus_per_node") or 8)
    return sorted({math.ceil(int(r["gpus"]) / per_node) for r in runs if isinstance(r, dict) and r.get("gpus")})


def settle_text(mechanism: str, plan_nodes: int | None = None, runs_nodes: list[int] | None = None) -> str:
    """What would pin ``mechanism`` for a plan on ``plan_nodes`` nodes: nothing about nodes for a
    plan on one node (issue 41: no advice to time a second node for an 8-GPU plan), and never
    runs of the kind the profile was already fitted to (``runs_nodes``: its runs' node counts;
    runs across nodes that still cannot tell the members apart are said so instead)."""
    if plan_nodes is None:
        return SETTLE.get(mechanism, "")
    if plan_nodes <= 1:
        return ""
    if runs_nodes and max(runs_nodes) > 1:
        return (f"{SETTLE_MEASURE.get(mechanism, '')} (the runs this profile was fitted to, on "
                f"{', '.join(map(str, runs_nodes))} node(s), do not tell them apart)")
    return SETTLE.get(mechanism, "")


WHAT = {
    "none": "nothing grows with the workers beyond today's terms",
    "channel": "the node-0 data channel's hops",
    "sync_fanout": "the actor's weight syncs, fanned out to each generator,",
    "ring": "the actor's collective ring steps",
    "intake": "the actor's trajectory intakes through the node-0 channel",
}


@dataclass(frozen=True)
class Member:
    """One structural alternative of a profile: its mechanism (a key of calibrate.GROWTH_PARAMS),
    its fitted values (provenance names, this backbone's and the shared ones) and how it
    cross-validated (group_out and scale MAPE, percent)."""

    mechanism: str
    values: dict[str, float]
    group_out_mape_pct: float
    scale_mape_pct: float
    end: str = "fit"  # "fit": the member's own fit; "upper": its parameter's profile-likelihood end

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "end": self.end, "values": dict(self.values),
                "group_out_mape_pct": self.group_out_mape_pct, "scale_mape_pct": self.scale_mape_pct,
                "settle": SETTLE.get(self.mechanism, "")}


def members_of(profile: Profile) -> list[Member]:
    """The profile's structural members (``provenance.structural.members``), checked; [] when it
    stores none."""
    doc = profile.provenance.get("structural")
    if not doc:
        return []
    path = "provenance.structural"
    if not isinstance(doc, dict) or not isinstance(doc.get("members"), list):
        raise ConfigError(path, "must be an object with a list 'members'")
    from perfmodel.calibration.calibrate import GROWTH_PARAMS

    out = []
    for i, m in enumerate(doc["members"]):
        where = f"{path}.members[{i}]"
        if not isinstance(m, dict) or m.get("mechanism") not in GROWTH_PARAMS:
            raise ConfigError(f"{where}.mechanism", f"must be one of {', '.join(GROWTH_PARAMS)}; got "
                              f"{m.get('mechanism') if isinstance(m, dict) else m!r}")
        vals = m.get("values")
        if not isinstance(vals, dict) or not vals or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf for v in vals.values()):
            raise ConfigError(f"{where}.values", "must map parameter names to fitted values > 0")
        if GROWTH_PARAMS[m["mechanism"]].name not in vals:
            raise ConfigError(f"{where}.values", f"must hold {GROWTH_PARAMS[m['mechanism']].name}, its mechanism's parameter")
        if m.get("end", "fit") not in ENDS:
            raise ConfigError(f"{where}.end", f"must be one of {', '.join(ENDS)}; got {m.get('end')!r}")
        out.append(Member(m["mechanism"], {k: float(v) for k, v in vals.items()},
                          float(m.get("group_out_mape_pct", math.nan)), float(m.get("scale_mape_pct", math.nan)),
                          m.get("end", "fit")))
    return out


ENDS = ("fit", "upper")
_BUILT: dict[tuple[int, str, str], tuple[Profile, Profile]] = {}


def member_profile(profile: Profile, member: Member) -> Profile:
    """``profile`` rebuilt at the member's fitted values (its own measurements and variability
    kept), once per profile object and member."""
    key = (id(profile), member.mechanism, member.end)
    hit = _BUILT.get(key)
    if hit is not None and hit[0] is profile:
        return hit[1]
    from perfmodel.backbones import get_backbone
    from perfmodel.calibration.calibrate import build_profile
    from perfmodel.calibration.measured import measured_of

    prov = {k: v for k, v in profile.provenance.items() if k not in ("uncertainty", "structural")}
    # on the profile's own node: a user's cluster's (calibrated from their runs) or the published one
    built = build_profile(get_backbone(profile.backbone), member.values, profile.costs.env_memory_gb, prov,
                          measured_of(profile.costs), node_facts=profile.provenance.get("node_facts"))
    built = replace(built, name=f"{profile.name}+{member.mechanism}:{member.end}", variability=profile.variability)
    if len(_BUILT) > 16:
        _BUILT.clear()
    _BUILT[key] = (profile, built)
    return built


def member_throughputs(plan: Plan, profile: Profile, run: Callable[[Plan, Profile], float]
                       ) -> list[tuple[Member, float]]:
    """Each member's throughput of ``plan`` (one simulation each)."""
    from perfmodel.calibration.worlds import plan_on

    out = []
    for m in members_of(profile):
        mp = member_profile(profile, m)
        out.append((m, run(plan_on(plan, profile, mp), mp)))
    return out


def member_worlds(plan: Plan, profile: Profile, centre: float, run: Callable[[Plan, Profile], float],
                  beyond: bool = True, model_sd_log: float = 0.0) -> tuple[list[World], str]:
    """One world per member the profile stores: the plan simulated on the profile rebuilt at the
    member's values. A bracket (the members are alternatives, not a spread): the interval is
    carried around the member that moves each end most (perfmodel.calibration.worlds). Within the
    calibrated GPU and node counts (``beyond`` false) they only enter where some member parts from
    the point by more than the residual model error (``model_sd_log``, one sd): there every member
    fits the same points, and their differences at the published setups (1.6 % at most for the
    bundled ensemble) are the fits' own scatter, which the model error already holds; they are
    recorded then, moving nothing."""
    if centre <= 0:
        return [], ""
    rows = [(m, thr) for m, thr in member_throughputs(plan, profile, run) if thr > 0]
    if not rows:
        return [], ""
    agree = not beyond and all(abs(math.log(thr / centre)) <= model_sd_log for _, thr in rows)
    worlds = [World(f"member {m.mechanism}:{m.end}", "structural", "structural members",
                    "recorded" if agree else "bracket", math.log(thr / centre), thr,
                    detail={"mechanism": m.mechanism, "end": m.end, "group_out_mape_pct": m.group_out_mape_pct})
              for m, thr in rows]
    if agree:
        return worlds, ""
    return worlds, ("structural: carried around each member the calibration admits ("
                    + ", ".join(dict.fromkeys(m.mechanism for m, _ in rows)) + ")")


def ratio_member_rule(worlds: list[World], beyond: bool, model_sd_log: float) -> list[World]:
    """The members' worlds of a ratio of two plans (``worlds.paired``), entering as for one plan:
    beyond the calibrated counts (either plan), or where a member parts the ratio by more than
    ``model_sd_log`` (the two plans' residual errors, sqrt(2) s); recorded otherwise."""
    members = [w for w in worlds if w.kind == "structural"]
    if not members:
        return worlds
    agree = not beyond and all(abs(w.log_change) <= model_sd_log for w in members)
    rule = "recorded" if agree else "bracket"
    return [replace(w, rule=rule) if w.kind == "structural" else w for w in worlds]


def member_record(worlds: list[World], centre: float, ratio: bool = False, plan_nodes: int | None = None,
                  runs_nodes: list[int] | None = None) -> dict[str, Any] | None:
    """``structural`` of an interval from its members' worlds: each member's throughput (ratio)
    and difference, the one that parts most (``drives_width``), what would settle it; where they
    all agree within the model error, only that (``members_agree_within_model_error``; a
    ratio's then has none). None without members."""
    ms = [w for w in worlds if w.kind == "structural"]
    if not ms or centre <= 0:
        return None
    entered = any(w.rule == "bracket" for w in ms)
    if not entered:
        if ratio:
            return None
        return {"members_agree_within_model_error": True,
                "max_differs_pct": max(100.0 * abs(math.exp(w.log_change) - 1) for w in ms)}
    widest = max(ms, key=lambda w: abs(w.log_change))
    mech, end = widest.detail["mechanism"], widest.detail["end"]
    if ratio:
        return {"drives_width": mech, "drives_width_end": end, "ratio": centre * math.exp(widest.log_change),
                "members": [{"mechanism": w.detail["mechanism"], "end": w.detail["end"],
                             "ratio": centre * math.exp(w.log_change)} for w in ms]}
    rows = [{"mechanism": w.detail["mechanism"], "end": w.detail["end"], "throughput": centre * math.exp(w.log_change),
             "differs_pct": 100.0 * math.expm1(w.log_change), "group_out_mape_pct": w.detail["group_out_mape_pct"],
             "settle": settle_text(w.detail["mechanism"], plan_nodes, runs_nodes)} for w in ms]
    return {"best": "none", "members": rows, "drives_width": mech, "drives_width_end": end,
            "differs_pct": 100.0 * math.expm1(widest.log_change), "settle": settle_text(mech, plan_nodes, runs_nodes),
            "tolerance_pp": TOLERANCE_PP}


def note(iv: dict[str, Any] | None, threshold_pct: float = 1.0, settle: bool = True) -> str | None:
    """The line predict, plan and sweep print for a structural envelope, or None when the
    members agree within ``threshold_pct`` (at the calibrated points they do)."""
    s = (iv or {}).get("structural")
    if not s or "differs_pct" not in s or abs(s["differs_pct"]) < threshold_pct:
        return None
    return (f"the calibration cannot tell today's fit from one in which {WHAT.get(s['drives_width'], s['drives_width'])} "
            f"grow with the workers (its other parameters refitted with it); they differ by {abs(s['differs_pct']):.0f} % "
            f"at this plan (the interval holds both)" + (f". To settle it: {s['settle']}" if settle and s.get("settle")
                                                          else ""))


# --------------------------------------------------------------------------------------------
# Calibration side: each admitted member's fit and the largest growth its points allow
# --------------------------------------------------------------------------------------------


def _rss(predicted: list[float], points: list) -> float:
    return float(sum(math.log(p / pt.throughput_env_steps_per_s) ** 2 for p, pt in zip(predicted, points)))


def growth_upper_end(mechanism: str, points: list, values: dict[str, float], residual_sd_log: float, *,
                     max_evals: int = 60, steps: int = 5, z: float = 1.645) -> tuple[dict[str, float], float]:
    """(values, RSS) at the largest value of the mechanism's parameter that the points admit: the
    profile likelihood's 90 % end, where the refitted misfit (every other parameter refitted with
    it held) has grown by z^2 residual variances over the member's own fit; bisected in log space
    between the fitted value and the parameter's upper bound (``steps`` refits of ``max_evals``
    each, from the member's values). What a point at 8 or 16 GPUs cannot exclude is how large a
    cost that grows with the workers may be; the fitted value is only the most likely."""
    import perfmodel.calibration.calibrate as calibrate

    p = calibrate.GROWTH_PARAMS[mechanism]
    bundled = calibrate.PARAMS
    calibrate.PARAMS = tuple(q for q in bundled if q.name != p.name)
    try:
        def refit(v: float) -> tuple[dict[str, float], float]:
            res = calibrate.fit(points, max_evals=max_evals, start=values, fixed={p.name: v})
            return res.values, _rss(res.predicted, points)

        profiles = calibrate.profiles_from_values(values, sorted({pt.backbone for pt in points}))
        base_rss = _rss(calibrate.predict_points(profiles, points), points)
        limit = base_rss + (z * residual_sd_log) ** 2
        lo, hi = math.log(values[p.name]), math.log(p.hi)
        best = (dict(values), base_rss)
        top = refit(p.hi)
        if top[1] <= limit:
            return top
        for _ in range(steps):
            mid = 0.5 * (lo + hi)
            got = refit(math.exp(mid))
            if got[1] <= limit:
                lo, best = mid, got
            else:
                hi = mid
        return best
    finally:
        calibrate.PARAMS = bundled


def member_entries(results: dict[str, dict[str, Any]], backbone: str, upper: dict[str, dict[str, float]]
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(members, rejected) for ``backbone`` from the alternatives' results
    (benchmarks/growth_mechanisms.py JSON by mechanism, ``none`` the bundled model's): admitted
    when the group_out MAPE is within TOLERANCE_PP of the best alternative's. Each admitted
    mechanism gives two members, its fit and its parameter's upper end (``upper``)."""
    best = min(r["group_out"]["model_mape_pct"] for r in results.values())

    def own(vals: dict[str, float]) -> dict[str, float]:
        return {k.split(".")[-1]: v for k, v in vals.items() if "." not in k or k.startswith(f"{backbone}.")}

    from perfmodel.calibration.calibrate import GROWTH_PARAMS

    members, rejected = [], []
    for name, r in sorted(results.items()):
        if name not in GROWTH_PARAMS:  # the bundled model, or a reading of the setup (reported, not a member)
            continue
        g, s = r["group_out"]["model_mape_pct"], r["scale"]["model_mape_pct"]
        entry = {"mechanism": name, "group_out_mape_pct": round(g, 3), "scale_mape_pct": round(s, 3)}
        if g > best + TOLERANCE_PP:
            rejected.append({**entry, "why": f"group_out {g:.2f} % is more than {TOLERANCE_PP} points above the best "
                                             f"({best:.2f} %)"})
            continue
        members.append({**entry, "end": "fit", "values": own(r["values"]), "settle": SETTLE.get(name, "")})
        if name in upper:
            members.append({**entry, "end": "upper", "values": own(upper[name]), "settle": SETTLE.get(name, "")})
    return members, rejected


def main(argv: list[str] | None = None) -> int:
    """Store the structural ensemble in fitted profiles (provenance.structural), from the
    alternatives' cross-validation results, with each admitted mechanism's upper end."""
    import argparse
    import json
    from pathlib import Path

    from perfmodel.calibration.reference import load_reference
    from perfmodel.calibration.calibrate import values_of
    from perfmodel.schema.jsonio import write_json_atomic
    from perfmodel.schema.profile import BUNDLED_REFERENCE, load_profile

    ap = argparse.ArgumentParser(prog="python -m perfmodel.calibration.structural",
                                 description="store the structural ensemble in fitted profiles")
    ap.add_argument("profiles", nargs="+", help="fitted profile JSON files (one joint fit)")
    ap.add_argument("--results", required=True, help="directory of benchmarks/growth_mechanisms.py JSON files")
    ap.add_argument("--reference", default=BUNDLED_REFERENCE)
    ap.add_argument("--max-evals", type=int, default=60, help="evaluations per refit of the upper-end search")
    args = ap.parse_args(argv)
    profs = {load_profile(p).backbone: (p, load_profile(p)) for p in args.profiles}
    results = {f.stem: json.loads(f.read_text()) for f in sorted(Path(args.results).glob("*.json"))}
    if "none" not in results:
        raise SystemExit(f"{args.results}: needs none.json (the bundled model's cross-validation at the same budget)")
    points = load_reference(args.reference)
    values_of({b: p for b, (_, p) in profs.items()})  # one joint fit, or refused
    s = next(iter(profs.values()))[1].uncertainty.residual_sd_log
    from perfmodel.calibration.calibrate import GROWTH_PARAMS

    best = min(r["group_out"]["model_mape_pct"] for r in results.values())
    upper = {}
    for name, r in sorted(results.items()):
        if name in GROWTH_PARAMS and r["group_out"]["model_mape_pct"] <= best + TOLERANCE_PP:
            upper[name], rss = growth_upper_end(name, points, r["values"], s, max_evals=args.max_evals)
            p = GROWTH_PARAMS[name].name
            print(f"{name}: {p} fitted {r['values'][p]:.4g}, upper end {upper[name][p]:.4g} (RSS {rss:.3g})", flush=True)
    for b, (path, prof) in profs.items():
        members, rejected = member_entries(results, b, upper)
        doc = json.loads(Path(path).read_text())
        doc["provenance"]["structural"] = {
            "tolerance_pp": TOLERANCE_PP,
            "criterion": f"group_out cross-validated MAPE within {TOLERANCE_PP} points of the best alternative "
                         "(benchmarks/growth_mechanisms.py); the point prediction is the bundled model's (none)",
            "cross_validation": {n: {"group_out_mape_pct": round(r["group_out"]["model_mape_pct"], 3),
                                     "scale_mape_pct": round(r["scale"]["model_mape_pct"], 3)}
                                 for n, r in sorted(results.items())},
            "members": members, "rejected": rejected}
        write_json_atomic(path, doc)
        print(f"{path}: {len(members)} members, {len(rejected)} rejected")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
