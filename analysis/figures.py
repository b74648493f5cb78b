"""The report's static figures (matplotlib, headless Agg) for the Markdown report, drawn from
the same data as the interactive HTML figures (analysis.decision, analysis.interactive) and in
the same styles (analysis.styles): one colour and marker per mode, one colour per stage. A
figure whose input is missing is not drawn at all; the report says in one line what is missing.
"""

from __future__ import annotations

import io
import math
import re
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from analysis import decision as dec  # noqa: E402
from analysis.styles import (CHOSEN_COLOR, STAGE_COLORS, mode_order, mode_style)  # noqa: E402
from perfmodel.schema.timeline import ITERATION_MARKER, STAGES  # noqa: E402

DPI = 100
plt.rcParams.update({"font.size": 10, "legend.fontsize": 9})


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _mode_kw(mode: str, line: bool = True) -> dict[str, Any]:
    s = mode_style(mode)
    kw = {"color": s.color, "marker": s.mpl_marker, "markersize": 5 + s.size / 3,
          "markerfacecolor": s.color if s.filled else "none", "markeredgewidth": 1.6}
    kw["ls"] = s.mpl_dash if line else ""
    return kw


def _shade(ax, calibrated: list[int], gpus: list[int], label: bool = True) -> None:
    if not calibrated or not gpus or max(gpus) <= max(calibrated):
        return
    x0, x1 = max(calibrated) * 2 ** 0.3, max(gpus) * 2 ** 0.5
    ax.axvspan(x0, x1, color="0.85", alpha=0.6, zorder=0, lw=0)
    if label:
        ax.text(math.sqrt(x0 * x1), 0.98, f"beyond calibrated scale\n({', '.join(map(str, calibrated))} GPUs): "
                "extrapolated", transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=8, color="0.3")


def _gpu_ticks(ax, gpus: list[int], price: float | None) -> None:
    from matplotlib.ticker import FixedLocator, NullFormatter

    ax.set_xscale("log", base=2)
    ticks = sorted(set(gpus))
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.set_xticklabels([f"{g}\n${g * price:,.0f}/h" if price else str(g) for g in ticks], fontsize=8)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(min(ticks) / 1.3, max(ticks) * 1.5)


