"""``perfmodel``: predict, validate and calibrate from the command line.

Bad input never shows a traceback: one line ``error: <field>: <what is allowed>``, exit code 2.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, Iterable

import click

from perfmodel.cliutil import (Choice, check_outputs_apart, check_writable, no_progress_option, progress_bar,
                               shows_progress, version_option)
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.jsonio import dumps as strict_json
from perfmodel.schema.modes import MODE_TABLE, MODES
from perfmodel.planning.choice import OBJECTIVES
from perfmodel.schema.plan import (DEFAULT_T_MAX_S, MAX_GPUS, Plan, check_gpu_hour_price, is_profile_path,
                                   parse_ratio, profile_file_of)

from perfmodel.schema.profile import BUNDLED_REFERENCE, user_profile_dir

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BACKBONE_NAMES = ("pi05", "gr00t_n15")
MAX_REPLICATIONS = 1000
MAX_SEED = 2**32 - 1  # numpy's seed range


def _check_seed(seed: int) -> None:
    if not 0 <= seed <= MAX_SEED:
        _fail("--seed", f"must be an integer in 0..{MAX_SEED}, got {seed}")


def _check_price(price: float | None) -> None:
    if price is not None:
        check_gpu_hour_price("--gpu-hour-price", price)


def _fail(field: str, message: str) -> None:
    raise ConfigError(field, message)


def _one_of(field: str, value: str | None, allowed: Iterable[str]) -> None:
    """``value``, when given, must be one of ``allowed``."""
    allowed = tuple(allowed)
    if value is not None and value not in allowed:
        _fail(field, f"must be one of {', '.join(allowed)}; got {value!r}")


def _backbone_or_profile(backbone: str | None, profile_path: str | None) -> str | None:
    """``--backbone`` (a bundled one) or ``--profile``, not both: the one given."""
    if backbone is not None and profile_path is not None:
        _fail("--profile", "give either --backbone or --profile, not both")
    _one_of("--backbone", backbone, BACKBONE_NAMES)
    return profile_path or backbone


def _check_backbone(backbone: str | None, profile, source: str) -> None:
    """``--backbone X`` with a profile of another backbone is a contradiction, not an override."""
    if backbone is not None and profile.backbone != backbone:
        _fail("--backbone", f"{backbone} contradicts {source} {profile.name!r}, a {profile.backbone} profile; "
                            "give one of them")


def load_rlinf_config(path: str, backbone: str | None, profile_path: str | None, gpu: str | None,
                      mode: str | None = None):
    """An RLinf config (``--rlinf-config``) as a plan; its warnings go to stderr, one a line."""
    from perfmodel.rlinf.importer import load_rlinf

    ref = _backbone_or_profile(backbone, profile_path)
    _one_of("--mode", mode, MODES)
    im = load_rlinf(path, profile_ref=ref, gpu=gpu, mode=mode)
    for w in im.warnings:
        click.echo(f"warning: {w}", err=True)
    return im


def _check_gpu(gpu: str | None) -> None:
    from perfmodel.schema.hardware import GPU_NAMES

    _one_of("--gpu", gpu, GPU_NAMES)


# Plan fields a predict option sets: an error about one names the option the user typed.
OPTION_OF_FIELD = {"plan.max_staleness": ("max_staleness", "--staleness"), "plan.b_max": ("b_max", "--b-max"),
                   "plan.t_max_s": ("t_max_s", "--t-max"),
                   "plan.pipeline_stage_num": ("pipeline_stage_num", "--pipeline-stages")}


def resolve_plan(mode: str | None, gpus: int | None, backbone: str | None, ratio: str | None,
                 plan_path: str | None, profile_path: str | None, knobs: dict[str, Any],
                 rlinf_config: str | None = None, gpu: str | None = None, imported: list | None = None):
    """``_resolve_plan``, with an error about a plan field that an option set naming the option."""
    try:
        return _resolve_plan(mode, gpus, backbone, ratio, plan_path, profile_path, knobs, rlinf_config, gpu,
                             imported)
    except ConfigError as e:
        knob, option = OPTION_OF_FIELD.get(e.field, (None, None))
        if knob is not None and knobs.get(knob) is not None:
            raise ConfigError(option, e.message) from None
        raise


def _resolve_plan(mode: str | None, gpus: int | None, backbone: str | None, ratio: str | None,
                 plan_path: str | None, profile_path: str | None, knobs: dict[str, Any],
                 rlinf_config: str | None = None, gpu: str | None = None, imported: list | None = None):
    """The plan and profile of a prediction, from a plan file or an RLinf config and/or options
    (options win). ``imported`` receives the RLinf import (its warnings) when there is one."""
    from perfmodel.schema.profile import load_profile
    from perfmodel.calibration.reference import complete_cluster, published_plan
    from perfmodel.gpu import cluster_on

    _check_gpu(gpu)
    for option, path in (("--plan", plan_path), ("--profile", profile_path), ("--rlinf-config", rlinf_config)):
        if path is not None and not path.strip():
            _fail(option, "must be a file path, got an empty string")
    if rlinf_config is not None:
        if plan_path is not None:
            _fail("--rlinf-config", "give either --plan or --rlinf-config, not both")
        im = load_rlinf_config(rlinf_config, backbone, profile_path, gpu, mode)
        if imported is not None:
            imported.append(im)
        base = im.plan
        profile = load_profile(base.profile)
        changes: dict[str, Any] = {}
        if gpus is not None:
            # Another cluster size keeps the config's envs per GPU (as plan and sweep do).
            if not 1 <= gpus <= MAX_GPUS:
                _fail("--gpus", f"must be an integer in 1..{MAX_GPUS}, got {gpus}")
            envs = base.workload.total_num_envs * gpus / base.cluster.gpus
            if not envs.is_integer():
                _fail("--gpus", f"the config's {base.workload.total_num_envs} envs on {base.cluster.gpus} GPUs do not "
                                f"scale to {gpus} GPUs at the same envs per GPU")
            changes["cluster"] = base.cluster.__class__(**{**base.cluster.__dict__, "gpus": gpus})
            changes["workload"] = base.workload.__class__(**{**base.workload.__dict__, "total_num_envs": int(envs)})
        if ratio is not None:
            if base.allocation_ratio is None:
                _fail("--ratio", "must not be given for colocated: every GPU runs every phase")
            changes["allocation_ratio"] = ratio
        changes.update({k: v for k, v in knobs.items() if v is not None})
        plan = base.with_(**changes)
        plan.check()
        return plan, profile

    _one_of("--backbone", backbone, BACKBONE_NAMES)
    _one_of("--mode", mode, MODES)
    if gpus is not None and not 1 <= gpus <= MAX_GPUS:
        _fail("--gpus", f"must be an integer in 1..{MAX_GPUS}, got {gpus}")
    base, given = Plan.load_with_given(plan_path) if plan_path else (None, {})
    profile = load_profile(profile_path or (base.profile if base and backbone is None else backbone or "pi05"),
                           "--profile" if profile_path else "plan.profile" if base and backbone is None else "--backbone")
    _check_backbone(backbone, profile, "--profile" if profile_path else "plan.profile")
    if base is not None:
        base = complete_cluster(base, given, profile)
    mode = mode or (base.mode if base else None)
    if mode is None:
        _fail("--mode", f"is required (one of {', '.join(MODES)}) unless --plan gives it")
    if base is None:
        if gpus is None:
            _fail("--gpus", "is required (an integer >= 1) unless --plan gives it")
        if mode == "colocated" and ratio is not None:
            _fail("--ratio", "must not be given for colocated: every GPU runs every phase")
        if ratio is not None:
            parse_ratio(ratio, gpus, "--ratio")
        plan = published_plan(profile, mode, gpus, ratio, **{k: v for k, v in knobs.items() if v is not None})
        if gpu is not None:
            plan = plan.with_(cluster=cluster_on(plan.cluster, gpu))
        return plan, profile
    changes: dict[str, Any] = {"mode": mode, "profile": profile.name if profile_path is None else profile_path}
    if gpus is not None:
        changes["cluster"] = base.cluster.__class__(**{**base.cluster.__dict__, "gpus": gpus})
    if mode == "colocated":
        if ratio is not None:
            _fail("--ratio", "must not be given for colocated: every GPU runs every phase")
        changes["allocation_ratio"] = None
    elif ratio is not None:
        changes["allocation_ratio"] = ratio
    elif base.allocation_ratio is None:
        changes["allocation_ratio"] = "1:1"
    changes.update({k: v for k, v in knobs.items() if v is not None})
    plan = base.with_(**changes)
    if gpu is not None:
        plan = plan.with_(cluster=cluster_on(plan.cluster, gpu))
    plan.check()
    return plan, profile


def _print_prediction(p: dict[str, Any]) -> None:
    split = ("all GPUs time-share every phase" if p["mode"] == "colocated"
             else f"rollout {p['rollout_gpus']} : actor {p['actor_gpus']} (ratio {p['allocation_ratio']})")
    rows = [
        ("mode", p["mode"]),
        ("backbone", f"{p['backbone']} (profile {p['profile']})"),
        ("gpus", f"{p['gpus']}, {split}"),
        ("envs", f"{p['total_num_envs']} ({p['pipeline_stage_num']} pipeline stage(s))"),
        ("throughput", f"{p['throughput_env_steps_per_s']:.2f} env steps/s"
         + (f"  (95% CI {p['throughput_ci95'][0]:.2f} .. {p['throughput_ci95'][1]:.2f}, "
            f"{p['replications']} replications)" if "throughput_ci95" in p else "")),
        *_interval_rows(p),
        ("bound", f"{p['bound_env_steps_per_s']:.2f} env steps/s (bottleneck: {p['bottleneck']})"),
        ("iteration", f"{p['iteration_time_s']:.1f} s"),
        ("per GPU-hour", f"{p['env_steps_per_gpu_hour']:.0f} env steps on {p.get('gpu', 'h100')}"
         + (f"; ${p['dollars_per_million_env_steps']:.2f} per million env steps at ${p['gpu_hour_price']:g}/GPU-hour"
            if "dollars_per_million_env_steps" in p else "")),
        ("utilization", "  ".join(f"{k} {v:.2f}" for k, v in p["utilization"]["resources"].items())),
        ("stage s/iter", "  ".join(f"{k} {v:.1f}" for k, v in p["stage_time_s"].items() if v > 0)),
    ]
    if p["staleness"]["max"] > 0:
        rows.append(("staleness", f"mean {p['staleness']['mean']:.2f}, max {p['staleness']['max']:.0f} versions"))
    rows += [("warning", w) for w in p.get("warnings", [])]
    if "trace" in p:
        rows.append(("trace", p["trace"]))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        click.echo(f"{k:<{width}}  {v}")


def _interval_rows(p: dict[str, Any]) -> list[tuple[str, str]]:
    """The prediction interval and, beyond the calibrated scale, the extrapolation warning."""
    rows: list[tuple[str, str]] = []
    iv = p.get("throughput_interval")
    if iv is not None:
        rows.append(("interval", f"{iv['low']:.2f} .. {iv['high']:.2f} env steps/s "
                                 f"({100 * iv['coverage']:.0f}% interval, width {iv['width_pct']:.1f}% of the prediction)"))
        parts = iv.get("components_pct") or {}
        # only a fitted profile's interval has a model-error term (a measured one is the
        # measurements' spread alone, and needs no excuse)
        if ("model_pct" in parts and parts.get("parameters_pct", 0) > parts["model_pct"]
                and not parts.get("extrapolation_pct") and not parts.get("gpu_type_pct")):
            # Within the calibrated scale a wide interval needs a reason: the fitted parameters
            # are pinned at the published setups, and this plan leans on ones they pin less.
            rows.append(("note", f"the width is mostly the fitted parameters' uncertainty "
                                 f"(+-{parts['parameters_pct']:.1f}% against +-{parts['model_pct']:.1f}% of model error): "
                                 "this plan's workload, split or hardware is away from the published setups they were fitted at"))
        if parts.get("unidentified_pct", 0) > 2 * parts.get("model_pct", 0):
            # A bracket over a parameter's whole range: name it, so the user knows what to measure.
            names = ", ".join(iv.get("unidentified_parameters", []))
            rows.append(("note", f"the calibrated points do not pin {names}, which this plan depends on: the interval "
                                 f"spans its whole plausible range ({parts['unidentified_pct']:.1f}% of log throughput)"))
    elif "throughput_interval_unavailable" in p:
        rows.append(("interval", f"unavailable: {p['throughput_interval_unavailable']}"))
    ext = p.get("extrapolation")
    if ext and (ext["beyond_calibrated_gpus"] or ext["beyond_calibrated_nodes"]):
        if ext["calibrated_gpus"]:
            what = (f"extrapolation: {p['gpus']} GPUs / {ext['nodes']} node(s) is beyond the calibrated "
                    f"{', '.join(map(str, ext['calibrated_gpus']))} GPUs / "
                    f"{', '.join(map(str, ext['calibrated_nodes']))} node(s)")
        else:
            what = f"extrapolation: {ext.get('note', 'no calibrated scale')}"
        rows.append(("warning", what))
    if ext and ext.get("beyond_calibrated_gpu_type"):
        other = (iv or {}).get("gpu_type_other_end")
        rows.append(("warning", f"extrapolation: costs calibrated on {ext['calibrated_gpu_type']} are carried to "
                                f"{ext['gpu_type']} by datasheet ratios (README: GPU types); no {ext['gpu_type']} "
                                "run backs them" + (
                                    f"; the interval holds {other:.2f} env steps/s, the plan with only the "
                                    "measured GPU compute scaled" if other is not None else
                                    ", and the interval does not include that")))
    return rows


SCALE_GLOBAL_BATCH = click.option(
    "--scale-global-batch", is_flag=True,
    help="raise global_batch_size to the smallest multiple of micro_batch_size x actor GPUs at or above it, so "
         "every actor GPU runs whole micro-batches and RLinf accepts the split (default: keep the workload's at "
         "every GPU count, as the published runs did; a split RLinf refuses is warned about)")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@version_option()
def cli() -> None:
    """Predict RL post-training throughput of VLA models on LIBERO for a cluster and mode."""


@cli.command()
@click.option("--mode", type=Choice(MODES), help="pipeline mode")
@click.option("--gpus", type=int, help="GPUs in the whole cluster")
@click.option("--backbone", type=Choice(BACKBONE_NAMES),
              help="bundled profile: pi05 (pi0.5) or gr00t_n15 (GR00T N1.5); default pi05")
@click.option("--ratio", help="rollout:actor GPU split, e.g. 1:1 or 3:1 (not for colocated)")
@click.option("--plan", "plan_path", type=click.Path(dir_okay=False), help="plan JSON file (options override its fields)")
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False),
              help="profile JSON file instead of a bundled one")
@click.option("--pipeline-stages", "pipeline_stage_num", type=int,
              help="pipeline_stage_num (default: the plan's or RLinf config's, else 1)")
@click.option("--b-max", type=int, help="dynamic batching: batch fires at this many envs (default: the "
              "plan's or RLinf config's, else one env worker's envs, RLinf's)")
@click.option("--t-max", "t_max_s", type=float, help="dynamic batching: or after this many seconds (default: the "
              f"plan's or RLinf config's, else {DEFAULT_T_MAX_S:g}, RLinf's)")
@click.option("--staleness", "max_staleness", type=int, help="max policy-version lag (async modes; default: the "
              "plan's or RLinf config's, else 1)")
@click.option("--replications", type=int, default=1, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--trace", type=click.Path(dir_okay=False), help="write a Chrome/Perfetto trace of the simulated timeline")
@click.option("--rlinf-config", "rlinf_config", help="RLinf Hydra config (.yaml) to predict (options override it)")
@click.option("--gpu", help="accelerator: a100, h100 (default), h200, b200 (README: GPU types)")
@click.option("--gpu-hour-price", "price", type=float, help="dollars per GPU-hour: adds dollars per million env steps")
@click.option("--no-interval", is_flag=True, help="skip the prediction interval (a few simulations fewer)")
@no_progress_option  # accepted for scripts that pass it to every command: predict has no bar
@SCALE_GLOBAL_BATCH
def predict(mode, gpus, backbone, ratio, plan_path, profile_path, pipeline_stage_num, b_max, t_max_s,
            max_staleness, replications, seed, as_json, trace, rlinf_config, gpu, price, no_interval,
            quiet, scale_global_batch) -> None:
    """Predict throughput for one plan."""
    from perfmodel.simulate import predict as run_predict

    imported: list = []
    plan, profile = resolve_plan(mode, gpus, backbone, ratio, plan_path, profile_path,
                                 {"pipeline_stage_num": pipeline_stage_num, "b_max": b_max,
                                  "t_max_s": t_max_s, "max_staleness": max_staleness},
                                 rlinf_config=rlinf_config, gpu=gpu, imported=imported)
    if scale_global_batch:
        scaled = plan.with_whole_global_batch()
        if scaled is not plan:
            click.echo(f"note: --scale-global-batch: global_batch_size {plan.workload.global_batch_size} -> "
                       f"{scaled.workload.global_batch_size} ({scaled.workload.micro_batch_size} x {plan.actor_gpus} "
                       "actor GPUs x whole micro-batches)", err=True)
        plan = scaled
    if not 1 <= replications <= MAX_REPLICATIONS:
        _fail("--replications", f"must be an integer in 1..{MAX_REPLICATIONS}, got {replications}")
    _check_seed(seed)
    _check_price(price)
    check_outputs_apart({"--plan": plan_path, "--profile": profile_path, "--rlinf-config": rlinf_config,
                         "plan.profile": profile_file_of(plan_path)}, {"--trace": trace})
    check_writable("--trace", trace)  # before simulating, not after
    given = (("--staleness", "max_staleness", max_staleness), ("--b-max", "b_max", b_max), ("--t-max", "t_max_s", t_max_s))
    unused = [f"{opt}: no effect in mode {plan.mode} ({plan.mechanisms.ignores(knob)})"
              for opt, knob, value in given if value is not None and plan.mechanisms.ignores(knob)]
    if b_max is not None and not plan.mechanisms.ignores("b_max") and b_max > plan.effective_b_max:
        unused.append(f"--b-max: {b_max} is above one env worker's {plan.envs_per_worker} envs, so a batch is capped "
                      f"at {plan.effective_b_max} (a generator serves one worker; RLinf caps a batch the same way)")
    for w in unused:  # an option silently ignored reads as one that took effect
        click.echo(f"warning: {w}", err=True)
    out = run_predict(plan, profile, replications=replications, seed=seed, trace_path=trace,
                      interval=not no_interval)
    if unused and as_json:
        out["warnings"] = list(out.get("warnings") or []) + unused
    out["gpu"] = plan.cluster.gpu
    out["env_steps_per_gpu_hour"] = out["throughput_env_steps_per_s"] * 3600 / plan.cluster.gpus
    if price is not None:
        out["gpu_hour_price"] = price
        out["dollars_per_million_env_steps"] = 1e6 / out["env_steps_per_gpu_hour"] * price
    if imported:
        out["rlinf_import"] = imported[0].to_dict()
        if as_json:  # one list of caveats in the JSON (the text output has them on stderr already)
            out["warnings"] = list(out.get("warnings") or []) + [f"{rlinf_config}: {w}" for w in imported[0].warnings]
    if as_json:
        click.echo(strict_json(out, indent=2))
    else:
        _print_prediction(out)


@cli.command("validate")
@click.option("--reference", type=click.Path(dir_okay=False), default=str(BUNDLED_REFERENCE), show_default=True,
              help="CSV with columns mode, backbone, gpus, allocation_ratio, throughput_env_steps_per_s")
@click.option("--json", "as_json", is_flag=True)
@click.option("--cross-validate", "cross", is_flag=True,
              help="refit on each GPU count alone and predict the others, beside linear and growth baselines")
@click.option("--max-evals", type=int, default=None,
              help="simulations of the training set per cross-validation fold (default 120)")
@click.option("--design", default="both", show_default=True,
              help="with --cross-validate: fold design: group_out (leave one backbone x GPU count out: the "
                   "headline, equal information for model and baselines), scale (fit one GPU count, predict "
                   "the other), or both")
@click.option("--record", is_flag=True, help="with --cross-validate: store the result in the bundled profiles' provenance")
@no_progress_option
def validate_cmd(reference: str, as_json: bool, cross: bool, max_evals: int | None, design: str,
                 record: bool, quiet: bool) -> None:
    """Compare predictions with published results (or cross-validate the calibration)."""
    from perfmodel.schema.profile import load_profile
    from perfmodel.calibration.reference import load_reference
    from perfmodel.calibration.validate import validate

    points = load_reference(reference)
    profiles = {}
    for b in sorted({p.backbone for p in points}):  # load_reference refused unknown backbones
        if not cross:
            profiles[b] = load_profile(b)
    if max_evals is not None and not cross:
        _fail("--max-evals", "only with --cross-validate (simulations per fold of its refits)")
    if max_evals is not None and max_evals < 1:
        _fail("--max-evals", f"must be an integer >= 1, got {max_evals}")
    if record and not cross:
        _fail("--record", "only with --cross-validate (it stores the cross-validation in the profiles)")
    from perfmodel.calibration.crossval import DESIGNS, check_design

    check_design(design, cross, given=click.get_current_context().get_parameter_source("design").name != "DEFAULT")
    if record:
        from perfmodel.schema.profile import BUNDLED_DIR

        check_outputs_apart({"--reference": reference}, {"--record": [str(BUNDLED_DIR / f"{b}.json") for b in
                                                                      {p.backbone for p in points}]})
    if cross:
        from perfmodel.calibration.crossval import DEFAULT_FOLD_EVALS, cross_validate, format_report

        def progress(label: str, n: int, rms: float) -> None:
            if not shows_progress(quiet):
                return
            if n < 0:  # a stage without evaluations
                click.echo(label, err=True)
            elif n % 10 == 0:
                click.echo(f"{label}: {n} evaluations, rms log error {rms:.4f}", err=True)

        doc = cross_validate(points, max_evals=max_evals or DEFAULT_FOLD_EVALS, progress=progress,
                             designs=DESIGNS if design == "both" else (design,))
        click.echo(strict_json(doc, indent=2) if as_json else format_report(doc))
        if record:
            from perfmodel.calibration.crossval import provenance_record
            from perfmodel.schema.profile import BUNDLED_DIR, Profile

            for b in sorted({p.backbone for p in points}):
                path = BUNDLED_DIR / f"{b}.json"
                prof = load_profile(str(path))
                prof.provenance["cross_validation"] = provenance_record(doc, b)
                prof.save(path)
                click.echo(f"recorded the cross-validation in {path}", err=True)
        return
    res = validate(points, profiles)
    if as_json:
        click.echo(strict_json(res, indent=2))
        return
    click.echo(f"{'backbone':<10} {'mode':<14} {'gpus':>4} {'ratio':>5} {'published':>10} {'predicted':>10} {'error':>7}")
    for r in res["points"]:
        click.echo(f"{r['backbone']:<10} {r['mode']:<14} {r['gpus']:>4} {r['allocation_ratio'] or '-':>5} "
                   f"{r['published']:>10.2f} {r['predicted']:>10.2f} {r['error_pct']:>+6.1f}%")
    a = res["best_mode_agreement"]
    click.echo(f"fit error (in-sample: the profiles at the points they were fitted to; --cross-validate for held-out): "
               f"MAPE {res['mape_pct']:.2f}%  median |error| {res['median_abs_error_pct']:.2f}%  "
               f"max |error| {res['max_abs_error_pct']:.2f}%")
    spearman = "n/a (fewer than 2 distinct points)" if res["spearman"] is None else f"{res['spearman']:.3f}"
    click.echo(f"best mode agrees in {a['matches']}/{a['groups']} (backbone, gpus) groups; Spearman {spearman}")
    for g in a["per_group"]:
        mark = "ok" if g["match"] else "MISMATCH"
        click.echo(f"  {g['backbone']} {g['gpus']} GPUs: published best {' = '.join(g['published_best'])}, "
                   f"predicted best {' = '.join(g['predicted_best'])} [{mark}]")


@cli.command()
@click.option("--reference", type=click.Path(dir_okay=False), default=str(BUNDLED_REFERENCE), show_default=True)
@click.option("--out-dir", type=click.Path(file_okay=False), default=None,
              help=f"where to write the fitted profiles (default: your profile directory, {user_profile_dir()}; "
                   "$VLAPERF_PROFILE_DIR overrides it); never the installed package")
@click.option("--max-evals", type=int, default=None,
              help="simulations of the whole set (default: 140, the bundled profiles' budget)")
@click.option("--json", "as_json", is_flag=True, help="print the fit as one JSON object")
@no_progress_option
def calibrate(reference: str, out_dir: str | None, max_evals: int, as_json: bool, quiet: bool) -> None:
    """Fit the bundled profiles' physical parameters to published results."""
    from perfmodel.calibration.calibrate import BUNDLED_FIT_EVALS, fit, fitted_profiles
    from perfmodel.calibration.reference import load_reference

    max_evals = BUNDLED_FIT_EVALS if max_evals is None else max_evals
    if not 1 <= max_evals <= 100_000:
        _fail("--max-evals", f"must be an integer in 1..100000, got {max_evals}")
    points = load_reference(reference)  # refuses a backbone without a bundled profile, naming its line
    out = Path(out_dir) if out_dir else user_profile_dir()
    if out.exists() and not out.is_dir():
        _fail("--out-dir", f"must be a directory, {out} is a file")
    check_outputs_apart({"--reference": reference},
                        {"--out-dir": [str(out / f"{n}.json") for n in {p.backbone for p in points}]})
    for name in sorted({p.backbone for p in points}):
        check_writable("--out-dir", str(out / f"{name}.json"))
    bar = progress_bar(max_evals, "calibrating", "eval", quiet)

    def progress(n: int, rms: float) -> None:
        if bar is not None:
            bar.n = min(n, max_evals)
            bar.set_postfix(rms_log_error=f"{rms:.4f}")
            bar.refresh()

    result = fit(points, max_evals=max_evals, progress=progress)
    if bar is not None:
        bar.close()
    given = any(a.split("=")[0] == "--max-evals" for a in sys.argv[2:])
    args = sys.argv[2:] + ([] if given else ["--max-evals", str(max_evals)])  # the budget used, said or not
    command = "perfmodel calibrate " + " ".join(shlex.quote(a) for a in args)
    try:
        ref_label = str(Path(reference).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        ref_label = reference
    written = []
    from perfmodel.calibration.uncertainty import analyse, attach

    # The fit's parameter covariance, stored so that predictions carry intervals without refitting.
    click.echo("prediction-interval analysis (one simulation of every point per parameter) ...", err=True)
    uncertainty = analyse(result.values, result.points)
    for name, prof in fitted_profiles(result, ref_label, command.strip()).items():
        prof = attach(prof, uncertainty[name])
        path = out / f"{name}.json"
        prof.save(path)
        written.append(str(path))
    errs = result.errors_pct
    import numpy as np

    abs_err = np.abs(errs)
    if as_json:
        click.echo(strict_json({
            "kind": "perfmodel.calibration", "wrote": written, "evaluations": result.evaluations,
            "seconds": result.seconds, "values": {k: float(v) for k, v in result.values.items()},
            "median_abs_error_pct": float(np.median(abs_err)), "max_abs_error_pct": float(abs_err.max()),
            "points": [{"mode": pt.mode, "backbone": pt.backbone, "gpus": pt.gpus,
                        "allocation_ratio": pt.allocation_ratio, "published": pt.throughput_env_steps_per_s,
                        "predicted": float(pred), "error_pct": float(err)}
                       for pt, pred, err in zip(result.points, result.predicted, errs)],
        }, indent=2))
        return
    for path in written:
        click.echo(f"wrote {path}")
    click.echo(f"{'backbone':<10} {'mode':<14} {'gpus':>4} {'published':>10} {'predicted':>10} {'error':>7}")
    for pt, pred, err in zip(result.points, result.predicted, errs):
        click.echo(f"{pt.backbone:<10} {pt.mode:<14} {pt.gpus:>4} {pt.throughput_env_steps_per_s:>10.2f} "
                   f"{pred:>10.2f} {err:>+6.1f}%")
    click.echo(f"median |error| {np.median(abs_err):.2f}%  max |error| {abs_err.max():.2f}%  "
               f"({result.evaluations} evaluations, {result.seconds:.0f} s)")
    for k, v in result.values.items():
        click.echo(f"  {k} = {v:.6g}")


# ---------------------------------------------------------------------------------------------
# Capacity planning (issue 5): `perfmodel sweep` and `perfmodel plan`. Their code lives in
# perfmodel/planning/ and is imported lazily inside the commands.
# ---------------------------------------------------------------------------------------------


def _cp_list(option: str, text: str | None, kind, allowed: str) -> tuple | None:
    if text is None:
        return None
    items = [t.strip() for t in str(text).split(",")]
    if not items or any(t == "" for t in items):
        _fail(option, f"must be a comma-separated list of {allowed}, got {text!r}")
    out = []
    for t in items:
        if kind is None:
            out.append(t)
            continue
        if t.lower() in ("null", "none") and option == "--b-max":
            out.append(None)
            continue
        try:
            out.append(kind(t))
        except ValueError:
            _fail(option, f"must be a comma-separated list of {allowed}, got {text!r}")
    return tuple(out)


def _cp_ref(backbone: str | None, profile_path: str | None) -> str:
    """What plans record as their profile: a bundled name, or the profile file as an absolute
    path (a relative one would later be read against the plan file's directory)."""
    ref = _backbone_or_profile(backbone, profile_path) or "pi05"
    if profile_path is not None and Path(profile_path).exists():
        return str(Path(profile_path).resolve())
    return ref


def _portable_plan(plan_dict: dict[str, Any], out: str) -> dict[str, Any]:
    """A plan to write at ``out``: a profile file path made relative to ``out``'s directory
    (where ``Plan.load`` resolves it), so the two can move together."""
    import os

    ref = plan_dict.get("profile")
    if isinstance(ref, str) and is_profile_path(ref) and Path(ref).is_absolute():
        plan_dict = {**plan_dict, "profile": os.path.relpath(ref, Path(out).resolve().parent)}
    return plan_dict


def _cp_profile(backbone: str | None, profile_path: str | None):
    from perfmodel.schema.profile import load_profile

    ref = _backbone_or_profile(backbone, profile_path) or "pi05"
    return ref, load_profile(ref, "--profile" if profile_path else "--backbone")


def _cp_sweep_profile(doc: dict[str, Any], sweep_path: str):
    """(the profile a sweep file was made with, or None and why): ``plan --sweep`` needs it for
    the ratio intervals (best over runner-up and over colocated); ``choose`` checks that it still
    gives the sweep's numbers. A relative file path is tried here, then beside the sweep file."""
    from perfmodel.schema.profile import load_profile

    ref = doc.get("spec", {}).get("profile_ref")
    if not isinstance(ref, str) or not ref:
        return None, "the sweep file names no profile (spec.profile_ref): no ratio intervals"
    tries = [ref]
    if not Path(ref).is_absolute() and (Path(sweep_path).parent / ref).is_file():
        tries.append(str(Path(sweep_path).parent / ref))
    why = ""
    for r in tries:
        try:
            return load_profile(r), None
        except (ConfigError, OSError, ValueError) as e:
            why = str(e)
    return None, f"the sweep's profile {ref!r} cannot be loaded here ({why}): no ratio intervals"


def _cp_rlinf(rlinf_config, backbone, profile_path, gpu, pipeline_stages, modes=None):
    """(profile ref, base plan dict, pipeline stages) for a sweep over an RLinf config; one of
    ``--modes`` stands for a config whose own mode vlaperf cannot name."""
    _check_gpu(gpu)
    if rlinf_config is None:
        return None, None, pipeline_stages, None
    from perfmodel.rlinf.importer import UnnamedModeError

    try:
        im = load_rlinf_config(rlinf_config, backbone, profile_path, gpu)
    except UnnamedModeError as e:
        # The sweep sets each row's mode anyway: one of --modes stands for the config, the first
        # that keeps its placement (shared or disjoint GPUs), else the first.
        from perfmodel.planning.sweep import check_modes

        _, option, kind, allowed = _CP_LISTS[0]
        listed = _cp_list(option, modes, kind, allowed)
        if listed is None:
            raise
        check_modes(listed)
        same = [m for m in listed if MODE_TABLE[m].disaggregated == e.disaggregated]
        im = load_rlinf_config(rlinf_config, backbone, profile_path, gpu, (same or listed)[0])
    stages = pipeline_stages if pipeline_stages is not None else str(im.plan.pipeline_stage_num)
    ref = im.plan.profile  # a bundled name, or a file: absolute, as _cp_ref makes it
    if Path(ref).is_file():
        ref = str(Path(ref).resolve())
    return ref, {**im.plan.to_dict(), "profile": ref}, stages, im


# The sweep's list options: (SweepSpec field, option, element type, what is allowed).
_CP_LISTS = (("modes", "--modes", None, f"modes ({', '.join(MODES)})"),
             ("ratios", "--ratios", None, "R:A ratios (e.g. 1:1,3:1)"),
             ("pipeline_stages", "--pipeline-stages", int, "integers >= 1"),
             ("b_max", "--b-max", int, "integers >= 1 or null"),
             ("t_max_s", "--t-max", float, "seconds >= 0"))


def _cp_lists(modes, ratios, pipeline_stages, b_max, t_max) -> dict[str, tuple | None]:
    """The sweep's list options parsed, by SweepSpec field (None: not given)."""
    texts = (modes, ratios, pipeline_stages, b_max, t_max)
    return {field: _cp_list(option, text, kind, allowed)
            for (field, option, kind, allowed), text in zip(_CP_LISTS, texts)}


def _cp_spec(profile_ref, modes, gpus, ratios, pipeline_stages, b_max, t_max, price, replications, seed,
             staleness, base_plan=None, gpu=None, scale_global_batch=False):
    from perfmodel.planning.sweep import SweepSpec

    kw: dict[str, Any] = {"profile_ref": profile_ref, "gpu_hour_price": price, "replications": replications,
                          "seed": seed, "max_staleness": staleness, "base_plan": base_plan, "gpu": gpu,
                          "scale_global_batch": scale_global_batch}
    lists = {**_cp_lists(modes, ratios, pipeline_stages, b_max, t_max), "gpus": gpus}
    kw.update({k: v for k, v in lists.items() if v is not None})
    spec = SweepSpec(**kw)
    spec.check()
    return spec


def _cp_progress(quiet: bool, desc: str):
    bar = progress_bar(0, desc, "plan", quiet)
    if bar is None:
        return None, None

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    return bar, progress


def _cp_options(f):
    for opt in reversed([
        click.option("--backbone", type=Choice(BACKBONE_NAMES), help="bundled profile: pi05 or gr00t_n15 (default pi05)"),
        click.option("--profile", "profile_path", type=click.Path(dir_okay=False),
                     help="profile JSON file instead of a bundled one"),
        click.option("--modes", help=f"comma-separated modes (default all: {','.join(MODES)})"),
        click.option("--ratios", help="comma-separated rollout:actor ratios (default 1:1,3:1,1:3,2:1,1:2); "
                     "all = every split of each GPU count in sixteenths or coarser"),
        click.option("--pipeline-stages", "pipeline_stages", help="comma-separated pipeline_stage_num values (default 1)"),
        click.option("--b-max", "b_max", help="comma-separated dynamic-batching b_max values, 'null' = one worker's envs (default null)"),
        click.option("--t-max", "t_max", help="comma-separated dynamic-batching t_max_s values (default 0.02, RLinf's)"),
        click.option("--staleness", type=int, help="max_staleness for every plan (default: the plan default, 1)"),
        click.option("--gpu-hour-price", "price", type=float, help="dollars per GPU-hour, for env steps per dollar"),
        click.option("--replications", type=int, default=1, show_default=True, help="simulations per plan (intervals when > 1)"),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--jobs", type=int, help="processes (default: all cores)"),
        no_progress_option,
        click.option("--rlinf-config", "rlinf_config",
                     help="RLinf Hydra config (.yaml): its model, workload, batch and FSDP settings for every plan "
                          "(envs scaled at its envs per GPU)"),
        click.option("--gpu", help="accelerator: a100, h100 (default), h200, b200 (README: GPU types)"),
        SCALE_GLOBAL_BATCH,
    ]):
        f = opt(f)
    return f


def _cp_check_common(jobs: int | None, price: float | None, replications: int, seed: int) -> None:
    if jobs is not None and not 1 <= jobs <= 1024:
        _fail("--jobs", f"must be an integer in 1..1024, got {jobs}")
    _check_price(price)
    if not 1 <= replications <= MAX_REPLICATIONS:
        _fail("--replications", f"must be an integer in 1..{MAX_REPLICATIONS}, got {replications}")
    _check_seed(seed)


def _cp_sweep_rows(sweep_path, backbone, profile_path, modes, ratios, pipeline_stages, b_max, t_max, staleness,
                   replications, seed, scale_global_batch=False) -> dict[str, Any]:
    """The rows of ``--sweep`` that the other options select. Options that select rows filter
    them; options that would have changed the predictions must agree with the sweep's own."""
    from click.core import ParameterSource

    from perfmodel.planning.sweepfile import load_sweep, select_rows

    doc = load_sweep(sweep_path)
    ctx = click.get_current_context()
    spec = doc.get("spec", {})

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)

    if backbone is not None and doc.get("backbone") not in (None, backbone):
        _fail("--backbone", f"{backbone} contradicts --sweep {sweep_path}, a {doc.get('backbone')} sweep; "
                            "leave it out or sweep again")
    if profile_path is not None and spec.get("profile_ref") not in (profile_path, _cp_ref(None, profile_path)):
        _fail("--profile", f"contradicts --sweep {sweep_path}, swept with profile {spec.get('profile_ref')!r}; "
                           "leave it out or sweep again")
    if given("scale_global_batch") and bool(spec.get("scale_global_batch")) != scale_global_batch:
        _fail("--scale-global-batch", f"contradicts --sweep {sweep_path}, swept without it; leave it out or sweep again")
    for name, option, value in (("staleness", "--staleness", staleness), ("replications", "--replications",
                                                                          replications), ("seed", "--seed", seed)):
        key = "max_staleness" if name == "staleness" else name
        swept = spec.get(key)
        if key == "max_staleness" and swept is None:
            swept = Plan.__dataclass_fields__["max_staleness"].default  # the sweep kept the plan default
        if given(name) and swept != value:
            _fail(option, f"{value} contradicts --sweep {sweep_path}, swept with {key} {swept}; "
                          "leave it out or sweep again")
    selection = _cp_lists(modes, ratios, pipeline_stages, b_max, t_max)
    return select_rows(doc, selection, {field: option for field, option, *_ in _CP_LISTS})


