"""The Python API: what the ``perfmodel`` commands do, as functions returning what each prints
with ``--json`` (docs/metrics.md, docs/formats.md). The command line and these functions run the
same code (perfmodel/commands/); options keep their command-line names with ``_`` for ``-``, and
bad input raises ``perfmodel.schema.errors.ConfigError`` naming the option (its ``field``).

    from perfmodel import api
    p = api.predict(mode="rollout_async", gpus=32)
    p["throughput_env_steps_per_s"], p["throughput_interval"]["low"], p["throughput_interval"]["high"]
    choice = api.plan(gpus=32)           # best plan, runner-up, top_candidates, explanation
    api.format_plan(choice)              # the table `perfmodel plan` prints

Warnings (an option without effect, an RLinf import's caveats) are in the result and are also
said on stderr; pass ``say=lambda line: None`` to keep them quiet, or a logger's method.
"""

from __future__ import annotations

from typing import Any, Sequence

from perfmodel.commands.calibrate import calibrate as _calibrate
from perfmodel.commands.common import Say
from perfmodel.commands.gpus import gpus
from perfmodel.commands.plan import format_plan, plan as _plan
from perfmodel.commands.predict import format_prediction, predict as _predict
from perfmodel.commands.sweep import sweep as _sweep
from perfmodel.commands.validate import format_validation, validate

__all__ = ["predict", "plan", "sweep", "calibrate", "validate", "gpus", "format_prediction", "format_plan",
           "format_validation"]

ListArg = str | Sequence[Any] | None


def _text(values: ListArg) -> str | None:
    """A list option as the command line takes it: comma-separated text (None for null)."""
    if values is None or isinstance(values, str):
        return values
    return ",".join("null" if v is None else str(v) for v in values)


def predict(mode: str | None = None, gpus: int | None = None, *, backbone: str | None = None,
            ratio: str | None = None, plan: str | None = None, profile: str | None = None,
            pipeline_stages: int | None = None, b_max: int | None = None, t_max: float | None = None,
            staleness: int | None = None, replications: int = 1, seed: int = 0, trace: str | None = None,
            rlinf_config: str | None = None, gpu: str | None = None, gpu_hour_price: float | None = None,
            interval: bool = True, scale_global_batch: bool = False, say: Say | None = None,
            node: dict[str, Any] | None = None) -> dict[str, Any]:
    """``perfmodel predict --json``: one plan's throughput, its 90 % interval
    (``throughput_interval``), bound, bottleneck, utilization and cost per GPU-hour. ``plan`` and
    ``profile`` are file paths, as ``--plan`` and ``--profile``. ``node``: the node options by
    name (``cpu_cores_per_node``, ``gpus_per_node``, ``nic_gbps``, ``node_ram_gb``)."""
    return _predict(mode, gpus, backbone=backbone, ratio=ratio, plan_path=plan, profile_path=profile,
                    pipeline_stage_num=pipeline_stages, b_max=b_max, t_max_s=t_max, max_staleness=staleness,
                    replications=replications, seed=seed, trace=trace, rlinf_config=rlinf_config, gpu=gpu,
                    price=gpu_hour_price, interval=interval, scale_global_batch=scale_global_batch, say=say,
                    **(node or {})).to_json()


def plan(gpus: int | None = None, *, objective: str = "throughput", backbone: str | None = None,
         profile: str | None = None, modes: ListArg = None, ratios: ListArg = None, pipeline_stages: ListArg = None,
         b_max: ListArg = None, t_max: ListArg = None, staleness: int | ListArg = None,
         gpu_hour_price: float | None = None, env_steps: float | None = None, within_hours: float | None = None,
         replications: int = 1, seed: int = 0, jobs: int | None = None, rlinf_config: str | None = None,
         gpu: str | None = None, scale_global_batch: bool = False, sweep: str | None = None, out: str | None = None,
         details: str | None = None, say: Say | None = None, node: dict[str, Any] | None = None,
         envs_per_gpu: ListArg = None, micro_batch_sizes: ListArg = None,
         sample_efficiency: dict[str, float] | None = None) -> dict[str, Any]:
    """``perfmodel plan --json``: the best plan for the budget (``plan``, runnable by ``executor
    run``), its prediction (``best``), the runner-up with the interval of their ratio,
    ``top_candidates`` (the table's rows) and the ``explanation``. ``sweep``: choose from this
    saved sweep file instead of sweeping now."""
    # with ``sweep``: the options set away from their defaults must agree with the sweep's own
    given = {name for name, set_ in (("staleness", staleness is not None), ("replications", replications != 1),
                                     ("seed", seed != 0), ("scale_global_batch", scale_global_batch)) if set_}
    return _plan(gpus, backbone=backbone, profile_path=profile, modes=_text(modes), ratios=_text(ratios),
                 pipeline_stages=_text(pipeline_stages), b_max=_text(b_max), t_max=_text(t_max), staleness=staleness,
                 price=gpu_hour_price, replications=replications, seed=seed, jobs=jobs, rlinf_config=rlinf_config,
                 gpu=gpu, scale_global_batch=scale_global_batch, objective=objective, env_steps=env_steps,
                 within_hours=within_hours, sweep_path=sweep, out=out, details=details, given_options=given,
                 say=say, envs_per_gpu=_text(envs_per_gpu), micro_batch_sizes=_text(micro_batch_sizes),
                 sample_efficiency=sample_efficiency or {}, **(node or {})).summary


def sweep(gpus: ListArg = None, *, backbone: str | None = None, profile: str | None = None, modes: ListArg = None,
          ratios: ListArg = None, pipeline_stages: ListArg = None, b_max: ListArg = None, t_max: ListArg = None,
          staleness: int | None = None, gpu_hour_price: float | None = None, replications: int = 1, seed: int = 0,
          jobs: int | None = None, rlinf_config: str | None = None, gpu: str | None = None,
          scale_global_batch: bool = False, out: str | None = None, csv: str | None = None,
          interval: bool = True, say: Say | None = None, node: dict[str, Any] | None = None,
          envs_per_gpu: ListArg = None, micro_batch_sizes: ListArg = None) -> dict[str, Any]:
    """``perfmodel sweep --json``: every combination's prediction (``rows``) and the sweep's
    ``spec``; list arguments take a list or comma-separated text."""
    return _sweep(_text(gpus), backbone=backbone, profile_path=profile, modes=_text(modes), ratios=_text(ratios),
                  pipeline_stages=_text(pipeline_stages), b_max=_text(b_max), t_max=_text(t_max),
                  staleness=staleness, price=gpu_hour_price, replications=replications, seed=seed, jobs=jobs,
                  rlinf_config=rlinf_config, gpu=gpu, scale_global_batch=scale_global_batch, out=out, csv_out=csv,
                  interval=interval, say=say, envs_per_gpu=_text(envs_per_gpu),
                  micro_batch_sizes=_text(micro_batch_sizes), **(node or {}))


def calibrate(reference: str | None = None, *, out_dir: str | None = None, max_evals: int | None = None,
              say: Say | None = None) -> dict[str, Any]:
    """``perfmodel calibrate --json``: fit the profiles to ``reference`` (default: the bundled
    published results) and write them to ``out_dir`` (default: your profile directory)."""
    argv = [a for k, v in (("--reference", reference), ("--out-dir", out_dir)) if v is not None for a in (k, str(v))]
    argv += ["--max-evals", str(max_evals)] if max_evals is not None else []
    return _calibrate(reference, out_dir=out_dir, max_evals=max_evals, argv=argv, say=say)
