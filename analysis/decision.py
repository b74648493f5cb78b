"""The numbers behind the report's decision figures, computed once for both renderers (plotly
for the HTML, matplotlib for the Markdown): plan points with their intervals, the Pareto front
of throughput against GPUs and dollars per hour, time and cost to a target number of env
steps, the calibrated scale, ties, and the two kinds of validation (in-sample, cross-validated).

Error everywhere: error = prediction / measurement - 1 (x100 in percent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.inputs import Inputs
from analysis.styles import mode_order
from perfmodel.cliutil import fmt_range
from perfmodel.schema.errors import ConfigError

TIE_REL = 0.005  # modes within 0.5 % of each other are listed as near ties (the planner's tie is 1e-4)


@dataclass
class PlanPoint:
    mode: str
    gpus: int
    ratio: str | None
    stages: int | None
    b_max: Any
    t_max_s: Any
    throughput: float
    low: float | None
    high: float | None
    interval_what: str | None   # "90% model interval (method)" or "95% CI of replications"
    bottleneck: str | None
    price: float | None          # $ per GPU-hour
    beyond_calibrated: bool | None
    source: str

    @property
    def dollars_per_hour(self) -> float | None:
        return self.gpus * self.price if self.price else None

    def hours_to(self, steps: float, thr: float | None = None) -> float:
        return steps / (thr or self.throughput) / 3600.0

    def cost_to(self, steps: float, thr: float | None = None) -> float | None:
        return self.hours_to(steps, thr) * self.dollars_per_hour if self.price else None

    @property
    def plan_label(self) -> str:
        bits = [self.mode, f"{self.gpus} GPUs"]
        if self.ratio:
            bits.append(self.ratio)
        if self.stages and self.stages > 1:
            bits.append(f"{self.stages} stages")
        return " ".join(bits)

    @property
    def key(self) -> tuple:
        return (self.mode, self.gpus, self.ratio, self.stages, self.b_max, self.t_max_s)


def interval_of(row: dict[str, Any]) -> tuple[float | None, float | None, str | None]:
    """The throughput interval a row (or prediction) carries: the model's
    ``throughput_interval`` (fid_unc), ``throughput_low``/``_high`` columns, or the 95% CI of
    replications (``throughput_ci95``, simulation noise only). (None, None, None) if none."""
    pred = row.get("prediction") if isinstance(row.get("prediction"), dict) else {}
    for src in (row, pred):
        ti = src.get("throughput_interval")
        if isinstance(ti, dict) and ti.get("low") is not None and ti.get("high") is not None:
            cov = ti.get("coverage")
            what = (f"{100 * cov:.0f}% " if isinstance(cov, (int, float)) else "") + "model interval"
            if ti.get("method"):  # its name, not the paragraph after it (a table cell; issue 41)
                what += f" ({str(ti['method']).split(':')[0].strip()})"
            return float(ti["low"]), float(ti["high"]), what
    # A sweep row carries both its low/high columns and its prediction's interval: name the latter.
    for src in (row, pred):
        for lo_k, hi_k in (("throughput_low", "throughput_high"),
                           ("throughput_env_steps_per_s_low", "throughput_env_steps_per_s_high")):
            if src.get(lo_k) is not None and src.get(hi_k) is not None:
                return float(src[lo_k]), float(src[hi_k]), "interval (low-high columns)"
    for src in (row, pred):
        ci = src.get("throughput_ci95")
        if ci:
            return float(ci[0]), float(ci[1]), "95% CI of replications (simulation noise)"
    return None, None, None


def _beyond(row: dict[str, Any], calibrated: list[int]) -> bool | None:
    """Whether a row's GPU count is beyond the calibrated scale: the prediction's
    ``extrapolation`` field (fid_unc) when it knows the calibrated GPU counts, else the
    calibrated counts found here; None when nothing says."""
    for src in (row, row.get("prediction") or {}):
        ex = src.get("extrapolation")
        if isinstance(ex, dict) and ex.get("calibrated_gpus") and "beyond_calibrated_gpus" in ex:
            return bool(ex["beyond_calibrated_gpus"])
    if not calibrated:
        return None
    return not (min(calibrated) <= row["gpus"] <= max(calibrated))


def calibrated_gpus(inp: Inputs) -> tuple[list[int], str]:
    """GPU counts the model was calibrated at, and where that comes from: the rows'
    ``extrapolation.calibrated_gpus`` when present, else the profile's fitted reference points."""
    rows = [r for _, d in inp.sweeps for r in d["rows"] if r.get("status") == "ok"]
    rows += [p for _, p in inp.predictions]
    if inp.choice:
        rows.append(inp.choice[1]["best"])
    for r in rows:
        for src in (r, r.get("prediction") or {}):
            ex = src.get("extrapolation")
            if isinstance(ex, dict) and ex.get("calibrated_gpus"):
                return sorted({int(g) for g in ex["calibrated_gpus"]}), "the predictions' extrapolation field"
    names = ({(d.get("spec") or {}).get("profile_ref") or d.get("profile") for _, d in inp.sweeps}
             | {p.get("profile") for _, p in inp.predictions})
    if inp.choice:
        names.add(inp.choice[1]["plan"].get("profile"))
    from perfmodel.schema.profile import load_profile

    gpus: set[int] = set()
    used = []
    for name in sorted(n for n in names if n):
        try:
            prof = load_profile(name)
        except ConfigError:
            continue
        prov = prof.provenance if isinstance(prof.provenance, dict) else {}
        pts = (prov.get("fit") or {}).get("points") or prov.get("reference_points") or []
        g = {int(p["gpus"]) for p in pts if isinstance(p, dict) and p.get("gpus")}
        if g:
            gpus |= g
            used.append(name)
    return sorted(gpus), (f"the points (published, or runs of yours) the profile{'s' if len(used) > 1 else ''} "
                          f"{', '.join(used)} {'were' if len(used) > 1 else 'was'} fitted to" if used else "")


