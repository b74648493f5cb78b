"""The report's interactive figures (plotly; the HTML embeds plotly.js once, so it opens
offline). Hover on a plan shows the plan, its throughput, interval and bottleneck. Every
trace of a mode carries ``meta = {"mode": ...}`` and the mode's one style (analysis.styles),
which the report's in-page check reads back to confirm the modes are distinguishable.
"""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis import decision as dec
from analysis.styles import (CHOSEN_COLOR, EXTRAPOLATION_FILL, FONT, LEGEND_FONT, STAGE_COLORS,
                             mode_order, mode_style)
from perfmodel.schema.timeline import STAGES

CONFIG = {"displaylogo": False, "responsive": True}


def _layout(fig: go.Figure, title: str, height: int = 520) -> go.Figure:
    fig.update_layout(title={"text": title, "x": 0.01, "font": {"size": 16}}, height=height,
                      font={"size": FONT}, legend={"font": {"size": LEGEND_FONT}, "itemsizing": "constant"},
                      hoverlabel={"font": {"size": 12}, "align": "left"}, template="plotly_white",
                      margin={"l": 70, "r": 30, "t": 70, "b": 60})
    return fig


def _marker(mode: str, size: int | None = None) -> dict[str, Any]:
    s = mode_style(mode)
    m = {"color": s.color, "symbol": s.symbol, "size": size or s.size}
    m["line"] = {"color": s.color, "width": 2 if not s.filled or s.symbol == "x" else 0}
    return m


def _line(mode: str) -> dict[str, Any]:
    s = mode_style(mode)
    return {"color": s.color, "dash": s.dash, "width": 2.5 if s.dash != "solid" else 2}


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    return f"rgba({int(h[0:2], 16)},{int(h[2:4], 16)},{int(h[4:6], 16)},{alpha})"


def shade_extrapolation(fig: go.Figure, calibrated: list[int], gpus: list[int], row=None, col=None,
                        label: bool = True) -> bool:
    """Shade GPU counts beyond the calibrated ones. True if anything was shaded."""
    if not calibrated or not gpus or max(gpus) <= max(calibrated):
        return False
    x0, x1 = max(calibrated) * 2 ** 0.35, max(gpus) * 1.35  # data coordinates (plotly.js >= 2)
    kw = {"row": row, "col": col} if row else {}
    text = f"beyond the calibrated scale ({', '.join(map(str, calibrated))} GPUs): extrapolated"
    ax = "" if not col or col == 1 else str(col)  # one-row subplots: column c uses axes x<c>, y<c>
    fig.add_shape(type="rect", xref=f"x{ax}", yref=f"y{ax} domain", x0=x0, x1=x1, y0=0, y1=1,
                  fillcolor=EXTRAPOLATION_FILL, line_width=0, layer="below")
    if label:  # annotations on a log axis take log10 coordinates, shapes take data coordinates
        fig.add_annotation(x=math.log10(math.sqrt(x0 * x1)), y=1.0, yref="y domain", text=text, showarrow=False,
                           yanchor="bottom", font={"size": 12, "color": "#444"}, **kw)
    return True


def log_ticks(values: list[float]) -> list[float]:
    """1-2-5 ticks per decade covering ``values`` (plotly's own log ticks label 2..9 as bare digits)."""
    lo, hi = min(values), max(values)
    out = []
    for d in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        out += [m * 10 ** d for m in (1, 2, 5) if lo / 1.3 <= m * 10 ** d <= hi * 1.3]
    return out


def _log_y(fig: go.Figure, values: list[float], **kw) -> None:
    ticks = log_ticks([v for v in values if v and v > 0])
    fig.update_yaxes(type="log", tickvals=ticks, ticktext=[f"{t:,.0f}" if t >= 1 else f"{t:g}" for t in ticks], **kw)