def throughput_pareto(points: list[dec.PlanPoint], chosen: dec.PlanPoint | None, calibrated: list[int],
                      price: float | None) -> bytes:
    fig, ax = plt.subplots(figsize=(8.5, 5))
    gpus = sorted({p.gpus for p in points})
    _shade(ax, calibrated, gpus)
    per = dec.best_per_mode_gpus(points)
    best = {p.key for ps in per.values() for p in ps}
    for p in points:
        if p.key not in best:
            ax.plot([p.gpus], [p.throughput], alpha=0.3, **_mode_kw(p.mode, line=False))
    front = dec.pareto_front(points)
    ax.plot([p.gpus for p in front], [p.throughput for p in front], color="black", alpha=0.25, lw=7,
            solid_capstyle="round", label="Pareto front", zorder=1)
    for mode, ps in per.items():
        if all(p.low is not None for p in ps):
            ax.fill_between([p.gpus for p in ps], [p.low for p in ps], [p.high for p in ps],
                            color=mode_style(mode).color, alpha=0.15, lw=0)
        ax.plot([p.gpus for p in ps], [p.throughput for p in ps], label=mode, zorder=3, **_mode_kw(mode))
    if chosen:
        ax.plot([chosen.gpus], [chosen.throughput], marker="*", ms=18, color=CHOSEN_COLOR, mec="black", ls="",
                label="chosen plan", zorder=5)
    _gpu_ticks(ax, gpus, price)
    ax.set_yscale("log")
    ax.set_ylabel("env steps / s (whole cluster)")
    ax.set_xlabel("GPUs" + (" and $ per hour" if price else ""))
    ax.set_title("Throughput vs GPUs vs $/h: best plan per mode, Pareto front, chosen plan", fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    return _png(fig)


def time_cost(points: list[dec.PlanPoint], chosen: dec.PlanPoint | None, target: float) -> bytes:
    priced = all(p.price for p in points)
    fig, ax = plt.subplots(figsize=(8.5, 5))

    def y_of(p, thr=None):
        return p.cost_to(target, thr) if priced else p.hours_to(target, thr) * p.gpus

    for mode, ps in dec.best_per_mode_gpus(points).items():
        xs, ys = [p.hours_to(target) for p in ps], [y_of(p) for p in ps]
        if all(p.low is not None for p in ps):
            ax.errorbar(xs, ys, xerr=[[x - p.hours_to(target, p.high) for x, p in zip(xs, ps)],
                                      [p.hours_to(target, p.low) - x for x, p in zip(xs, ps)]],
                        yerr=[[y - y_of(p, p.high) for y, p in zip(ys, ps)], [y_of(p, p.low) - y for y, p in zip(ys, ps)]],
                        fmt="none", ecolor=mode_style(mode).color, alpha=0.6)
        ax.plot(xs, ys, label=mode, **_mode_kw(mode))
        for p, x, y in zip(ps, xs, ys):
            if p.beyond_calibrated:
                ax.plot([x], [y], marker="o", ms=14, mfc="none", mec="0.5", ls="")
    ax.plot([], [], marker="o", ms=14, mfc="none", mec="0.5", ls="", label="beyond calibrated scale")
    if chosen:
        ax.plot([chosen.hours_to(target)], [y_of(chosen)], marker="*", ms=18, color=CHOSEN_COLOR, mec="black",
                ls="", label="chosen plan", zorder=5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"hours to {target:,.0f} env steps")
    ax.set_ylabel(f"$ to {target:,.0f} env steps" if priced else "GPU-hours")
    ax.set_title(f"Time and {'cost' if priced else 'GPU-hours'} to {target:,.0f} env steps (down-left is better)",
                 fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return _png(fig)


def scaling(sweeps: list[dict[str, Any]], calibrated: list[int]) -> bytes:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3))
    gpus = sorted({e["gpus"] for d in sweeps for e in d["summary"]["best_per_mode"]})
    for ax in axes:
        _shade(ax, calibrated, gpus, label=ax is axes[0])
    for doc in sweeps:
        per: dict[str, list] = {}
        for e in doc["summary"]["best_per_mode"]:
            per.setdefault(e["mode"], []).append(e)
        for mode in sorted(per, key=mode_order):
            es = sorted(per[mode], key=lambda e: e["gpus"])
            axes[0].plot([e["gpus"] for e in es], [e["scaling_efficiency"] for e in es], label=mode, **_mode_kw(mode))
            g = [e for e in es if e.get("gain_over_colocated_pct") is not None]
            if mode != "colocated" and g:
                axes[1].plot([e["gpus"] for e in g], [e["gain_over_colocated_pct"] for e in g], **_mode_kw(mode))
    axes[0].axhline(1.0, color="black", lw=0.8, ls="--")
    axes[1].axhline(0.0, color="black", lw=0.8)
    for ax, t in zip(axes, ("Scaling efficiency (thr(N)/N) / (thr(N0)/N0)", "Gain over colocated (%)")):
        _gpu_ticks(ax, gpus, None)
        ax.set_xlabel("GPUs")
        ax.set_title(t, fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0].legend()
    return _png(fig)


def per_gpu_figure(series: list[dec.PerGpuSeries], calibrated: list[int]):
    """Per-GPU throughput against GPU count, one panel per backbone: a line per mode (its best
    plan at each GPU count), its interval shaded, the published points as filled black-edged
    markers of the mode's style. Returns the matplotlib Figure (``per_gpu`` renders it)."""
    fig, axes = plt.subplots(1, len(series), figsize=(6.2 * len(series), 4.6), squeeze=False)
    for ax, s in zip(axes[0], series):
        gpus = sorted({g for pts in s.modes.values() for g, *_ in pts} | {g for pts in s.published.values()
                                                                         for g, _ in pts})
        _shade(ax, calibrated, gpus, label=ax is axes[0][0])
        for mode, pts in s.modes.items():
            if all(lo is not None and hi is not None for _, _, lo, hi in pts):
                ax.fill_between([g for g, *_ in pts], [lo for _, _, lo, _ in pts], [hi for *_, hi in pts],
                                color=mode_style(mode).color, alpha=0.15, lw=0, label=f"_{mode} interval")
            ax.plot([g for g, *_ in pts], [y for _, y, *_ in pts], label=mode, **_mode_kw(mode))
        for mode, pts in s.published.items():
            kw = {**_mode_kw(mode, line=False), "markerfacecolor": mode_style(mode).color, "markeredgecolor": "black"}
            ax.plot([g for g, _ in pts], [y for _, y in pts], zorder=5, **kw,
                    label=f"published {mode}" + (" (another workload)" if s.published_other_workload else ""))
        _gpu_ticks(ax, gpus, None)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("GPUs")
        ax.set_ylabel("env steps / s per GPU")
        ax.set_title(f"{s.backbone}: best plan per mode (band: interval; black edge: published)"
                     + (f"\n{s.published_other_workload}" if s.published_other_workload else ""), fontsize=9)
        ax.grid(True, alpha=0.3)
    # one legend below the panels (the bands fill the panels): every label once, in panel order
    seen: dict[str, Any] = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=5, fontsize=8,
               bbox_to_anchor=(0.5, -0.02 - 0.045 * math.ceil(len(seen) / 5)))
    return fig