@cli.command("sweep")
@_cp_options
@click.option("--gpus", "gpus_text", help="comma-separated GPU counts (default 8,16,24,32,64,128,256)")
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False),
              help="write the sweep as JSON (input of `perfmodel plan --sweep` and `analysis report`)")
@click.option("--csv", "csv_out", type=click.Path(dir_okay=False), help="write the table as CSV")
@click.option("--json", "as_json", is_flag=True, help="print the sweep JSON instead of the table")
@click.option("--show-infeasible", is_flag=True, help="list the combinations that cannot run, with the reason")
@click.option("--address", help="run the predictions as Ray tasks on this cluster (host:port, auto; local = a new local one)")
@click.option("--no-interval", is_flag=True, help="skip the prediction intervals (a few simulations fewer per plan)")
def sweep_cmd(backbone, profile_path, modes, ratios, pipeline_stages, b_max, t_max, staleness, price, replications,
              seed, jobs, quiet, rlinf_config, gpu, scale_global_batch, gpus_text, out, csv_out, as_json,
              show_infeasible, address, no_interval) -> None:
    """Predict every mode x GPU count x ratio x knob combination; table, CSV and JSON."""
    from dataclasses import replace

    from perfmodel.schema.jsonio import write_json_atomic
    from perfmodel.planning.sweep import format_table, run_sweep, write_csv_atomic

    gpus = _cp_list("--gpus", gpus_text, int, "integers >= 1")
    _cp_check_common(jobs, price, replications, seed)
    check_outputs_apart({"--profile": profile_path, "--rlinf-config": rlinf_config}, {"--out": out, "--csv": csv_out})
    check_writable("--out", out)
    check_writable("--csv", csv_out)
    ref, base, pipeline_stages, _ = _cp_rlinf(rlinf_config, backbone, profile_path, gpu, pipeline_stages, modes)
    spec = _cp_spec(ref or _cp_ref(backbone, profile_path), modes, gpus, ratios, pipeline_stages, b_max, t_max, price,
                    replications, seed, staleness, base, gpu, scale_global_batch)
    if no_interval:
        spec = replace(spec, intervals=False)
    _, profile = _cp_profile(None, ref) if ref else _cp_profile(backbone, profile_path)
    bar, progress = _cp_progress(quiet, "sweep")
    doc = run_sweep(spec, profile, jobs=jobs, progress=progress, address=address)
    if bar is not None:
        bar.close()
    try:
        if out:
            write_json_atomic(out, doc)
        if csv_out:
            write_csv_atomic(csv_out, doc)
    except OSError as e:
        _fail("--out" if out else "--csv", f"must be a writable path; {e.strerror}: {e.filename}")
    if as_json:
        click.echo(strict_json(doc, indent=2))
    else:
        click.echo(format_table(doc, show_infeasible))
        for label, path in (("sweep", out), ("csv", csv_out)):
            if path:
                click.echo(f"wrote {label} {path}")