def _log_x(fig: go.Figure, values: list[float], **kw) -> None:
    ticks = log_ticks([v for v in values if v and v > 0])
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[f"{t:,.0f}" if t >= 1 else f"{t:g}" for t in ticks], **kw)


def _gpu_axis(fig: go.Figure, gpus: list[int], price: float | None, **kw) -> None:
    ticks = sorted(set(gpus))
    text = [f"{g}<br>${g * price:,.0f}/h" if price else str(g) for g in ticks]
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=text, title_text="GPUs" + (" and $ per hour" if price else ""),
                     **kw)


def throughput_pareto(points: list[dec.PlanPoint], chosen: dec.PlanPoint | None, calibrated: list[int],
                      price: float | None, target: float) -> go.Figure:
    """Throughput vs GPUs vs $/h: every predicted plan, each mode's best per GPU count (band: its
    interval), the Pareto front, the chosen plan; the extrapolated region shaded."""
    fig = go.Figure()
    gpus = sorted({p.gpus for p in points})
    shade_extrapolation(fig, calibrated, gpus)
    per = dec.best_per_mode_gpus(points)
    best_keys = {p.key for ps in per.values() for p in ps}
    front = dec.pareto_front(points)
    if front:
        fig.add_trace(go.Scatter(
            x=[p.gpus for p in front], y=[p.throughput for p in front], mode="lines", name="Pareto front",
            line={"color": "rgba(0,0,0,0.18)", "width": 9}, hoverinfo="skip", meta={"role": "pareto"}))
    for mode in sorted({p.mode for p in points}, key=mode_order):
        others = [p for p in points if p.mode == mode and p.key not in best_keys]
        if others:
            fig.add_trace(go.Scatter(
                x=[p.gpus for p in others], y=[p.throughput for p in others], mode="markers", name=f"{mode} (other splits)",
                legendgroup=mode, showlegend=False, meta={"mode": mode, "role": "other"},
                marker=dict(_marker(mode, 7), opacity=0.35), hovertext=[dec.hover(p, target) for p in others],
                hoverinfo="text"))
    for mode, ps in per.items():
        c = mode_style(mode).color
        if all(p.low is not None for p in ps):
            fig.add_trace(go.Scatter(
                x=[p.gpus for p in ps] + [p.gpus for p in reversed(ps)],
                y=[p.high for p in ps] + [p.low for p in reversed(ps)], fill="toself", fillcolor=_rgba(c, 0.15),
                line={"width": 0}, hoverinfo="skip", legendgroup=mode, showlegend=False,
                meta={"mode": mode, "role": "band"}, name=f"{mode} interval"))
        fig.add_trace(go.Scatter(
            x=[p.gpus for p in ps], y=[p.throughput for p in ps], mode="lines+markers", name=mode,
            legendgroup=mode, meta={"mode": mode, "role": "best"}, marker=_marker(mode), line=_line(mode),
            hovertext=[dec.hover(p, target) for p in ps], hoverinfo="text"))
    if chosen:
        fig.add_trace(go.Scatter(
            x=[chosen.gpus], y=[chosen.throughput], mode="markers+text", name="chosen plan",
            marker={"symbol": "star", "size": 22, "color": CHOSEN_COLOR, "line": {"color": "black", "width": 1}},
            text=["chosen"], textposition="top left", hovertext=[dec.hover(chosen, target)], hoverinfo="text",
            meta={"role": "chosen"}))
    _gpu_axis(fig, gpus, price)
    _log_y(fig, [p.throughput for p in points] + [p.low for p in points if p.low] + [p.high for p in points if p.high],
           title_text="env steps / s (whole cluster)")
    band = any(p.low is not None for p in points)
    return _layout(fig, "Throughput vs GPUs vs $/h: best plan per mode" + (" (bands: intervals)" if band else
                                                                              " (no intervals in the input)")
                   + ", Pareto front, chosen plan")


