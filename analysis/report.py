"""Build the capacity-planning report: a self-contained interactive HTML (plotly, its script
embedded once, so it opens offline) and a Markdown version with matplotlib PNGs beside it, from
files: sweeps, a plan choice, predictions, run records, Chrome traces, published reference CSVs
and a cross-validation result (analysis.inputs). Figures whose input is missing are left out
with one line saying what is missing. Error everywhere: prediction / measurement - 1.
"""

from __future__ import annotations

import html
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from analysis import decision as dec
from analysis import figures, interactive
from analysis.inputs import Inputs, load_inputs  # noqa: F401 - load_inputs re-exported for callers
from analysis.styles import CHOSEN_COLOR, mode_order
from perfmodel.cliutil import fmt_number
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.jsonio import write_atomic
from perfmodel.schema.metrics import error_pct

# The report's figures, in order: (id, caption). The browser test checks each one it expects.
FIGURES = (
    ("decision", "Throughput vs GPUs vs $/h: every predicted plan (faint: other splits), each mode's best "
                 "plan per GPU count (band: its interval when the input has one), the Pareto front and the "
                 "chosen plan; shaded: beyond the calibrated scale"),
    ("time_cost", "Time and cost to reach the target number of env steps (bars: intervals when given; grey "
                  "ring: extrapolated beyond the calibrated scale)"),
    ("per_gpu", "Per-GPU throughput against GPUs for each backbone swept: a line per mode (its best plan), its "
                "interval shaded, the published points overlaid (--reference, else the bundled CSV)"),
    ("scaling", "Scaling efficiency against linear and gain over colocated, best plan per mode"),
    ("utilization", "Per-stage utilization (busy fraction of the stage's resource, docs/metrics.md)"),
    ("timeline", "Timeline (Gantt) of one iteration: simulated, then measured"),
    ("validation", "Predicted vs published throughput: in-sample fit and cross-validated error, separately"),
    ("predicted_vs_measured", "Predicted vs measured throughput, from run records"),
)
NEEDS = {
    "decision": "no sweep given (--sweep FILE from `perfmodel sweep -o`)",
    "time_cost": "no sweep given (--sweep)",
    "per_gpu": "no sweep given (--sweep; one per backbone for a panel each)",
    "scaling": "no sweep given (--sweep)",
    "utilization": "no prediction, plan choice, sweep or run record with utilization given",
    "timeline": "no trace given (--trace-sim, --trace-run, or --choice to simulate the chosen plan)",
    "validation": "no reference CSV (--reference) and no cross-validation (--cross-validation FILE from "
                  "`perfmodel validate --cross-validate --json`) given",
    "predicted_vs_measured": "no run record with a prediction given (--run runs/X/record.json)",
}


