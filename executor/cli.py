"""``executor``: run the real components. ``executor profile`` measures a profile.

Bad input (unknown suite or backbone, non-positive sizes, a device that is not there, a missing
option) prints one line ``error: <field>: <message>`` to stderr and exits with code 2; every
vlaperf CLI ends through ``perfmodel.cliutil.run_click`` (exit codes there).
"""

from __future__ import annotations

import os
import sys
import threading

import click

from perfmodel.cliutil import check_outputs_apart, check_writable, fmt_number, run_click, version_option
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.jsonio import dumps as strict_json
from perfmodel.schema.metrics import error_pct


def _sizes(field: str, text: str, kind=int) -> tuple:
    try:
        vals = tuple(kind(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise ConfigError(field, f"must be comma-separated positive numbers, got {text!r}") from None
    if not vals or any(v <= 0 for v in vals):
        raise ConfigError(field, f"must be comma-separated positive numbers, got {text!r}")
    return vals


# executor profile's options that one kind of measurement uses: given to the other kind, an
# option would be silently unused (--comm --backbone pi05 measures no backbone).
COMM_ONLY = ("comm_ranks", "comm_mb", "address")
MAX_SETTLE_STEPS = 1000  # a bound on a typo (LIBERO's is 15; an episode is at most a few hundred steps)
COMM_USES = COMM_ONLY + ("comm", "base_profile", "out", "device", "repeats", "verbose", "no_progress")
# --run-share with --base-profile measures the run shares alone, on the base profile's envs and policy
SHARE_ONLY_USES = ("base_profile", "run_share", "out", "device", "verbose", "no_progress")


def _check_profile_kind(comm: bool, share_only: bool) -> None:
    """Refuse an option given for another kind of ``executor profile`` (see COMM_ONLY and
    SHARE_ONLY_USES)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    for param in ctx.command.params:
        if ctx.get_parameter_source(param.name) in (None, ParameterSource.DEFAULT):
            continue
        option = max(param.opts, key=len)
        if comm and param.name not in COMM_USES:
            raise ConfigError(option, "is not for --comm (it measures collectives, no backbone or env); leave it out")
        if share_only and param.name not in SHARE_ONLY_USES:
            raise ConfigError(option, "is not for --run-share with --base-profile (it measures the run shares alone, "
                                      "on the base profile's backbone and envs); leave it out")
        if not comm and param.name in COMM_ONLY:
            raise ConfigError(option, "only with --comm (collectives)")
    if not comm and not share_only and ctx.get_parameter_source("base_profile") not in (None, ParameterSource.DEFAULT):
        raise ConfigError("--base-profile", "only with --comm (collectives) or --run-share (env CPU shares added to it)")


def _positive(field: str, v: int) -> int:
    if v < 1:
        raise ConfigError(field, f"must be an integer >= 1, got {v}")
    return v


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@version_option()
def cli() -> None:
    """Real LIBERO env workers, pi0.5 / GR00T N1.5 stand-in policies, PPO/GRPO learner."""


@cli.command()
@click.option("--backbone", default=None, help="pi05, gr00t_n15, pi0, openvla_oft or gr00t_n16 (not with --comm)")
@click.option("--scale", default="tiny", show_default=True, help="tiny, small or full")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda[:N] or auto")
@click.option("--suite", default="libero_spatial", show_default=True,
              help="libero_spatial, libero_object, libero_goal or libero_10")
@click.option("--task-id", default=0, type=int, show_default=True)
@click.option("--out", required=True, help="profile JSON to write, e.g. profiles/pi05_tiny_cpu.json")
@click.option("--image-size", default=128, type=int, show_default=True, help="camera height and width")
@click.option("--env-counts", default="1,2,4", show_default=True, help="envs per worker to measure")
@click.option("--env-repeats", default=3, type=int, show_default=True, help="measured chunks per env count")
@click.option("--reset-repeats", default=2, type=int, show_default=True, help="measured resets of one env")
@click.option("--batch-sizes", default="1,2,4,8", show_default=True, help="inference batch sizes")
@click.option("--train-sizes", default="1,2,4,8", show_default=True, help="training micro-batch sizes")
@click.option("--repeats", default=5, type=int, show_default=True, help="measured calls per model size")
@click.option("--sync-mb", default="1,4,16,64", show_default=True, help="broadcast sizes (MB) for bandwidth")
@click.option("--gpus-per-node", default=None, type=int,
              help="device slots of this node (default: CUDA devices, or 2 on a CPU box)")
@click.option("--env-profile", default=None,
              help="take env costs from this measured (CPU) profile instead of measuring envs here")
@click.option("--driver-chunk-steps", default=6, type=int, show_default=True,
              help="chunk steps of the real runs that measure the driver's cost per chunk step (0: skip)")
@click.option("--trained-part", default=None,
              help="which weights the training measurement trains: action_expert (VLM frozen, as published) or "
                   "full (default: what RLinf trains: action_expert; full for openvla_oft)")
@click.option("--run-share", default="none", show_default=True,
              help="modes (comma list, or all) whose env CPU share a short run on this host measures "
                   "(Costs.env_cpu_share): what the driver, Ray and the actors take from the env cores; with "
                   "--base-profile, measured alone and added to that profile")
@click.option("--comm", is_flag=True,
              help="measure collectives (all-reduce, all-gather, broadcast) over torch.distributed instead")
@click.option("--comm-ranks", default="2,4", show_default=True, help="--comm: rank counts")
@click.option("--comm-mb", default="0.25,1,4,16", show_default=True, help="--comm: message sizes (MB)")
@click.option("--base-profile", default=None,
              help="--comm: write this profile with the table in extra.collectives (else a standalone table); "
                   "--run-share: write this measured profile with the run shares added, measuring nothing else")
@click.option("--address", default=None, help="--comm: spread the ranks over this Ray cluster's nodes")
@click.option("--verbose", is_flag=True, help="let Ray's own messages through to stderr")
@click.option("--no-progress", is_flag=True, help="no progress bar")
def profile(backbone, scale, device, suite, task_id, out, image_size, env_counts, env_repeats, reset_repeats,
            batch_sizes, train_sizes, repeats, sync_mb, gpus_per_node, env_profile, driver_chunk_steps, trained_part, run_share, comm, comm_ranks,
            comm_mb, base_profile, address, verbose, no_progress) -> None:
    """Measure env, inference, training and sync costs into a perfmodel profile (or, with
    --comm, the cost of collectives at increasing rank counts)."""
    from executor.profiling.config import ProfileConfig
    from executor.profiling.run import command_line, run_profile
    from executor.profiling.runshare import parse_modes

    share_only = not comm and base_profile is not None and bool(parse_modes(run_share))
    _check_profile_kind(comm, share_only)
    check_outputs_apart({"--env-profile": env_profile, "--base-profile": base_profile}, {"--out": out})
    check_writable("--out", out)  # before measuring for minutes, not after
    if comm:
        _profile_comm(out, device, comm_ranks, comm_mb, repeats, base_profile, address, verbose, no_progress)
        return
    if share_only:
        _profile_run_share(base_profile, parse_modes(run_share), out, device, no_progress)
        return
    if backbone is None:
        raise ConfigError("backbone", "missing: --backbone pi05, gr00t_n15, pi0, openvla_oft or gr00t_n16 (or --comm)")

    cfg = ProfileConfig(
        backbone=backbone, scale=scale, out=out, device=device, suite=suite, task_id=task_id,
        image_size=_positive("image-size", image_size),
        env_counts=_sizes("env-counts", env_counts),
        env_repeats=_positive("env-repeats", env_repeats),
        reset_repeats=_positive("reset-repeats", reset_repeats),
        batch_sizes=_sizes("batch-sizes", batch_sizes),
        train_sizes=_sizes("train-sizes", train_sizes),
        repeats=_positive("repeats", repeats),
        sync_mb=_sizes("sync-mb", sync_mb, float),
        gpus_per_node=None if gpus_per_node is None else _positive("gpus-per-node", gpus_per_node),
        env_profile=env_profile,
        driver_chunk_steps=driver_chunk_steps,
        trained_part=trained_part,
        run_share=parse_modes(run_share),
        command=command_line(sys.argv[1:]),
    )
    cfg.check()  # all input errors before any measurement starts
    p = run_profile(cfg, progress=not no_progress)
    c = p.costs
    click.echo(f"wrote {out}: env step {c.env_step_core_s * 1e3:.1f} ms/core, efficiency "
               f"{c.env_core_efficiency:.2f}, reset {c.env_reset_s:.2f} s, {c.env_memory_gb:.2f} GB/env; "
               f"infer(1) {c.infer_s(1) * 1e3:.1f} ms, train(1) {c.train_micro_batch_s(1) * 1e3:.1f} ms, "
               f"optimizer {c.optimizer_step_s * 1e3:.1f} ms, sync {p.node['intra_node_bw_GBps']:.2f} GB/s")


def _profile_run_share(base_profile, modes, out, device, no_progress) -> None:
    from executor.profiling.run import add_run_share, command_line
    from perfmodel.schema.profile import load_profile

    base = load_profile(base_profile, "--base-profile")
    p = add_run_share(base, modes, out, device, command_line(sys.argv[1:]), progress=not no_progress)
    shares = ", ".join(f"{m} {s['env_step']:.2f}/{s['env_reset']:.2f}" for m, s in p.costs.env_cpu_share.items())
    click.echo(f"wrote {out}: {base_profile} with the env CPU share (step/reset) measured here: {shares}")


def _profile_comm(out, device, ranks, sizes, repeats, base_profile, address, verbose, no_progress) -> None:
    from executor.comm import CommConfig, run_comm_profile
    from executor.policies import resolve_device
    from executor.runtime.preflight import resolve_address
    from perfmodel.schema.jsonio import write_json_atomic
    from perfmodel.schema.profile import load_profile

    base = load_profile(base_profile, "--base-profile") if base_profile else None
    addr, _ = resolve_address(address)
    cfg = CommConfig(ranks=_sizes("comm-ranks", ranks), sizes_mb=_sizes("comm-mb", sizes, float),
                     repeats=_positive("repeats", repeats), device=str(resolve_device(device)), address=addr)
    cfg.check()

    def show(row) -> None:
        if not no_progress:
            click.echo(f"{row['op']:<10} ranks {row['ranks']} nodes {row['nodes']} {row['bytes'] / 1e6:>8.2f} MB  "
                       f"median {row['median_s'] * 1e3:8.2f} ms  busbw {row['busbw_GBps']:.3f} GB/s", err=True)
    table = run_comm_profile(cfg, verbose=verbose, progress=show)
    table["provenance"]["command"] = "executor " + " ".join(sys.argv[1:])
    if base is not None:
        d = base.to_dict()
        d["extra"] = {**d.get("extra", {}), "collectives": table}
        write_json_atomic(out, d)
    else:
        write_json_atomic(out, table)
    n = len(table["rows"])
    click.echo(f"wrote {out}: {n} measured collectives ({table['backend']}, ranks {','.join(map(str, cfg.ranks))}, "
               f"up to {max(r['nodes'] for r in table['rows'])} node(s))")


# ---------------------------------------------------------------------------------------------
# executor run: parse, check everything, run, print (executor/runtime/ does the work)


def summary(record: dict) -> str:
    c = record["counts"]
    lines = [
        f"mode          {record['mode']}",
        f"backbone      {record['backbone']} (profile {record['profile']})",
        f"gpus          {record['gpus']} slots, rollout {record['rollout_gpus']} : actor {record['actor_gpus']}"
        + (f" (ratio {record['allocation_ratio']})" if record["allocation_ratio"]
           else " (colocated)" if record["mode"] == "colocated" else " (the same slots: shared GPUs)"),
        f"envs          {record['total_num_envs']} ({record['pipeline_stage_num']} pipeline stage(s))",
        f"throughput    {fmt_number(record['throughput_env_steps_per_s'])} env steps/s (measured)",
        f"iteration     {fmt_number(record['iteration_time_s'])} s",
        f"counts        env_steps {c['env_steps']} (expected {record['expected_counts']['env_steps']}: "
        f"{'ok' if record['env_steps_match'] else 'MISMATCH'}), samples {c['samples']}, optimizer_steps "
        f"{c['optimizer_steps']}, weight_versions {c['weight_versions']}, inference_calls {c['inference_calls']}",
        f"staleness     mean {record['staleness']['mean']:.2f}, max {record['staleness']['max']:.0f} versions",
    ]
    if record.get("utilization"):
        u = record["utilization"]["resources"]
        lines.append("utilization   " + "  ".join(f"{k} {v:.2f}" for k, v in u.items()))
    if record.get("stage_time_s"):
        lines.append("stage s/iter  " + "  ".join(f"{k} {v:.2f}" for k, v in record["stage_time_s"].items() if v))
    if record.get("faults"):
        lines.append(f"faults        {len(record['faults'])} env restart(s), episodes re-run, "
                     f"{record.get('env_restarts_in_measured_window', 0)} inside the measured window")
    for w in record.get("warnings", []):
        lines.append(f"warning       {w}")
    return "\n".join(lines)


def comparison_table(record: dict) -> str:
    rows = [("", "predicted", "measured", "error"),
            ("throughput (env steps/s)", fmt_number(record["predicted_throughput_env_steps_per_s"]),
             fmt_number(record["throughput_env_steps_per_s"]), fmt_number(record["error_pct"], "+.1f", " %")),
            ("iteration time (s)", fmt_number(record["predicted_iteration_time_s"]),
             fmt_number(record["iteration_time_s"]), fmt_number(record["iteration_time_error_pct"], "+.1f", " %"))]
    for s, v in record["stages"].items():
        rows.append((f"{s} (s/iter/unit)", fmt_number(v["predicted_s"], ".3f"), fmt_number(v["measured_s"], ".3f"),
                     fmt_number(v["error_pct"], "+.1f", " %")))
    d = record.get("driver_chunk_step")
    if d and d["measured_s"] is not None:
        rows.append(("driver (s/chunk step)", fmt_number(d["predicted_s"], ".3f"), fmt_number(d["measured_s"], ".3f"),
                     fmt_number(error_pct(d["predicted_s"], d["measured_s"]), "+.1f", " %")))
    width = max(len(r[0]) for r in rows)
    lines = [f"{r[0]:<{width}}  {r[1]:>10}  {r[2]:>10}  {r[3]:>9}" for r in rows]
    probe, unscaled = record.get("host_probe"), record.get("prediction_unscaled")
    if probe:
        r = probe["ratio"]
        lines.append(f"host probe: env step x{r['env_step']:.3f}, reset x{r['env_reset']:.3f} of the profile "
                     f"({probe['envs']} env(s) on {probe.get('where', 'one core')}, of which they got {probe['core_share']['env_step']:.2f}; "
                     f"{probe['wall_s']:.1f} s, load {probe['loadavg_1min']:.2f}); "
                     "the prediction above uses them")
    if unscaled and unscaled.get("error_pct") is not None:
        lines.append(f"unscaled: the profile as it is predicts {fmt_number(unscaled['throughput_env_steps_per_s'])} "
                     f"env steps/s ({unscaled['error_pct']:+.1f} %)")
    lines += [f"warning: {w}" for w in (record.get("prediction") or {}).get("warnings", [])]
    lines += diagnosis_lines(record)
    return "\n".join(lines)


# --compare's diagnoses, in order: the record field, what it holds fixed at the run's value, and
# what its error means
DIAGNOSES = (
    ("diagnosis_at_measured_cpu_share",
     lambda d: (f"at the CPU share the env processes got (reset {d['cpu_share']['env_reset']:.2f}, step "
                f"{d['cpu_share']['env_step']:.2f} of their cores)"),
     "near 0 while the prediction misses: a busy machine, not the model"),
    ("diagnosis_at_measured_env_costs",
     lambda d: (f"also at the env CPU seconds this run used (reset x{d['env_cost_ratio']['env_reset']:.2f}, "
                f"step x{d['env_cost_ratio']['env_step']:.2f} the profile's, whole run: a slow warm-up iteration "
                "counts too)"),
     "what remains is the model's composition and its non-env costs, unless warm-up inflated the ratios "
     "(compare the per-stage times above)"),
)


def predict_before_run(plan, profile, opts, backbone: str, iterations: int, warmup: int) -> dict:
    """``--compare``'s prediction, made before anything of the run starts: the host probe
    (``executor.runtime.probe``) scales the profile's env costs to this host now; the prediction
    from the profile as it is stays beside it. Returns the scaled profile, both predictions, the
    probe, warnings (a profile from another host) and the line to print."""
    from executor.runtime.probe import other_host, probe_host, scaled_profile
    from perfmodel.prediction import predict

    probe = probe_host(plan, profile, opts)
    scaled = scaled_profile(profile, probe)
    fields = ("throughput_env_steps_per_s", "iteration_time_s")
    at_probe = predict(plan, scaled, iterations=iterations, warmup=warmup, interval=False)
    unscaled = predict(plan, profile, iterations=iterations, warmup=warmup, interval=False)
    line = before_line(at_probe["throughput_env_steps_per_s"], probe.ratio, unscaled["throughput_env_steps_per_s"])
    warnings = [w for w in [other_host(profile, backbone, opts.scale)] if w]
    share = profile.costs.env_cpu_share.get(plan.mode)
    if share is None:
        warnings.append(f"profile {profile.name} has no env CPU share measured for {plan.mode}: the prediction "
                        "assumes the envs get their cores whole, though the run's driver, Ray and actors take part "
                        f"of them (executor profile ... --run-share {plan.mode} measures it)")
    return {"profile": scaled, "probe": probe.to_dict(), "line": line, "warnings": warnings,
            "at_probe": {**{k: at_probe[k] for k in fields}, "env_cpu_share": share or {"env_step": 1.0, "env_reset": 1.0},
                         "env_cpu_share_source": f"profile {profile.name}" if share else "none measured: 1.0"},
            "unscaled": {k: unscaled[k] for k in fields},
            "prediction": at_probe}  # the record's prediction: the run is judged by it, not simulated again


def before_line(at_probe: float, ratio: dict, unscaled: float) -> str:
    """--compare's line on stderr before the run: the prediction the run is judged by (the profile
    scaled by the host probe's ``ratio``) and the profile's as it is."""
    return (f"predicted     {fmt_number(at_probe)} env steps/s before the run "
            f"(host probe: env step x{ratio['env_step']:.2f}, reset x{ratio['env_reset']:.2f} of the profile; "
            f"{fmt_number(unscaled)} with the profile as it is)")


def wrote_line(out: str | Path, profile: bool, tensorboard: bool) -> str:
    return (f"wrote {out}/ (record.json, trace.json, plan.json{', profile.json' if profile else ''}"
            f"{', tensorboard/' if tensorboard else ''})")


def compare_output(record: dict, out: str | Path, tensorboard: bool) -> list[str]:
    """What ``executor run --compare --no-progress`` prints on stdout for a finished run's
    ``record`` (the summary, the comparison with its probe and diagnosis lines, where it wrote):
    the docs' example is rendered from a stored record with it (tests/test_docs_examples.py)."""
    return summary(record).splitlines() + [""] + comparison_table(record).splitlines() + [
        wrote_line(out, True, tensorboard)]


def add_probe(record: dict, before: dict) -> None:
    """The probe, and the prediction from the unscaled profile with its error, into the record."""
    record["host_probe"] = before["probe"]
    unscaled = dict(before["unscaled"])
    measured = record.get("throughput_env_steps_per_s")
    if measured:
        unscaled["error_pct"] = error_pct(unscaled["throughput_env_steps_per_s"], measured)
    record["prediction_unscaled"] = unscaled
    record["prediction_before_run"] = dict(before["at_probe"])
    if before["warnings"]:
        record["warnings"] = list(record.get("warnings", [])) + before["warnings"]


def diagnosis_lines(record: dict) -> list[str]:
    """--compare's diagnoses: the prediction at the CPU share the env processes got, then also at
    the CPU seconds per env step and reset they used (the host's speed during the run)."""
    return [f"diagnosis: {at(d)} the model predicts {fmt_number(d['predicted_throughput_env_steps_per_s'])} "
            f"env steps/s, error {fmt_number(d['error_pct'], '+.1f', ' %')} ({meaning})"
            for field, at, meaning in DIAGNOSES if (d := record.get(field))]


def _parse_fault(text):
    if text is None:
        return None
    try:
        it, wk = (int(x) for x in text.split(":"))
        if it < 0 or wk < 0:
            raise ValueError
        return it, wk
    except ValueError:
        raise ConfigError("inject-env-fault", f"must look like ITERATION:ENV_WORKER (e.g. 1:0), got {text!r}") from None


@cli.command("run")
@click.argument("plan_arg", metavar="PLAN", required=False)
@click.option("--plan", "plan_opt", default=None, help="plan JSON (or give it as the argument)")
@click.option("--out", default=None,
              help="run directory (default runs/<mode>_<UTC time>_<pid>); must not exist or be empty")
@click.option("--overwrite", is_flag=True, help="replace --out if it is a non-empty directory")
@click.option("--iterations", default=3, type=int, show_default=True)
@click.option("--warmup-iterations", default=1, type=int, show_default=True,
              help="first iterations left out of the figures")
@click.option("--compare", is_flag=True, help="also predict the plan with the measured profile and print both")
@click.option("--profile", "profile_path", default=None,
              help="profile to predict with (default profiles/<backbone>_<scale>_cpu.json)")
@click.option("--json", "as_json", is_flag=True, help="print the run record as one JSON object")
@click.option("--address", default=None,
              help="join this Ray cluster (HOST:PORT of the head, or auto) instead of starting a local one; "
                   "default: RAY_ADDRESS if set")
@click.option("--scale", default="tiny", show_default=True, help="policy scale: tiny, small or full")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or auto")
@click.option("--image-size", default=None, type=int, help="camera px (default: the profile's, else 128)")
@click.option("--suite", default="libero_spatial", show_default=True,
              help="libero_spatial, libero_object, libero_goal or libero_10")
@click.option("--soft-reset", is_flag=True, help="reset without rebuilding the scene (faster; not what profiles measure)")
@click.option("--settle-steps", default=None, type=int,
              help="zero-action steps after each reset (default: LIBERO's 15; fewer: faster, not what "
                   "profiles measure)")
@click.option("--no-render", is_flag=True,
              help="step the scenes without rendering the cameras (the policy sees blank images): the "
                   "pipeline at a fraction of the env cost; not what profiles measure")
@click.option("--verbose", is_flag=True, help="let Ray's own messages through to stderr")
@click.option("--inject-env-fault", default=None, hidden=True, help="ITER:WORKER: kill one env process (tests)")
@click.option("--inject-actor-fault", default=None, type=int, hidden=True,
              help="ITER: kill generator 0's Ray actor at this iteration (tests)")
@click.option("--no-progress", is_flag=True, help="no progress bar")
def run(plan_arg, plan_opt, out, overwrite, iterations, warmup_iterations, compare, profile_path, as_json, address,
        scale, device, image_size, suite, soft_reset, settle_steps, no_render, verbose, inject_env_fault,
        inject_actor_fault, no_progress) -> None:
    """Run PLAN (perfmodel's plan JSON) for real on Ray in its mode; write a run record and a trace."""
    from pathlib import Path

    from executor.policies import resolve_device
    from executor.runtime import preflight, rundir
    from executor.runtime.modes import RunOptions
    from executor.runtime.session import RunFailed, Signals, execute, quiet_output
    from perfmodel.calibration.reference import complete_cluster
    from perfmodel.schema.plan import Plan
    from perfmodel.schema.profile import load_profile

    # every check before any work: plan, options, address, profile, memory, output path
    if plan_arg and plan_opt and plan_arg != plan_opt:
        raise ConfigError("plan", f"given twice ({plan_arg} and {plan_opt}); give it once")
    path = plan_arg or plan_opt
    if not path:
        raise ConfigError("plan", "missing: executor run PLAN.json (or --plan PLAN.json)")
    # Cluster fields the file leaves out come from its profile's node, as in perfmodel predict --plan.
    plan, given = Plan.load_with_given(path)
    plan = complete_cluster(plan, given, load_profile(plan.profile))
    if iterations < 1:
        raise ConfigError("iterations", f"must be an integer >= 1, got {iterations}")
    if warmup_iterations < 0 or warmup_iterations >= iterations:
        raise ConfigError("warmup-iterations", f"must be in 0..{iterations - 1}, got {warmup_iterations}")
    preflight.check_options(suite, image_size)
    if settle_steps is not None and not 0 <= settle_steps <= MAX_SETTLE_STEPS:
        raise ConfigError("settle-steps", f"must be an integer in 0..{MAX_SETTLE_STEPS}, got {settle_steps}")
    fault = _parse_fault(inject_env_fault)
    dev = str(resolve_device(device))
    addr, _ = preflight.resolve_address(address)
    backbone = preflight.resolve_backbone(plan)
    profile = None
    if compare or profile_path:
        p = Path(profile_path) if profile_path else preflight.default_profile_path(backbone, scale)
        if not p.exists():
            raise ConfigError("profile", f"{p} does not exist; measure it with executor profile --backbone "
                              f"{backbone} --scale {scale} --out {p}, or pass --profile FILE")
        profile = load_profile(str(p))
        if profile.backbone != backbone:
            raise ConfigError("profile", f"{p} is a {profile.backbone} profile but the plan runs {backbone}")
    prov_size = (profile.provenance.get("image_size") if profile is not None and
                 isinstance(getattr(profile, "provenance", None), dict) else None)
    size = image_size if image_size is not None else (prov_size or 128)
    mem = preflight.ENV_MEMORY_GB_DEFAULT if profile is None else profile.costs.env_memory_gb
    preflight.check_plan_fits(plan, backbone, scale, mem, local=addr is None)
    opts = RunOptions(backbone=backbone, scale=scale, device=dev, image_size=size, suite=suite,
                      hard_reset=not soft_reset, render=not no_render, inject_env_fault=fault,
                      inject_actor_fault=inject_actor_fault,
                      **({} if settle_steps is None else {"settle_steps": settle_steps}))
    from perfmodel.schema.plan import is_profile_path

    check_outputs_apart({"--plan": path, "--profile": profile_path,
                         "plan.profile": plan.profile if is_profile_path(plan.profile) else None}, {}, {"--out": out})
    run_dir = rundir.reserve(out, plan.mode, overwrite=overwrite)
    loaded = preflight.load_warning(os.getloadavg()[0])
    if loaded:
        click.echo(f"warning: {loaded}", err=True)
    before = None
    if compare:  # the prediction the run is judged by, made now, with this host's speed now
        try:  # the probe's envs print (LIBERO, robosuite): into the run's log, as Ray's messages
            with quiet_output(None if verbose else run_dir.tmp / "ray.log"):
                before = predict_before_run(plan, profile, opts, backbone, iterations, warmup_iterations)
        except BaseException:
            run_dir.discard()
            raise
        for w in before["warnings"]:
            click.echo(f"warning: {w}", err=True)
        click.echo(before["line"], err=True)

    # The run's signal handling (a first Ctrl-C or SIGTERM stops it, later ones are only counted)
    # lasts until its record is written: the run's own handlers give way to these when it returns,
    # so a second Ctrl-C just after a quick teardown cannot abort the writing of the record.
    stop = threading.Event()
    with Signals(stop) as signals:
        try:
            try:
                record, rec = execute(plan, iterations=iterations, warmup=warmup_iterations, opts=opts,
                                      progress=not no_progress, address=addr, stop=stop,
                                      profile=before["profile"] if before else profile, verbose=verbose,
                                      ray_log=run_dir.tmp / "ray.log", on_session=run_dir.note_ray_session,
                                      after_iteration=run_dir.note_iteration,
                                      prediction=before["prediction"] if before else None)
            except RunFailed as e:
                record = e.record
                if before:
                    add_probe(record, before)
                record["run_dir"] = str(run_dir.out)
                run_dir.write(plan, record, e.rec, profile)
                if as_json:
                    click.echo(strict_json(record, indent=None, measured=True))
                click.echo(f"error: run: {e} (partial record in {run_dir.out / 'record.json'})", err=True)
                code = 130 if record["status"] == "interrupted" else 1
                if code == 130:  # stopped by a signal, the record written: one more only ends the exit
                    signals.ignore_from_now()
                if e.abandoned:  # a thread is stuck inside Ray: its exit hooks would block; leave now
                    run_dir.discard()
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
                sys.exit(code)
            if before:
                add_probe(record, before)
            record["run_dir"] = str(run_dir.out)
            run_dir.write(plan, record, rec, profile)
        finally:
            run_dir.discard()
    if as_json:
        click.echo(strict_json(record, indent=None, measured=True))
        return
    click.echo(summary(record))
    if "error_pct" in record:
        click.echo("")
        click.echo(comparison_table(record))
    click.echo(wrote_line(run_dir.out, profile is not None, (run_dir.out / "tensorboard").is_dir()))


# --rlinf-config on executor run: perfmodel's RLinf import hands the command its plan (issue 10).
from perfmodel.rlinf.hook import add_rlinf_config_option  # noqa: E402

add_rlinf_config_option(cli.commands["run"])


def main(argv: list[str] | None = None) -> None:
    run_click(cli, "executor", argv)


if __name__ == "__main__":
    main()
