"""``perfmodel predict``: one plan's throughput with its interval (docs/metrics.md). The plan
comes from a plan file, an RLinf config and/or options (options win); ``predict`` is what the
command line and a Python caller (perfmodel.api) run, ``format_prediction`` the text output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfmodel.commands.common import (BACKBONE_NAMES, Say, check_backbone, check_gpu, check_price,
                                       check_replications, check_seed, fail, load_rlinf_config, node_options, one_of,
                                       to_stderr)
from perfmodel.backbones import LAUNCH_BOUND
from perfmodel.bound_gap import format_gap
from perfmodel.schema.errors import ConfigError
from perfmodel.calibration.structural import note as structural_note
from perfmodel.calibration.worlds import describe_end
from perfmodel.schema.modes import MODE_TABLE, MODES
from perfmodel.schema.plan import MAX_GPUS, Plan, parse_ratio


# Plan fields a predict option sets: an error about one names the option the user typed.
OPTION_OF_FIELD = {"plan.max_staleness": ("max_staleness", "--staleness"), "plan.b_max": ("b_max", "--b-max"),
                   "plan.t_max_s": ("t_max_s", "--t-max"),
                   "plan.pipeline_stage_num": ("pipeline_stage_num", "--pipeline-stages")}


def resolve_plan(mode: str | None, gpus: int | None, backbone: str | None, ratio: str | None,
                 plan_path: str | None, profile_path: str | None, knobs: dict[str, Any],
                 rlinf_config: str | None = None, gpu: str | None = None, imported: list | None = None,
                 say: Say | None = None, node: dict[str, Any] | None = None):
    """``_resolve_plan``, with an error about a plan field that an option set naming the option.
    ``node``: the node options given (commands.common.node_options)."""
    try:
        return _resolve_plan(mode, gpus, backbone, ratio, plan_path, profile_path, knobs, rlinf_config, gpu,
                             imported, say, node or {})
    except ConfigError as e:
        knob, option = OPTION_OF_FIELD.get(e.field, (None, None))
        if knob is not None and knobs.get(knob) is not None:
            raise ConfigError(option, e.message) from None
        raise


def _resolve_plan(mode: str | None, gpus: int | None, backbone: str | None, ratio: str | None,
                 plan_path: str | None, profile_path: str | None, knobs: dict[str, Any],
                 rlinf_config: str | None = None, gpu: str | None = None, imported: list | None = None,
                 say: Say | None = None, node: dict[str, Any] | None = None):
    """The plan and profile of a prediction, from a plan file or an RLinf config and/or options
    (options win). ``imported`` receives the RLinf import (its warnings) when there is one."""
    from perfmodel.schema.profile import load_profile
    from perfmodel.calibration.reference import complete_cluster, published_plan
    from perfmodel.gpu import gpu_node
    from perfmodel.schema.node import with_node

    check_gpu(gpu)
    for option, path in (("--plan", plan_path), ("--profile", profile_path), ("--rlinf-config", rlinf_config)):
        if path is not None and not path.strip():
            fail(option, "must be a file path, got an empty string")
    if rlinf_config is not None:
        if plan_path is not None:
            fail("--rlinf-config", "give either --plan or --rlinf-config, not both")
        im = load_rlinf_config(rlinf_config, backbone, profile_path, gpu, mode, say, node, ratio=ratio)
        if imported is not None:
            imported.append(im)
        base = im.plan
        profile = load_profile(base.profile)
        changes: dict[str, Any] = {}
        if gpus is not None:
            # Another cluster size keeps the config's envs per GPU (as plan and sweep do).
            if not 1 <= gpus <= MAX_GPUS:
                fail("--gpus", f"must be an integer in 1..{MAX_GPUS}, got {gpus}")
            envs = base.workload.total_num_envs * gpus / base.cluster.gpus
            if not envs.is_integer():
                fail("--gpus", f"the config's {base.workload.total_num_envs} envs on {base.cluster.gpus} GPUs do not "
                                f"scale to {gpus} GPUs at the same envs per GPU")
            changes["cluster"] = base.cluster.__class__(**{**base.cluster.__dict__, "gpus": gpus})
            changes["workload"] = base.workload.__class__(**{**base.workload.__dict__, "total_num_envs": int(envs)})
            if base.colocated_rollout_gpus is not None:  # the config's rollout share of the GPUs, as its envs
                share = base.colocated_rollout_on(gpus)
                if not isinstance(share, int):
                    fail("--gpus", f"the config's rollout on {base.colocated_rollout_gpus} of its {base.cluster.gpus} "
                                   f"GPUs does not scale to {gpus} GPUs at the same share")
                changes["colocated_rollout_gpus"] = share
        if ratio is not None:
            if not MODE_TABLE[base.mode].disaggregated:
                fail("--ratio", "must not be given for colocated: every GPU runs every phase")
            changes["allocation_ratio"] = ratio  # train_async on shared GPUs: apart, at this split
        changes.update({k: v for k, v in knobs.items() if v is not None})
        plan = base.with_(**changes)
        plan.check()
        return plan, profile

    one_of("--backbone", backbone, BACKBONE_NAMES)
    one_of("--mode", mode, MODES)
    if gpus is not None and not 1 <= gpus <= MAX_GPUS:
        fail("--gpus", f"must be an integer in 1..{MAX_GPUS}, got {gpus}")
    base, given = Plan.load_with_given(plan_path) if plan_path else (None, {})
    profile = load_profile(profile_path or (base.profile if base and backbone is None else backbone or "pi05"),
                           "--profile" if profile_path else "plan.profile" if base and backbone is None else "--backbone")
    check_backbone(backbone, profile, "--profile" if profile_path else "plan.profile")
    if base is not None:
        base = complete_cluster(base, given, profile)
    mode = mode or (base.mode if base else None)
    if mode is None:
        fail("--mode", f"is required (one of {', '.join(MODES)}) unless --plan gives it")
    if base is None:
        if gpus is None:
            fail("--gpus", "is required (an integer >= 1) unless --plan gives it")
        if mode == "colocated" and ratio is not None:
            fail("--ratio", "must not be given for colocated: every GPU runs every phase")
        if ratio is not None:
            parse_ratio(ratio, gpus, "--ratio")
        plan = published_plan(profile, mode, gpus, ratio, **{k: v for k, v in knobs.items() if v is not None})
        if gpu is not None:
            plan = plan.with_(cluster=gpu_node(plan.cluster, gpu))
        if node:
            plan = plan.with_(cluster=with_node(plan.cluster, node))
            plan.check()
        return plan, profile
    changes: dict[str, Any] = {"mode": mode, "profile": profile.name if profile_path is None else profile_path}
    if gpus is not None:
        changes["cluster"] = base.cluster.__class__(**{**base.cluster.__dict__, "gpus": gpus})
    if mode == "colocated":
        if ratio is not None:
            fail("--ratio", "must not be given for colocated: every GPU runs every phase")
        changes["allocation_ratio"] = None
    elif ratio is not None:
        changes["allocation_ratio"] = ratio
    elif base.allocation_ratio is None and mode != base.mode:  # from colocated to a split mode
        changes["allocation_ratio"] = "1:1"
    changes.update({k: v for k, v in knobs.items() if v is not None})
    plan = base.with_(**changes)
    if gpu is not None:
        plan = plan.with_(cluster=gpu_node(plan.cluster, gpu))
    if node:
        plan = plan.with_(cluster=with_node(plan.cluster, node))
    plan.check()
    return plan, profile


@dataclass
class PredictAnswer:
    """``prediction``: the simulated prediction with its cost per GPU-hour (the text output's
    rows); ``notes``: the command's own warnings (options without effect in the mode, the RLinf
    import's), said on stderr as they arose and listed once more in the JSON."""

    prediction: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """What ``perfmodel predict --json`` prints."""
        if not self.notes:
            return self.prediction
        return {**self.prediction, "warnings": list(self.prediction.get("warnings") or []) + self.notes}