def simulated_trace(plan_dict: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The simulated trace of a plan (when no --trace-sim is given but a plan choice is), or
    None when its profile cannot be loaded here."""
    from perfmodel.schema.plan import Plan
    from perfmodel.schema.profile import load_profile
    from perfmodel.prediction import predict

    try:
        plan = Plan.from_dict(plan_dict, "plan")
        profile = load_profile(plan.profile)
    except ConfigError:
        return None
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.json"
        predict(plan, profile, trace_path=path)
        doc = json.loads(path.read_text())
    return "chosen plan (simulated by the report)", doc


def _label(path: str, doc: dict[str, Any]) -> str:
    bits = [str(doc.get(k)) for k in ("mode", "gpus") if doc.get(k) is not None]
    if doc.get("allocation_ratio"):
        bits.append(str(doc["allocation_ratio"]))
    return " ".join(bits) if bits else Path(path).stem


def _match_prediction(rec: dict[str, Any], inp: Inputs) -> dict[str, Any] | None:
    """A prediction for a run record that has none: a given prediction or sweep row of the same
    mode, GPUs, ratio and pipeline stages."""
    key = tuple(rec.get(k) for k in ("mode", "gpus", "allocation_ratio", "pipeline_stage_num"))
    if None in key[:2]:
        return None
    for _, p in inp.predictions:
        if tuple(p.get(k) for k in ("mode", "gpus", "allocation_ratio", "pipeline_stage_num")) == key:
            return p
    for _, doc in inp.sweeps:
        for r in doc["rows"]:
            if r["status"] == "ok" and (r["mode"], r["gpus"], r["allocation_ratio"], r["pipeline_stage_num"]) == key:
                return r["prediction"]
    return None


# --- the profiles the report used, and the runs a profile was fitted to ---------------------------

def profile_refs(inp: Inputs) -> list[str]:
    """The profiles (names or files) the report's inputs were made with: the sweeps', the
    predictions', the plan choice's and --reference-profile's."""
    refs = [(d.get("spec") or {}).get("profile_ref") or d.get("profile") for _, d in inp.sweeps]
    refs += [p.get("profile") for _, p in inp.predictions]
    if inp.choice:
        refs.append(inp.choice[1]["plan"].get("profile"))
    refs += list(inp.reference_profiles.values())
    return list(dict.fromkeys(r for r in refs if isinstance(r, str) and r))


def fitted_to_runs(prof: Any) -> bool:
    """A profile calibrated from the user's runs (calibrate --from-rlinf-run: provenance.runs)."""
    prov = prof.provenance if isinstance(prof.provenance, dict) else {}
    return isinstance(prov.get("runs"), list) and bool(prov["runs"])


def runs_profiles(inp: Inputs) -> list[Any]:
    """The report's profiles fitted to runs, each once (a file no longer there is skipped)."""
    from perfmodel.schema.profile import load_profile

    out, names = [], set()
    for ref in profile_refs(inp):
        try:
            prof = load_profile(ref)
        except ConfigError:
            continue
        if fitted_to_runs(prof) and prof.name not in names:
            names.add(prof.name)
            out.append(prof)
    return out


def _same_dir(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b


def fitted_run(prof: Any, folder: str) -> int | None:
    """The index of ``folder`` among the runs ``prof`` was fitted to, or None."""
    for i, r in enumerate(prof.provenance.get("runs") or []):
        if isinstance(r, dict) and isinstance(r.get("path"), str) and _same_dir(r["path"], folder):
            return i
    return None


def calibration_rows(prof: Any) -> list[dict[str, Any]]:
    """A runs profile's own calibration data (provenance.fit.points with provenance.runs): each
    timer a run gave, measured and as the fit reproduces it, in seconds per iteration (error =
    fitted / measured - 1, as calibrate prints it)."""
    runs = prof.provenance.get("runs") or []
    out = []
    for p in (prof.provenance.get("fit") or {}).get("points") or []:
        if not isinstance(p, dict):
            continue
        i = p.get("run")
        if (not isinstance(i, int) or not 0 <= i < len(runs) or not isinstance(runs[i], dict)
                or not p.get("measured") or not p.get("predicted")):
            continue
        steps = runs[i].get("env_steps_per_iteration")
        kind = p.get("kind", "throughput")
        row = {"profile": prof.name, "run": i, "path": runs[i].get("path", f"run {i}"), "mode": p.get("mode"),
               "gpus": p.get("gpus"), "timer": "time/step" if kind == "throughput" else f"time/{kind}",
               "kind": kind, "measured_rate": float(p["measured"]), "fitted_rate": float(p["predicted"])}
        if steps:
            row["measured_s"], row["fitted_s"] = steps / row["measured_rate"], steps / row["fitted_rate"]
            row["error_pct"] = error_pct(row["fitted_s"], row["measured_s"])
        out.append(row)
    return out


def rlinf_run_prediction(rec: dict[str, Any], inp: Inputs) -> tuple[float | None, str]:
    """The prediction an RLinf run is compared with: the fit's own where a report profile was
    fitted to this run (in-sample, said so); else the run's plan predicted on the report's
    profile of its backbone (a profile fitted to other runs, the sweep's, --reference-profile's,
    else the bundled one), on that profile's node where it is a user's cluster's."""
    from dataclasses import fields, replace

    from perfmodel.prediction import predict
    from perfmodel.schema.plan import Plan
    from perfmodel.schema.profile import load_profile

    backbone = rec.get("backbone")
    mine = [p for p in runs_profiles(inp) if p.backbone == backbone]
    for prof in mine:
        i = fitted_run(prof, rec["run_dir"])
        if i is not None:
            fit = [r for r in calibration_rows(prof) if r["run"] == i and r["kind"] == "throughput"]
            if fit:
                return fit[0]["fitted_rate"], f"in-sample: profile {prof.name} was fitted to this run"
    try:
        prof = mine[0] if mine else load_profile(inp.reference_profiles.get(backbone) or swept_profile(inp, backbone)
                                                 or backbone)
        plan = Plan.from_dict(rec["plan"], "--run: plan")
        facts = prof.provenance.get("node_facts") if fitted_to_runs(prof) else None
        if isinstance(facts, dict):
            names = {f.name for f in fields(plan.cluster)}
            plan = plan.with_(cluster=replace(plan.cluster, **{k: v for k, v in facts.items() if k in names}))
        thr = predict(plan, prof, interval=False)["throughput_env_steps_per_s"]
    except ConfigError as e:
        return None, f"none: {e.field}: {e.message}"
    return thr, (f"profile {prof.name} (not fitted to this run)" if fitted_to_runs(prof)
                 else f"profile {prof.name}")


def comparison_points(inp: Inputs) -> list[dict[str, Any]]:
    """Run records (and RLinf runs) against their predictions, then the throughput points of the
    runs a report profile was fitted to that no --run gives (in-sample, said so); error =
    prediction / measurement - 1 (computed here from the two throughputs, whatever error field a
    record carries)."""
    pts = []
    for path, rec in inp.runs:
        pred, ci, source = None, None, "none"
        if rec.get("source") == "rlinf":
            pred, source = rlinf_run_prediction(rec, inp)
        elif isinstance(rec.get("prediction"), dict) and rec["prediction"].get("throughput_env_steps_per_s"):
            pred, source = rec["prediction"]["throughput_env_steps_per_s"], "record (executor run --compare)"
        elif rec.get("predicted_throughput_env_steps_per_s"):
            pred, ci, source = rec["predicted_throughput_env_steps_per_s"], rec.get("predicted_throughput_ci95"), "record"
        else:
            m = _match_prediction(rec, inp)
            if m is not None:
                pred, ci, source = m["throughput_env_steps_per_s"], m.get("throughput_ci95"), "matched prediction"
        measured = rec["throughput_env_steps_per_s"]
        pts.append({"label": _label(path, rec), "path": path, "mode": rec.get("mode"), "measured": measured,
                    "measured_ci95": rec.get("throughput_ci95"), "predicted": pred, "predicted_ci95": ci,
                    "prediction_source": source,
                    "error_pct": error_pct(pred, measured)})
    given = [rec["run_dir"] for _, rec in inp.runs if rec.get("source") == "rlinf"]
    for prof in runs_profiles(inp):
        for r in calibration_rows(prof):
            if r["kind"] != "throughput" or any(_same_dir(r["path"], g) for g in given):
                continue
            pts.append({"label": f"{r['mode']} {r['gpus']} (run {r['run']} of {prof.name})", "path": r["path"],
                        "mode": r["mode"], "measured": r["measured_rate"], "measured_ci95": None,
                        "predicted": r["fitted_rate"], "predicted_ci95": None,
                        "prediction_source": f"in-sample: profile {prof.name} was fitted to this run",
                        "error_pct": error_pct(r["fitted_rate"], r["measured_rate"])})
    return pts


def run_validation(inp: Inputs) -> tuple[dict[str, Any] | None, dict[str, Any], str]:
    """perfmodel.calibration.validate over the reference CSVs, with a profile per backbone (a
    bundled one unless --reference-profile names a file). Returns (result, profiles, why-not)."""
    if not inp.references:
        return None, {}, "no reference CSV given (--reference)"
    from perfmodel.calibration.reference import load_reference
    from perfmodel.calibration.validate import validate
    from perfmodel.schema.profile import load_profile

    points = [p for ref in inp.references for p in load_reference(ref)]
    profiles, mine = {}, []
    for b in sorted({p.backbone for p in points}):
        explicit = inp.reference_profiles.get(b)
        try:
            prof = load_profile(explicit or swept_profile(inp, b) or b)
        except ConfigError as e:
            return None, {}, f"no profile for backbone {b}: {e.message}"
        if not explicit and fitted_to_runs(prof):
            mine.append(prof.name)  # checked against its own runs (calibration_rows), issue 41
            continue
        profiles[b] = prof
    why = (f"{', '.join(mine)} {'was' if len(mine) == 1 else 'were'} fitted to your runs and {'is' if len(mine) == 1 else 'are'} "
           "checked against them (the calibration data below), not against published points measured on another "
           "cluster at another workload (--reference-profile BACKBONE=FILE compares them anyway)") if mine else ""
    points = [p for p in points if p.backbone in profiles]
    if not points:
        return None, {}, why
    return validate(points, profiles), profiles, why


def swept_profile(inp: Inputs, backbone: str) -> str | None:
    """The profile the report's sweeps of ``backbone`` were made with, when it is
    not the bundled one: the reference is validated against the profile the sweep used (issue 41),
    unless --reference-profile names another. A file no longer there: None (the bundled one)."""
    from perfmodel.schema.plan import is_profile_path

    refs = [doc.get("spec", {}).get("profile_ref") for _, doc in inp.sweeps if doc.get("backbone") == backbone]
    for ref in refs:
        if isinstance(ref, str) and ref != backbone and is_profile_path(ref) and Path(ref).is_file():
            return ref
    return None


def utilization_sources(inp: Inputs) -> list[tuple[str, str | None, dict[str, Any]]]:
    out: list[tuple[str, str | None, dict[str, Any]]] = []
    if inp.choice:
        best = inp.choice[1]["best"]
        out.append((f"chosen: {_label('', best)} (predicted)", best["mode"], best["prediction"]))
    for path, p in inp.predictions:
        out.append((f"{_label(path, p)} (predicted)", p.get("mode"), p))
    for path, r in inp.runs:
        out.append((f"{_label(path, r)} (measured)", r.get("mode"), r))
    if inp.sweeps:
        doc = inp.sweeps[0][1]
        gpus = inp.gpus or (inp.choice[1]["best"]["gpus"] if inp.choice else
                            max((r["gpus"] for r in doc["rows"] if r["status"] == "ok"), default=None))
        best: dict[str, dict[str, Any]] = {}
        for r in doc["rows"]:
            if r["status"] == "ok" and r["gpus"] == gpus:
                if r["mode"] not in best or r["throughput_env_steps_per_s"] > best[r["mode"]]["throughput_env_steps_per_s"]:
                    best[r["mode"]] = r
        for mode in sorted(best, key=mode_order):
            out.append((f"best {mode} at {gpus} GPUs (sweep)", mode, best[mode]["prediction"]))
    return [s for s in out if isinstance(s[2].get("utilization"), dict)
            and isinstance(s[2]["utilization"].get("stages"), dict)][:8]


def _stand_in(kind: str, doc: dict[str, Any]) -> bool:
    """A "measured" trace that perfmodel wrote (simulated, standing in for a run)."""
    return kind == "measured" and (doc.get("otherData") or {}).get("source") == "perfmodel"


def _trace_title(kind: str, item: tuple[str, dict[str, Any]], lanes: dict[str, Any]) -> str:
    path, doc = item
    title = f"{kind}: {Path(path).name}"
    if _stand_in(kind, doc):
        title += " (stand-in: this trace's source is perfmodel, i.e. simulated)"
    reps = (doc.get("otherData") or {}).get("simulated_replicas")
    if reps:
        title += f"; each simulated worker stands for {max(reps.values())} real ones"
    if lanes["hidden"]:
        title += f"; {lanes['hidden']} more lanes not shown"
    return title


@dataclass
class Built:
    """Everything the renderers need, computed once."""

    calibrated: list[int] = field(default_factory=list)
    calibrated_source: str = ""
    points: list[dec.PlanPoint] = field(default_factory=list)
    chosen: dec.PlanPoint | None = None
    validation: dict[str, Any] | None = None
    validation_in_sample: bool = False
    validation_missing: str = ""
    cv_points: list[dict[str, Any]] = field(default_factory=list)
    comparison: list[dict[str, Any]] = field(default_factory=list)
    util: list[tuple[str, str | None, dict[str, Any]]] = field(default_factory=list)
    util_empty: list[str] = field(default_factory=list)
    gantt: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    gantt_kinds: list[str] = field(default_factory=list)  # "simulated", "measured": which panels exist
    titles: dict[str, str] = field(default_factory=dict)


def build(inp: Inputs) -> Built:
    b = Built()
    b.calibrated, b.calibrated_source = dec.calibrated_gpus(inp)
    b.points = dec.sweep_points(inp, b.calibrated)
    b.chosen = dec.chosen_point(inp, b.calibrated)
    b.validation, profiles, b.validation_missing = run_validation(inp)
    b.validation_in_sample = dec.in_sample(b.validation, profiles)
    if inp.cross_validation:
        b.cv_points = dec.cv_points(inp.cross_validation[1])
    b.comparison = comparison_points(inp)
    b.util = utilization_sources(inp)
    if inp.trace_sim is None and inp.choice is not None:
        inp.trace_sim = simulated_trace(inp.choice[1]["plan"])
    record = next((d for _, d in inp.runs if d.get("source") == "executor"), None)  # an RLinf run has no trace
    for kind, item, rec in (("simulated", inp.trace_sim, None), ("measured", inp.trace_run, record)):
        if item is not None:
            lanes = figures.gantt_lanes(item[1], rec, inp.iteration)
            if lanes["spans"]:
                b.gantt.append((_trace_title(kind, item, lanes), lanes))
                b.gantt_kinds.append("a simulated stand-in for the measured one" if _stand_in(kind, item[1]) else kind)
    v = b.validation
    if v:
        a = v["best_mode_agreement"]
        tied = a.get("predicted_ties", 0)  # a predicted tie is counted apart, never as agreeing
        b.titles["in_sample"] = (("In-sample fit (profiles fitted to these points)" if b.validation_in_sample
                                  else "Profile vs reference (not fitted to these points)")
                                 + f"<br>MAPE {v['mape_pct']:.1f}%, best mode agrees {a['matches']}/{a['groups']}"
                                 + (f", {tied} predicted tie{'s' if tied > 1 else ''}" if tied else ""))
    if b.cv_points:
        m, base = cv_mape(inp, b)
        cv = inp.cross_validation[1]
        if cv.get("design", "scale") == "scale":
            folds = "; ".join(f"fit {f.get('fit_gpus')} -> predict {f.get('predict_gpus')}" for f in cv["folds"])
        else:
            folds = f"{cv['design']}: {len(cv['folds'])} folds, one group held out each"
        iv = (cv.get("summary") or {}).get("interval")
        b.titles["cv"] = (f"Cross-validated ({folds})<br>model MAPE {m:.1f}%"
                          + "".join(f", {k} {x:.1f}%" for k, x in base.items())
                          + (f"; {iv['inside']}/{iv['points']} inside their {100 * iv['coverage']:.0f} % intervals "
                             f"(median width {iv['median_width_pct']:.0f} %)" if iv else ""))
    return b


def cv_mape(inp: Inputs, b: Built) -> tuple[float, dict[str, float]]:
    """The cross-validation's model MAPE and its baselines' (those with a number), in percent."""
    s = inp.cross_validation[1].get("summary") or {}
    base = s.get("baseline_mape_pct") or {}
    return (s.get("model_mape_pct", dec.mape(b.cv_points)),
            {k: x for k, x in base.items() if isinstance(x, (int, float))})


def per_gpu_series(inp: Inputs) -> list[dec.PerGpuSeries]:
    """The per-GPU figure's series: the sweeps, with the published points of --reference (else
    the bundled reference CSV: the published 8- and 16-GPU points) overlaid."""
    from perfmodel.schema.profile import BUNDLED_REFERENCE

    return dec.per_gpu_series([d for _, d in inp.sweeps], list(inp.references) or [BUNDLED_REFERENCE])


def available(inp: Inputs, b: Built) -> dict[str, bool]:
    return {"decision": bool(b.points), "time_cost": bool(b.points), "per_gpu": bool(inp.sweeps),
            "scaling": bool(inp.sweeps),
            "utilization": bool(b.util), "timeline": bool(b.gantt),
            "validation": bool(b.validation or b.cv_points),
            "predicted_vs_measured": any(p["predicted"] for p in b.comparison)}


def interactive_figures(inp: Inputs, b: Built) -> dict[str, Any]:
    av = available(inp, b)
    makers: dict[str, Callable[[], Any]] = {
        "decision": lambda: interactive.throughput_pareto(b.points, b.chosen, b.calibrated, inp.price,
                                                          inp.target_env_steps),
        "time_cost": lambda: interactive.time_cost(b.points, b.chosen, inp.target_env_steps),
        "per_gpu": lambda: interactive.per_gpu(per_gpu_series(inp), b.calibrated),
        "scaling": lambda: interactive.scaling([d for _, d in inp.sweeps], b.calibrated),
        "utilization": lambda: interactive.utilization(b.util)[0],
        "timeline": lambda: interactive.gantt(b.gantt),
        "validation": lambda: interactive.validation(b.validation["points"] if b.validation else None,
                                                     b.titles.get("in_sample", ""), b.cv_points or None,
                                                     b.titles.get("cv", "")),
        "predicted_vs_measured": lambda: interactive.predicted_vs_measured(b.comparison),
    }
    return {fid: makers[fid]() for fid, _ in FIGURES if av[fid]}


def png_figures(inp: Inputs, b: Built) -> dict[str, bytes]:
    av = available(inp, b)
    strip = lambda t: t.replace("<br>", "\n")  # noqa: E731
    makers: dict[str, Callable[[], bytes]] = {
        "decision": lambda: figures.throughput_pareto(b.points, b.chosen, b.calibrated, inp.price),
        "time_cost": lambda: figures.time_cost(b.points, b.chosen, inp.target_env_steps),
        "per_gpu": lambda: figures.per_gpu(per_gpu_series(inp), b.calibrated),
        "scaling": lambda: figures.scaling([d for _, d in inp.sweeps], b.calibrated),
        "utilization": lambda: figures.utilization(b.util),
        "timeline": lambda: figures.timeline(b.gantt),
        "validation": lambda: figures.validation(b.validation["points"] if b.validation else None,
                                                 strip(b.titles.get("in_sample", "")), b.cv_points or None,
                                                 strip(b.titles.get("cv", ""))),
        "predicted_vs_measured": lambda: figures.predicted_vs_measured(b.comparison),
    }
    return {fid: makers[fid]() for fid, _ in FIGURES if av[fid]}


# --- tables and text ----------------------------------------------------------------------------

def num(v: Any, digits: int = 3) -> str:
    """A number for people: thousands separators, about ``digits`` significant digits, no
    5.000000000004229."""
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v):,}"
    a = abs(v)
    if a >= 10 ** digits:
        return f"{v:,.0f}"
    if a == 0:
        return "0"
    import math

    decimals = max(0, digits - 1 - int(math.floor(math.log10(a))))
    out = f"{v:,.{decimals}f}"
    return out.rstrip("0").rstrip(".") if "." in out else out


