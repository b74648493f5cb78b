"""``analysis``: reports from perfmodel and executor outputs (read as files).

Bad input never shows a traceback: one line ``error: <option>: <what is allowed>``, exit code 2.
"""

from __future__ import annotations

from pathlib import Path

import click

from perfmodel.cliutil import check_outputs_apart, check_writable, no_progress_option, version_option
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.jsonio import dumps as strict_json


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@version_option()
def cli() -> None:
    """Reports on sweeps, plans, predictions and measured runs."""


@cli.command("report")
@click.option("--sweep", "sweeps", multiple=True, help="sweep JSON from `perfmodel sweep -o` (repeatable)")
@click.option("--choice", help="plan choice JSON from `perfmodel plan --details`")
@click.option("--prediction", "predictions", multiple=True, help="`perfmodel predict --json` output (repeatable)")
@click.option("--run", "runs", multiple=True, help="executor run record JSON or run directory, or an RLinf run "
                                                    "directory (its log_path: config.yaml and tensorboard "
                                                    "timers) (repeatable)")
@click.option("--trace-sim", help="Chrome trace of a simulated run (`perfmodel predict --trace`)")
@click.option("--trace-run", help="Chrome trace of a measured run (executor run)")
@click.option("--reference", "references", multiple=True, help="published reference CSV (repeatable)")
@click.option("--reference-profile", "reference_profiles", multiple=True,
              help="BACKBONE=PROFILE.json: profile used to validate that backbone (default: the bundled one)")
@click.option("--gpus", type=int, help="GPU count for the utilization figure's sweep plans (default: the chosen "
                                       "plan's, else the largest swept)")
@click.option("--iteration", type=int, help="which iteration of the traces to draw (default 2, the first after warm-up)")
@click.option("--cross-validation", "cross_validation",
              help="cross-validation JSON from `perfmodel validate --cross-validate --json`")
@click.option("--target-env-steps", type=float, help="env steps a training run needs, for time and cost to reach "
                                                      "it (default 100,000,000)")
@click.option("--gpu-hour-price", type=float, help="$ per GPU-hour (default: the sweep's --gpu-hour-price)")
@click.option("--title", help="report title")
@click.option("-o", "--out", "out", required=True, help="HTML report path")
@click.option("--md", "md", help="Markdown report path (default: the HTML path with .md); figures go beside it")
@click.option("--json", "as_json", is_flag=True, help="print what was written as one JSON object")
@no_progress_option  # accepted as in every vlaperf command: the report has no progress bar
def report_cmd(sweeps, choice, predictions, runs, trace_sim, trace_run, references, reference_profiles, gpus,
               iteration, cross_validation, target_env_steps, gpu_hour_price, title, out, md, as_json, quiet) -> None:
    """Build a self-contained interactive HTML report (and a Markdown version with PNG figures)."""
    from analysis.inputs import load_inputs
    from analysis.report import write_report

    if gpus is not None and gpus < 1:
        raise ConfigError("--gpus", f"must be an integer >= 1, got {gpus}")
    if iteration is not None and iteration < 1:
        raise ConfigError("--iteration", f"must be an integer >= 1, got {iteration}")
    check_outputs_apart({"--sweep": sweeps, "--choice": choice, "--prediction": predictions, "--run": runs,
                         "--trace-sim": trace_sim, "--trace-run": trace_run, "--reference": references,
                         "--reference-profile": [r.split("=", 1)[-1].strip() for r in reference_profiles],
                         "--cross-validation": cross_validation},
                        {"--out": out, "--md": md or str(Path(out).with_suffix(".md"))})
    check_writable("--out", out)
    if md:
        check_writable("--md", md)
    inp = load_inputs(sweeps=sweeps, choice=choice, predictions=predictions, runs=runs, trace_sim=trace_sim,
                      trace_run=trace_run, references=references, reference_profiles=reference_profiles,
                      cross_validation=cross_validation, gpus=gpus, iteration=iteration,
                      target_env_steps=target_env_steps, gpu_hour_price=gpu_hour_price, title=title)
    try:
        res = write_report(inp, out, md)
    except OSError as e:
        raise ConfigError("--out", f"must be a writable path; {e.strerror}: {e.filename}") from None
    if as_json:
        click.echo(strict_json({"html": str(res["html"]), "markdown": str(res["markdown"]),
                               "figures_dir": str(res["figures_dir"]), "figures": [str(f) for f in res["figures"]],
                               "not_drawn": list(res["missing"])}, indent=2))
        return
    click.echo(f"wrote {res['html']} ({len(res['figures'])} interactive figures"
               + (f"; not drawn for lack of input: {', '.join(res['missing'])}" if res["missing"] else "") + ")")
    click.echo(f"wrote {res['markdown']} (figures in {res['figures_dir']})")


def main(argv: list[str] | None = None) -> None:
    from perfmodel.cliutil import run_click

    run_click(cli, "analysis", argv)


if __name__ == "__main__":
    main()