def time_cost(points: list[dec.PlanPoint], chosen: dec.PlanPoint | None, target: float) -> go.Figure:
    """Time and cost to reach ``target`` env steps, best plan per mode and GPU count."""
    per = dec.best_per_mode_gpus(points)
    priced = all(p.price for p in points)
    fig = go.Figure()

    def y_of(p, thr=None):
        return p.cost_to(target, thr) if priced else p.hours_to(target, thr) * p.gpus

    for mode, ps in per.items():
        ex = {}
        if all(p.low is not None for p in ps):
            ex = dict(error_x={"type": "data", "symmetric": False,
                               "array": [p.hours_to(target, p.low) - p.hours_to(target) for p in ps],
                               "arrayminus": [p.hours_to(target) - p.hours_to(target, p.high) for p in ps],
                               "color": mode_style(mode).color, "thickness": 1.2},
                      error_y={"type": "data", "symmetric": False,
                               "array": [y_of(p, p.low) - y_of(p) for p in ps],
                               "arrayminus": [y_of(p) - y_of(p, p.high) for p in ps],
                               "color": mode_style(mode).color, "thickness": 1.2})
        fig.add_trace(go.Scatter(
            x=[p.hours_to(target) for p in ps], y=[y_of(p) for p in ps], mode="lines+markers", name=mode,
            legendgroup=mode, meta={"mode": mode, "role": "best"}, marker=_marker(mode), line=_line(mode),
            hovertext=[dec.hover(p, target) for p in ps], hoverinfo="text", **ex))
    beyond = [p for ps in per.values() for p in ps if p.beyond_calibrated]
    if beyond:
        fig.add_trace(go.Scatter(
            x=[p.hours_to(target) for p in beyond], y=[y_of(p) for p in beyond], mode="markers",
            name="beyond the calibrated scale (extrapolated)", hoverinfo="skip", meta={"role": "extrapolated"},
            marker={"symbol": "circle-open", "size": 22, "color": "rgba(90,90,90,0.6)", "line": {"width": 1.5}}))
    if chosen:
        fig.add_trace(go.Scatter(
            x=[chosen.hours_to(target)], y=[y_of(chosen)], mode="markers+text", name="chosen plan", text=["chosen"],
            textposition="top right", meta={"role": "chosen"},
            marker={"symbol": "star", "size": 22, "color": CHOSEN_COLOR, "line": {"color": "black", "width": 1}},
            hovertext=[dec.hover(chosen, target)], hoverinfo="text"))
    allp = [p for ps in per.values() for p in ps]
    _log_x(fig, [p.hours_to(target) for p in allp], title_text=f"hours to {target:,.0f} env steps")
    _log_y(fig, [y_of(p) for p in allp], title_text=f"$ to {target:,.0f} env steps" if priced else
                     f"GPU-hours to {target:,.0f} env steps (no $ price given)")
    return _layout(fig, f"Time and {'cost' if priced else 'GPU-hours'} to reach {target:,.0f} env steps "
                        "(each point: a mode's best plan at one GPU count; down-left is better)")