def _ratio_text(r: dict[str, Any] | None, what: str) -> str:
    """``perfmodel plan``'s interval of the best plan's throughput over another's (what moves
    both alike cancelled), and whether the model orders the two; empty when the input has none."""
    if not r:
        return ""
    verdict = ("measurement spread only" if r["resolved"] is None else
               "the model orders the two" if r["resolved"] else "the model cannot order the two")
    return (f"; best {what} {100 * (r['ratio'] - 1):+.1f}% {r.get('measure', 'throughput')}, "
            f"{100 * r['coverage']:.0f}% interval {100 * (r['low'] - 1):+.1f}%..{100 * (r['high'] - 1):+.1f}%: "
            + verdict)


def _rlinf_verdict(plan: dict[str, Any]) -> str:
    """Whether `perfmodel plan --emit rlinf` gives RLinf a config it accepts (perfmodel.costs.rlinf_batch_repair)."""
    from perfmodel.costs import rlinf_batch_repair
    from perfmodel.schema.plan import Plan

    try:
        fixed, note = rlinf_batch_repair(Plan.from_dict(plan, "plan"))
    except ConfigError as e:
        return f"unknown ({e})"
    if fixed is None:
        return f"no: {note}"
    return "yes" + (f", {note.split(':')[0]}" if note else "")


