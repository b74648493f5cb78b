"""How far a plan lies beyond what a profile's calibration saw (GPU and node counts, GPU type,
workload, with the measured width of a workload's error per axis where a grid measured one).
Light on purpose (no numpy): every prediction states it, with or without an interval."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.hardware import DEFAULT_GPU
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import BUNDLED_DIR, Profile, Uncertainty


def calibrated_gpu_type(profile: Profile) -> str:
    """The GPU type a profile's costs are for (its node's; the default, H100-class, when unsaid)."""
    return profile.node.get("gpu", DEFAULT_GPU)


def extrapolation(plan: Plan, unc: Uncertainty | None, calibrated_gpu_type: str | None = None) -> dict[str, Any]:
    """How far ``plan`` lies beyond what the calibration saw: GPU and node counts (the interval
    widens per doubling beyond them) and the GPU type (``calibrated_gpu_type``, the profile's
    node's): another type is costed by datasheet ratios (perfmodel/gpu.py), which nothing
    calibrated measures, so it is flagged; where the profile has measured GPU compute, the interval
    spans the two ends of what the fitted slopes allow (uncertainty.gpu_type_worlds)."""
    g, nodes = plan.cluster.gpus, plan.cluster.nodes
    cg = list(unc.calibrated_gpus) if unc else []
    cn = list(unc.calibrated_nodes) if unc else []
    beyond_g = not cg or g < min(cg) or g > max(cg)
    beyond_n = not cn or nodes < min(cn) or nodes > max(cn)
    d = 0.0
    if cg and beyond_g:
        d = math.log2(g / max(cg)) if g > max(cg) else math.log2(min(cg) / g)
    out = {"beyond_calibrated_gpus": beyond_g, "calibrated_gpus": cg,
           "beyond_calibrated_nodes": beyond_n, "calibrated_nodes": cn, "nodes": nodes,
           "doublings_beyond": round(d, 4)}
    if calibrated_gpu_type is not None:
        out.update(gpu_type=plan.cluster.gpu, calibrated_gpu_type=calibrated_gpu_type,
                   beyond_calibrated_gpu_type=plan.cluster.gpu != calibrated_gpu_type)
    if not cg:
        out["note"] = "the profile records no calibrated scale (measured, or not calibrated against a cluster)"
    return out


# The workload fields a calibration is tied to (issue 32): envs per GPU, the episode's length and
# its chunking, the epochs and the batch sizes. Denoising steps are the config's (an RLinf import
# knows them: commands.predict adds them).
WORKLOAD_FIELDS = ("envs_per_gpu", "num_action_chunks", "max_episode_steps", "rollout_epoch", "update_epoch",
                   "micro_batch_size", "global_batch_size")
# The measured width of the error of predicting another workload, per axis (issue 39 item 4): a
# data file that a measured grid fills (benchmarks/workload_grid.py; format in docs/metrics.md,
# "Beyond the calibrated workload"). Absent, or without an axis: no width is measured there.
WORKLOAD_WIDTHS = BUNDLED_DIR / "reference" / "workload_widths.json"
WORKLOAD_AXES = WORKLOAD_FIELDS + ("denoising_steps", "action_horizon")
_WIDTHS: dict[str, tuple[float, dict[str, tuple[tuple[float, float], ...]]]] = {}


def load_workload_widths(path: str | Path | None = None) -> dict[str, tuple[tuple[float, float], ...]]:
    """axis -> ((distance, sd_log), ...), distances increasing, from the widths file (default
    ``WORKLOAD_WIDTHS``); {} where there is none. A distance is |log2(plan value / calibrated
    value)| along the axis; sd_log the standard deviation of log(prediction / measurement) of the
    grid's held-out workloads at that distance. Read once per file version."""
    import json

    p = Path(path) if path is not None else WORKLOAD_WIDTHS
    try:
        mtime = p.stat().st_mtime
    except OSError:
        return {}
    hit = _WIDTHS.get(str(p))
    if hit is not None and hit[0] == mtime:
        return hit[1]
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(str(p), f"unreadable workload widths: {e}") from None
    axes = doc.get("axes") if isinstance(doc, dict) else None
    if not isinstance(axes, dict):
        raise ConfigError(f"{p}: axes", "must map workload axes to {\"sd_log_by_distance\": [[distance, sd_log], ...]}")
    out: dict[str, tuple[tuple[float, float], ...]] = {}
    for axis, entry in axes.items():
        where = f"{p}: axes.{axis}"
        if axis not in WORKLOAD_AXES:
            raise ConfigError(where, f"must be one of {', '.join(WORKLOAD_AXES)}")
        pts = entry.get("sd_log_by_distance") if isinstance(entry, dict) else None
        ok = isinstance(pts, list) and pts and all(
            isinstance(q, list) and len(q) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                        and math.isfinite(v) for v in q)
            and q[0] > 0 and q[1] >= 0 for q in pts)
        if not ok or any(b[0] <= a[0] for a, b in zip(pts, pts[1:])):
            raise ConfigError(f"{where}.sd_log_by_distance",
                              "must be a list of [distance > 0, sd_log >= 0] pairs, distances increasing")
        out[axis] = tuple((float(d), float(s)) for d, s in pts)
    _WIDTHS[str(p)] = (mtime, out)
    return out


