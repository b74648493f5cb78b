"""An RLinf run as it is on disk: its resolved ``config.yaml`` and its tensorboard timers per step.

What RLinf writes (../shared/reference/rlinf-logs.md, RLinf commit a3816b5): under
``runner.logger.log_path``, ``tensorboard/`` (or ``tensorboard/all`` with per-worker logging)
holds torch ``SummaryWriter`` event files and the whole resolved config as ``config.yaml``. Every
scalar's step is the runner's ``global_step``, one iteration. The runner's own timer gives
``time/step`` (the iteration) and stage timers (``time/actor_training``,
``time/generate_rollouts``, ...). RLinf logs no throughput: env steps per iteration follow from the
config (the imported plan's ``workload.env_steps_per_iteration``), over ``time/step``.

The event files are read with tensorboard's own reader (``EventAccumulator``), an optional
dependency (``pip install 'vlaperf[runs]'``); ``perfmodel`` starts without it.

Warm-up (``WARMUP_RULE``): the first logged step is always dropped (model loading, compilation,
cache warm-up); then each next leading step whose ``time/step`` exceeds ``WARMUP_FACTOR`` times the
median of the steps after it, so that a slow second step (a late compilation) does not count.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.schema.errors import ConfigError

STEP_KEY = "time/step"
# The runner's stage timers a calibration reads (the synchronous runner's names), by the model
# quantity they measure (perfmodel.calibration.from_runs).
STAGE_KEYS = {"actor_training": "time/actor_training", "generate_rollouts": "time/generate_rollouts"}
CONFIG_NAME = "config.yaml"
# Where the event files and config.yaml may sit under a run folder given on the command line.
SUBDIRS = ("", "tensorboard", "tensorboard/all")
WARMUP_FACTOR = 1.5
WARMUP_RULE = (f"the first logged step, then each next leading step whose {STEP_KEY} exceeds "
               f"{WARMUP_FACTOR:g} x the median of the steps after it")
RUNS_EXTRA = "pip install 'vlaperf[runs]' (tensorboard's event reader)"


@dataclass(frozen=True)
class RunLog:
    """One run: where it is, its plan (the RLinf importer's), and its timers per used step."""

    folder: Path  # the folder with config.yaml and the event files
    imported: Any  # perfmodel.rlinf.importer.Imported
    steps: tuple[int, ...]  # every logged step with a time/step
    used: tuple[int, ...]  # those left after warm-up
    step_s: tuple[float, ...]  # time/step of each used step
    stage_s: dict[str, tuple[float, ...]] = field(default_factory=dict)  # STAGE_KEYS name -> per used step
    env_not_as_rlinf: tuple[str, ...] = ()  # an executor run's flags that changed how its envs step

    @property
    def plan(self) -> Any:
        return self.imported.plan

    @property
    def env_steps_per_iteration(self) -> int:
        return self.plan.workload.env_steps_per_iteration

    @property
    def iteration_s(self) -> float:
        """Mean time/step over the used steps (total env steps over total time: their ratio is
        the run's throughput)."""
        return sum(self.step_s) / len(self.step_s)

    @property
    def throughput_env_steps_per_s(self) -> float:
        return self.env_steps_per_iteration / self.iteration_s

    def stage_mean_s(self, name: str) -> float | None:
        v = self.stage_s.get(name)
        return sum(v) / len(v) if v else None

    def provenance(self) -> dict[str, Any]:
        return {"path": str(self.folder), "mode": self.plan.mode, "gpus": self.plan.cluster.gpus,
                "total_num_envs": self.plan.workload.total_num_envs,
                "steps_logged": len(self.steps), "steps_used": [self.used[0], self.used[-1]],
                "steps_used_count": len(self.used), "warmup_dropped": len(self.steps) - len(self.used),
                "iteration_s": round(self.iteration_s, 6),
                "env_steps_per_iteration": self.env_steps_per_iteration,
                "throughput_env_steps_per_s": round(self.throughput_env_steps_per_s, 4),
                "stage_mean_s": {k: round(v, 6) for k in STAGE_KEYS if (v := self.stage_mean_s(k)) is not None},
                **({"env_not_as_rlinf": list(self.env_not_as_rlinf)} if self.env_not_as_rlinf else {})}


def find_folder(path: str | Path, option: str = "--from-rlinf-run") -> Path:
    """The folder of a run that holds ``config.yaml``: ``path`` itself, its ``tensorboard/`` or
    ``tensorboard/all/`` (RLinf's layout under ``runner.logger.log_path``)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(option, f"no such directory: {p}")
    if not p.is_dir():
        raise ConfigError(option, f"{p} is not a directory (give the run's log_path or its tensorboard/ folder)")
    for sub in SUBDIRS:
        if (p / sub / CONFIG_NAME).is_file():
            return p / sub
    raise ConfigError(f"{p}/{CONFIG_NAME}", f"missing: no {CONFIG_NAME} in {p} or its "
                                            f"{', '.join(s + '/' for s in SUBDIRS if s)} (RLinf saves the resolved "
                                            "config there when its logger starts)")


def _accumulator(folder: Path) -> Any:
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        raise ConfigError("--from-rlinf-run", f"reading RLinf's tensorboard logs needs {RUNS_EXTRA}") from None
    return EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every step


def read_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """Every scalar of the event files in ``folder``: key -> step -> value (the last one written
    for a step, as tensorboard shows it after a restart)."""
    events = sorted(folder.glob("events.out.tfevents.*"))
    if not events:
        raise ConfigError(f"{folder}/events.out.tfevents.*", "no tensorboard event files (RLinf writes them with "
                                                             "runner.logger.logger_backends: [tensorboard])")
    acc = _accumulator(folder)
    try:
        acc.Reload()
    except Exception as e:  # noqa: BLE001 - a corrupt file is the user's input: one line
        raise ConfigError(f"{events[0]}", f"cannot be read as tensorboard events ({type(e).__name__}: "
                                          f"{' '.join(str(e).split())[:200]})") from None
    out: dict[str, dict[int, float]] = {}
    for key in acc.Tags().get("scalars", []):
        out[key] = {int(e.step): float(e.value) for e in acc.Scalars(key)}
    if not out:
        raise ConfigError(f"{folder}/events.out.tfevents.*", f"no scalar could be read from {len(events)} event "
                                                             "file(s): empty, or not tensorboard event files")
    return out


def drop_warmup(step_s: list[float]) -> int:
    """How many leading steps are warm-up (WARMUP_RULE); at least one, always leaving one."""
    n = 1
    while n < len(step_s) - 1 and step_s[n] > WARMUP_FACTOR * statistics.median(step_s[n + 1:]):
        n += 1
    return n


def _check_time(where: str, key: str, step: int, value: float) -> None:
    if not (math.isfinite(value) and value > 0 if key == STEP_KEY else math.isfinite(value) and value >= 0):
        raise ConfigError(f"{where}:{key}", f"step {step} has {value!r}: a time must be finite and "
                                            f"{'> 0' if key == STEP_KEY else '>= 0'} seconds")


def env_not_as_rlinf(folder: Path, option: str) -> tuple[str, ...]:
    """An ``executor run``'s own record beside its timers (``record.json`` in the run directory
    that holds ``tensorboard/``) lists the flags under which its envs did not step as RLinf's
    (``options.env_not_as_rlinf``). A run without cameras or without its settle steps is refused:
    its env costs are an order of magnitude below a rendered env's (an unrendered step ~0.01 CPU s
    against ~0.17 here; a reset without its 15 settle steps ~1/8 of one with them,
    docs/executor.md), and a profile fitted to them would predict RLinf's runs silently wrong.
    A soft reset (no scene rebuild) is let through and named in the run's provenance. An RLinf
    folder has no such record: ()."""
    for d in (folder, *folder.parents[:2]):
        record = d / "record.json"
        if record.is_file():
            try:
                opts = json.loads(record.read_text()).get("options") or {}
            except (OSError, ValueError, AttributeError):
                return ()
            flags = tuple(str(f) for f in opts.get("env_not_as_rlinf") or ())
            refused = [f for f in flags if f != "--soft-reset"]
            if refused:
                raise ConfigError(option, f"{d}: recorded with {' '.join(refused)} ({record.name} "
                                          "options.env_not_as_rlinf): its envs do not cost what RLinf's do; "
                                          "calibrate from runs without them")
            return flags
    return ()


def read_run(path: str | Path, profile_ref: str | None = None, gpu: str | None = None,
             mode: str | None = None, option: str = "--from-rlinf-run",
             node: dict[str, Any] | None = None) -> RunLog:
    """One RLinf run folder -> its plan and timers (on ``gpu``'s node and the ``node`` fields
    given: calibrate's --gpu and node options); every problem is one ConfigError naming the
    file and the key."""
    from perfmodel.rlinf.importer import load_rlinf

    folder = find_folder(path, option)
    env_flags = env_not_as_rlinf(folder, option)
    config = folder / CONFIG_NAME
    try:
        imported = load_rlinf(config, profile_ref=profile_ref, gpu=gpu, mode=mode, node=node)
    except ConfigError as e:
        raise ConfigError(f"{config}:{e.field}", e.message) from None
    scalars = read_scalars(folder)
    where = f"{folder}/events.out.tfevents.*"
    if STEP_KEY not in scalars:
        timers = sorted(k for k in scalars if k.startswith("time/"))
        raise ConfigError(f"{where}:{STEP_KEY}", "no such scalar: the run logged no iteration times "
                                                 f"({'time keys: ' + ', '.join(timers[:6]) if timers else 'no time/ keys'})")
    steps_map = scalars[STEP_KEY]
    # A step that logged anything else but no time/step is a step without its timer.
    all_steps = sorted({s for k, v in scalars.items() if k.startswith("time/") for s in v})
    for s in all_steps:
        if s not in steps_map:
            raise ConfigError(f"{where}:{STEP_KEY}", f"step {s} has other timers but no {STEP_KEY}")
    steps = sorted(steps_map)
    for s in steps:
        _check_time(where, STEP_KEY, s, steps_map[s])
    if len(steps) < 2:
        raise ConfigError(f"{where}:{STEP_KEY}", f"{len(steps)} logged step(s); needs at least 2 "
                                                 f"(the first is warm-up: {WARMUP_RULE})")
    times = [steps_map[s] for s in steps]
    used = steps[drop_warmup(times):]
    stage_s: dict[str, tuple[float, ...]] = {}
    for name, key in STAGE_KEYS.items():
        vals = scalars.get(key)
        if not vals:
            continue
        for s in used:
            if s not in vals:
                raise ConfigError(f"{where}:{key}", f"step {s} has {STEP_KEY} but no {key} (logged for "
                                                    f"{len(vals)} other steps)")
            _check_time(where, key, s, vals[s])
        stage_s[name] = tuple(vals[s] for s in used)
    return RunLog(folder, imported, tuple(steps), tuple(used), tuple(steps_map[s] for s in used), stage_s,
                  env_flags)