def chosen_rows(inp: Inputs, b: Built) -> list[tuple[str, str]]:
    c = inp.choice[1]
    best, p = c["best"], b.chosen
    plan = c["plan"]
    rows = [("mode", best["mode"])]
    # The planner's own verdict (runner_up_margin.tie: the same number up to simulation rounding),
    # not the report's looser TIE_REL, which lists near ties in the sweep as such.
    margin, runner = c.get("runner_up_margin") or {}, c.get("runner_up")
    if runner and margin.get("tie"):
        tied = [m for m in margin.get("tied_modes") or [best["mode"], runner["mode"]] if m != best["mode"]]
        rows[0] = ("mode", f"{best['mode']} (tie: {' and '.join(tied)} "
                           f"predict{'s' if len(tied) == 1 else ''} the same {margin.get('measure', 'throughput')})")
    split = (f"rollout {best['rollout_gpus']} : actor {best['actor_gpus']}" +
             (f" (ratio {best['allocation_ratio']})" if best.get("allocation_ratio") else " (shared)"))
    rows += [("GPUs", f"{best['gpus']}: {split}"),
             ("envs", f"{num(best['total_num_envs'])}, {best.get('pipeline_stage_num', 1)} pipeline stage(s)")]
    if best.get("b_max") is not None or plan.get("t_max_s") is not None:
        rows.append(("batching", f"b_max {best.get('b_max') if best.get('b_max') is not None else 'one worker'}, "
                                 f"t_max {num(best.get('t_max_s'))} s"))
    rows.append(("predicted throughput", f"{num(best['throughput_env_steps_per_s'])} env steps/s"))
    rows.append(("interval", dec.fmt_interval(p).replace("none given", "none in the input (no uncertainty estimate)")))
    rows.append(("iteration time", f"{num(best['iteration_time_s'])} s"))
    rows.append(("runs in RLinf as emitted", _rlinf_verdict(plan)))
    rows.append(("bottleneck", f"{best['bottleneck']} (analytic bound {num(best['bound_env_steps_per_s'])} env steps/s)"))
    res = (best.get("prediction") or {}).get("utilization", {}).get("resources") or {}
    if res:
        rows.append(("utilization", ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(res.items(), key=lambda kv: -kv[1]))))
    rows.append(("env steps per GPU-hour", num(best.get("env_steps_per_gpu_hour"))))
    if inp.price:
        rows.append(("cost", f"${num(best['gpus'] * inp.price)}/h (${num(inp.price)} per GPU-hour)"))
    h, cost = p.hours_to(inp.target_env_steps), p.cost_to(inp.target_env_steps)
    rows.append((f"to {num(inp.target_env_steps)} env steps", f"{num(h)} h" + (f", ${num(cost)}" if cost else "")))
    if c.get("runner_up"):
        r = c["runner_up"]
        rows.append(("runner-up", f"{r['mode']} {r['gpus']} GPUs {r.get('allocation_ratio') or ''}: "
                                  f"{num(r['throughput_env_steps_per_s'])} env steps/s "
                                  f"({100 * (r['throughput_env_steps_per_s'] / best['throughput_env_steps_per_s'] - 1):+.1f}%)"
                                  + _ratio_text(c.get("runner_up_ratio"), "over the runner-up")))
    if best.get("gain_over_colocated_pct") is not None and best["mode"] != "colocated":
        rows.append(("vs colocated", f"{best['gain_over_colocated_pct']:+.1f}% (colocated "
                                     f"{num(best.get('colocated_throughput_env_steps_per_s'))} env steps/s)"
                                     + _ratio_text(c.get("colocated_ratio"), "over colocated")))
    if p.beyond_calibrated:
        rows.append(("calibrated scale", f"EXTRAPOLATED: {best['gpus']} GPUs is beyond the calibrated "
                                         f"{', '.join(map(str, b.calibrated))} GPUs"))
    elif p.beyond_calibrated is False:
        rows.append(("calibrated scale", f"within the calibrated {', '.join(map(str, b.calibrated))} GPUs"))
    return rows