def per_gpu(series: list[dec.PerGpuSeries], calibrated: list[int]) -> go.Figure:
    """Per-GPU throughput against GPU count, a panel per backbone (as figures.per_gpu)."""
    fig = make_subplots(rows=1, cols=max(1, len(series)), subplot_titles=[s.backbone for s in series])
    seen = set()
    for col, s in enumerate(series, start=1):
        gpus = sorted({g for pts in s.modes.values() for g, *_ in pts})
        shade_extrapolation(fig, calibrated, gpus, row=1, col=col, label=False)
        for mode, pts in s.modes.items():
            xs = [g for g, *_ in pts]
            if all(lo is not None and hi is not None for _, _, lo, hi in pts):
                fig.add_trace(go.Scatter(x=xs + xs[::-1], y=[hi for *_, hi in pts] + [lo for _, _, lo, _ in pts][::-1],
                                         fill="toself", fillcolor=mode_style(mode).color, opacity=0.15,
                                         line={"width": 0}, hoverinfo="skip", showlegend=False, legendgroup=mode,
                                         meta={"mode": mode, "role": "interval"}), row=1, col=col)
            fig.add_trace(go.Scatter(x=xs, y=[y for _, y, *_ in pts], mode="lines+markers", name=mode, legendgroup=mode,
                                     showlegend=mode not in seen, marker=_marker(mode), line=_line(mode),
                                     meta={"mode": mode, "role": "best"}, hoverinfo="text",
                                     hovertext=[f"{s.backbone} {mode} {g} GPUs: {y:,.1f} env steps/s per GPU"
                                                + (f" [{lo:,.1f}, {hi:,.1f}]" if lo is not None else "")
                                                for g, y, lo, hi in pts]), row=1, col=col)
            seen.add(mode)
        for mode, pts in s.published.items():
            fig.add_trace(go.Scatter(x=[g for g, _ in pts], y=[y for _, y in pts], mode="markers",
                                     name=f"published {mode}", legendgroup=mode, showlegend=False,
                                     marker={**_marker(mode, 14), "line": {"color": "black", "width": 2}},
                                     meta={"mode": mode, "role": "published"}, hoverinfo="text",
                                     hovertext=[f"published {s.backbone} {mode} {g} GPUs: {y:,.1f}"
                                                + (f" ({s.published_other_workload})" if s.published_other_workload
                                                   else "") for g, y in pts]),
                          row=1, col=col)
        fig.update_xaxes(type="log", tickvals=gpus, ticktext=[str(g) for g in gpus], title_text="GPUs", row=1, col=col)
        fig.update_yaxes(title_text="env steps / s per GPU", rangemode="tozero", row=1, col=col)
    return _layout(fig, "Per-GPU throughput against GPUs, best plan per mode (band: interval; black ring: published)")


def scaling(sweeps: list[dict[str, Any]], calibrated: list[int]) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        "Scaling efficiency (thr(N)/N) / (thr(N0)/N0)", "Gain over colocated at the same GPUs (%)"))
    gpus = sorted({e["gpus"] for d in sweeps for e in d["summary"]["best_per_mode"]})
    for col in (1, 2):
        shade_extrapolation(fig, calibrated, gpus, row=1, col=col, label=False)
    seen = set()
    for doc in sweeps:
        per: dict[str, list[dict[str, Any]]] = {}
        for e in doc["summary"]["best_per_mode"]:
            per.setdefault(e["mode"], []).append(e)
        for mode in sorted(per, key=mode_order):
            es = sorted(per[mode], key=lambda e: e["gpus"])
            kw = dict(legendgroup=mode, name=mode, meta={"mode": mode, "role": "best"}, marker=_marker(mode),
                      line=_line(mode), mode="lines+markers")
            fig.add_trace(go.Scatter(x=[e["gpus"] for e in es], y=[e["scaling_efficiency"] for e in es],
                                     showlegend=mode not in seen,
                                     hovertext=[f"{mode} {e['gpus']} GPUs {e.get('allocation_ratio') or ''}<br>"
                                                f"efficiency {e['scaling_efficiency']:.3f}" for e in es],
                                     hoverinfo="text", **kw), row=1, col=1)
            seen.add(mode)
            g = [e for e in es if e.get("gain_over_colocated_pct") is not None]
            if mode != "colocated" and g:
                fig.add_trace(go.Scatter(x=[e["gpus"] for e in g], y=[e["gain_over_colocated_pct"] for e in g],
                                         showlegend=False, hovertext=[f"{mode} {e['gpus']} GPUs: "
                                                                      f"{e['gain_over_colocated_pct']:+.1f}% vs colocated"
                                                                      for e in g], hoverinfo="text", **kw), row=1, col=2)
    fig.add_hline(y=1.0, line={"color": "black", "width": 1, "dash": "dash"}, row=1, col=1)
    fig.add_hline(y=0.0, line={"color": "black", "width": 1}, row=1, col=2)
    for col in (1, 2):
        fig.update_xaxes(type="log", tickvals=gpus, ticktext=[str(g) for g in gpus], title_text="GPUs", row=1, col=col)
    shaded = bool(calibrated) and bool(gpus) and max(gpus) > max(calibrated)
    return _layout(fig, "Scaling (N0 = the mode's smallest swept GPU count) and gain over colocated"
                   + (f"; shaded: beyond the calibrated {', '.join(map(str, calibrated))} GPUs" if shaded else ""), 460)


