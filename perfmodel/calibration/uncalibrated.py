"""Profiles of backbones that no published throughput calibrates (pi0, OpenVLA-OFT, GR00T N1.6).

Such a backbone runs on the same LIBERO envs, hosts, links and RLinf pipeline as the calibrated
ones, so it takes the calibration's shared physical parameters as they were fitted (env step per
core, inter-node bandwidth, actor cores, lock-step barrier, fixed times per micro-batch, optimizer
step and inference call, offload bandwidth: ``calibrate.PARAMS`` with ``shared``). Its GPU costs
come from its own shapes (FLOPs and bytes, perfmodel.backbones). What nothing measured for it is
its per-backbone parameters (inference and training MFU, host work per observation): the
calibrated backbones' values say how far those differ between two real VLAs, so the profile
takes a central value (the calibrated backbone of its family, same code path and VLM, where it
has one; else their geometric mean) and brackets each over the calibrated backbones' whole spread
(``Uncertainty.unidentified``: the interval is evaluated at both ends, not assumed). The shared
parameters keep their fitted covariance (the marginal block). Predictions say so:
``extrapolation.backbone_not_calibrated``.

A launch-bound backbone (``backbones.LAUNCH_BOUND``: RLinf's MLP policy) takes its fixed times
per inference call, micro-batch and optimizer step from its stand-in's measured profile instead
(``measured_call_costs``), bracketed up to the calibration's fitted values (the share of RLinf's
per-call host path around the model that it pays is not measured), and out of the shared
covariance; its host work per observation is none of its own, bracketed up to the smallest
calibrated backbone's (the part of it RLinf's env side may do for every backbone).

``python -m perfmodel.calibration.uncalibrated --out-dir profiles`` writes the bundled ones.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any, Callable

from perfmodel.backbones import BACKBONES, CALIBRATED, FAMILY, LAUNCH_BOUND, get_backbone
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.profile import Profile, Uncertainty, load_profile

COMMAND = "python -m perfmodel.calibration.uncalibrated --out-dir profiles"
UNCALIBRATED = tuple(n for n in BACKBONES if n not in CALIBRATED)


def _values(prof: Profile) -> dict[str, float]:
    return {n: float(p["value"]) for n, p in prof.provenance["parameters"].items()}


def spread(calibrated: dict[str, Profile]) -> dict[str, tuple[float, float, dict[str, float]]]:
    """Per-backbone parameter -> (lowest, highest, value per calibrated backbone)."""
    from perfmodel.calibration.calibrate import PARAMS

    out = {}
    for p in PARAMS:
        if p.shared:
            continue
        by = {b: _values(prof)[p.name] for b, prof in calibrated.items()}
        out[p.name] = (min(by.values()), max(by.values()), by)
    return out


# The calibration's fixed times -> the measured profile's costs a launch-bound backbone takes for
# them: (where in the profile, in words; how to read it). The whole measured optimizer step is
# fixed: a launch-bound step does not shrink with FSDP shards.
CALL_COSTS: dict[str, tuple[str, Callable[[Any], float]]] = {
    "infer_overhead_s": ("costs.infer_s.intercept", lambda k: k.infer_s.intercept),
    "train_micro_fixed_s": ("costs.train_micro_batch_s.intercept", lambda k: k.train_micro_batch_s.intercept),
    "optimizer_fixed_s": ("costs.optimizer_step_s + costs.optimizer_fixed_s",
                          lambda k: k.optimizer_step_s + k.optimizer_fixed_s),
}


def measured_call_costs(name: str) -> tuple[str, dict[str, float]]:
    """A launch-bound backbone's fixed times (``CALL_COSTS``) from its stand-in's bundled measured
    profile (``LAUNCH_BOUND``): (the profile's name, value per calibration parameter)."""
    ref = LAUNCH_BOUND[name]
    prof = load_profile(ref)
    if prof.provenance.get("kind") != "measured" or prof.backbone != name:
        raise ConfigError(f"{ref}: provenance.kind", f"must be a measured profile of {name} (executor profile); got "
                                                     f"{prof.provenance.get('kind')!r} of {prof.backbone!r}")
    return ref, {n: read(prof.costs) for n, (_, read) in CALL_COSTS.items()}


def uncalibrated_profile(name: str, calibrated: dict[str, Profile] | None = None,
                         command: str = COMMAND) -> Profile:
    """The profile of backbone ``name`` (not calibrated) from the calibrated profiles (default:
    the bundled ``pi05`` and ``gr00t_n15``), which must share their shared parameters."""
    from perfmodel.calibration.calibrate import PARAMS, build_profile

    if name not in UNCALIBRATED:
        raise ConfigError("backbone", f"must be one of {', '.join(UNCALIBRATED)} (the calibrated ones have fitted "
                                      f"profiles); got {name!r}")
    calibrated = calibrated or {b: load_profile(b) for b in CALIBRATED}
    shared = [p.name for p in PARAMS if p.shared]
    ref_name = next(iter(calibrated))
    ref = calibrated[ref_name]
    values = {n: _values(ref)[n] for n in shared}
    for b, prof in calibrated.items():
        for n in shared:
            if not math.isclose(_values(prof)[n], values[n], rel_tol=1e-9):
                raise ConfigError(f"{b}: provenance.parameters.{n}", f"is {_values(prof)[n]:g} but {values[n]:g} in "
                                                                     f"{ref_name}: profiles of separate fits")
    family = FAMILY.get(name)
    per = spread(calibrated)
    for n, (lo, hi, by) in per.items():
        values[n] = by[family] if family in by else math.exp(sum(math.log(v) for v in by.values()) / len(by))
    measured_ref, own = measured_call_costs(name) if name in LAUNCH_BOUND else ("", {})
    fitted = {n: values[n] for n in own}
    values.update(own)
    if own:
        # no host work per observation of its own (RLinf's preprocess_env_obs keeps the state, moved
        # to the device inside the call): the calibration's floor for the parameter (a profile's
        # parameters are > 0), up to the smallest calibrated backbone's, the most of it that RLinf's
        # env side can do alike for every backbone
        values["obs_cpu_s"] = next(p.lo for p in PARAMS if p.name == "obs_cpu_s")
    brackets = {n: (lo, hi) for n, (lo, hi, _) in per.items()}
    if own:
        brackets["obs_cpu_s"] = (values["obs_cpu_s"], per["obs_cpu_s"][0])
    shared = [n for n in shared if n not in own]

    unc = ref.uncertainty
    if unc is None:
        raise ConfigError(f"{ref_name}: provenance.uncertainty", "is missing: the shared parameters' covariance is "
                                                               "needed (run perfmodel calibrate)")
    keep = [i for i, n in enumerate(unc.parameters) if n in shared]
    cov = tuple(tuple(unc.log_covariance[i][j] for j in keep) for i in keep)
    center = family if family in per[next(iter(per))][2] else "geometric mean of " + " and ".join(calibrated)
    method = (f"shared parameters: the marginal covariance of {ref_name}'s fit; per-backbone parameters "
              f"({', '.join(per)}) not calibrated for {name}: bracketed over the calibrated backbones' spread "
              f"(centre: {center})")
    if own:
        method = (f"shared parameters but {', '.join(own)}: the marginal covariance of {ref_name}'s fit; "
                  f"{', '.join(own)} measured ({measured_ref}.json), bracketed up to the calibration's fitted values; "
                  f"{', '.join(n for n in per if n != 'obs_cpu_s')} not calibrated for {name}: bracketed over the "
                  f"calibrated backbones' spread (centre: {center}); obs_cpu_s none of its own, bracketed up to the "
                  "smallest calibrated backbone's")
    transferred = Uncertainty(
        method=method,
        coverage=unc.coverage,
        parameters=tuple(unc.parameters[i] for i in keep),
        log_covariance=cov,
        residual_sd_log=unc.residual_sd_log,
        extrapolation_sd_log_per_doubling=unc.extrapolation_sd_log_per_doubling,
        extrapolation_source=unc.extrapolation_source,
        calibrated_gpus=unc.calibrated_gpus,
        calibrated_nodes=unc.calibrated_nodes,
        extrapolation_pair_sd_log_per_doubling=unc.extrapolation_pair_sd_log_per_doubling,
        unidentified=tuple(e for e in unc.unidentified if e[0] in shared)
        + tuple((n, own[n], fitted[n]) for n in own)
        + tuple((n, *brackets[n]) for n in per),
        direction_ends=(),  # the fit's ends are for its own joint parameters: the Gaussian ends here
    )
    meaning = {p.name: p.doc for p in PARAMS}
    params: dict[str, Any] = {}
    for n, v in values.items():
        rec: dict[str, Any] = {"value": v, "meaning": meaning[n]}
        if n in own:
            rec.update(kind="measured", source=f"profiles/{measured_ref}.json {CALL_COSTS[n][0]}", bracket=[v, fitted[n]],
                       note=f"measured on CPU (the stand-in, one core); transfer: a launch-bound MLP costs on a GPU "
                            f"what its host path costs; bracketed up to the calibration's {fitted[n]:.4g} s (fitted "
                            f"to RLinf's VLA path, {ref_name}.json), since what of RLinf's own path around the model "
                            "(its observations carry the env's camera images all the same) it pays is not measured")
        elif own and n == "obs_cpu_s":
            by = per[n][2]
            rec.update(kind="derived", bracket=list(brackets[n]),
                       note=(f"none of its own: RLinf's MLP keeps the state of an observation and moves it to the "
                             f"device inside the call (rlinf 0.3.0 mlp_policy.py preprocess_env_obs; its stand-in "
                             f"likewise: the measured call holds it); the calibration's floor for the parameter "
                             f"(a profile's parameters are > 0), bracketed up to the smallest calibrated backbone's "
                             f"(" + ", ".join(f"{b} {x:.4g} s" for b, x in by.items()) + "), the most of it that "
                             "RLinf's env side can do alike for every backbone"))
        elif n in per:
            lo, hi, by = per[n]
            rec.update(kind="derived", calibrated_values=by, bracket=[lo, hi],
                       note=f"not calibrated for {name}: centre {center}, bracketed over the calibrated spread")
        else:
            rec.update(kind="fitted", source=f"{ref_name}.json provenance.parameters (shared by the calibration)")
        params[n] = rec
    spec = get_backbone(name)
    provenance = {
        "kind": "transferred",
        "date": date.today().isoformat(),
        "method": command,
        "backbone_calibrated": False,
        "source": ", ".join(f"profiles/{b}.json" for b in calibrated),
        "reference": ref.provenance.get("reference", ""),
        "note": (f"no published throughput calibrates {name}: the shared physical parameters (env, host path, "
                 "links, fixed times) are the calibration's; GPU costs from the backbone's shapes (FLOPs / "
                 "(peak x MFU)); its MFUs and host work per observation are not measured: centred on "
                 f"{center}, and every prediction's interval spans the calibrated backbones' spread of them"),
        "parameters": params,
        "uncertainty": transferred.to_dict(),
    }
    if own:
        provenance["source"] += f", profiles/{measured_ref}.json"
        provenance["note"] = (
            f"no published throughput calibrates {name}: the shared physical parameters (env, links) are the "
            f"calibration's; its fixed times per inference call, micro-batch and optimizer step are its stand-in's, "
            f"measured on CPU (profiles/{measured_ref}.json; transfer: a launch-bound MLP costs on a GPU what its host "
            "path costs), bracketed up to the calibration's; its per-sample GPU costs from its shapes (FLOPs / "
            f"(peak x MFU), MFUs bracketed over the calibrated backbones'); no host work per observation of its own")
    prof = build_profile(spec, values, ref.costs.env_memory_gb, provenance)
    if own:
        prof = replace(prof, assumptions={**prof.assumptions, "launch_bound": (
            f"{name}'s compute is a vanishing part of every call: its fixed times (infer_s and train_micro_batch_s "
            f"intercepts, optimizer_fixed_s) are its stand-in's measured on one CPU core (profiles/{measured_ref}.json), "
            "taken as its GPU call costs; the slopes are FLOPs / (peak x MFU)")})
    return prof


def backbone_worlds(plan: Any, profile: Profile, centre: float, run: Any) -> tuple[list[Any], str]:
    """For a profile of a backbone not calibrated: one world per calibrated backbone, the plan
    with all its per-backbone parameters at that backbone's values at once; none for any other
    profile. The per-parameter bracket (Uncertainty.unidentified) moves one at a time, and the
    parameters interact (more host work per observation hides faster inference), so the interval
    also reaches these joint corners (``reach``: each is an end of parameters already bracketed,
    so it is not added to them)."""
    params = profile.provenance.get("parameters") or {}
    if not profile.backbone_uncalibrated or not params or centre <= 0:
        return [], ""
    from perfmodel.calibration.calibrate import build_profile
    from perfmodel.calibration.measured import measured_of
    from perfmodel.calibration.worlds import World, plan_on

    values = {n: float(p["value"]) for n, p in params.items()}
    by_backbone: dict[str, dict[str, float]] = {}
    for n, p in params.items():
        for b, v in (p.get("calibrated_values") or {}).items():
            by_backbone.setdefault(b, {})[n] = float(v)
    out = []
    prov = {k: v for k, v in profile.provenance.items() if k != "uncertainty"}
    for b, vals in by_backbone.items():
        built = build_profile(get_backbone(profile.backbone), {**values, **vals}, profile.costs.env_memory_gb, prov,
                              measured_of(profile.costs), node_facts=profile.provenance.get("node_facts"))
        built = replace(built, name=f"{profile.name}@{b}", variability=profile.variability)
        thr = run(plan_on(plan, profile, built), built)
        if thr > 0:
            out.append(World(f"per-backbone parameters at {b}'s", "backbone", "backbone corners", "reach",
                             math.log(thr / centre), thr, detail={"backbone": b}))
    if not out:
        return [], ""
    return out, ("backbone not calibrated: reaches the plan with its per-backbone parameters at each calibrated "
                 "backbone's values (" + ", ".join(w.detail["backbone"] for w in out) + ")")


def main(argv: list[str] | None = None) -> int:
    from perfmodel.schema.jsonio import write_json_atomic

    ap = argparse.ArgumentParser(prog="python -m perfmodel.calibration.uncalibrated", description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default="profiles")
    ap.add_argument("--backbone", action="append", choices=UNCALIBRATED, help="default: all of them")
    args = ap.parse_args(argv)
    try:
        for name in args.backbone or UNCALIBRATED:
            prof = uncalibrated_profile(name)
            path = Path(args.out_dir) / f"{name}.json"
            write_json_atomic(path, prof.to_dict())
            print(f"wrote {path}")
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