def predict(mode: str | None = None, gpus: int | None = None, *, backbone: str | None = None,
            ratio: str | None = None, plan_path: str | None = None, profile_path: str | None = None,
            pipeline_stage_num: int | None = None, b_max: int | None = None, t_max_s: float | None = None,
            max_staleness: int | None = None, replications: int = 1, seed: int = 0, trace: str | None = None,
            rlinf_config: str | None = None, gpu: str | None = None, price: float | None = None,
            interval: bool = True, scale_global_batch: bool = False, say: Say | None = None,
            cpu_cores_per_node: int | None = None, gpus_per_node: int | None = None, nic_gbps: float | None = None,
            node_ram_gb: float | None = None) -> PredictAnswer:
    """Predict one plan (``perfmodel predict``'s options, by name). ``say`` receives the stderr
    lines (default: stderr). Bad input raises ConfigError naming the option."""
    from perfmodel.cliutil import check_outputs_apart, check_writable
    from perfmodel import prediction
    from perfmodel.schema.plan import profile_file_of

    say = say or to_stderr
    imported: list = []
    plan, profile = resolve_plan(mode, gpus, backbone, ratio, plan_path, profile_path,
                                 {"pipeline_stage_num": pipeline_stage_num, "b_max": b_max,
                                  "t_max_s": t_max_s, "max_staleness": max_staleness},
                                 rlinf_config=rlinf_config, gpu=gpu, imported=imported, say=say,
                                 node=node_options(cpu_cores_per_node, gpus_per_node, nic_gbps, node_ram_gb))
    if scale_global_batch:
        scaled = plan.with_whole_global_batch()
        if scaled is not plan:
            say(f"note: --scale-global-batch: global_batch_size {plan.workload.global_batch_size} -> "
                f"{scaled.workload.global_batch_size} ({scaled.workload.micro_batch_size} x {plan.actor_gpus} "
                "actor GPUs x whole micro-batches)")
        plan = scaled
    check_replications(replications)
    check_seed(seed)
    check_price(price)
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
        say(f"warning: {w}")
    out = prediction.predict(plan, profile, replications=replications, seed=seed, trace_path=trace,
                             interval=interval)
    out["gpu"] = plan.cluster.gpu
    out["env_steps_per_gpu_hour"] = out["throughput_env_steps_per_s"] * 3600 / plan.cluster.gpus
    if price is not None:
        out["gpu_hour_price"] = price
        out["dollars_per_million_env_steps"] = 1e6 / out["env_steps_per_gpu_hour"] * price
    notes = list(unused)
    if imported:
        out["rlinf_import"] = imported[0].to_dict()
        notes += [f"{rlinf_config}: {w}" for w in imported[0].warnings]
    return PredictAnswer(out, notes)