def per_gpu(series: list[dec.PerGpuSeries], calibrated: list[int]) -> bytes:
    return _png(per_gpu_figure(series, calibrated))


def utilization(sources: list[tuple[str, str | None, dict[str, Any]]]) -> bytes:
    stages = [s for s in STAGES if any(src["utilization"]["stages"].get(s, 0) > 0 for _, _, src in sources)]
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(sources) + 3), 4.5))
    width = 0.8 / max(1, len(stages))
    for j, st in enumerate(stages):
        ax.bar([i + (j - (len(stages) - 1) / 2) * width for i in range(len(sources))],
               [float(src["utilization"]["stages"].get(st, 0.0)) for _, _, src in sources], width,
               color=STAGE_COLORS[st], label=st)
    ax.set_xticks(range(len(sources)))
    ax.set_xticklabels([lab for lab, _, _ in sources], rotation=15, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("busy fraction of the stage's resource")
    ax.set_title("Per-stage utilization (one colour per stage)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(ncol=min(4, len(stages)), loc="upper right")
    return _png(fig)


def timeline(panels: list[tuple[str, dict[str, Any]]]) -> bytes:
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, sum(1.2 + 0.28 * len(l["rows"]) for _, l in panels) + 0.8),
                             squeeze=False)
    used = set()
    for ax, (title, lanes) in zip(axes[:, 0], panels):
        for row, stage, start, dur, _ in lanes["spans"]:
            ax.broken_barh([(start, dur)], (row - 0.4, 0.8), facecolors=STAGE_COLORS.get(stage, "#444"))
            used.add(stage)
        ax.set_yticks(range(len(lanes["rows"])))
        ax.set_yticklabels(lanes["rows"], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, lanes["length_s"])
        ax.set_xlabel(lanes["xlabel"])
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="x", alpha=0.3)
    fig.legend(handles=[Patch(color=STAGE_COLORS[s], label=s) for s in STAGES if s in used], loc="lower center",
               ncol=len(used), bbox_to_anchor=(0.5, -0.03))
    fig.tight_layout()
    return _png(fig)


