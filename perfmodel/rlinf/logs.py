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
import os
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
    truncated: tuple[str, ...] = ()  # event files whose last record is incomplete (a run stopped while writing)
    inputs: tuple[str, ...] = ()  # every file read (config.yaml, event files, an executor record): never an output

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
                **({"env_not_as_rlinf": list(self.env_not_as_rlinf)} if self.env_not_as_rlinf else {}),
                **({"truncated": list(self.truncated)} if self.truncated else {})}


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


# Bounds on what a run folder may hold before it is read (issue 44): a run writes one event file
# per start (and per worker with per-worker logging), never thousands; a folder beyond these is
# refused with its size, before minutes of reading.
MAX_EVENT_FILES = 1000
MAX_EVENT_BYTES = 2 << 30
# A file up to this size has every record's checksum verified; a larger one, the records that carry
# a ``time/`` timer (the ones read; pure-Python CRC32C costs ~16 us per record).
VERIFY_ALL_BYTES = 8 << 20
# A logged iteration (time/step) outside these is not a time: an RL iteration steps rendered envs
# and trains, never in less than 10 ms; the longest, one day, is the profiles' bound on a time.
MIN_STEP_S = 0.01
MAX_STEP_S = 86_400.0
# A stage timer is part of its iteration; their clocks are read apart, so allow this much over.
STAGE_SLACK = 1.01


def _event_proto() -> Any:
    try:
        import importlib

        event_pb2 = importlib.import_module("tensorboard.compat.proto.event_pb2")
        masked_crc32c = importlib.import_module("tensorboard.compat.tensorflow_stub.pywrap_tensorflow").masked_crc32c
    except ImportError:
        raise ConfigError("--from-rlinf-run", f"reading RLinf's tensorboard logs needs {RUNS_EXTRA}") from None
    return event_pb2, masked_crc32c


def event_files(folder: Path) -> list[Path]:
    """The folder's event files (``events.out.tfevents.*``, as tensorboard's writer names them),
    each a regular file, within MAX_EVENT_FILES and MAX_EVENT_BYTES; other files are not read."""
    from perfmodel.schema.jsonio import check_regular_file

    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.startswith("events.out.tfevents."))
    except OSError as e:
        raise ConfigError(str(folder), f"cannot list the run folder: {e.strerror or type(e).__name__}") from None
    if not names:
        raise ConfigError(f"{folder}/events.out.tfevents.*", "no tensorboard event files (RLinf writes them with "
                                                             "runner.logger.logger_backends: [tensorboard])")
    if len(names) > MAX_EVENT_FILES:
        raise ConfigError(f"{folder}/events.out.tfevents.*", f"{len(names)} event files; a run writes one per start "
                                                             f"(and worker), at most {MAX_EVENT_FILES} are read: "
                                                             "give one run's folder")
    files = [folder / n for n in names]
    total = 0
    for f in files:
        check_regular_file(f, str(f))
        total += f.stat().st_size
    if total > MAX_EVENT_BYTES:
        raise ConfigError(f"{folder}/events.out.tfevents.*", f"{total / 2**30:.1f} GiB of event files; at most "
                                                             f"{MAX_EVENT_BYTES >> 30} GiB are read")
    return files


def _records(path: Path, data: bytes, crc: Any, needle: bytes) -> Any:
    """The records of one event file that hold ``needle`` (TFRecord framing: length, its CRC,
    data, its CRC). Every record's framing is verified, and every record's data in a file up to
    VERIFY_ALL_BYTES (else the records read). A record that fails its checksum in the middle of the
    file is refused (every step after it would be lost silently); an incomplete last record (a
    run stopped while writing) ends the file: returned as ``("truncated", byte)``."""
    import struct

    unpack = struct.unpack_from
    pos, n, size = 0, 0, len(data)
    header_ok: dict[bytes, bool] = {}  # most records share a length: its CRC once
    verify_all = size <= VERIFY_ALL_BYTES
    while pos < size:
        if size - pos < 12:
            return ("truncated", pos)
        framed = data[pos:pos + 12]  # the length and its CRC: a cached verdict for the same 12 bytes
        ok = header_ok.get(framed)
        if ok is None:
            ok = header_ok[framed] = crc(framed[:8]) == unpack("<I", framed, 8)[0]
        if not ok and n == 0:
            raise ConfigError(str(path), "not a tensorboard event file (its first record fails its checksum)")
        if not ok:
            raise ConfigError(str(path), f"record {n + 1} (byte {pos}) fails its checksum: corrupt; {size - pos} "
                                         "bytes from there cannot be read (nothing after it is used silently)")
        start = pos + 12
        end = start + unpack("<Q", framed)[0]
        if end + 4 > size:
            return ("truncated", pos)
        wanted = data.find(needle, start, end) >= 0
        if (verify_all or wanted) and crc(data[start:end]) != unpack("<I", data, end)[0]:
            raise ConfigError(str(path), f"record {n + 1} (byte {pos}) fails its checksum: corrupt; "
                                         f"{size - pos} bytes from there are not read (nothing after it is used "
                                         "silently)")
        if wanted:
            yield data[start:end]
        pos, n = end + 4, n + 1
    return None


