"""The report's figures, each a function of plain data (sweeps, predictions, run records, traces)
returning PNG bytes. Matplotlib runs headless (Agg). A figure whose input was not given is drawn
as a placeholder that says what is missing, so the report always has the same figures."""

from __future__ import annotations

import io
import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from perfmodel.schema.modes import MODES  # noqa: E402
from perfmodel.schema.timeline import STAGES  # noqa: E402

MODE_COLORS = dict(zip(MODES, ("#7f7f7f", "#1f77b4", "#2ca02c", "#ff7f0e", "#d62728")))
STAGE_COLORS = dict(zip(STAGES, ("#bcbd22", "#17becf", "#1f77b4", "#d62728", "#9467bd", "#2ca02c", "#7f7f7f")))
LINESTYLES = ("-", "--", ":", "-.")
DPI = 100


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def placeholder(title: str, message: str) -> bytes:
    fig, ax = plt.subplots(figsize=(7, 2.2))
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=11, wrap=True,
            bbox={"boxstyle": "round", "fc": "#f4f4f4", "ec": "#999999"})
    return _png(fig)


def _sweep_label(doc: dict[str, Any]) -> str:
    return f"{doc.get('backbone', '?')} ({doc.get('profile', '?')})"


def _per_mode(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in doc["summary"]["best_per_mode"]:
        out.setdefault(e["mode"], []).append(e)
    return out


def throughput_vs_gpus(sweeps: list[dict[str, Any]]) -> bytes:
    title = "Throughput vs GPUs (best plan per mode)"
    if not sweeps:
        return placeholder(title, "no sweep given (--sweep sweep.json from `perfmodel sweep -o`)")
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for si, doc in enumerate(sweeps):
        for mode, es in _per_mode(doc).items():
            xs = [e["gpus"] for e in es]
            ys = [e["throughput_env_steps_per_s"] for e in es]
            label = mode if len(sweeps) == 1 else f"{mode}, {_sweep_label(doc)}"
            ls = LINESTYLES[si % len(LINESTYLES)]
            cis = [e.get("throughput_ci95") for e in es]
            if all(cis):
                err = [[y - c[0] for y, c in zip(ys, cis)], [c[1] - y for y, c in zip(ys, cis)]]
                ax.errorbar(xs, ys, yerr=err, marker="o", ls=ls, color=MODE_COLORS[mode], label=label, capsize=3)
            else:
                ax.plot(xs, ys, marker="o", ls=ls, color=MODE_COLORS[mode], label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _log_axes(ax, xticks=_swept_gpus(sweeps))
    ax.set_xlabel("GPUs")
    ax.set_ylabel("env steps / s (whole cluster)")
    ax.set_title(title + ("; bars: 95% CI" if any(e.get("throughput_ci95") for d in sweeps
                                                   for e in d["summary"]["best_per_mode"]) else ""))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def scaling_efficiency(sweeps: list[dict[str, Any]]) -> bytes:
    title = "Scaling efficiency vs linear (best plan per mode)"
    if not sweeps:
        return placeholder(title, "no sweep given (--sweep)")
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for si, doc in enumerate(sweeps):
        for mode, es in _per_mode(doc).items():
            label = mode if len(sweeps) == 1 else f"{mode}, {_sweep_label(doc)}"
            ax.plot([e["gpus"] for e in es], [e["scaling_efficiency"] for e in es], marker="o",
                    ls=LINESTYLES[si % len(LINESTYLES)], color=MODE_COLORS[mode], label=label)
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label="linear")
    ax.set_xscale("log", base=2)
    _log_axes(ax, y=False, xticks=_swept_gpus(sweeps))
    ax.set_xlabel("GPUs")
    ax.set_ylabel("(thr(N)/N) / (thr(N0)/N0)")
    ax.set_title(title + "\nN0 = the mode's smallest GPU count in the sweep", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def gain_over_colocated(sweeps: list[dict[str, Any]]) -> bytes:
    title = "Gain over colocated at the same GPU count (best plan per mode)"
    usable = [d for d in sweeps if any(e.get("gain_over_colocated_pct") is not None
                                       for e in d["summary"]["best_per_mode"] if e["mode"] != "colocated")]
    if not usable:
        return placeholder(title, "no sweep with colocated and another mode given (--sweep)")
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for si, doc in enumerate(usable):
        for mode, es in _per_mode(doc).items():
            if mode == "colocated":
                continue
            es = [e for e in es if e.get("gain_over_colocated_pct") is not None]
            label = mode if len(usable) == 1 else f"{mode}, {_sweep_label(doc)}"
            ax.plot([e["gpus"] for e in es], [e["gain_over_colocated_pct"] for e in es], marker="o",
                    ls=LINESTYLES[si % len(LINESTYLES)], color=MODE_COLORS[mode], label=label)
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xscale("log", base=2)
    _log_axes(ax, y=False, xticks=_swept_gpus(usable))
    ax.set_xlabel("GPUs")
    ax.set_ylabel("throughput / colocated - 1  (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def utilization(sources: list[tuple[str, dict[str, Any]]]) -> bytes:
    """Grouped bars: per-stage utilization (docs/metrics.md) of each (label, prediction-or-record)."""
    title = "Per-stage utilization"
    sources = [(lab, s) for lab, s in sources if isinstance(s.get("utilization"), dict)
               and isinstance(s["utilization"].get("stages"), dict)][:8]
    if not sources:
        return placeholder(title, "no prediction, sweep or run record with utilization given")
    stages = [st for st in STAGES if any(s["utilization"]["stages"].get(st, 0) > 0 for _, s in sources)] or list(STAGES)
    fig, ax = plt.subplots(figsize=(max(7.5, 1.2 * len(stages) + 2), 4.5))
    width = 0.8 / len(sources)
    for i, (label, s) in enumerate(sources):
        vals = [float(s["utilization"]["stages"].get(st, 0.0)) for st in stages]
        ax.bar([j + (i - (len(sources) - 1) / 2) * width for j in range(len(stages))], vals, width, label=label)
    ax.set_xticks(range(len(stages)))
    ax.set_xticklabels(stages, rotation=20)
    ax.set_ylabel("busy fraction of the stage's resource")
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    return _png(fig)


# --- traces ------------------------------------------------------------------------------------

def _opt_steps_per_iteration(trace: dict[str, Any], record: dict[str, Any] | None) -> int | None:
    plan = (trace.get("otherData") or {}).get("plan")
    try:
        w = plan["workload"]
        samples = w["total_num_envs"] * (w["max_episode_steps"] // w["num_action_chunks"]) * w["rollout_epoch"]
        return math.ceil(samples / w["global_batch_size"]) * w["update_epoch"]
    except (TypeError, KeyError, ZeroDivisionError):
        pass
    counts = (record or {}).get("counts") or {}
    if counts.get("optimizer_steps") and counts.get("iterations"):
        return max(1, int(counts["optimizer_steps"]) // int(counts["iterations"]))
    return None


def iteration_window(trace: dict[str, Any], iteration: int | None = None,
                     record: dict[str, Any] | None = None) -> tuple[float, float, str]:
    """(start_us, end_us, label) of one iteration: between the ends of the last optimizer step of
    iteration i-1 and of iteration i (default: the second iteration, the first after warm-up,
    or the last one the trace has). Falls back to the whole trace."""
    ev = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    if not ev:
        return 0.0, 1.0, "empty trace"
    t_lo = min(e["ts"] for e in ev)
    t_hi = max(e["ts"] + e["dur"] for e in ev)
    k = _opt_steps_per_iteration(trace, record)
    ends = sorted(e["ts"] + e["dur"] for e in ev if e["name"] == "optimizer_step")
    if not k or len(ends) < k:
        return t_lo, t_hi, "whole trace (iterations not identifiable)"
    n_iter = len(ends) // k
    i = iteration if iteration is not None else (2 if n_iter >= 2 else n_iter)
    i = max(1, min(i, n_iter))
    switches = [e for e in ev if e["name"] == "phase_switch"]

    def swapped_back(t: float) -> float:
        # colocated swaps back after an iteration's last optimizer step: that belongs to it
        for e in switches:
            if abs(e["ts"] - t) < 1.0:
                t = max(t, e["ts"] + e["dur"])
        return t

    start = t_lo if i == 1 else swapped_back(ends[(i - 1) * k - 1])
    end = swapped_back(ends[i * k - 1])
    return start, end, f"iteration {i} of {n_iter}"


def _lanes(trace: dict[str, Any]) -> tuple[dict[int, str], dict[tuple[int, int], str]]:
    procs, threads = {}, {}
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    return procs, threads


KIND_ORDER = ("env_worker", "rollout_gpu", "actor", "all_gpus")


def _kind(name: str) -> str:
    import re

    return re.sub(r"_\d+$", "", str(name).split(" (", 1)[0])


def _pick_lanes(rows: list[tuple[int, int]], procs: dict[int, str], max_rows: int,
                per_kind: int = 2) -> list[tuple[int, int]]:
    """A readable subset of lanes: the first ``per_kind`` resources of each kind (env workers,
    rollout GPUs, actor, shared GPUs), every lane of those, in pipeline order."""
    by_kind: dict[str, list[int]] = {}
    for pid, _ in rows:
        k = _kind(procs.get(pid, pid))
        if pid not in by_kind.setdefault(k, []):
            by_kind[k].append(pid)
    order = sorted(by_kind, key=lambda k: (KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER), k))
    picked = [r for k in order for pid in by_kind[k][:per_kind] for r in rows if r[0] == pid]
    if len(picked) > max_rows:  # too many lanes per resource: keep every kind represented
        quota = max(1, max_rows // max(1, len(order)))
        picked = [r for k in order for r in [x for x in picked if _kind(procs.get(x[0], x[0])) == k][:quota]]
    return picked[:max_rows]


def _log_axes(ax, x: bool = True, y: bool = True, xticks=None) -> None:
    """Plain numbers on log axes (1, 2, 5 per decade); GPU axes get the swept counts as ticks."""
    from matplotlib.ticker import FixedLocator, LogLocator, NullFormatter, ScalarFormatter

    for on, axis in ((x, ax.xaxis), (y, ax.yaxis)):
        if on:
            axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(NullFormatter())
    if xticks:
        ax.xaxis.set_major_locator(FixedLocator(sorted(set(xticks))))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())


def _swept_gpus(sweeps) -> list[int]:
    return sorted({e["gpus"] for d in sweeps for e in d["summary"]["best_per_mode"]})


def _gantt(ax, trace: dict[str, Any], title: str, record: dict[str, Any] | None, max_rows: int,
           iteration: int | None) -> set[str]:
    start, end, what = iteration_window(trace, iteration, record)
    procs, threads = _lanes(trace)
    ev = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"
          and e["ts"] < end and e["ts"] + e["dur"] > start]
    rows = _pick_lanes(sorted({(e["pid"], e["tid"]) for e in ev}), procs, max_rows)
    hidden = len({(e["pid"], e["tid"]) for e in ev}) - len(rows)
    index = {r: i for i, r in enumerate(rows)}
    used = set()
    for e in ev:
        r = index.get((e["pid"], e["tid"]))
        if r is None:
            continue
        s, f = max(e["ts"], start), min(e["ts"] + e["dur"], end)
        ax.broken_barh([((s - start) / 1e6, (f - s) / 1e6)], (r - 0.4, 0.8),
                       facecolors=STAGE_COLORS.get(e["name"], "#444444"))
        used.add(e["name"])
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{procs.get(p, p)}/{threads.get((p, t), t)}" for p, t in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, (end - start) / 1e6)
    ax.set_xlabel(f"seconds into {what}")
    ax.set_title(title + (f"\n({hidden} more lanes not shown)" if hidden else ""), fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    return used


def timeline(sim: dict[str, Any] | None, measured: dict[str, Any] | None, *, sim_label: str = "simulated",
             measured_label: str = "measured", record: dict[str, Any] | None = None, max_rows: int = 16,
             iteration: int | None = None) -> bytes:
    """Gantt of one iteration: simulated (left) and measured (right) side by side."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    used: set[str] = set()
    for ax, tr, label, rec in ((axes[0], sim, sim_label, None), (axes[1], measured, measured_label, record)):
        if tr is None:
            ax.set_axis_off()
            ax.text(0.5, 0.5, f"{label}: none given", ha="center", va="center", fontsize=12,
                    bbox={"boxstyle": "round", "fc": "#f4f4f4", "ec": "#999999"})
            continue
        used |= _gantt(ax, tr, label, rec, max_rows, iteration)
    if used:
        from matplotlib.patches import Patch

        fig.legend(handles=[Patch(color=STAGE_COLORS.get(s, "#444444"), label=s) for s in STAGES if s in used],
                   loc="lower center", ncol=len(used), fontsize=8, bbox_to_anchor=(0.5, -0.04))
    fig.suptitle("Timeline of one iteration (Gantt)")
    fig.tight_layout()
    return _png(fig)


# --- comparisons -------------------------------------------------------------------------------

def predicted_vs_measured(points: list[dict[str, Any]]) -> bytes:
    """points: label, predicted, measured, optional predicted_ci95 / measured_ci95."""
    title = "Predicted vs measured throughput (run records)"
    pts = [p for p in points if p.get("predicted") and p.get("measured")]
    if not pts:
        return placeholder(title, "no run record with a prediction given (--run runs/X/record.json)")
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    for p in pts:
        xe = ye = None
        if p.get("predicted_ci95"):
            xe = [[p["predicted"] - p["predicted_ci95"][0]], [p["predicted_ci95"][1] - p["predicted"]]]
        if p.get("measured_ci95"):
            ye = [[p["measured"] - p["measured_ci95"][0]], [p["measured_ci95"][1] - p["measured"]]]
        ax.errorbar([p["predicted"]], [p["measured"]], xerr=xe, yerr=ye, marker="o", capsize=3,
                    color=MODE_COLORS.get(p.get("mode"), "black"))
        ax.annotate(f"{p['label']} ({100 * (p['predicted'] / p['measured'] - 1):+.1f}%)",
                    (p["predicted"], p["measured"]), fontsize=7, xytext=(4, 4), textcoords="offset points")
    lo = min(min(p["predicted"], p["measured"]) for p in pts) * 0.8
    hi = max(max(p["predicted"], p["measured"]) for p in pts) * 1.2
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="predicted = measured")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("predicted env steps / s")
    ax.set_ylabel("measured env steps / s")
    ax.set_title(title + "\n(label: prediction error vs measured)", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def predicted_vs_published(validation: dict[str, Any] | None, reason: str = "") -> bytes:
    title = "Predicted vs published (RL-VLA3 reference)"
    if not validation or not validation.get("points"):
        return placeholder(title, reason or "no reference CSV given (--reference)")
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [1, 1.3]})
    ax = axes[0]
    markers = {}
    for r in validation["points"]:
        m = markers.setdefault(r["backbone"], "os^D"[len(markers) % 4])
        ax.scatter(r["published"], r["predicted"], color=MODE_COLORS.get(r["mode"], "black"), marker=m, s=30)
    allv = [v for r in validation["points"] for v in (r["published"], r["predicted"])]
    lo, hi = min(allv) * 0.8, max(allv) * 1.2
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _log_axes(ax)
    ax.set_xlabel("published env steps / s")
    ax.set_ylabel("predicted env steps / s")
    a = validation["best_mode_agreement"]
    ax.set_title(f"MAPE {validation['mape_pct']:.1f}%, best mode agrees {a['matches']}/{a['groups']}", fontsize=10)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, marker="o", ls="", label=m) for m, c in MODE_COLORS.items()
               if any(r["mode"] == m for r in validation["points"])]
    handles += [Line2D([], [], color="black", marker=mk, ls="", label=b) for b, mk in markers.items()]
    ax.legend(handles=handles, fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    ax = axes[1]
    pts = validation["points"]
    labels = [f"{r['backbone']} {r['mode']} {r['gpus']}" + (f" {r['allocation_ratio']}" if r["allocation_ratio"] else "")
              for r in pts]
    ax.barh(range(len(pts)), [r["error_pct"] for r in pts], color=[MODE_COLORS.get(r["mode"], "black") for r in pts])
    ax.set_yticks(range(len(pts)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel("prediction error vs published (%)")
    ax.set_title("error per point", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return _png(fig)