def utilization(sources: list[tuple[str, str | None, dict[str, Any]]]) -> tuple[go.Figure, list[str]]:
    """Grouped bars, one colour per stage; stages busy in no source are left out (returned)."""
    stages = [s for s in STAGES if any(src["utilization"]["stages"].get(s, 0) > 0 for _, _, src in sources)]
    empty = [s for s in STAGES if s not in stages]
    labels = [lab for lab, _, _ in sources]
    fig = go.Figure()
    for st in stages:
        fig.add_trace(go.Bar(x=labels, y=[float(src["utilization"]["stages"].get(st, 0.0)) for _, _, src in sources],
                             name=st, marker_color=STAGE_COLORS[st], meta={"stage": st},
                             hovertemplate=f"{st}: %{{y:.0%}}<br>%{{x}}<extra></extra>"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%", title_text="busy fraction of the stage's resource")
    fig.update_xaxes(tickfont={"size": 12})
    return _layout(fig, "Per-stage utilization (one colour per stage)", 470), empty


def gantt(panels: list[tuple[str, dict[str, Any]]]) -> go.Figure:
    """panels: (title, lanes) with lanes = {"rows": [label...], "spans": [(row, stage, start_s, dur_s, args)],
    "xlabel": str}. One subplot per panel, stacked; one legend entry per stage."""
    fig = make_subplots(rows=len(panels), cols=1, subplot_titles=[t for t, _ in panels], vertical_spacing=0.16)
    shown = set()
    for i, (_, lanes) in enumerate(panels, start=1):
        by_stage: dict[str, list] = {}
        for row, stage, start, dur, args in lanes["spans"]:
            by_stage.setdefault(stage, []).append((row, start, dur, args))
        for st in STAGES:
            if st not in by_stage:
                continue
            sp = by_stage[st]
            fig.add_trace(go.Bar(
                y=[lanes["rows"][r] for r, _, _, _ in sp], x=[d for _, _, d, _ in sp], base=[s for _, s, _, _ in sp],
                orientation="h", name=st, legendgroup=st, showlegend=st not in shown,
                marker={"color": STAGE_COLORS[st], "line": {"width": 0}}, meta={"stage": st},
                hovertext=[f"{st} {s:.3f}-{s + d:.3f} s<br>" + ", ".join(f"{k}={v}" for k, v in a.items())
                           for _, s, d, a in sp], hoverinfo="text"), row=i, col=1)
            shown.add(st)
        fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(lanes["rows"])), row=i, col=1,
                         tickfont={"size": 11})
        fig.update_xaxes(title_text=lanes["xlabel"], row=i, col=1)
    fig.update_layout(barmode="overlay", bargap=0.25)
    height = 150 + sum(90 + 22 * len(l["rows"]) for _, l in panels)
    return _layout(fig, "Timeline of one iteration (Gantt)", height)