def _value(v: Any) -> tuple[float, str] | None:
    """A summary value's number and its form (``simple_value`` or a scalar ``tensor``)."""
    kind = v.WhichOneof("value")
    if kind == "simple_value":
        return float(v.simple_value), "scalar"
    if kind == "tensor" and not v.tensor.tensor_shape.dim:
        t = v.tensor
        vals = list(t.float_val) or list(t.double_val)
        if not vals and t.tensor_content and len(t.tensor_content) in (4, 8):
            import struct

            vals = list(struct.unpack("<f" if len(t.tensor_content) == 4 else "<d", t.tensor_content))
        if len(vals) == 1:
            return float(vals[0]), "tensor"
    return None


@dataclass
class Scalars:
    """What an RLinf folder's event files hold: ``values`` key -> step -> value (the last
    written for a step, as tensorboard shows it after a restart); ``truncated``: files whose last
    record is incomplete (a run stopped while writing)."""

    values: dict[str, dict[int, float]]
    files: list[Path]
    truncated: list[str]


def read_scalars(folder: Path, only: str = "time/") -> Scalars:
    """Every scalar under ``only`` of the event files in ``folder``, read record by record with
    every checksum of a used record verified. Refused: a corrupt record (not the last), two runs
    in one folder (a later file whose steps start where an earlier one's did), a key logged both
    as a scalar and as a tensor."""
    event_pb2, crc = _event_proto()
    files = event_files(folder)
    needle = only.encode()
    out: dict[str, dict[int, float]] = {}
    forms: dict[str, str] = {}
    truncated: list[str] = []
    firsts: list[tuple[int, Path]] = []
    for f in files:
        try:
            with open(f, "rb") as fh:
                data = fh.read(MAX_EVENT_BYTES + 1)
        except OSError as e:
            raise ConfigError(str(f), f"cannot read: {e.strerror or type(e).__name__}") from None
        records = _records(f, data, crc, needle)
        first: int | None = None
        while True:
            try:
                body = next(records)
            except StopIteration as stop:
                if stop.value is not None:
                    truncated.append(f"{f.name} (its last record, from byte {stop.value[1]} of {len(data)}, is "
                                     "incomplete)")
                break
            ev = event_pb2.Event()
            try:
                ev.ParseFromString(body)
            except Exception:  # noqa: BLE001 - protobuf's DecodeError: the user's file
                raise ConfigError(str(f), "a record that passes its checksum is not a tensorboard event") from None
            for v in ev.summary.value:
                if not v.tag.startswith(only):
                    continue
                got = _value(v)
                if got is None:
                    continue
                value, form = got
                if forms.setdefault(v.tag, form) != form:
                    raise ConfigError(f"{f}:{v.tag}", "logged both as a scalar and as a tensor: two writers, "
                                                      "or two runs; give one run's folder")
                out.setdefault(v.tag, {})[int(ev.step)] = value
                first = int(ev.step) if first is None else min(first, int(ev.step))
        if first is not None:
            for other_first, other in firsts:
                if first <= other_first:
                    raise ConfigError(str(f), f"its steps start at {first}, where {other.name}'s start at "
                                              f"{other_first}: two runs in one folder (a resumed run continues "
                                              "after its first); give each run its own folder")
            firsts.append((first, f))
    if not out:
        raise ConfigError(f"{folder}/events.out.tfevents.*", f"no {only} scalar could be read from {len(files)} "
                                                             "event file(s): empty, or not RLinf's timers")
    return Scalars(out, files, truncated)


def drop_warmup(step_s: list[float]) -> int:
    """How many leading steps are warm-up (WARMUP_RULE); at least one, always leaving one."""
    n = 1
    while n < len(step_s) - 1 and step_s[n] > WARMUP_FACTOR * statistics.median(step_s[n + 1:]):
        n += 1
    return n


def _check_time(where: str, key: str, step: int, value: float) -> None:
    if key == STEP_KEY:
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{where}:{key}", f"step {step} has {value!r}: a time must be finite and > 0 seconds")
        if not MIN_STEP_S <= value <= MAX_STEP_S:
            raise ConfigError(f"{where}:{key}", f"step {step} has {value:g} s: an iteration takes "
                                                f"{MIN_STEP_S:g}..{MAX_STEP_S:g} s (not a time in seconds)")
    elif not (math.isfinite(value) and 0 <= value <= MAX_STEP_S):
        raise ConfigError(f"{where}:{key}", f"step {step} has {value!r}: a time must be finite and >= 0 seconds, "
                                            f"at most {MAX_STEP_S:g}")


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
            from perfmodel.schema.jsonio import check_list, check_object, load_json

            doc = check_object(str(record), load_json(record, str(record)))
            opts = check_object(f"{record}:options", doc.get("options") or {})
            raw = check_list(f"{record}:options.env_not_as_rlinf", opts.get("env_not_as_rlinf") or [])
            if not all(isinstance(f, str) for f in raw):
                raise ConfigError(f"{record}:options.env_not_as_rlinf", f"must be a list of flags (text), got {raw!r}"[:300])
            flags = tuple(raw)
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
    read = read_scalars(folder)
    scalars = read.values
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
            if vals[s] > STAGE_SLACK * steps_map[s]:
                raise ConfigError(f"{where}:{key}", f"step {s} has {vals[s]:g} s, longer than its iteration "
                                                    f"({STEP_KEY} {steps_map[s]:g} s): a stage is part of it")
        stage_s[name] = tuple(vals[s] for s in used)
    record = [d / "record.json" for d in (folder, *folder.parents[:2]) if (d / "record.json").is_file()][:1]
    return RunLog(folder, imported, tuple(steps), tuple(used), tuple(steps_map[s] for s in used), stage_s,
                  env_flags, tuple(read.truncated), tuple(str(p) for p in (config, *read.files, *record)))