def sweep_points(inp: Inputs, calibrated: list[int]) -> list[PlanPoint]:
    price = inp.price
    out = []
    for path, doc in inp.sweeps:
        for r in doc["rows"]:
            if r.get("status") != "ok":
                continue
            lo, hi, what = interval_of(r)
            out.append(PlanPoint(r["mode"], r["gpus"], r.get("allocation_ratio"), r.get("pipeline_stage_num"),
                                 r.get("b_max"), r.get("t_max_s"), float(r["throughput_env_steps_per_s"]), lo, hi,
                                 what, r.get("bottleneck"), price, _beyond(r, calibrated), path))
    return out


def chosen_point(inp: Inputs, calibrated: list[int]) -> PlanPoint | None:
    if not inp.choice:
        return None
    b = inp.choice[1]["best"]
    lo, hi, what = interval_of(b)
    return PlanPoint(b["mode"], b["gpus"], b.get("allocation_ratio"), b.get("pipeline_stage_num"), b.get("b_max"),
                     b.get("t_max_s"), float(b["throughput_env_steps_per_s"]), lo, hi, what, b.get("bottleneck"),
                     inp.price, _beyond(b, calibrated), inp.choice[0])


def best_per_mode_gpus(points: list[PlanPoint]) -> dict[str, list[PlanPoint]]:
    """The best plan per (mode, GPU count), by mode, in GPU order."""
    best: dict[tuple[str, int], PlanPoint] = {}
    for p in points:
        k = (p.mode, p.gpus)
        if k not in best or p.throughput > best[k].throughput:
            best[k] = p
    out: dict[str, list[PlanPoint]] = {}
    for (mode, _), p in sorted(best.items(), key=lambda kv: (mode_order(kv[0][0]), kv[0][1])):
        out.setdefault(mode, []).append(p)
    return out


