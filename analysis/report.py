"""Build the capacity-planning report (self-contained HTML with base64 PNG figures, and a
Markdown version with the PNGs beside it) from files: sweeps (``perfmodel sweep -o``), a plan
choice (``perfmodel plan --details``), predictions (``perfmodel predict --json``), run records
(``executor run``: JSON with the prediction's fields), Chrome traces (simulated and measured) and
published reference CSVs. Executor output is read as files only; nothing here imports executor.
"""

from __future__ import annotations

import base64
import html
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis import figures
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.jsonio import write_atomic
from perfmodel.schema.modes import MODES

# The report's figures, in order: (id, caption). The test checks that every one is rendered.
FIGURES = (
    ("throughput", "Throughput vs GPUs per mode (best plan per mode and GPU count; bars: 95% CI when replicated)"),
    ("scaling", "Scaling efficiency against linear: (thr(N)/N) / (thr(N0)/N0), N0 = the mode's smallest GPU count"),
    ("gain", "Gain over colocated at the same GPU count: throughput / colocated throughput - 1"),
    ("utilization", "Per-stage utilization (busy fraction of the stage's resource, docs/metrics.md)"),
    ("timeline", "Timeline (Gantt) of one iteration: simulated (left) and measured (right)"),
    ("predicted_vs_measured", "Predicted vs measured throughput, from run records"),
    ("predicted_vs_published", "Predicted vs published throughput (validation MAPE, best-mode agreement)"),
)


@dataclass
class Inputs:
    sweeps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    choice: tuple[str, dict[str, Any]] | None = None
    predictions: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    runs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    trace_sim: tuple[str, dict[str, Any]] | None = None
    trace_run: tuple[str, dict[str, Any]] | None = None
    references: list[str] = field(default_factory=list)
    reference_profiles: dict[str, str] = field(default_factory=dict)
    gpus: int | None = None
    iteration: int | None = None
    title: str = "vlaperf capacity-planning report"


def _load(option: str, path: str) -> Any:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(option, f"file not found: {path}")
    try:
        return json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(option, f"{path} is not valid JSON ({e})") from None


def load_inputs(*, sweeps=(), choice=None, predictions=(), runs=(), trace_sim=None, trace_run=None,
                references=(), reference_profiles=(), gpus=None, iteration=None, title=None) -> Inputs:
    """Read and check every input file; bad input is a ConfigError naming the option."""
    inp = Inputs(gpus=gpus, iteration=iteration)
    if title:
        inp.title = title
    for s in sweeps:
        doc = _load("--sweep", s)
        if not isinstance(doc, dict) or doc.get("kind") != "perfmodel.planning.sweep":
            raise ConfigError("--sweep", f"{s} is not a sweep written by `perfmodel sweep -o`")
        inp.sweeps.append((s, doc))
    if choice:
        doc = _load("--choice", choice)
        if not isinstance(doc, dict) or doc.get("kind") != "perfmodel.plan_choice":
            raise ConfigError("--choice", f"{choice} is not written by `perfmodel plan --details`")
        inp.choice = (choice, doc)
    for p in predictions:
        doc = _load("--prediction", p)
        if not isinstance(doc, dict) or "throughput_env_steps_per_s" not in doc:
            raise ConfigError("--prediction", f"{p} lacks throughput_env_steps_per_s (`perfmodel predict --json`)")
        inp.predictions.append((p, doc))
    for r in runs:
        doc = _load("--run", r)
        if not isinstance(doc, dict) or not isinstance(doc.get("throughput_env_steps_per_s"), (int, float)):
            raise ConfigError("--run", f"{r} is not a run record: it needs throughput_env_steps_per_s")
        inp.runs.append((r, doc))
    for opt, t, attr in (("--trace-sim", trace_sim, "trace_sim"), ("--trace-run", trace_run, "trace_run")):
        if t:
            doc = _load(opt, t)
            if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
                raise ConfigError(opt, f"{t} is not a Chrome trace (needs traceEvents)")
            setattr(inp, attr, (t, doc))
    if inp.trace_sim is None and inp.choice is not None:
        inp.trace_sim = simulated_trace(inp.choice[1]["plan"])
    for ref in references:
        if not Path(ref).is_file():
            raise ConfigError("--reference", f"file not found: {ref}")
        inp.references.append(ref)
    for item in reference_profiles:
        if "=" not in item:
            raise ConfigError("--reference-profile", f"must look like BACKBONE=PROFILE.json, got {item!r}")
        b, path = item.split("=", 1)
        inp.reference_profiles[b.strip()] = path.strip()
    return inp