def axis_width(points: tuple[tuple[float, float], ...], distance: float) -> tuple[float, bool]:
    """(sd_log at ``distance`` along an axis, whether that lies beyond the measured distances):
    linear between the measured points and from (0, 0) (no distance, no workload error); beyond
    the farthest, growing in proportion to the distance, as the farthest measured point does."""
    prev = (0.0, 0.0)
    for d, s in points:
        if distance <= d:
            return prev[1] + (s - prev[1]) * (distance - prev[0]) / (d - prev[0]), False
        prev = (d, s)
    return prev[1] * distance / prev[0], True


def workload_axis_widths(plan: Plan, profile: Profile) -> dict[str, dict[str, Any] | None]:
    """For each workload axis where ``plan`` is away from the calibrated workload: its distance
    (|log2 ratio|) and the measured width there (``axis_width``), or None where no width is
    measured for the axis."""
    ext = workload_extrapolation(plan, profile, widths=False)
    if not ext.get("beyond_calibrated_workload"):
        return {}
    widths = load_workload_widths()
    out: dict[str, dict[str, Any] | None] = {}
    for axis in ext["beyond_calibrated_workload"]:
        now, cal = ext["workload"][axis], ext["calibrated_workload"][axis]
        if axis not in widths or not now or not cal or now <= 0 or cal <= 0:
            out[axis] = None
            continue
        distance = abs(math.log2(now / cal))
        sd, beyond = axis_width(widths[axis], distance)
        out[axis] = {"distance": round(distance, 4), "sd_log": sd, "beyond_measured_distance": beyond}
    return out


def _workload_sentence(widths: dict[str, dict[str, Any] | None]) -> str:
    have = [f"{a} ({100 * w['sd_log']:.1f} % sd at {w['distance']:.2f} doublings"
            + (", beyond the farthest measured" if w["beyond_measured_distance"] else "") + ")"
            for a, w in widths.items() if w is not None]
    lack = [a for a, w in widths.items() if w is None]
    parts = []
    if have:
        parts.append("widened by the measured error of predicting another workload along " + ", ".join(have))
    if lack:
        parts.append("no measured width exists for " + ", ".join(lack))
    return "; ".join(parts)


def calibrated_workload(profile: Profile) -> dict[str, float]:
    """The workload a profile was calibrated at: its default workload (the published setup's for
    the bundled profiles: perfmodel/calibration/reference.py scales it with the GPUs at
    ``envs_per_gpu``)."""
    from perfmodel.schema.plan import Workload

    w = Workload.from_dict(dict(profile.default_workload), "profile.default_workload")
    return {"envs_per_gpu": profile.envs_per_gpu, **{f: getattr(w, f) for f in WORKLOAD_FIELDS[1:]}}


def workload_extrapolation(plan: Plan, profile: Profile, widths: bool = True) -> dict[str, Any]:
    """The workload fields of ``plan`` away from the calibrated workload (``beyond_calibrated_workload``,
    the values on both sides) and, with ``widths``, the measured width along each
    (``workload_widths``: distance and sd_log, or None where none is measured) and the sentence
    that says so (``workload_interval``); {} for a profile not calibrated against a cluster
    (measured)."""
    unc = profile.uncertainty
    if unc is None or not unc.calibrated_gpus:
        return {}
    cal = calibrated_workload(profile)
    w = plan.workload
    envs = w.total_num_envs / plan.cluster.gpus
    now = {"envs_per_gpu": int(envs) if float(envs).is_integer() else round(envs, 4),
           **{f: getattr(w, f) for f in WORKLOAD_FIELDS[1:]}}
    beyond = [f for f in WORKLOAD_FIELDS if now[f] != cal[f]]
    # the policy's shape (plan.denoising_steps / action_horizon, set where they differ from the
    # backbone's own): its costs are rescaled by FLOPs (perfmodel.costs), not calibrated there
    from perfmodel.backbones import BACKBONES

    spec = BACKBONES.get(profile.backbone)
    for field, own in (("denoising_steps", spec and spec.denoise_steps), ("action_horizon", spec and spec.action_chunk)):
        value = getattr(plan, field, None)
        if value is not None and own is not None and value != own:
            beyond.append(field)
            now[field], cal = value, {**cal, field: own}
    out: dict[str, Any] = {"beyond_calibrated_workload": beyond, "calibrated_workload": cal,
                           "workload": {f: now[f] for f in beyond}}
    if widths and beyond:
        out["workload_widths"] = workload_axis_widths(plan, profile)
        out["workload_interval"] = _workload_sentence(out["workload_widths"])
    return out