def plan_detail_rows(plan: dict[str, Any]) -> list[tuple[str, str]]:
    rows = []
    for k, v in plan.items():
        if isinstance(v, dict):
            rows += [(f"{k}.{k2}", num(v2)) for k2, v2 in v.items()]
        else:
            rows.append((k, num(v)))
    return rows


def tables(inp: Inputs, b: Built) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(title, header, rows, note) of the report's tables."""
    out = []
    for path, doc in inp.sweeps:
        s = doc["summary"]
        rows = [[num(e["gpus"]), e["mode"], e["allocation_ratio"] or "-", num(e["throughput_env_steps_per_s"]),
                 f"{e['scaling_efficiency']:.2f}",
                 fmt_number(e.get("gain_over_colocated_pct"), "+.1f", "%"),
                 num(e["env_steps_per_gpu_hour"]), num(e.get("env_steps_per_dollar")), e["bottleneck"],
                 "yes" if b.calibrated and not (min(b.calibrated) <= e["gpus"] <= max(b.calibrated)) else "no"]
                for e in sorted(s["best_per_mode"], key=lambda e: (e["gpus"], mode_order(e["mode"])))]
        note = (f"{s['feasible']} of {s['combinations']} combinations predicted, {s['infeasible']} infeasible"
                + (": " + "; ".join(f"{n} {k}" for k, n in sorted(s["not_run_by_reason"].items()))
                   if s["not_run_by_reason"] else "") + ".")
        price = doc["spec"].get("gpu_hour_price")
        note += f" Price: ${price:g} per GPU-hour." if price else " No --gpu-hour-price: steps/$ not computed."
        out.append((f"Sweep {Path(path).name}: {doc.get('backbone')} (profile {doc.get('profile')}), best plan per "
                    "mode and GPU count", ["GPUs", "mode", "ratio", "env steps/s", "scaling eff.", "vs colocated",
                                           "steps/GPU-h", "steps/$", "bottleneck", "extrapolated"], rows, note))
    for prof in runs_profiles(inp):
        rows = calibration_rows(prof)
        if rows:
            out.append((f"Calibration data of profile {prof.name} (the runs it was fitted to: in-sample)",
                        ["run", "path", "mode", "GPUs", "timer", "measured s", "fitted s", "error"],
                        [[str(r["run"]), r["path"], r["mode"] or "-", num(r["gpus"]), r["timer"],
                          num(r.get("measured_s")), num(r.get("fitted_s")),
                          fmt_number(r.get("error_pct"), "+.1f", "%")] for r in rows],
                        "seconds per iteration; error = fitted / measured - 1 (perfmodel calibrate prints the "
                        "same rows)."))
    if b.comparison:
        out.append(("Run records: predicted vs measured",
                    ["run", "file", "measured env steps/s", "predicted", "error", "prediction from"],
                    [[p["label"], p["path"], num(p["measured"]), num(p["predicted"]),
                      fmt_number(p["error_pct"], "+.1f", "%"), p["prediction_source"]]
                     for p in b.comparison],
                    "error = prediction / measurement - 1 (the one definition used everywhere; computed here "
                    "from the two throughputs)."))
    v = b.validation
    if v:
        kind = "in-sample fit" if b.validation_in_sample else "not fitted to these points"
        out.append((f"Published reference points ({kind})",
                    ["backbone", "mode", "GPUs", "ratio", "published", "predicted", "error"],
                    [[r["backbone"], r["mode"], num(r["gpus"]), r["allocation_ratio"] or "-", num(r["published"]),
                      num(r["predicted"]), f"{r['error_pct']:+.1f}%"] for r in v["points"]],
                    "error = prediction / published - 1."))
    if b.cv_points:
        out.append(("Cross-validated points (predicted by a profile fitted without them)",
                    ["fit on", "predict", "backbone", "mode", "GPUs", "published", "predicted", "error"]
                    + [f"{k} error" for k in sorted({k for p in b.cv_points for k in (p.get("baselines") or {})})],
                    [[str(p.get("fit_gpus")), str(p.get("predict_gpus")), p.get("backbone", "-"), p["mode"],
                      num(p.get("gpus")), num(p["published"]), num(p["predicted"]), f"{p['error_pct']:+.1f}%"]
                     + [f"{(p.get('baselines') or {}).get(k, {}).get('error_pct', float('nan')):+.1f}%"
                        for k in sorted({k for q in b.cv_points for k in (q.get("baselines") or {})})]
                     for p in b.cv_points], "error = prediction / published - 1."))
    return out