def simulated_trace(plan_dict: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The simulated trace of a plan (when no --trace-sim is given but a plan choice is), or
    None when its profile cannot be loaded here."""
    from perfmodel.schema.plan import Plan
    from perfmodel.schema.profile import load_profile
    from perfmodel.simulate import predict

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


def comparison_points(inp: Inputs) -> list[dict[str, Any]]:
    pts = []
    for path, rec in inp.runs:
        pred = rec.get("predicted_throughput_env_steps_per_s")
        ci = rec.get("predicted_throughput_ci95")
        source = "record"
        if pred is None:
            m = _match_prediction(rec, inp)
            if m is not None:
                pred, ci, source = m["throughput_env_steps_per_s"], m.get("throughput_ci95"), "matched prediction"
        measured = rec["throughput_env_steps_per_s"]
        pts.append({"label": _label(path, rec), "path": path, "mode": rec.get("mode"), "measured": measured,
                    "measured_ci95": rec.get("throughput_ci95"), "predicted": pred, "predicted_ci95": ci,
                    "prediction_source": source if pred is not None else "none",
                    "error_pct": (100 * (pred / measured - 1) if pred and measured else None)})
    return pts


def run_validation(inp: Inputs) -> tuple[dict[str, Any] | None, str]:
    """perfmodel.calibration.validate over the reference CSVs, with a profile per backbone (a bundled one
    unless --reference-profile names a file). Returns (result, why-not)."""
    if not inp.references:
        return None, "no reference CSV given (--reference)"
    from perfmodel.schema.profile import load_profile
    from perfmodel.calibration.reference import load_reference
    from perfmodel.calibration.validate import validate

    points = [p for ref in inp.references for p in load_reference(ref)]
    profiles = {}
    for b in sorted({p.backbone for p in points}):
        try:
            profiles[b] = load_profile(inp.reference_profiles.get(b, b))
        except ConfigError as e:
            return None, f"no profile for backbone {b}: {e.message}"
    return validate(points, profiles), ""


def utilization_sources(inp: Inputs) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if inp.choice:
        best = inp.choice[1]["best"]
        out.append((f"chosen plan: {_label('', best)} (predicted)", best["prediction"]))
    for path, p in inp.predictions:
        out.append((f"{_label(path, p)} (predicted)", p))
    for path, r in inp.runs:
        out.append((f"{_label(path, r)} (measured)", r))
    if inp.sweeps:
        doc = inp.sweeps[0][1]
        gpus = inp.gpus or (inp.choice[1]["best"]["gpus"] if inp.choice else
                            max((r["gpus"] for r in doc["rows"] if r["status"] == "ok"), default=None))
        best = {}
        for r in doc["rows"]:
            if r["status"] == "ok" and r["gpus"] == gpus:
                if r["mode"] not in best or r["throughput_env_steps_per_s"] > best[r["mode"]]["throughput_env_steps_per_s"]:
                    best[r["mode"]] = r
        for mode, r in best.items():
            out.append((f"best {mode} at {gpus} GPUs (sweep)", r["prediction"]))
    return out


def _trace_label(kind: str, item: tuple[str, dict[str, Any]] | None) -> str:
    if item is None:
        return f"{kind} trace"
    path, doc = item
    src = (doc.get("otherData") or {}).get("source")
    label = f"{kind}: {Path(path).name}"
    if kind == "measured" and src == "perfmodel":
        label += "\n(stand-in: this trace's source is perfmodel, i.e. simulated)"
    return label


def build_figures(inp: Inputs) -> tuple[dict[str, bytes], dict[str, Any]]:
    sweeps = [d for _, d in inp.sweeps]
    validation, why = run_validation(inp)
    points = comparison_points(inp)
    record = inp.runs[0][1] if inp.runs else None
    figs = {
        "throughput": figures.throughput_vs_gpus(sweeps),
        "scaling": figures.scaling_efficiency(sweeps),
        "gain": figures.gain_over_colocated(sweeps),
        "utilization": figures.utilization(utilization_sources(inp)),
        "timeline": figures.timeline(inp.trace_sim[1] if inp.trace_sim else None,
                                     inp.trace_run[1] if inp.trace_run else None,
                                     sim_label=_trace_label("simulated", inp.trace_sim),
                                     measured_label=_trace_label("measured", inp.trace_run),
                                     record=record, iteration=inp.iteration),
        "predicted_vs_measured": figures.predicted_vs_measured(points),
        "predicted_vs_published": figures.predicted_vs_published(validation, why),
    }
    assert list(figs) == [f for f, _ in FIGURES]
    return figs, {"validation": validation, "validation_missing": why, "comparison": points}


# --- rendering ---------------------------------------------------------------------------------

def _f(v: Any, spec: str = ".2f") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def _tables(inp: Inputs, extra: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]], str]]:
    """(title, header, rows, note) of every table in the report."""
    tables = []
    for path, doc in inp.sweeps:
        s = doc["summary"]
        rows = [[str(e["gpus"]), e["mode"], e["allocation_ratio"] or "-", _f(e["throughput_env_steps_per_s"]),
                 _f(e["scaling_efficiency"], ".3f"),
                 "-" if e.get("gain_over_colocated_pct") is None else f"{e['gain_over_colocated_pct']:+.1f}%",
                 _f(e["env_steps_per_gpu_hour"], ".0f"), _f(e.get("env_steps_per_dollar"), ".0f"), e["bottleneck"]]
                for e in sorted(s["best_per_mode"], key=lambda e: (e["gpus"], MODES.index(e["mode"])))]
        note = (f"{s['feasible']} of {s['combinations']} combinations predicted, {s['infeasible']} infeasible"
                + (": " + "; ".join(f"{n} {k}" for k, n in sorted(s["not_run_by_reason"].items()))
                   if s["not_run_by_reason"] else "") + ". Scaling efficiency here: (thr(N)/N) / (thr(N0)/N0) of the "
                "mode's best plan, N0 = the mode's smallest swept GPU count; gain over colocated: thr / colocated "
                "thr at the same GPU count - 1.")
        price = doc["spec"].get("gpu_hour_price")
        note += f" Price: ${price:g} per GPU-hour." if price else " No --gpu-hour-price: steps/$ not computed."
        tables.append((f"Sweep {Path(path).name}: {doc.get('backbone')} (profile {doc.get('profile')}), "
                       "best plan per mode and GPU count",
                       ["GPUs", "mode", "ratio", "env steps/s", "scaling eff.", "vs colocated", "steps/GPU-h",
                        "steps/$", "bottleneck"], rows, note))
    pts = extra["comparison"]
    if pts:
        tables.append(("Run records: predicted vs measured",
                       ["run", "file", "measured env steps/s", "predicted", "error", "prediction from"],
                       [[p["label"], p["path"], _f(p["measured"]), _f(p["predicted"]),
                         "-" if p["error_pct"] is None else f"{p['error_pct']:+.1f}%", p["prediction_source"]]
                        for p in pts], "error = predicted / measured - 1."))
    v = extra["validation"]
    if v:
        a = v["best_mode_agreement"]
        tables.append(("Validation against published results",
                       ["backbone", "mode", "GPUs", "ratio", "published", "predicted", "error"],
                       [[r["backbone"], r["mode"], str(r["gpus"]), r["allocation_ratio"] or "-", _f(r["published"]),
                         _f(r["predicted"]), f"{r['error_pct']:+.1f}%"] for r in v["points"]],
                       f"MAPE {v['mape_pct']:.2f}%, max |error| {v['max_abs_error_pct']:.2f}%, best mode agrees in "
                       f"{a['matches']}/{a['groups']} (backbone, GPUs) groups, Spearman "
                       f"{_f(v['spearman'], '.3f')}."))
    return tables


def _inputs_list(inp: Inputs) -> list[str]:
    items = [f"sweep: {p}" for p, _ in inp.sweeps]
    if inp.choice:
        items.append(f"plan choice: {inp.choice[0]}")
    items += [f"prediction: {p}" for p, _ in inp.predictions]
    items += [f"run record: {p}" for p, _ in inp.runs]
    items.append(f"simulated trace: {inp.trace_sim[0]}" if inp.trace_sim else "simulated trace: none given")
    if inp.trace_run:
        src = (inp.trace_run[1].get("otherData") or {}).get("source")
        items.append(f"measured trace: {inp.trace_run[0]}"
                     + (" (its source is perfmodel: a simulated stand-in, not a measurement)" if src == "perfmodel" else ""))
    else:
        items.append("measured trace: none given")
    items += [f"reference: {r}" for r in inp.references]
    items += [f"reference profile for {b}: {p}" for b, p in inp.reference_profiles.items()]
    return items


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1200px;margin:2em auto;
padding:0 1em;color:#222} h1{font-size:1.6em} h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0} td,th{border:1px solid #ccc;padding:2px 6px;
text-align:right} th{background:#f3f3f3} td:nth-child(2),td:first-child{text-align:left}
figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee} figcaption{font-size:0.9em;color:#555}
.note{font-size:0.85em;color:#555} .choice{background:#f7f9fc;border-left:4px solid #1f77b4;padding:0.6em 1em}
"""

CHECK_SCRIPT = """
<script>
(function () {
  function check() {
    var imgs = document.querySelectorAll('img.report-figure');
    var ok = 0;
    imgs.forEach(function (img) {
      var good = img.complete && img.naturalWidth > 0 && img.naturalHeight > 0;
      img.setAttribute('data-rendered', good ? 'yes' : 'no');
      if (good) { ok += 1; }
    });
    document.body.setAttribute('data-figures-total', String(imgs.length));
    document.body.setAttribute('data-figures-rendered', String(ok));
  }
  if (document.readyState === 'complete') { check(); } else { window.addEventListener('load', check); }
})();
</script>
"""


def render_html(inp: Inputs, figs: dict[str, bytes], extra: dict[str, Any]) -> str:
    e = html.escape
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(inp.title)}</title>"
             f"<style>{CSS}</style></head><body>", f"<h1>{e(inp.title)}</h1>",
             "<h2>Inputs</h2><ul>" + "".join(f"<li>{e(i)}</li>" for i in _inputs_list(inp)) + "</ul>"]
    if inp.choice:
        c = inp.choice[1]
        parts.append(f"<h2>Chosen plan ({e(c['objective'])}, {c['gpus_budget']} GPUs)</h2>"
                     f"<p class='choice'>{e(c['explanation'])}</p>"
                     f"<pre>{e(json.dumps(c['plan'], indent=2))}</pre>")
    parts.append("<h2>Figures</h2>")
    for fid, caption in FIGURES:
        b64 = base64.b64encode(figs[fid]).decode()
        parts.append(f"<figure id='figure-{fid}'><img class='report-figure' id='fig-{fid}' data-figure='{fid}' "
                     f"alt='{e(caption)}' src='data:image/png;base64,{b64}'><figcaption>{e(caption)}</figcaption></figure>")
    for title, head, rows, note in _tables(inp, extra):
        parts.append(f"<h2>{e(title)}</h2><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
                     + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows)
                     + f"</table><p class='note'>{e(note)}</p>")
    parts.append(CHECK_SCRIPT + "</body></html>")
    return "\n".join(parts)


