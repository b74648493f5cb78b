"""``executor``: run the real components. ``executor profile`` measures a profile.

Bad input (unknown suite or backbone, non-positive sizes, a device that is not there, a missing
option) prints one line ``error: <field>: <message>`` to stderr and exits with code 2.
"""

from __future__ import annotations

import sys

import click

from perfmodel.schema.errors import ConfigError


def _sizes(field: str, text: str, kind=int) -> tuple:
    try:
        vals = tuple(kind(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise ConfigError(field, f"must be comma-separated positive numbers, got {text!r}") from None
    if not vals or any(v <= 0 for v in vals):
        raise ConfigError(field, f"must be comma-separated positive numbers, got {text!r}")
    return vals


def _positive(field: str, v: int) -> int:
    if v < 1:
        raise ConfigError(field, f"must be an integer >= 1, got {v}")
    return v


class _Group(click.Group):
    """Turn every usage error and ConfigError into one line and exit code 2."""

    def main(self, args=None, prog_name=None, **kw):  # type: ignore[override]
        try:
            rv = super().main(args=args, prog_name=prog_name or "executor", standalone_mode=False, **kw)
        except ConfigError as e:
            click.echo(f"error: {e.field}: {e.message}", err=True)
            sys.exit(2)
        except click.UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError" and e.ctx is not None:
                click.echo(e.ctx.get_help(), err=True)
                sys.exit(2)
            param = getattr(e, "param", None)
            field = (param.opts[0].lstrip("-") if param is not None and getattr(param, "opts", None) else "usage")
            click.echo(f"error: {field}: {e.format_message().splitlines()[0]}", err=True)
            sys.exit(2)
        except click.exceptions.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Real LIBERO env workers, pi0.5 / GR00T N1.5 stand-in policies, PPO/GRPO learner."""


@main.command()
@click.option("--backbone", required=True, help="pi05 or gr00t_n15")
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
@click.option("--no-progress", is_flag=True, help="no progress bar")
def profile(backbone, scale, device, suite, task_id, out, image_size, env_counts, env_repeats, reset_repeats,
            batch_sizes, train_sizes, repeats, sync_mb, gpus_per_node, env_profile, no_progress) -> None:
    """Measure env, inference, training and sync costs into a perfmodel profile."""
    from executor.profiler import ProfileConfig, command_line, run_profile

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
        command=command_line(sys.argv[1:]),
    )
    cfg.check()  # all input errors before any measurement starts
    p = run_profile(cfg, progress=not no_progress)
    c = p.costs
    click.echo(f"wrote {out}: env step {c.env_step_core_s * 1e3:.1f} ms/core, efficiency "
               f"{c.env_core_efficiency:.2f}, reset {c.env_reset_s:.2f} s, {c.env_memory_gb:.2f} GB/env; "
               f"infer(1) {c.infer_s(1) * 1e3:.1f} ms, train(1) {c.train_micro_batch_s(1) * 1e3:.1f} ms, "
               f"optimizer {c.optimizer_step_s * 1e3:.1f} ms, sync {p.node['intra_node_bw_GBps']:.2f} GB/s")


from executor.run import run  # noqa: E402  (executor run: issue 4)

main.add_command(run)


# --rlinf-config on executor run: perfmodel's RLinf import hands the command its plan (issue 10).
from perfmodel.rlinf.hook import add_rlinf_config_option  # noqa: E402

add_rlinf_config_option(main.commands["run"])


if __name__ == "__main__":
    main()