def validation_notes(inp: Inputs, b: Built) -> list[str]:
    notes = []
    v = b.validation
    if v:
        a = v["best_mode_agreement"]
        if b.validation_in_sample:
            notes.append(f"In-sample fit, not validation: the profiles were fitted to these {len(v['points'])} points, "
                         f"so MAPE {v['mape_pct']:.1f}% (max {v['max_abs_error_pct']:.1f}%) measures how well the fit "
                         "reproduces its own data, not how well it predicts new setups.")
        else:
            notes.append(f"MAPE {v['mape_pct']:.1f}% over {len(v['points'])} points the profiles were not fitted to.")
        ties = [g for g in a["per_group"] if len(g["predicted_best"]) > 1 or len(g["published_best"]) > 1]
        pub = [g for g in ties if len(g["published_best"]) > 1]
        pred_ties = a.get("predicted_ties", 0)
        notes.append(f"Best mode agrees in {a['matches']}/{a['groups']} (backbone, GPUs) groups"
                     + (f"; in {pred_ties} more the model predicts a tie that includes the published best (not "
                        "counted as agreeing: it does not name the best)" if pred_ties else "")
                     + ("; tied in the published table too: " + "; ".join(
                         f"{g['backbone']} {g['gpus']} GPUs {' = '.join(sorted(g['published_best'], key=mode_order))}"
                         for g in pub) if pub else "") + ".")
        pt = dec.predicted_ties(v)
        if pt:
            notes.append("Modes the model cannot tell apart (equal predictions): " + "; ".join(pt) + ".")
    if not v and b.validation_missing:
        notes.append(f"No comparison with published points: {b.validation_missing}.")
    elif b.validation_missing:
        notes.append(f"Published points not compared for a profile: {b.validation_missing}.")
    for prof in runs_profiles(inp):
        rows = calibration_rows(prof)
        thr = [abs(r["error_pct"]) for r in rows if r["kind"] == "throughput" and r.get("error_pct") is not None]
        runs = len(prof.provenance.get("runs") or [])
        if rows:
            notes.append(f"Profile {prof.name} was fitted to {runs} run{'s' if runs != 1 else ''} of yours "
                         f"({len(rows)} timer{'s' if len(rows) != 1 else ''}, table 'Calibration data'): in-sample, so "
                         + (f"its time/step error (mean |error| {sum(thr) / len(thr):.1f}%) " if thr else "its error ")
                         + "measures how well the fit reproduces those runs, not how well it predicts others "
                           "(calibrate's leave-one-run-out does).")
    if b.cv_points:
        m, base = cv_mape(inp, b)
        notes.append(f"Cross-validated: each fold's profile was fitted without the points it predicts; model MAPE "
                     f"{m:.1f}%" + "".join(f", baseline {k} {x:.1f}%" for k, x in base.items())
                     + f" ({inp.cross_validation[0]}).")
    else:
        notes.append("No cross-validation given (--cross-validation FILE from `perfmodel validate --cross-validate "
                     "--json`): nothing here measures how well the model predicts points it was not fitted to.")
    if b.points:
        t = dec.ties(b.points)
        if t:
            notes.append("Near ties in the sweep (modes whose best plans at a GPU count are within 0.5%, less than the "
                         "model's residual error; `perfmodel plan` calls a tie only the same number): " + "; ".join(
                f"{g} GPUs: {' = '.join(ms)} ({num(thr)} env steps/s)" for g, ms, thr in t) + ".")
    return notes