def validation(in_sample_pts: list[dict[str, Any]] | None, in_sample_title: str,
               cv_pts: list[dict[str, Any]] | None, cv_title: str) -> go.Figure:
    panels = [(t, p) for t, p in ((in_sample_title, in_sample_pts), (cv_title, cv_pts)) if p]
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[t for t, _ in panels], horizontal_spacing=0.1)
    seen = set()
    for col, (_, pts) in enumerate(panels, start=1):
        allv = [v for r in pts for v in (r["published"], r["predicted"])]
        allv += [v for r in pts if r.get("interval") for v in (r["interval"]["low"], r["interval"]["high"])]
        lo, hi = min(allv) * 0.8, max(allv) * 1.25
        fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", line={"color": "black", "dash": "dash",
                                 "width": 1}, name="predicted = published", showlegend=col == 1,
                                 hoverinfo="skip"), row=1, col=col)
        for mode in sorted({r["mode"] for r in pts}, key=mode_order):
            rs = [r for r in pts if r["mode"] == mode]
            ivs = [r.get("interval") for r in rs]
            # held-out points carry the 90 % prediction interval their fold's fit printed
            error_y = ({"type": "data", "symmetric": False, "thickness": 1,
                        "array": [iv["high"] - r["predicted"] if iv else 0 for r, iv in zip(rs, ivs)],
                        "arrayminus": [r["predicted"] - iv["low"] if iv else 0 for r, iv in zip(rs, ivs)]}
                       if any(ivs) else None)
            fig.add_trace(go.Scatter(
                x=[r["published"] for r in rs], y=[r["predicted"] for r in rs], mode="markers", name=mode,
                legendgroup=mode, showlegend=mode not in seen, marker=_marker(mode), meta={"mode": mode},
                error_y=error_y,
                hovertext=[f"{r['backbone']} {mode} {r['gpus']} GPUs {r.get('allocation_ratio') or ''}<br>"
                           f"published {r['published']:.1f}, predicted {r['predicted']:.1f}<br>"
                           f"error {r['error_pct']:+.1f}% (prediction / published - 1)"
                           + (f"<br>fit on {r['fit_gpus']} GPUs" if r.get("fit_gpus") else "")
                           + (f"<br>90 % interval {iv['low']:.1f}-{iv['high']:.1f} "
                              f"({'inside' if iv['inside'] else 'outside'})" if iv else "")
                           for r, iv in zip(rs, ivs)],
                hoverinfo="text"), row=1, col=col)
            seen.add(mode)
        _log_x(fig, allv, title_text="published env steps / s", row=1, col=col)
        _log_y(fig, allv, title_text="predicted env steps / s", row=1, col=col)
    fig.update_annotations(font_size=13)
    return _layout(fig, "Validation against published throughput", 500)


def predicted_vs_measured(points: list[dict[str, Any]]) -> go.Figure:
    pts = [p for p in points if p.get("predicted") and p.get("measured")]
    fig = go.Figure()
    allv = [v for p in pts for v in (p["predicted"], p["measured"])]
    lo, hi = min(allv) * 0.8, max(allv) * 1.25
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="predicted = measured",
                             line={"color": "black", "dash": "dash", "width": 1}, hoverinfo="skip"))
    for mode in sorted({p.get("mode") for p in pts}, key=mode_order):
        ps = [p for p in pts if p.get("mode") == mode]
        fig.add_trace(go.Scatter(
            x=[p["predicted"] for p in ps], y=[p["measured"] for p in ps], mode="markers+text", name=mode or "?",
            marker=_marker(mode), meta={"mode": mode}, text=[f"{p['error_pct']:+.1f}%" for p in ps],
            textposition="top right",
            hovertext=[f"{p['label']}<br>measured {p['measured']:.2f}, predicted {p['predicted']:.2f}<br>"
                       f"error {p['error_pct']:+.1f}% (prediction / measurement - 1)<br>prediction from "
                       f"{p['prediction_source']}" for p in ps], hoverinfo="text"))
    _log_x(fig, allv, title_text="predicted env steps / s")
    _log_y(fig, allv, title_text="measured env steps / s")
    return _layout(fig, "Predicted vs measured (run records; label: prediction / measurement - 1)", 480)