@cli.command("plan")
@_cp_options
@click.option("--gpus", type=int, help="GPU budget: exactly N (throughput) or at most N (cost, time); "
              "default: the --rlinf-config's GPUs")
@click.option("--objective", type=Choice(OBJECTIVES), default="throughput", show_default=True,
              help="throughput (most env steps/s on N GPUs), cost (most env steps per GPU-hour on <= N GPUs) or "
                   "time (fewest GPU-hours, so dollars, to reach --env-steps within --within-hours on <= N GPUs)")
@click.option("--env-steps", type=float, help="time objective: env steps to reach (e.g. 5e7)")
@click.option("--within-hours", type=float, help="time objective: deadline in hours")
@click.option("--emit", type=Choice(["rlinf"]), help="print the chosen plan as a config fragment: rlinf (YAML to paste)")
@click.option("--sweep", "sweep_path", type=click.Path(dir_okay=False),
              help="choose from this sweep JSON instead of sweeping now (--modes, --ratios, --pipeline-stages, "
                   "--b-max, --t-max select among its rows)")
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False),
              help="write the chosen plan (runnable by `executor run` and `perfmodel predict --plan`)")
@click.option("--details", "details", type=click.Path(dir_okay=False),
              help="write the choice (prediction, runner-up, explanation) as JSON")