def pareto_front(points: list[PlanPoint]) -> list[PlanPoint]:
    """Plans no other plan beats on both cost (GPUs, so $/h) and throughput, cheapest first."""
    front: list[PlanPoint] = []
    for p in sorted(points, key=lambda p: (p.gpus, -p.throughput)):
        if not front or p.throughput > front[-1].throughput * (1 + 1e-12):
            front.append(p)
    return front


def ties(points: list[PlanPoint]) -> list[tuple[int, list[str], float]]:
    """(GPUs, modes, throughput): modes whose best plans at one GPU count are within TIE_REL of
    each other (the model cannot tell them apart there), highest first."""
    out = []
    per = best_per_mode_gpus(points)
    for g in sorted({p.gpus for p in points}):
        at = sorted((p for m in per for p in per[m] if p.gpus == g), key=lambda p: -p.throughput)
        i = 0
        while i < len(at):
            j = i + 1
            while j < len(at) and at[j].throughput >= at[i].throughput * (1 - TIE_REL):
                j += 1
            if j - i >= 2:
                out.append((g, sorted((p.mode for p in at[i:j]), key=mode_order), at[i].throughput))
            i = j
    return out


def fmt_interval(p: PlanPoint) -> str:
    if p.low is None:
        return "none given"
    return f"{fmt_range(p.low, p.high, '-', thousands=True)} ({p.interval_what})"


def hover(p: PlanPoint, target: float | None = None) -> str:
    lines = [f"<b>{p.plan_label}</b>",
             f"throughput {p.throughput:,.1f} env steps/s",
             f"interval: {fmt_interval(p)}",
             f"bottleneck: {p.bottleneck or '-'}"]
    if p.b_max is not None or p.t_max_s is not None:
        lines.append(f"b_max {p.b_max if p.b_max is not None else 'one worker'}, t_max {p.t_max_s:g} s"
                     if p.t_max_s is not None else f"b_max {p.b_max}")
    if p.dollars_per_hour:
        lines.append(f"${p.dollars_per_hour:,.2f}/h ({p.gpus} GPUs x ${p.price:g})")
    if target:
        h = p.hours_to(target)
        c = p.cost_to(target)
        lines.append(f"{target:,.0f} env steps: {h:,.1f} h" + (f", ${c:,.0f}" if c is not None else ""))
    if p.beyond_calibrated:
        lines.append("<i>beyond the calibrated scale: extrapolated</i>")
    return "<br>".join(lines)


# --- validation -------------------------------------------------------------------------------

def in_sample(validation: dict[str, Any] | None, profiles: dict[str, Any]) -> bool:
    """Whether the validated points are the ones the profiles were fitted to: each point among
    the published points its own backbone's profile was fitted to (a profile fitted to a user's
    runs, whose fit points name runs, was fitted to none of them: issue 41)."""
    if not validation:
        return False
    fitted = set()
    for backbone, prof in profiles.items():
        prov = prof.provenance if isinstance(prof.provenance, dict) else {}
        for p in (prov.get("fit") or {}).get("points") or []:
            if "run" not in p:  # a published point, not one of the user's runs
                fitted.add((p.get("backbone", backbone), p.get("mode"), p.get("gpus"), p.get("allocation_ratio")))
    pts = {(r["backbone"], r["mode"], r["gpus"], r["allocation_ratio"]) for r in validation["points"]}
    return bool(pts) and pts <= fitted


def validation_ties(validation: dict[str, Any]) -> list[dict[str, Any]]:
    """Groups whose best mode is a tie, in the prediction or the published table."""
    out = []
    for g in validation["best_mode_agreement"]["per_group"]:
        if len(g["predicted_best"]) > 1 or len(g["published_best"]) > 1:
            out.append(g)
    return out