def format_prediction(p: dict[str, Any]) -> str:
    """The text output of ``perfmodel predict``: one row a quantity."""
    split = (f"actor on all, env and rollout on {p['rollout_gpus']} of them, phases in turn"
             if p["mode"] == "colocated" and p["rollout_gpus"] != p["gpus"]
             else "all GPUs time-share every phase" if p["mode"] == "colocated"
             else "actor and rollout share every GPU, training while rollout goes on" if p["allocation_ratio"] is None
             else f"rollout {p['rollout_gpus']} : actor {p['actor_gpus']} (ratio {p['allocation_ratio']})")
    rows = [
        ("mode", p["mode"] + (f", rollout {p['rollout']}" if "rollout" in p else "")),
        ("backbone", f"{p['backbone']} (profile {p['profile']})"),
        ("gpus", f"{p['gpus']}, {split}"),
        ("envs", f"{p['total_num_envs']} ({p['pipeline_stage_num']} pipeline stage(s))"),
        ("throughput", f"{p['throughput_env_steps_per_s']:.2f} env steps/s"
         + (f"  (95% CI {p['throughput_ci95'][0]:.2f} .. {p['throughput_ci95'][1]:.2f}, "
            f"{p['replications']} replications)" if "throughput_ci95" in p else "")),
        *interval_rows(p),
        ("bound", f"{p['bound_env_steps_per_s']:.2f} env steps/s (bottleneck: {p['bottleneck']})"),
        *([("bound gap", format_gap(p["bound_gap"]))] if "bound_gap" in p else []),
        *([("headroom", f"{p['headroom']['stage']} binds at {p['headroom']['factor']:.2f}x its modelled time per "
                        "iteration")] if "headroom" in p else []),
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
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def interval_rows(p: dict[str, Any]) -> list[tuple[str, str]]:
    """The prediction interval and, beyond the calibrated scale, the extrapolation warning."""
    rows: list[tuple[str, str]] = []
    iv = p.get("throughput_interval")
    if iv is not None:
        rows.append(("interval", f"{iv['low']:.2f} .. {iv['high']:.2f} env steps/s "
                                 f"({100 * iv['coverage']:.0f}% interval, width {iv['width_pct']:.1f}% of the prediction)"))
        ends = [f"{side}: {d}" for side, d in (("low", describe_end(iv, "low")), ("high", describe_end(iv, "high"))) if d]
        if ends:  # the world that moves each end most (perfmodel.calibration.worlds)
            rows.append(("ends set by", "; ".join(ends)))
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
    rows += [("note", n) for n in [structural_note(iv)] if n]  # calibration.structural: members that part
    ext = p.get("extrapolation")
    if ext and (ext["beyond_calibrated_gpus"] or ext["beyond_calibrated_nodes"]):
        if ext["calibrated_gpus"]:
            what = (f"extrapolation: {p['gpus']} GPUs / {ext['nodes']} node(s) is beyond the calibrated "
                    f"{', '.join(map(str, ext['calibrated_gpus']))} GPUs / "
                    f"{', '.join(map(str, ext['calibrated_nodes']))} node(s)")
        else:
            what = f"extrapolation: {ext.get('note', 'no calibrated scale')}"
        rows.append(("warning", what))
    if ext and ext.get("backbone_not_calibrated"):
        how = ("its fixed times its stand-in's measured on CPU, bracketed up to the calibration's; its MFUs bracketed "
               "over the calibrated backbones'" if p["backbone"] in LAUNCH_BOUND else
               "GPU costs from its shapes, its MFUs and host work bracketed over the calibrated backbones'")
        rows.append(("warning", f"extrapolation: no published throughput calibrates {p['backbone']}: shared parameters "
                                f"from the calibration, {how} (docs/backbones.md)"))
    if ext and ext.get("beyond_calibrated_workload"):
        cal = ext["calibrated_workload"]
        rows.append(("warning", "extrapolation: workload beyond the calibrated one: "
                                + ", ".join(f"{f} {v:g} (calibrated {cal[f]:g})" for f, v in ext["workload"].items())
                                + (f"; {ext['workload_interval']}" if ext.get("workload_interval") else "")
                                + " (docs/metrics.md: Beyond the calibrated workload)"))
    if ext and ext.get("beyond_calibrated_gpu_type"):
        other = (iv or {}).get("gpu_type_other_end")
        rows.append(("warning", f"extrapolation: costs calibrated on {ext['calibrated_gpu_type']} are carried to "
                                f"{ext['gpu_type']} by datasheet ratios (docs/guide.md: GPU types and prices); no {ext['gpu_type']} "
                                "run backs them" + (
                                    f"; the interval holds {other:.2f} env steps/s, the plan with only the "
                                    "measured GPU compute scaled" if other is not None else
                                    ", and the interval does not include that")))
    return rows