@click.option("--json", "as_json", is_flag=True, help="print the choice as JSON")
def plan_cmd(backbone, profile_path, modes, ratios, pipeline_stages, b_max, t_max, staleness, price, replications,
             seed, jobs, quiet, rlinf_config, gpu, scale_global_batch, gpus, objective, env_steps, within_hours, emit,
             sweep_path, out, details, as_json) -> None:
    """Choose the best plan for N GPUs and explain the choice."""
    from perfmodel.planning.choice import choice_summary, choose, chosen_plan, plan_best
    from perfmodel.schema.jsonio import write_json_atomic

    import math

    if emit is not None and emit != "rlinf":
        _fail("--emit", f"must be rlinf, got {emit!r}")
    if emit and as_json:
        _fail("--emit", "prints YAML; give either --emit or --json")
    target = None
    if env_steps is not None or within_hours is not None:
        if env_steps is None or within_hours is None:
            _fail("--env-steps", "and --within-hours go together (the time objective)")
        for option, v in (("--env-steps", env_steps), ("--within-hours", within_hours)):
            if not (v > 0 and math.isfinite(v)):
                _fail(option, f"must be a finite number > 0, got {v}")
        target = (env_steps, within_hours)
    from perfmodel.planning.choice import check_target

    if objective in OBJECTIVES:
        check_target(objective, target)
    if sweep_path and rlinf_config:  # the sweep fixed the workload and cluster; the config would not apply
        _fail("--rlinf-config", f"contradicts --sweep {sweep_path}: a saved sweep's plans are chosen from as they are; "
                                "leave it out, or sweep the config (perfmodel sweep --rlinf-config)")
    if sweep_path and gpu:
        _fail("--gpu", f"contradicts --sweep {sweep_path}: its plans were predicted on their own accelerator; "
                       "leave it out, or sweep again with --gpu")
    ref, base, pipeline_stages, imported = _cp_rlinf(rlinf_config, backbone, profile_path, gpu, pipeline_stages, modes)
    if gpus is None:
        if imported is None:
            _fail("--gpus", "is required (an integer >= 1) unless --rlinf-config gives it")
        gpus = imported.plan.cluster.gpus
    if not 1 <= gpus <= MAX_GPUS:
        _fail("--gpus", f"must be an integer in 1..{MAX_GPUS}, got {gpus}")
    _cp_check_common(jobs, price, replications, seed)
    check_outputs_apart({"--sweep": sweep_path, "--profile": profile_path, "--rlinf-config": rlinf_config},
                        {"--out": out, "--details": details})
    check_writable("--out", out)
    check_writable("--details", details)
    if sweep_path:
        doc = _cp_sweep_rows(sweep_path, backbone, profile_path, modes, ratios, pipeline_stages, b_max, t_max,
                             staleness, replications, seed, scale_global_batch)
        from perfmodel.planning.sweep import MODEL_REVISION

        revision = doc.get("model_revision", 1)
        if not isinstance(revision, int) or revision < MODEL_REVISION:
            click.echo(f"note: --sweep {sweep_path} was written by an older model (revision {revision}, now "
                       f"{MODEL_REVISION}): its numbers, and the choice made from them, may differ from a sweep made "
                       "today (sweep again)", err=True)
        if price is not None:
            for r in doc["rows"]:
                if r["status"] == "ok":
                    r["env_steps_per_dollar"] = r["env_steps_per_gpu_hour"] / price
            doc["spec"]["gpu_hour_price"] = price
        profile, why = _cp_sweep_profile(doc, sweep_path)
        choice = choose(doc, gpus, objective, target, profile=profile)
        choice["ratio_unavailable"] = choice.get("ratio_unavailable") or why
    else:
        spec = _cp_spec(ref or _cp_ref(backbone, profile_path), modes, None, ratios, pipeline_stages, b_max, t_max,
                        price, replications, seed, staleness, base, gpu, scale_global_batch)
        _, profile = _cp_profile(None, ref) if ref else _cp_profile(backbone, profile_path)
        bar, progress = _cp_progress(quiet, "plan")
        choice, _ = plan_best(spec, profile, gpus, objective, jobs=jobs, progress=progress, target=target)
        if bar is not None:
            bar.close()
    plan = chosen_plan(choice)
    summary = choice_summary(choice)
    try:
        if out:
            write_json_atomic(out, _portable_plan(plan.to_dict(), out))
        if details:
            write_json_atomic(details, summary)
    except OSError as e:
        _fail("--out", f"must be a writable path; {e.strerror}: {e.filename}")
    if choice.get("ratio_unavailable"):  # on stderr whatever stdout carries (text, JSON, YAML)
        click.echo(f"note: {choice['ratio_unavailable']}", err=True)
    from perfmodel.costs import batch_split_warning

    split = batch_split_warning(plan)  # from the plan itself: a sweep file may predate the warning
    for w in [w for w in (choice["best"].get("prediction") or {}).get("warnings") or []
              if not w.startswith("workload.global_batch_size:")] + ([split] if split and emit != "rlinf" else []):
        click.echo(f"warning: chosen plan: {w}", err=True)  # (--emit rlinf writes the split's into the fragment)
    if as_json:
        click.echo(strict_json(summary, indent=2))
        return
    if emit == "rlinf":
        import textwrap

        from perfmodel.rlinf.emit import emit_yaml
        from perfmodel.schema.profile import load_profile

        header = "\n".join(textwrap.wrap(choice["explanation"], 100))
        click.echo(emit_yaml(plan, load_profile(plan.profile).backbone, header), nl=False)
        if out:
            click.echo(f"wrote plan {out}", err=True)
        return
    click.echo(choice["explanation"])
    if out:
        click.echo(f"wrote plan {out}  (run it: executor run --plan {out}; check it: perfmodel predict --plan {out})")
    if details:
        click.echo(f"wrote details {details}")


# --------------------------------------- end of capacity planning ---------------------------


@cli.command("gpus")
@click.option("--json", "as_json", is_flag=True, help="print the table as JSON")
def gpus_cmd(as_json: bool) -> None:
    """The accelerators --gpu accepts, with their datasheet numbers and typical node."""
    from perfmodel.schema.hardware import ACCELERATORS, table_markdown

    if as_json:
        click.echo(strict_json({k: a.__dict__ for k, a in ACCELERATORS.items()}, indent=2))
        return
    click.echo(table_markdown())
    for a in ACCELERATORS.values():
        click.echo(f"{a.name}: {a.source}")


def main(argv: list[str] | None = None) -> None:
    from perfmodel.cliutil import run_click

    run_click(cli, "perfmodel", argv)


if __name__ == "__main__":
    main()
