"""``perfmodel``: predict, validate, calibrate, sweep and plan from the command line.

Only options, one call and printing live here: each command's logic is a function of
perfmodel/commands/ (the Python API, perfmodel.api, calls the same ones). Bad input never shows a
traceback: one line ``error: <field>: <what is allowed>``, exit code 2.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from perfmodel.cliutil import Choice, no_progress_option, progress_bar, shows_progress, version_option
from perfmodel.commands.common import BACKBONE_NAMES, fail
from perfmodel.schema.jsonio import dumps as strict_json
from perfmodel.schema.modes import MODES
from perfmodel.planning import OBJECTIVES
from perfmodel.schema.plan import DEFAULT_T_MAX_S
from perfmodel.schema.profile import BUNDLED_REFERENCE, user_profile_dir_if_any


def _say(line: str) -> None:
    """A command's stderr line (warning, note)."""
    click.echo(line, err=True)


def _given_options() -> set[str]:
    """The parameters of the running command that the user set (not left at their default)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    return {name for name in ctx.params if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)}


class _Progress:
    """A progress bar (cliutil.progress_bar: only to a terminal) opened at the first report, so
    that a refusal before any work draws none."""

    def __init__(self, quiet: bool, desc: str) -> None:
        self.quiet, self.desc, self.bar = quiet, desc, None  # bar: None not yet opened, False none to draw

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = progress_bar(0, self.desc, "plan", self.quiet) or False
        if not self.bar:
            return
        self.bar.total = total
        self.bar.n = done
        self.bar.refresh()

    def close(self) -> None:
        if self.bar:
            self.bar.close()


SCALE_GLOBAL_BATCH = click.option(
    "--scale-global-batch", is_flag=True,
    help="raise global_batch_size to the smallest multiple of micro_batch_size x actor GPUs at or above it, so "
         "every actor GPU runs whole micro-batches and RLinf accepts the split (default: keep the workload's at "
         "every GPU count, as the published runs did; a split RLinf refuses is warned about)")


GPU_HELP = ("accelerator: a100, h100, h200, b200, on its typical node unless a node option says otherwise "
            "(default: the profile's GPU and node; perfmodel gpus lists both)")
# Where a node option's default comes from, in every help text: one table, printed by
# `perfmodel gpus` (perfmodel.commands.gpus.assumed_nodes), as the commands' notes print it.
NODE_DEFAULT = "default: the profile's node, or with --gpu that GPU's typical node: perfmodel gpus lists both"


def node_options(f):
    """The node's shape (perfmodel/schema/node.py); each not given is the profile's node, printed
    as assumed with --rlinf-config (an RLinf config cannot say it; its vlaperf: block can)."""
    for opt in reversed([
        click.option("--cpu-cores-per-node", type=int, help="CPU cores per node (env workers share a node's "
                     f"cores; {NODE_DEFAULT})"),
        click.option("--gpus-per-node", type=int, help=f"GPUs per node ({NODE_DEFAULT})"),
        click.option("--nic-gbps", type=float, help="inter-node NIC bandwidth per GPU in GB/s, effective (the "
                     f"bundled profiles' is fitted to the published runs; {NODE_DEFAULT})"),
        click.option("--node-ram-gb", type=float, help="host RAM per node in GB (bounds the envs a node holds; "
                     f"{NODE_DEFAULT})"),
    ]):
        f = opt(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@version_option()
def cli() -> None:
    """Predict RL post-training throughput of VLA models on LIBERO for a cluster and mode."""


@cli.command()
@click.option("--mode", type=Choice(MODES), help="pipeline mode")
@click.option("--gpus", type=int, help="GPUs in the whole cluster")
@click.option("--backbone", type=Choice(BACKBONE_NAMES),
              help="bundled profile: pi05 (pi0.5), gr00t_n15 (GR00T N1.5); not calibrated: pi0, openvla_oft, gr00t_n16, mlp_policy (RLinf's MLP policy); default pi05")
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
@click.option("--gpu", help=GPU_HELP)
@click.option("--gpu-hour-price", "price", type=float, help="dollars per GPU-hour: adds dollars per million env steps")
@click.option("--no-interval", is_flag=True, help="skip the prediction interval (a few simulations fewer)")
@no_progress_option  # accepted for scripts that pass it to every command: predict has no bar
@SCALE_GLOBAL_BATCH
@node_options
def predict(mode, gpus, backbone, ratio, plan_path, profile_path, pipeline_stage_num, b_max, t_max_s,
            max_staleness, replications, seed, as_json, trace, rlinf_config, gpu, price, no_interval,
            quiet, scale_global_batch, cpu_cores_per_node, gpus_per_node, nic_gbps, node_ram_gb) -> None:
    """Predict throughput for one plan."""
    from perfmodel.commands.predict import format_prediction, predict as run_predict

    answer = run_predict(mode, gpus, backbone=backbone, ratio=ratio, plan_path=plan_path, profile_path=profile_path,
                         pipeline_stage_num=pipeline_stage_num, b_max=b_max, t_max_s=t_max_s,
                         max_staleness=max_staleness, replications=replications, seed=seed, trace=trace,
                         rlinf_config=rlinf_config, gpu=gpu, price=price, interval=not no_interval,
                         scale_global_batch=scale_global_batch, say=_say, cpu_cores_per_node=cpu_cores_per_node,
                         gpus_per_node=gpus_per_node, nic_gbps=nic_gbps, node_ram_gb=node_ram_gb)
    if as_json:
        click.echo(strict_json(answer.to_json(), indent=2))
    else:
        click.echo(format_prediction(answer.prediction))


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
                   "the others), extrapolate (fit on every GPU count below the target, predict it: 8 -> 16, "
                   "8 and 16 -> 32), or both (all three)")
@click.option("--record", is_flag=True, help="with --cross-validate: store the result in the bundled profiles' provenance")
@no_progress_option
def validate_cmd(reference: str, as_json: bool, cross: bool, max_evals: int | None, design: str,
                 record: bool, quiet: bool) -> None:
    """Compare predictions with published results (or cross-validate the calibration)."""
    from perfmodel.commands.validate import format_validation, validate

    def progress(label: str, n: int, rms: float) -> None:
        if not shows_progress(quiet):
            return
        if n < 0:  # a stage without evaluations
            click.echo(label, err=True)
        elif n % 10 == 0:
            click.echo(f"{label}: {n} evaluations, rms log error {rms:.4f}", err=True)

    def report(doc: dict[str, Any]) -> None:  # printed before --record writes the profiles
        from perfmodel.calibration.crossval import format_report

        click.echo(strict_json(doc, indent=2) if as_json else format_report(doc))

    design_given = click.get_current_context().get_parameter_source("design").name != "DEFAULT"
    doc = validate(reference, cross=cross, max_evals=max_evals, design=design, design_given=design_given,
                   record=record, progress=progress,
                   say=_say, report=report)
    if not cross:
        click.echo(strict_json(doc, indent=2) if as_json else format_validation(doc))


@cli.command()
@click.option("--reference", type=click.Path(dir_okay=False), default=str(BUNDLED_REFERENCE), show_default=True)
@click.option("--out-dir", type=click.Path(file_okay=False), default=None,
              help="where to write the fitted profiles (default: your profile directory, "
                   f"{user_profile_dir_if_any() or '$HOME/.local/share/vlaperf/profiles'}; "
                   "$VLAPERF_PROFILE_DIR overrides it); never the installed package")
@click.option("--max-evals", type=int, default=None,
              help="simulations of the whole set (default: 140, the bundled profiles' budget; from runs: 80)")
@click.option("--json", "as_json", is_flag=True, help="print the fit as one JSON object")
@click.option("--from-rlinf-run", "rlinf_runs", multiple=True, metavar="LOGDIR",
              help="calibrate a profile of your cluster from RLinf runs (log_path or its tensorboard/ folder: "
                   "config.yaml + event files); more LOGDIRs may follow (docs/own-runs.md)")
@click.option("--from-run", "executor_runs", multiple=True, metavar="RUNDIR",
              help="the same from `executor run` directories (their tensorboard/ folder)")
@click.option("--cpu-cores-per-node", type=int, help="with --from-*-run: CPU cores per node of your cluster "
              "(an RLinf config does not say; default: the plan's)")
@click.option("--name", help="with --from-*-run: the profile's name (default <backbone>_cluster)")
@click.option("--gpu", help="with --from-*-run: the runs' " + GPU_HELP + " (a config's vlaperf.gpu says it too)")
@click.option("--gpus-per-node", type=int, help=f"with --from-*-run: GPUs per node of your cluster ({NODE_DEFAULT})")
@click.option("--node-ram-gb", type=float, help=f"with --from-*-run: host RAM per node in GB ({NODE_DEFAULT})")
@click.argument("more_runs", nargs=-1, metavar="[LOGDIR]...")
@no_progress_option
def calibrate(reference: str, out_dir: str | None, max_evals: int, as_json: bool, rlinf_runs: tuple[str, ...],
              executor_runs: tuple[str, ...], cpu_cores_per_node: int | None, name: str | None, gpu: str | None,
              gpus_per_node: int | None, node_ram_gb: float | None, more_runs: tuple[str, ...], quiet: bool) -> None:
    """Fit the bundled profiles' physical parameters to published results, or (--from-rlinf-run,
    --from-run) a profile of your own cluster to your runs."""
    runs_only = {"--name": name, "--gpu": gpu, "--gpus-per-node": gpus_per_node, "--node-ram-gb": node_ram_gb}
    if rlinf_runs or executor_runs or more_runs or cpu_cores_per_node is not None or any(
            v is not None for v in runs_only.values()):
        import shlex

        from perfmodel.calibration.from_runs import calibrate_command, cli_runs
        from perfmodel.commands.common import check_gpu
        from perfmodel.schema.node import check_node

        given = next((o for o, v in runs_only.items() if v is not None), "--name")
        paths, option = cli_runs(rlinf_runs, executor_runs, more_runs, cpu_cores_per_node, name, given)
        check_gpu(gpu)
        node = check_node({"gpus_per_node": gpus_per_node, "node_ram_gb": node_ram_gb})
        calibrate_command(paths, option, out_dir=out_dir, cpu_cores_per_node=cpu_cores_per_node,
                          max_evals=max_evals, as_json=as_json, quiet=quiet, name=name,
                          command="perfmodel calibrate " + " ".join(shlex.quote(a) for a in sys.argv[2:]),
                          echo=click.echo, gpu=gpu, node=node)
        return
    from perfmodel.calibration.calibrate import BUNDLED_FIT_EVALS
    from perfmodel.commands.calibrate import calibrate as run_calibrate, format_calibration

    total = BUNDLED_FIT_EVALS if max_evals is None else max_evals
    bar = None

    def progress(n: int, rms: float) -> None:
        nonlocal bar
        if bar is None:
            bar = progress_bar(total, "calibrating", "eval", quiet) or False
        if bar:
            bar.n = min(n, total)
            bar.set_postfix(rms_log_error=f"{rms:.4f}")
            bar.refresh()

    try:
        doc = run_calibrate(reference, out_dir=out_dir, max_evals=max_evals, argv=sys.argv[2:], progress=progress,
                            say=_say)
    finally:
        if bar:
            bar.close()
    click.echo(strict_json(doc, indent=2) if as_json else format_calibration(doc))


# ---------------------------------------------------------------------------------------------
# Capacity planning (issue 5): `perfmodel sweep` and `perfmodel plan` (perfmodel/commands/sweep.py,
# plan.py; perfmodel/planning/).
# ---------------------------------------------------------------------------------------------


def _cp_options(f):
    for opt in reversed([
        click.option("--backbone", type=Choice(BACKBONE_NAMES), help="bundled profile: pi05, gr00t_n15, pi0, openvla_oft, gr00t_n16 or mlp_policy (default pi05)"),
        click.option("--profile", "profile_path", type=click.Path(dir_okay=False),
                     help="profile JSON file instead of a bundled one"),
        click.option("--modes", help=f"comma-separated modes (default all: {','.join(MODES)})"),
        click.option("--ratios", help="comma-separated rollout:actor ratios (default 1:1,3:1,1:3,2:1,1:2); "
                     "all = every split of each GPU count in sixteenths or coarser"),
        click.option("--pipeline-stages", "pipeline_stages", help="comma-separated pipeline_stage_num values (default 1)"),
        click.option("--b-max", "b_max", help="comma-separated dynamic-batching b_max values, 'null' = one worker's envs (default null)"),
        click.option("--t-max", "t_max", help="comma-separated dynamic-batching t_max_s values (default 0.02, RLinf's)"),
        click.option("--staleness", help="comma-separated max_staleness values for the asynchronous modes (default: "
                     "the config's or plan default, 1); more than one is a search axis"),
        click.option("--envs-per-gpu", "envs_per_gpu", help="comma-separated envs per GPU to search (default: "
                     "the published count; with --rlinf-config, plan and sweep both try the config's and 2, 4 and 6 "
                     "times it, up to 4 envs per CPU core; what does not fit node RAM or GPU memory is infeasible)"),
        click.option("--micro-batch-sizes", "micro_batch_sizes", help="comma-separated actor micro_batch_size values "
                     "to search (default: the config's); one that does not divide the global batch is infeasible"),
        click.option("--gpu-hour-price", "price", type=float, help="dollars per GPU-hour, for env steps per dollar"),
        click.option("--replications", type=int, default=1, show_default=True, help="simulations per plan (intervals when > 1)"),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--jobs", type=int, help="processes (default: all cores)"),
        no_progress_option,
        click.option("--rlinf-config", "rlinf_config",
                     help="RLinf Hydra config (.yaml): its model, workload, batch and FSDP settings for every plan "
                          "(envs scaled at its envs per GPU)"),
        click.option("--gpu", help=GPU_HELP),
        SCALE_GLOBAL_BATCH,
    ]):
        f = opt(f)
    return node_options(f)


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
def sweep_cmd(backbone, profile_path, modes, ratios, pipeline_stages, b_max, t_max, staleness, envs_per_gpu,
              micro_batch_sizes, price, replications, seed, jobs, quiet, rlinf_config, gpu, scale_global_batch, cpu_cores_per_node, gpus_per_node, nic_gbps,
              node_ram_gb, gpus_text, out, csv_out, as_json, show_infeasible, address, no_interval) -> None:
    """Predict every mode x GPU count x ratio x knob combination; table, CSV and JSON."""
    from perfmodel.commands.sweep import sweep
    from perfmodel.planning.sweep import format_table

    bar = _Progress(quiet, "sweep")
    try:
        doc = sweep(gpus_text, backbone=backbone, profile_path=profile_path, modes=modes, ratios=ratios,
                    pipeline_stages=pipeline_stages, b_max=b_max, t_max=t_max, staleness=staleness, price=price,
                    replications=replications, seed=seed, jobs=jobs, rlinf_config=rlinf_config, gpu=gpu,
                    scale_global_batch=scale_global_batch, out=out, csv_out=csv_out, address=address,
                    interval=not no_interval, progress=bar, say=_say, cpu_cores_per_node=cpu_cores_per_node,
                    gpus_per_node=gpus_per_node, nic_gbps=nic_gbps, node_ram_gb=node_ram_gb, envs_per_gpu=envs_per_gpu,
                    micro_batch_sizes=micro_batch_sizes)
    finally:
        bar.close()
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
@click.option("--sample-efficiency", "sample_efficiency", multiple=True, metavar="MODE=FACTOR",
              help="env steps MODE needs per env step of a synchronous run to reach the same success (e.g. "
                   "rollout_async=1.2; repeatable): the cost and time objectives count env steps times it")
def plan_cmd(backbone, profile_path, modes, ratios, pipeline_stages, b_max, t_max, staleness, envs_per_gpu,
             micro_batch_sizes, price, replications, seed, jobs, quiet, rlinf_config, gpu, scale_global_batch, cpu_cores_per_node, gpus_per_node, nic_gbps,
             node_ram_gb, gpus, objective, env_steps, within_hours, emit, sweep_path, out, details, as_json,
             sample_efficiency) -> None:
    """Choose the best plan for N GPUs and explain the choice."""
    from perfmodel.commands.plan import emit_rlinf, format_plan, plan

    if emit is not None and emit != "rlinf":
        fail("--emit", f"must be rlinf, got {emit!r}")
    if emit and as_json:
        fail("--emit", "prints YAML; give either --emit or --json")
    bar = _Progress(quiet, "plan")
    try:
        answer = plan(gpus, backbone=backbone, profile_path=profile_path, modes=modes, ratios=ratios,
                      pipeline_stages=pipeline_stages, b_max=b_max, t_max=t_max, staleness=staleness, price=price,
                      replications=replications, seed=seed, jobs=jobs, rlinf_config=rlinf_config, gpu=gpu,
                      scale_global_batch=scale_global_batch, objective=objective, env_steps=env_steps,
                      within_hours=within_hours, emit=emit, sweep_path=sweep_path, out=out, details=details,
                      given_options=_given_options(), progress=bar, say=_say,
                      cpu_cores_per_node=cpu_cores_per_node, gpus_per_node=gpus_per_node, nic_gbps=nic_gbps,
                      node_ram_gb=node_ram_gb, envs_per_gpu=envs_per_gpu, micro_batch_sizes=micro_batch_sizes,
                      sample_efficiency=sample_efficiency)
    finally:
        bar.close()
    if as_json:
        click.echo(strict_json(answer.summary, indent=2))
        return
    if emit == "rlinf":
        click.echo(emit_rlinf(answer), nl=False)
        if out:
            click.echo(f"wrote plan {out}", err=True)
        return
    click.echo(format_plan(answer.summary))
    if out:
        click.echo(f"wrote plan {out}  (run it: executor run --plan {out}; check it: perfmodel predict --plan {out})")
    if details:
        click.echo(f"wrote details {details}")


@cli.command("gpus")
@click.option("--json", "as_json", is_flag=True, help="print the table as JSON")
def gpus_cmd(as_json: bool) -> None:
    """The accelerators --gpu accepts, with their datasheet numbers and typical node."""
    from perfmodel.commands.gpus import format_gpus, gpus

    click.echo(strict_json(gpus(), indent=2) if as_json else format_gpus())


def main(argv: list[str] | None = None) -> None:
    from perfmodel.cliutil import run_click

    run_click(cli, "perfmodel", argv)


if __name__ == "__main__":
    main()