def predicted_ties(validation: dict[str, Any]) -> list[str]:
    """"pi05 8 GPUs: rollout_async = streamer (363.5)" for equal predictions of one group."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in validation["points"]:
        groups.setdefault((r["backbone"], r["gpus"]), []).append(r)
    out = []
    for (b, g), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: -r["predicted"])
        used: set[int] = set()
        for i, r in enumerate(rs):
            if i in used:
                continue
            same = [j for j in range(i + 1, len(rs)) if abs(rs[j]["predicted"] / r["predicted"] - 1) < 1e-6]
            if same:
                used |= set(same)
                modes = sorted([r["mode"]] + [rs[j]["mode"] for j in same], key=mode_order)
                out.append(f"{b} {g} GPUs: {' = '.join(modes)} (predicted {r['predicted']:.1f})")
    return out


def cv_points(cv: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for f in cv.get("folds", []):
        for p in f.get("points", []):
            out.append(dict(p, fit_gpus=f.get("fit_gpus"), predict_gpus=f.get("predict_gpus")))
    return out


def mape(points: list[dict[str, Any]]) -> float | None:
    errs = [abs(p["error_pct"]) for p in points if p.get("error_pct") is not None]
    return sum(errs) / len(errs) if errs else None


@dataclass
class PerGpuSeries:
    """One backbone's per-GPU throughput against GPU count: each mode's best plan per GPU count
    from a sweep (env steps/s per GPU, with its interval where the sweep has one) and the
    published points of the same backbone (per GPU)."""

    backbone: str
    modes: dict[str, list[tuple[int, float, float | None, float | None]]]  # mode -> (gpus, per GPU, low, high)
    published: dict[str, list[tuple[int, float]]]  # mode -> (gpus, per GPU)
    # where the sweep ran another workload than the published points (envs per GPU): which, said
    # on the figure (a 2-3x gap between the two is the workload, not model error; issue 41)
    published_other_workload: str | None = None


def other_workload(doc: dict[str, Any], backbone: str) -> str | None:
    """How a sweep's envs per GPU differ from the published points' (the bundled profile's
    published setup), in words, or None where they match (or cannot be told)."""
    from perfmodel.schema.errors import ConfigError
    from perfmodel.schema.profile import load_profile

    try:
        published = load_profile(backbone).envs_per_gpu
    except ConfigError:
        return None
    swept = sorted({r["plan"]["workload"]["total_num_envs"] // r["plan"]["cluster"]["gpus"]
                    for r in doc.get("rows") or [] if r.get("status") == "ok" and isinstance(r.get("plan"), dict)})
    if not swept or swept == [published]:
        return None
    return (f"published points: another workload ({published} envs per GPU; this sweep "
            f"{', '.join(map(str, swept))})")


def per_gpu_series(sweeps: list[dict[str, Any]], references: list[str]) -> list[PerGpuSeries]:
    """A PerGpuSeries per sweep's backbone (sweeps of one backbone: the first one's rows), with
    the published points of that backbone from the reference CSVs overlaid."""
    from perfmodel.calibration.reference import load_reference

    points = [p for ref in references for p in load_reference(ref)]
    out: dict[str, PerGpuSeries] = {}
    for doc in sweeps:
        b = str(doc.get("backbone") or doc.get("profile") or "?")
        if b in out:
            continue
        modes: dict[str, list[tuple[int, float, float | None, float | None]]] = {}
        for e in sorted(doc["summary"]["best_per_mode"], key=lambda e: e["gpus"]):
            g = e["gpus"]
            low, high = e.get("throughput_low"), e.get("throughput_high")
            modes.setdefault(e["mode"], []).append((g, e["throughput_env_steps_per_s"] / g,
                                                    None if low is None else low / g,
                                                    None if high is None else high / g))
        published: dict[str, list[tuple[int, float]]] = {}
        for p in sorted(points, key=lambda p: p.gpus):
            if p.backbone == b:
                published.setdefault(p.mode, []).append((p.gpus, p.throughput_env_steps_per_s / p.gpus))
        out[b] = PerGpuSeries(b, dict(sorted(modes.items(), key=lambda kv: mode_order(kv[0]))),
                              dict(sorted(published.items(), key=lambda kv: mode_order(kv[0]))),
                              other_workload(doc, b) if published else None)
    return list(out.values())
