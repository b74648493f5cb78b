"""How far a plan lies beyond what a profile's calibration saw (GPU and node counts, GPU type).
Light on purpose (no numpy): every prediction states it, with or without an interval."""

from __future__ import annotations

import math
from typing import Any

from perfmodel.schema.hardware import DEFAULT_GPU
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile, Uncertainty


def calibrated_gpu_type(profile: Profile) -> str:
    """The GPU type a profile's costs are for (its node's; the default, H100-class, when unsaid)."""
    return profile.node.get("gpu", DEFAULT_GPU)


def extrapolation(plan: Plan, unc: Uncertainty | None, calibrated_gpu_type: str | None = None) -> dict[str, Any]:
    """How far ``plan`` lies beyond what the calibration saw: GPU and node counts (the interval
    widens per doubling beyond them) and the GPU type (``calibrated_gpu_type``, the profile's
    node's): another type is costed by datasheet ratios (perfmodel/gpu.py), which nothing
    calibrated measures, so it is flagged; where the profile has measured GPU compute, the interval
    spans the two ends of what the fitted slopes allow (uncertainty.with_gpu_type_bracket)."""
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
WORKLOAD_INTERVAL_NOTE = ("not widened: every calibrated point runs this one workload (the published setup's, at "
                          "every GPU count), so no cross-validation fold holds a workload out and nothing measures "
                          "the error at another; a run of yours at this workload does (perfmodel calibrate "
                          "--from-rlinf-run)")


# The same for a profile fitted to the user's runs (its calibrated workload is theirs, not the
# published setup's).
WORKLOAD_INTERVAL_NOTE_RUNS = ("not widened: the runs this profile was fitted to set its calibrated workload, and no "
                               "cross-validation holds a workload out, so nothing measures the error at another; a "
                               "run of yours at this workload does (perfmodel calibrate --from-rlinf-run)")


def calibrated_workload(profile: Profile) -> dict[str, float]:
    """The workload a profile was calibrated at: its default workload (the published setup's for
    the bundled profiles: perfmodel/calibration/reference.py scales it with the GPUs at
    ``envs_per_gpu``)."""
    from perfmodel.schema.plan import Workload

    w = Workload.from_dict(dict(profile.default_workload), "profile.default_workload")
    return {"envs_per_gpu": profile.envs_per_gpu, **{f: getattr(w, f) for f in WORKLOAD_FIELDS[1:]}}


def workload_extrapolation(plan: Plan, profile: Profile) -> dict[str, Any]:
    """The workload fields of ``plan`` away from the calibrated workload (``beyond_calibrated_workload``,
    the values on both sides), or {} for a profile not calibrated against a cluster (measured)."""
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
    fitted_to_runs = isinstance(profile.provenance, dict) and bool(profile.provenance.get("runs"))
    return {"beyond_calibrated_workload": beyond, "calibrated_workload": cal,
            "workload": {f: now[f] for f in beyond},
            "workload_interval": WORKLOAD_INTERVAL_NOTE_RUNS if fitted_to_runs else WORKLOAD_INTERVAL_NOTE}
