"""A run's per-iteration timers as RLinf logs them (../shared/reference/rlinf-logs.md), so that
``perfmodel calibrate --from-run`` (or ``--from-rlinf-run``) reads an executor run exactly as it
reads a real RLinf run: ``<run>/tensorboard/`` with the plan as an RLinf config
(perfmodel.rlinf.emit: the fragment ``plan --emit rlinf`` writes, which the importer reads back as
the same plan) saved as ``config.yaml``, and torch ``SummaryWriter`` event files whose step is the
iteration.

Keys (RLinf's synchronous runner's names): ``time/step``, the iteration (from the previous
iteration's end, the run's start for the first, to the actor's last optimizer step of it, the
executor's ``iteration_done``); ``time/actor_training``, from the first training micro-batch to
the last optimizer step of the iteration; ``time/generate_rollouts``, from the first env or
inference span of the iteration to the last (synchronous modes: RLinf's runner times the
rollout phase apart only there; the asynchronous ones overlap it with training);
``time/sync_weights``, the weight-sync spans of the iteration (summed, disaggregated modes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROLLOUT_STAGES = ("env_reset", "env_step", "inference")
TRAIN_STAGES = ("train", "optimizer_step")


def iteration_timers(plan: Any, spans: list[tuple], iteration_done: list[float]) -> list[dict[str, float]]:
    """Each completed iteration's timers (RLinf key -> seconds) from the run's spans
    (perfmodel.schema.timeline.Recorder.spans) and iteration end times."""
    sync = not plan.mechanisms.async_training
    out = []
    start = 0.0
    for end in iteration_done:
        row = {"time/step": end - start}
        inside = [s for s in spans if start <= s[3] < end + 1e-9]
        train = [s for s in inside if s[0] in TRAIN_STAGES]
        if train:
            row["time/actor_training"] = max(s[4] for s in train) - min(s[3] for s in train)
        if sync:
            roll = [s for s in inside if s[0] in ROLLOUT_STAGES]
            if roll:
                row["time/generate_rollouts"] = max(s[4] for s in roll) - min(s[3] for s in roll)
        ws = [s for s in inside if s[0] == "weight_sync"]
        if ws:
            row["time/sync_weights"] = sum(s[4] - s[3] for s in ws)
        out.append(row)
        start = end
    return out


def write(run_dir: Path, plan: Any, backbone: str | None, spans: list[tuple], iteration_done: list[float]) -> Path | None:
    """``run_dir/tensorboard/`` (config.yaml + event file); None, writing nothing, where
    tensorboard is not installed (the run record is what matters)."""
    from perfmodel.rlinf.emit import emit_yaml

    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return None
    header = "written by executor run: the run's plan as an RLinf config (RLinf saves its resolved config here)"
    return write_run(run_dir / "tensorboard", emit_yaml(plan, backbone, header=header),
                     iteration_timers(plan, spans, iteration_done))


def write_run(folder: str | Path, config_yaml: str, timers: list[dict[str, float]], first_step: int = 0) -> Path:
    """Write a run in RLinf's layout: ``folder/config.yaml`` and one event file with each
    iteration's timers (``timers[i]``: key -> seconds, at step ``first_step + i``), with torch's
    ``SummaryWriter`` as RLinf does. Used by ``executor run`` and the tests."""
    from perfmodel.rlinf.logs import CONFIG_NAME, RUNS_EXTRA
    from perfmodel.schema.errors import ConfigError

    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ConfigError("tensorboard", f"writing RLinf-style logs needs torch and {RUNS_EXTRA}") from None
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_NAME).write_text(config_yaml)
    w = SummaryWriter(log_dir=str(out))
    try:
        for i, row in enumerate(timers):
            for key, value in row.items():
                w.add_scalar(key, value, first_step + i)
    finally:
        w.close()
    return out