def render_markdown(inp: Inputs, fig_paths: dict[str, str], extra: dict[str, Any]) -> str:
    lines = [f"# {inp.title}", "", "## Inputs", ""] + [f"- {i}" for i in _inputs_list(inp)] + [""]
    if inp.choice:
        c = inp.choice[1]
        lines += [f"## Chosen plan ({c['objective']}, {c['gpus_budget']} GPUs)", "", c["explanation"], "",
                  "```json", json.dumps(c["plan"], indent=2), "```", ""]
    lines += ["## Figures", ""]
    for fid, caption in FIGURES:
        lines += [f"![{caption}]({fig_paths[fid]})", "", f"*{caption}*", ""]
    for title, head, rows, note in _tables(inp, extra):
        lines += [f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        lines += ["", note, ""]
    return "\n".join(lines)


def write_report(inp: Inputs, html_path: str | Path, md_path: str | Path | None = None) -> dict[str, Any]:
    """Write the HTML (figures embedded) and the Markdown (figures as PNG files in
    ``<md stem>_figures/``). Returns the paths and the figure ids."""
    html_path = Path(html_path)
    md_path = Path(md_path) if md_path else html_path.with_suffix(".md")
    figs, extra = build_figures(inp)
    fig_dir = md_path.parent / f"{md_path.stem}_figures"
    rel = {}
    for fid, png in figs.items():
        write_atomic(fig_dir / f"{fid}.png", png)
        rel[fid] = f"{fig_dir.name}/{fid}.png"
    write_atomic(md_path, render_markdown(inp, rel, extra).encode())
    write_atomic(html_path, render_html(inp, figs, extra).encode())
    return {"html": str(html_path), "markdown": str(md_path), "figures_dir": str(fig_dir),
            "figures": [f for f, _ in FIGURES], "validation": extra["validation"] is not None}