def validation(in_sample_pts, in_sample_title: str, cv_pts, cv_title: str) -> bytes:
    panels = [(t, p) for t, p in ((in_sample_title, in_sample_pts), (cv_title, cv_pts)) if p]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5), squeeze=False)
    for ax, (title, pts) in zip(axes[0], panels):
        for r in sorted(pts, key=lambda r: mode_order(r["mode"])):
            kw = _mode_kw(r["mode"], line=False)
            ax.plot([r["published"]], [r["predicted"]], **kw)
            iv = r.get("interval")
            if iv:  # a held-out point's 90 % prediction interval, as its fold's fit printed it
                ax.errorbar([r["published"]], [r["predicted"]], yerr=[[r["predicted"] - iv["low"]], [iv["high"] - r["predicted"]]],
                            fmt="none", ecolor=kw["color"], alpha=0.5, lw=1)
        allv = [v for r in pts for v in (r["published"], r["predicted"])]
        allv += [v for r in pts if r.get("interval") for v in (r["interval"]["low"], r["interval"]["high"])]
        lo, hi = min(allv) * 0.8, max(allv) * 1.25
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("published env steps / s")
        ax.set_ylabel("predicted env steps / s")
        ax.set_title(title.replace("<br>", "\n"), fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        modes = sorted({r["mode"] for r in pts}, key=mode_order)
        ax.legend(handles=[Line2D([], [], label=m, **_mode_kw(m, line=False)) for m in modes])
    fig.tight_layout()
    return _png(fig)


def predicted_vs_measured(points: list[dict[str, Any]]) -> bytes:
    pts = [p for p in points if p.get("predicted") and p.get("measured")]
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    for p in pts:
        ax.plot([p["predicted"]], [p["measured"]], **_mode_kw(p.get("mode"), line=False))
        ax.annotate(f"{p['label']} ({p['error_pct']:+.1f}%)", (p["predicted"], p["measured"]), fontsize=8,
                    xytext=(5, 5), textcoords="offset points")
    lo = min(min(p["predicted"], p["measured"]) for p in pts) * 0.8
    hi = max(max(p["predicted"], p["measured"]) for p in pts) * 1.25
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="predicted = measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("predicted env steps / s")
    ax.set_ylabel("measured env steps / s")
    ax.set_title("Predicted vs measured (label: prediction / measurement - 1)", fontsize=10)
    modes = sorted({p.get("mode") for p in pts}, key=mode_order)
    ax.legend(handles=[Line2D([], [], label=m, **_mode_kw(m, line=False)) for m in modes]
              + [Line2D([], [], color="black", ls="--", label="predicted = measured")])
    ax.grid(True, which="both", alpha=0.3)
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


def _markers(trace: dict[str, Any]) -> list[float]:
    """End times (us) of iterations 1, 2, ... from the trace's ``iteration <k> done`` markers."""
    pat = re.compile("^" + ITERATION_MARKER.format(k=r"(\d+)") + "$")
    found = {}
    for e in trace.get("traceEvents", []):
        m = pat.match(str(e.get("name"))) if e.get("ph") == "i" else None
        if m:
            found[int(m.group(1))] = e["ts"]
    return [found[k] for k in range(1, len(found) + 1)] if set(found) == set(range(1, len(found) + 1)) else []


def _check_iteration(iteration: int | None, n_iter: int) -> None:
    """``--iteration`` beyond the trace's iterations: refused (clamping it drew another one)."""
    if iteration is not None and not 1 <= iteration <= n_iter:
        from perfmodel.schema.errors import ConfigError

        raise ConfigError("--iteration", f"must be an integer in 1..{n_iter} (the iterations the trace has), "
                                         f"got {iteration}")


def iteration_window(trace: dict[str, Any], iteration: int | None = None,
                     record: dict[str, Any] | None = None) -> tuple[float, float, str]:
    """(start_us, end_us, label) of one iteration (default: the second, the first after warm-up,
    or the last one the trace has): between the trace's iteration markers when it has them, else
    between the ends of the last optimizer step of iterations i-1 and i. Falls back to the whole
    trace."""
    ev = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    if not ev:
        return 0.0, 1.0, "empty trace"
    t_lo = min(e["ts"] for e in ev)
    t_hi = max(e["ts"] + e["dur"] for e in ev)
    ends = _markers(trace)
    if ends:
        n_iter = len(ends)
        _check_iteration(iteration, n_iter)
        i = max(1, min(iteration if iteration is not None else min(2, n_iter), n_iter))
        return (t_lo if i == 1 else ends[i - 2]), ends[i - 1], f"iteration {i} of {n_iter}"
    k = _opt_steps_per_iteration(trace, record)
    ends = sorted(e["ts"] + e["dur"] for e in ev if e["name"] == "optimizer_step")
    if not k or len(ends) < k:
        return t_lo, t_hi, "whole trace (iterations not identifiable)"
    n_iter = len(ends) // k
    _check_iteration(iteration, n_iter)
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


def gantt_lanes(trace: dict[str, Any], record: dict[str, Any] | None = None, iteration: int | None = None,
                max_rows: int = 16) -> dict[str, Any]:
    """One iteration of a trace as Gantt rows: {"rows": ["env_worker_0 (x4 replicas) / group_0", ...],
    "spans": [(row, stage, start_s, dur_s, args)], "xlabel", "length_s", "hidden": lanes not shown}."""
    start, end, what = iteration_window(trace, iteration, record)
    procs, threads = _lanes(trace)
    ev = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and e["ts"] < end and e["ts"] + e["dur"] > start]
    all_rows = sorted({(e["pid"], e["tid"]) for e in ev})
    rows = _pick_lanes(all_rows, procs, max_rows)
    index = {r: i for i, r in enumerate(rows)}
    spans = []
    for e in ev:
        r = index.get((e["pid"], e["tid"]))
        if r is not None:
            s, f = max(e["ts"], start), min(e["ts"] + e["dur"], end)
            spans.append((r, e["name"], (s - start) / 1e6, (f - s) / 1e6, e.get("args") or {}))
    return {"rows": [f"{procs.get(p, p)} / {threads.get((p, t), t)}" for p, t in rows], "spans": spans,
            "xlabel": f"seconds into {what}", "length_s": (end - start) / 1e6, "hidden": len(all_rows) - len(rows)}
