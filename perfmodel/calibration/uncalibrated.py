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

``python -m perfmodel.calibration.uncalibrated --out-dir profiles`` writes the bundled ones.
"""

from __future__ import annotations

import argparse
import math
import sys
from datetime import date
from pathlib import Path
from typing import Any

from perfmodel.backbones import BACKBONES, CALIBRATED, FAMILY, get_backbone
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

    unc = ref.uncertainty
    if unc is None:
        raise ConfigError(f"{ref_name}: provenance.uncertainty", "is missing: the shared parameters' covariance is "
                                                               "needed (run perfmodel calibrate)")
    keep = [i for i, n in enumerate(unc.parameters) if n in shared]
    cov = tuple(tuple(unc.log_covariance[i][j] for j in keep) for i in keep)
    center = family if family in per[next(iter(per))][2] else "geometric mean of " + " and ".join(calibrated)
    transferred = Uncertainty(
        method=(f"shared parameters: the marginal covariance of {ref_name}'s fit; per-backbone parameters "
                f"({', '.join(per)}) not calibrated for {name}: bracketed over the calibrated backbones' spread "
                f"(centre: {center})"),
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
        + tuple((n, lo, hi) for n, (lo, hi, _) in per.items()),
        direction_ends=(),  # the fit's ends are for its own joint parameters: the Gaussian ends here
    )
    meaning = {p.name: p.doc for p in PARAMS}
    params: dict[str, Any] = {}
    for n, v in values.items():
        rec: dict[str, Any] = {"value": v, "meaning": meaning[n]}
        if n in per:
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
    prof = build_profile(spec, values, ref.costs.env_memory_gb, provenance)
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
    from dataclasses import replace as _replace

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
        built = _replace(built, name=f"{profile.name}@{b}", variability=profile.variability)
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