def _inputs_list(inp: Inputs) -> list[str]:
    items = [f"sweep: {p}" for p, _ in inp.sweeps]
    items.append(f"plan choice: {inp.choice[0]}" if inp.choice else "plan choice: none given")
    items += [f"prediction: {p}" for p, _ in inp.predictions]
    items += [f"run record: {p}" for p, _ in inp.runs] or ["run record: none given"]
    items.append(f"simulated trace: {inp.trace_sim[0]}" if inp.trace_sim else "simulated trace: none given")
    if inp.trace_run:
        src = (inp.trace_run[1].get("otherData") or {}).get("source")
        items.append(f"measured trace: {inp.trace_run[0]}"
                     + (" (its source is perfmodel: a simulated stand-in, not a measurement)" if src == "perfmodel" else ""))
    else:
        items.append("measured trace: none given")
    items += [f"reference: {r}" for r in inp.references]
    items += [f"reference profile for {k}: {p}" for k, p in inp.reference_profiles.items()]
    items.append(f"cross-validation: {inp.cross_validation[0]}" if inp.cross_validation else
                 "cross-validation: none given")
    return items


# --- rendering ----------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1200px;margin:2em auto;
padding:0 1em;color:#222} h1{font-size:1.6em} h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:0.88em;margin:0.5em 0} td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right} th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
table.kv td:first-child{font-weight:600;background:#fafafa} table.kv td{text-align:left}
figure{margin:1em 0} figcaption{font-size:0.9em;color:#555} .note{font-size:0.9em;color:#444}
.missing{font-size:0.9em;color:#777;font-style:italic;margin:0.3em 0}
.warn{color:#a04000;font-weight:600} .choice{border-left:4px solid """ + CHOSEN_COLOR + """;padding-left:0.8em}
details{font-size:0.9em;margin:0.5em 0}
"""

CHECK_SCRIPT = """
<script>
(function () {
  function check() {
    var figs = document.querySelectorAll('div.report-figure');
    var ok = 0, styles = {};
    figs.forEach(function (div) {
      var gd = div.querySelector('.js-plotly-plot');
      var traces = gd ? gd.querySelectorAll('g.trace').length : 0;
      var good = !!(gd && gd.querySelector('svg.main-svg') && traces > 0 && gd.data && gd.data.length > 0);
      div.setAttribute('data-rendered', good ? 'yes' : 'no');
      div.setAttribute('data-traces', String(traces));
      if (good) { ok += 1; }
      var s = {};
      (gd && gd.data || []).forEach(function (t) {
        if (t.meta && t.meta.mode && t.visible !== false && t.marker) {
          s[t.meta.mode] = [t.marker.color, t.marker.symbol, (t.line && t.line.dash) || null];
        }
      });
      styles[div.getAttribute('data-figure')] = s;
    });
    document.body.setAttribute('data-figures-total', String(figs.length));
    document.body.setAttribute('data-figures-rendered', String(ok));
    document.body.setAttribute('data-figures-missing', String(document.querySelectorAll('p.missing').length));
    document.body.setAttribute('data-mode-styles', JSON.stringify(styles));
  }
  window.addEventListener('load', function () { setTimeout(check, 300); });
})();
</script>
"""


def _table_html(head: list[str] | None, rows: list[list[str]], cls: str = "") -> str:
    e = html.escape
    h = "<tr>" + "".join(f"<th>{e(x)}</th>" for x in head) + "</tr>" if head else ""
    return (f"<table class='{cls}'>" + h + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>"
                                                  for r in rows) + "</table>")


def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def figure_div(fid: str, fig: Any) -> str:
    import plotly.io as pio

    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=f"plot-{fid}",
                       config=interactive.CONFIG)


def standalone_html(figs: dict[str, Any], title: str = "figure") -> str:
    """Just these figures, plotly.js embedded (for screenshots and tests)."""
    body = "".join(f"<div class='report-figure' data-figure='{fid}'>{figure_div(fid, f)}</div>" for fid, f in figs.items())
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<script>{plotly_js()}</script></head><body style='margin:0'>{body}{CHECK_SCRIPT}</body></html>")


def render_html(inp: Inputs, b: Built, figs: dict[str, Any]) -> str:
    e = html.escape
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(inp.title)}</title>"
             f"<style>{CSS}</style><script>{plotly_js()}</script></head><body>", f"<h1>{e(inp.title)}</h1>"]
    if inp.choice:
        c = inp.choice[1]
        parts.append(f"<h2>Chosen plan ({e(c['objective'])}, {c['gpus_budget']} GPUs)</h2><div class='choice'>"
                     + _table_html(None, [list(r) for r in chosen_rows(inp, b)], "kv")
                     + f"<details><summary>Why (perfmodel plan's explanation)</summary><p>{e(c['explanation'])}</p>"
                     "</details><details><summary>Plan fields</summary>"
                     + _table_html(["field", "value"], [list(r) for r in plan_detail_rows(c["plan"])], "kv")
                     + "</details></div>")
    parts.append("<h2>Inputs</h2><ul>" + "".join(f"<li>{e(i)}</li>" for i in _inputs_list(inp)) + "</ul>")
    if b.calibrated:
        parts.append(f"<p class='note'>Calibrated scale: {', '.join(map(str, b.calibrated))} GPUs (from "
                     f"{e(b.calibrated_source)}); predictions beyond it are extrapolations and are shaded or marked.</p>")
    util_note = (f"Stages busy in no source, left out: {', '.join(interactive.utilization(b.util)[1])}."
                 if b.util and interactive.utilization(b.util)[1] else "")
    for fid, caption in FIGURES:
        caption = caption_of(fid, caption, b)
        if fid == "validation":
            parts.append("<h2 id='validation'>Validation</h2>")
        elif fid == "decision":
            parts.append(f"<h2>Decision: throughput, GPUs, dollars (target {num(inp.target_env_steps)} env steps)</h2>")
        if fid in figs:
            parts.append(f"<figure id='figure-{fid}'><div class='report-figure' data-figure='{fid}'>"
                         f"{figure_div(fid, figs[fid])}</div><figcaption>{e(caption)}</figcaption></figure>")
        else:
            parts.append(f"<p class='missing' data-figure='{fid}'>Not drawn ({e(fid.replace('_', ' '))}): "
                         f"{e(NEEDS[fid])}.</p>")
        if fid == "utilization" and util_note and fid in figs:
            parts.append(f"<p class='note'>{e(util_note)}</p>")
        if fid == "validation":
            parts.append("<ul class='note'>" + "".join(f"<li>{e(n)}</li>" for n in validation_notes(inp, b)) + "</ul>")
    for title, head, rows, note in tables(inp, b):
        parts.append(f"<h2>{e(title)}</h2>" + _table_html(head, rows) + f"<p class='note'>{e(note)}</p>")
    parts.append(CHECK_SCRIPT + "</body></html>")
    return "\n".join(parts)


def caption_of(fid: str, caption: str, b: Built) -> str:
    """A figure's caption as drawn: the timeline names the panels it has (simulated, measured)."""
    if fid == "timeline" and b.gantt_kinds:
        return "Timeline (Gantt) of one iteration: " + ", then ".join(b.gantt_kinds)
    return caption


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows])


def render_markdown(inp: Inputs, b: Built, fig_paths: dict[str, str]) -> str:
    lines = [f"# {inp.title}", ""]
    if inp.choice:
        c = inp.choice[1]
        lines += [f"## Chosen plan ({c['objective']}, {c['gpus_budget']} GPUs)", ""]
        lines += _md_table(["", ""], [list(r) for r in chosen_rows(inp, b)]) + ["", c["explanation"], ""]
    lines += ["## Inputs", ""] + [f"- {i}" for i in _inputs_list(inp)] + [""]
    if b.calibrated:
        lines += [f"Calibrated scale: {', '.join(map(str, b.calibrated))} GPUs ({b.calibrated_source}); beyond it, "
                  "predictions are extrapolations.", ""]
    lines += ["## Figures", ""]
    for fid, caption in FIGURES:
        caption = caption_of(fid, caption, b)
        if fid in fig_paths:
            lines += [f"![{caption}]({fig_paths[fid]})", "", f"*{caption}*", ""]
        else:
            lines += [f"*Not drawn ({fid.replace('_', ' ')}): {NEEDS[fid]}.*", ""]
        if fid == "validation":
            lines += [f"- {n}" for n in validation_notes(inp, b)] + [""]
    for title, head, rows, note in tables(inp, b):
        lines += [f"## {title}", ""] + _md_table(head, rows) + ["", note, ""]
    return "\n".join(lines)


def write_report(inp: Inputs, html_path: str | Path, md_path: str | Path | None = None) -> dict[str, Any]:
    """Write the HTML (interactive figures, plotly.js embedded once) and the Markdown (PNG
    figures in ``<md stem>_figures/``). Returns the paths and the figure ids drawn."""
    html_path = Path(html_path)
    md_path = Path(md_path) if md_path else html_path.with_suffix(".md")
    b = build(inp)
    figs = interactive_figures(inp, b)
    pngs = png_figures(inp, b)
    fig_dir = md_path.parent / f"{md_path.stem}_figures"
    rel = {}
    for fid, png in pngs.items():
        write_atomic(fig_dir / f"{fid}.png", png)
        rel[fid] = f"{fig_dir.name}/{fid}.png"
    write_atomic(md_path, render_markdown(inp, b, rel).encode())
    write_atomic(html_path, render_html(inp, b, figs).encode())
    return {"html": str(html_path), "markdown": str(md_path), "figures_dir": str(fig_dir),
            "figures": [f for f, _ in FIGURES if f in figs],
            "missing": [f for f, _ in FIGURES if f not in figs], "validation": b.validation is not None}
