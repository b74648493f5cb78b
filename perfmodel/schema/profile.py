"""The profile schema: per-stage cost models plus how they were obtained.

A profile is written by ``executor profile`` (measured) or ``perfmodel calibrate`` (fitted to
published results) and read by the simulator. It depends on nothing else in the project but the
error and field helpers. See docs/formats.md "Profile format" for the JSON layout.
"""

from __future__ import annotations

import bisect
import os
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.jsonio import Fields, check_float, check_list, load_json, write_json_atomic

SCHEMA_VERSION = 1
CURVE_MODELS = ("linear", "table")
# env costs kept as curves over envs per core (executor profile): one env's step in a lock-step
# group, one env's step stepping by itself (dynamic batching), one env's reset
ENV_DENSITY_KINDS = ("step_lockstep", "step_free", "reset")
DENSITY_MATCH_REL = 0.02  # a plan's envs per core within 2 % of a measured point reads that point
# transferred: a backbone no published point calibrates, with the shared parameters of a fitted
# calibration and its own costs from its shapes (perfmodel.calibration.uncalibrated)
PROVENANCE_KINDS = ("measured", "fitted", "transferred")
# The repository's top-level profiles/ folder is the source of truth; pyproject.toml maps it to
# the package ``perfmodel.profiles`` so that wheels and `pip install .` carry it as package data.
_CHECKOUT_DIR = Path(__file__).resolve().parents[2] / "profiles"
PROFILES_PACKAGE = "perfmodel.profiles"
USER_DIR_ENV = "VLAPERF_PROFILE_DIR"


def _bundled_dir() -> Path:
    """Where the bundled profiles are: the installed package data (importlib.resources) or,
    when running from a checkout that is not installed, the repository's profiles/ folder."""
    # A source checkout (editable install or PYTHONPATH) reads its own profiles/ folder.
    if (_CHECKOUT_DIR.parent / "pyproject.toml").is_file() and (_CHECKOUT_DIR / "pi05.json").is_file():
        return _CHECKOUT_DIR
    try:
        from importlib.resources import files

        # A directory without __init__.py is a namespace package: files() gives a
        # MultiplexedPath, whose joinpath() is a real file path when the file exists.
        marker = files(PROFILES_PACKAGE).joinpath("pi05.json")
        if isinstance(marker, Path) and marker.is_file():
            return marker.parent
    except (ModuleNotFoundError, TypeError, ValueError):
        pass
    return _CHECKOUT_DIR


BUNDLED_DIR = _bundled_dir()
BUNDLED_REFERENCE = BUNDLED_DIR / "reference" / "rl_vla3_libero.csv"


def user_profile_dir() -> Path:
    """Where this user's own profiles go (``perfmodel calibrate``, ``executor profile``), never
    inside the installed package: $VLAPERF_PROFILE_DIR, else $XDG_DATA_HOME/vlaperf/profiles,
    else ~/.local/share/vlaperf/profiles (the XDG / platformdirs user-data location)."""
    import os

    if os.environ.get(USER_DIR_ENV):
        return Path(os.environ[USER_DIR_ENV]).expanduser()
    try:
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    except (RuntimeError, KeyError):  # HOME unset and no passwd entry (a container's uid)
        raise ConfigError("HOME", f"is not set and this user has no home directory; set HOME, XDG_DATA_HOME or "
                                  f"{USER_DIR_ENV} (where your own profiles go)") from None
    return Path(base).expanduser() / "vlaperf" / "profiles"


def user_profile_dir_if_any() -> Path | None:
    """The user's profile directory for reading: none when it cannot be named (no home)."""
    try:
        return user_profile_dir()
    except ConfigError:
        return None


@dataclass(frozen=True)
class Curve:
    """Seconds as a function of a size x (batch size, envs, bytes).

    ``linear``: intercept + slope * x. ``table``: piecewise-linear through ``points`` (x, y),
    extrapolated linearly beyond the ends. ``samples`` keeps the raw measurements
    ([x, [y, ...]]) and ``fit_error_pct`` the fit's max relative error on their means.
    """

    model: str = "linear"
    intercept: float = 0.0
    slope: float = 0.0
    points: tuple[tuple[float, float], ...] = ()
    samples: tuple[tuple[float, tuple[float, ...]], ...] = ()
    fit_error_pct: float | None = None

    def __call__(self, x: float) -> float:
        if self.model == "linear":
            return self.intercept + self.slope * x
        xs = [p[0] for p in self.points]
        if len(xs) == 1:
            return self.points[0][1]
        i = min(max(bisect.bisect_left(xs, x), 1), len(xs) - 1)
        (x0, y0), (x1, y1) = self.points[i - 1], self.points[i]
        return max(0.0, y0 + (y1 - y0) * (x - x0) / (x1 - x0))

    @classmethod
    def from_dict(cls, obj: Any, path: str) -> "Curve":
        f = Fields(obj, path)
        model = f.str("model", choices=CURVE_MODELS)
        intercept = f.float("intercept", 0.0)
        slope = f.float("slope", 0.0)
        raw_points = f.any("points", [])
        raw_samples = f.any("samples", [])
        err = f.any("fit_error_pct", None)
        f.done()
        points = _points(raw_points, f.sub("points"), "x")
        samples = _samples(raw_samples, f.sub("samples"), "x")
        if model == "table":
            if not points:
                raise ConfigError(f"{path}.points", "a table curve needs at least one [x, seconds] point")
            if sorted(points) != points or len({p[0] for p in points}) != len(points):
                raise ConfigError(f"{path}.points", "x values must be strictly increasing")
            for i in range(1, len(points)):
                # A bigger batch never takes less time; a falling table would also extrapolate to
                # free work beyond its last point.
                if points[i][1] < points[i - 1][1]:
                    raise ConfigError(f"{path}.points[{i}][1]",
                                      f"seconds must not decrease as x grows (monotone non-decreasing): "
                                      f"{points[i][1]:g} s at x={points[i][0]:g} after {points[i - 1][1]:g} s "
                                      f"at x={points[i - 1][0]:g}")
        if err is not None:
            err = check_float(f"{path}.fit_error_pct", err)
        return cls(model, intercept, slope, tuple(points), tuple(samples), err)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"model": self.model}
        if self.model == "linear":
            d.update(intercept=self.intercept, slope=self.slope)
        else:
            d["points"] = [list(p) for p in self.points]
        if self.samples:
            d["samples"] = [[x, list(ys)] for x, ys in self.samples]
        if self.fit_error_pct is not None:
            d["fit_error_pct"] = self.fit_error_pct
        return d


def _points(raw: Any, path: str, x: str, positive: bool = False) -> list[tuple[float, float]]:
    """A curve's measured points: ``[[x, seconds], ...]`` (both > 0 when ``positive``, else >= 0)."""
    points = []
    for i, p in enumerate(check_list(path, raw)):
        if not isinstance(p, (list, tuple)) or len(p) != 2:
            raise ConfigError(f"{path}[{i}]", f"must be a pair [{x}, seconds]")
        points.append((check_float(f"{path}[{i}][0]", p[0], strict_min=positive),
                       check_float(f"{path}[{i}][1]", p[1], strict_min=positive)))
    return points


def _samples(raw: Any, path: str, x: str) -> list[tuple[float, tuple[float, ...]]]:
    """A curve's raw measurements: ``[[x, [seconds, ...]], ...]``."""
    samples = []
    for i, s in enumerate(check_list(path, raw)):
        if not isinstance(s, (list, tuple)) or len(s) != 2 or not isinstance(s[1], list):
            raise ConfigError(f"{path}[{i}]", f"must be [{x}, [seconds, ...]]")
        ys = tuple(check_float(f"{path}[{i}][1][{j}]", y) for j, y in enumerate(s[1]))
        samples.append((check_float(f"{path}[{i}][0]", s[0]), ys))
    return samples


@dataclass(frozen=True)
class EnvDensityCurve:
    """CPU seconds of one env's step (or reset) vs envs per core, as ``executor profile`` measured
    them: ``points`` are (envs per core, median CPU seconds), ``samples`` the raw measurements
    ([envs per core, [seconds, ...]]). Not required to be monotone: CPU time per step can fall
    as well as rise with the envs sharing a core (caches, frequency)."""

    points: tuple[tuple[float, float], ...]
    samples: tuple[tuple[float, tuple[float, ...]], ...] = ()

    @property
    def densities(self) -> tuple[float, ...]:
        return tuple(x for x, _ in self.points)

    def at(self, density: float) -> tuple[float, str | None]:
        """(seconds, note): the measured point at ``density`` (note None); between two measured
        points their linear interpolation, beyond them the nearest measured point; never an
        extrapolation, and the note says which was done."""
        xs = self.densities
        for x, y in self.points:
            if abs(x - density) <= DENSITY_MATCH_REL * x:
                return y, None
        measured = ", ".join(f"{x:g}" for x in xs)
        if density < xs[0] or density > xs[-1]:
            x, y = self.points[0] if density < xs[0] else self.points[-1]
            return y, (f"{density:.3g} envs per core is outside the measured {measured}: the nearest "
                       f"measured point ({x:g}) is used, not extrapolated")
        i = bisect.bisect_left(xs, density)
        (x0, y0), (x1, y1) = self.points[i - 1], self.points[i]
        return (y0 + (y1 - y0) * (density - x0) / (x1 - x0),
                f"{density:.3g} envs per core was not measured (measured {measured}): interpolated "
                f"between {x0:g} and {x1:g}")

    def scaled(self, f: float) -> "EnvDensityCurve":
        return EnvDensityCurve(tuple((x, y * f) for x, y in self.points), ())

    @classmethod
    def from_dict(cls, obj: Any, path: str) -> "EnvDensityCurve":
        f = Fields(obj, path)
        raw_points = f.any("points")
        raw_samples = f.any("samples", [])
        f.done()
        points = _points(raw_points, f.sub("points"), "envs per core", positive=True)
        if not points:
            raise ConfigError(f"{path}.points", "needs at least one [envs per core, seconds] point")
        if sorted(points) != points or len({p[0] for p in points}) != len(points):
            raise ConfigError(f"{path}.points", "envs per core must be strictly increasing")
        return cls(tuple(points), tuple(_samples(raw_samples, f.sub("samples"), "envs per core")))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"points": [list(p) for p in self.points]}
        if self.samples:
            d["samples"] = [[x, list(ys)] for x, ys in self.samples]
        return d


def _env_density(obj: Any, path: str) -> dict[str, EnvDensityCurve]:
    Fields(obj, path)
    out = {}
    for kind, raw in obj.items():
        if kind not in ENV_DENSITY_KINDS:
            raise ConfigError(f"{path}.{kind}", f"unknown env cost curve; allowed: {', '.join(ENV_DENSITY_KINDS)}")
        out[kind] = EnvDensityCurve.from_dict(raw, f"{path}.{kind}")
    return out


# Physical upper bounds of a profile's costs, by unit (the key's suffix): far beyond anything
# measured (pi0.5's slowest call is seconds, its weights 6.5 GB), they keep every simulated time
# finite (a cost of 1e308 s made the throughput NaN).
MAX_COST_S = 86_400.0  # one call, step, reset or transfer: a day
MAX_BYTES = 1e15  # bytes moved per step or sync: a petabyte
MAX_GB = 1e5  # memory: 100 TB
MAX_SIZE = 1e9  # a curve's x: a batch size or envs per core
MAX_FACTOR = 1e6  # a ratio, scale, slowdown or percentage


def _cost_bound(keys: list[str], in_pair_x: bool) -> tuple[float, str]:
    """(upper bound, unit) of a number at ``keys`` under a profile's costs (see MAX_COST_S)."""
    if any(k.endswith("_bytes") for k in keys):
        return MAX_BYTES, "bytes"
    if any("gb" in k.lower() for k in keys):
        return MAX_GB, "GB"
    if in_pair_x:
        return MAX_SIZE, "(a size)"
    if any(k.endswith("_s") for k in keys):
        return MAX_COST_S, "s"
    return MAX_FACTOR, ""


def check_cost_bounds(obj: Any, path: str, keys: tuple[str, ...] = ()) -> None:
    """Refuse any number in a profile's costs above the physical bound of its unit, naming the
    field and the range; the readers check types, signs and shapes."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            check_cost_bounds(v, f"{path}.{k}", keys + (str(k),))
    elif isinstance(obj, list):
        in_points = bool(keys) and keys[-1] in ("points", "samples")
        for i, v in enumerate(obj):
            if in_points and isinstance(v, list):  # [x, y] or [x, [y, ...]]
                for j, w in enumerate(v):
                    check_cost_bounds(w, f"{path}[{i}][{j}]", keys + (("x",) if j == 0 else ()))
            else:
                check_cost_bounds(v, f"{path}[{i}]", keys)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool) and obj == obj:  # NaN: the readers' message
        bound, unit = _cost_bound(list(keys[:-1] if keys and keys[-1] == "x" else keys), bool(keys) and keys[-1] == "x")
        if abs(obj) > bound:
            raise ConfigError(path, f"must be at most {bound:g}{' ' + unit if unit else ''} (a physical bound far "
                                    f"beyond any measured cost), got {obj:g}")


@dataclass(frozen=True)
class Costs:
    """Per-stage costs on the profiled hardware (seconds, bytes, GB).

    env_step_core_s: one env step (physics + rendering) of one env running alone on one core.
    env_core_efficiency: per-core env throughput when every core of a worker is busy, relative
        to one env alone (memory-bandwidth contention); 1.0 means perfect scaling over cores.
    env_reset_s: one env reset (scene rebuild + settle steps) on one core.
    env_memory_gb: resident memory of one env process (a node-RAM capacity limit).
    infer_s: one chunk-generation call (prefix + denoising) on one device vs batch size.
    train_micro_batch_s: forward + backward of one micro-batch on one device vs its size.
    optimizer_step_s: one optimizer step of one actor rank (its shard).
    grad_allreduce_bytes: gradient bytes all-reduced per optimizer step (trained parameters).
    weight_sync_bytes: bytes sent from the actor to each generator per weight sync.
    offload_s / reload_s: colocated mode's model swap, per phase switch, per device.
    comm_latency_s: fixed latency of one collective or transfer.
    fsdp_gather_bytes: parameter bytes each actor rank all-gathers per micro-batch when the
        actor shards its weights (FSDP: the whole model for forward, the trained part again
        for backward); 0 without sharding.
    env_lockstep_slowdown: extra fraction of time a lock-step chunk step takes over the same
        envs running free: the barrier waits for the slowest env of the group at every step
        (dynamic batching lets each env go on by itself, without the barrier).
    env_density: measured curves over envs per core (``ENV_DENSITY_KINDS``): CPU seconds of one
        env's step in a lock-step group (``step_lockstep``), of one env stepping by itself
        (``step_free``), of one env's reset (``reset``), with every core of the worker running
        that many envs. Where present they replace env_step_core_s / env_reset_s and
        env_core_efficiency at the plan's envs per core (perfmodel.costs); empty in fitted profiles.
    driver_chunk_step_s: the run's own orchestration per chunk step of an env group, outside every
        stage (the driver's calls to the inference and env processes and the hand-off between
        them), measured by ``executor profile``: ``lockstep`` and ``dynamic`` (dynamic batching's
        request queue and batcher thread); 0 when not measured (fitted profiles).
    obs_cpu_s: CPU seconds per env and chunk step of the policy's host-side work on the env
        worker's cores (turning one observation into the policy's inputs and its action chunk
        back), on top of the ``num_action_chunks`` env steps: it competes with env stepping for
        the cores, so it bounds a CPU-bound rollout as env stepping does. Fitted per backbone in
        the bundled profiles; 0 in measured ones (their driver and inference costs hold it).
    infer_latency_s: seconds of every inference request spent on the host path while the GPU is
        free (observations to the generator and actions back, collation, launches): part of
        ``infer_s``, which stays a lone call's whole time; the GPU is held for the rest. A
        lock-step group waits it in series with its call; under dynamic batching each group's
        request is in transit on its own while other groups' batches use the GPU
        (perfmodel.sim.workers.InferenceServer). The fixed per-call time of the bundled
        profiles; 0 in measured ones (the stand-ins' calls run on the measuring device itself).
    gpu_compute_per_sample_s: the architecture's GPU seconds per sample of ``infer_s`` and
        ``train_micro_batch_s`` on the profile's GPU, measured (full-scale stand-ins on a GPU,
        perfmodel.calibration.measured), where the curves' per-sample slopes are fitted: the
        part of each slope that is surely GPU compute. Carrying costs to another GPU type
        (perfmodel/gpu.py) scales the whole slope by default; scaling only this part brackets
        how much of the rest is GPU work (the interval includes both). Empty: not measured.
    infer_activation_gb_per_sample: GPU memory an inference call holds per sample of its batch
        beyond the weights (measured peak, full-scale stand-in); ``trained_parts.<part>.
        train_activation_gb_per_sample`` likewise for one training micro-batch (forward +
        backward, no activation checkpointing: RLinf's openpi configs do not support it). The
        GPU-memory check counts them (StageCosts.gpu_memory_gb); 0 / absent: not measured, not
        counted.
    channel_hop_s, sync_per_generator_s, ring_step_s, intake_per_sample_s: costs that grow with the cluster's workers
        or nodes (perfmodel.costs; docs/metrics.md "Between 32 and 256 GPUs"), each 0 (absent)
        unless a calibration alternative fitted it: seconds per message hop through RLinf's
        data channels, one process on node 0, for env workers off node 0 (``channel_hop_s``);
        seconds per generator of the actor's weight sync, served one after another
        (``sync_per_generator_s``); seconds per ring step of each actor collective
        (``ring_step_s``); seconds per trajectory sample that the node-0 channel hands to an
        actor rank off node 0, one after another (``intake_per_sample_s``).
    env_cpu_share: per mode, the share of their cores the env processes got in a run of that
        mode on the profiled host (``env_step``, ``env_reset``; 1.0: all of it): the rest went
        to the run's own driver, Ray and the generator and trainer actors on the same cores
        (the executor on a CPU host, where a "GPU" is a slot of its cores). Measured by
        ``executor profile --run-share`` from a short run of each mode; the env stages' wall
        time is divided by it (perfmodel.costs), their CPU seconds are not. Absent (fitted
        profiles, and modes not measured): 1.0, the envs have their cores whole.
    """

    env_step_core_s: float
    env_core_efficiency: float
    env_reset_s: float
    env_memory_gb: float
    infer_s: Curve
    train_micro_batch_s: Curve
    optimizer_step_s: float
    grad_allreduce_bytes: float
    weight_sync_bytes: float
    offload_s: float
    reload_s: float
    comm_latency_s: float = 0.0
    env_lockstep_slowdown: float = 0.0
    fsdp_gather_bytes: float = 0.0
    optimizer_fixed_s: float = 0.0
    weights_gb: float = 0.0
    trained_parts: dict = field(default_factory=dict)
    env_density: dict = field(default_factory=dict)
    driver_chunk_step_s: dict = field(default_factory=dict)
    obs_cpu_s: float = 0.0
    infer_latency_s: float = 0.0
    gpu_compute_per_sample_s: dict = field(default_factory=dict)
    infer_activation_gb_per_sample: float = 0.0
    channel_hop_s: float = 0.0
    sync_per_generator_s: float = 0.0
    ring_step_s: float = 0.0
    intake_per_sample_s: float = 0.0
    env_cpu_share: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, obj: Any, path: str) -> "Costs":
        f = Fields(obj, path)
        check_cost_bounds(obj, path)
        c = cls(
            env_step_core_s=f.float("env_step_core_s", min=0.0, strict_min=True),
            env_core_efficiency=f.float("env_core_efficiency", 1.0, min=0.0, max=1.0, strict_min=True),
            env_reset_s=f.float("env_reset_s"),
            env_memory_gb=f.float("env_memory_gb", min=0.0, strict_min=True),  # an env holds GBs: 0 would lift the RAM limit
            infer_s=Curve.from_dict(f.any("infer_s"), f.sub("infer_s")),
            train_micro_batch_s=Curve.from_dict(f.any("train_micro_batch_s"), f.sub("train_micro_batch_s")),
            optimizer_step_s=f.float("optimizer_step_s"),
            grad_allreduce_bytes=f.float("grad_allreduce_bytes"),
            weight_sync_bytes=f.float("weight_sync_bytes"),
            offload_s=f.float("offload_s"),
            reload_s=f.float("reload_s"),
            comm_latency_s=f.float("comm_latency_s", 0.0),
            env_lockstep_slowdown=f.float("env_lockstep_slowdown", 0.0),
            fsdp_gather_bytes=f.float("fsdp_gather_bytes", 0.0),
            optimizer_fixed_s=f.float("optimizer_fixed_s", 0.0),
            weights_gb=f.float("weights_gb", 0.0),
            trained_parts=_trained_parts(f.any("trained_parts", {}), f.sub("trained_parts")),
            env_density=_env_density(f.any("env_density", {}), f.sub("env_density")),
            driver_chunk_step_s=_driver_costs(f.any("driver_chunk_step_s", {}), f.sub("driver_chunk_step_s")),
            obs_cpu_s=f.float("obs_cpu_s", 0.0, min=0.0),
            infer_latency_s=f.float("infer_latency_s", 0.0, min=0.0),
            gpu_compute_per_sample_s=_gpu_compute(f.any("gpu_compute_per_sample_s", {}),
                                                  f.sub("gpu_compute_per_sample_s")),
            infer_activation_gb_per_sample=f.float("infer_activation_gb_per_sample", 0.0, min=0.0),
            channel_hop_s=f.float("channel_hop_s", 0.0, min=0.0),
            sync_per_generator_s=f.float("sync_per_generator_s", 0.0, min=0.0),
            ring_step_s=f.float("ring_step_s", 0.0, min=0.0),
            intake_per_sample_s=f.float("intake_per_sample_s", 0.0, min=0.0),
            env_cpu_share=_env_cpu_share(f.any("env_cpu_share", {}), f.sub("env_cpu_share")),
        )
        f.done()
        for name in ("infer_s", "train_micro_batch_s"):
            curve: Curve = getattr(c, name)
            if curve(1) <= 0:
                raise ConfigError(f"{path}.{name}", "must give a positive time at size 1")
        for stage, g in c.gpu_compute_per_sample_s.items():
            curve = getattr(c, stage)
            if curve.model != "linear" or g > curve.slope:
                raise ConfigError(f"{path}.gpu_compute_per_sample_s.{stage}",
                                  f"must be part of a linear {stage}'s slope ({curve.slope:g} s per sample); got {g:g}"
                                  + ("" if curve.model == "linear" else f" on a {curve.model} curve"))
        if c.infer_latency_s > c.infer_s(1):
            raise ConfigError(f"{path}.infer_latency_s", f"must be at most infer_s at batch 1 ({c.infer_s(1):g} s), "
                                                         f"the part of a call that is off the GPU; got {c.infer_latency_s:g}")
        return c

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            if k in ("env_density", "driver_chunk_step_s", "obs_cpu_s", "infer_latency_s",
                     "gpu_compute_per_sample_s", "infer_activation_gb_per_sample", *GROWTH_COSTS) and not v:
                continue  # absent in profiles that do not have them
            if k == "env_density":
                v = {kind: c.to_dict() for kind, c in v.items()}
            d[k] = v.to_dict() if isinstance(v, Curve) else v
        return d

    def env_scaled(self, step: float, reset: float) -> "Costs":
        """These costs with every env step cost x ``step`` and reset cost x ``reset`` (scalars and
        density curves alike; the host work on the env cores goes with the steps): for an
        uncertainty, or env processes that get a CPU share."""
        from dataclasses import replace

        dens = {k: c.scaled(reset if k == "reset" else step) for k, c in self.env_density.items()}
        return replace(self, env_step_core_s=self.env_step_core_s * step, env_reset_s=self.env_reset_s * reset,
                       env_density=dens, obs_cpu_s=self.obs_cpu_s * step)


DRIVER_KINDS = ("lockstep", "dynamic")
# Costs that grow with the cluster's workers or nodes (Costs docstring): absent = 0 = not modelled.
GROWTH_COSTS = ("channel_hop_s", "sync_per_generator_s", "ring_step_s", "intake_per_sample_s")


def _float_table(obj: Any, path: str, keys: tuple[str, ...]) -> dict[str, float]:
    """An object of optional non-negative numbers under ``keys`` (unknown keys refused)."""
    Fields(obj, path)  # must be an object
    for k in obj:
        if k not in keys:
            raise ConfigError(f"{path}.{k}", f"unknown field (allowed: {', '.join(keys)})")
    return {k: check_float(f"{path}.{k}", obj[k], min=0.0) for k in keys if k in obj}


ENV_SHARE_STAGES = ("env_step", "env_reset")


def _env_cpu_share(obj: Any, path: str) -> dict[str, dict[str, float]]:
    """{mode: {env_step, env_reset}}: shares in (0, 1] (Costs.env_cpu_share)."""
    from perfmodel.schema.modes import MODES

    Fields(obj, path)  # must be an object
    out = {}
    for mode, shares in obj.items():
        if mode not in MODES:
            raise ConfigError(f"{path}.{mode}", f"unknown mode (allowed: {', '.join(MODES)})")
        Fields(shares, f"{path}.{mode}")
        missing = [k for k in ENV_SHARE_STAGES if k not in shares]
        if missing or any(k not in ENV_SHARE_STAGES for k in shares):
            raise ConfigError(f"{path}.{mode}", f"must hold exactly {' and '.join(ENV_SHARE_STAGES)}; got "
                                                f"{', '.join(shares) or 'nothing'}")
        out[mode] = {k: check_float(f"{path}.{mode}.{k}", shares[k], min=0.0, max=1.0, strict_min=True)
                     for k in ENV_SHARE_STAGES}
    return out


def _driver_costs(obj: Any, path: str) -> dict[str, float]:
    return _float_table(obj, path, DRIVER_KINDS)


TRAINED_PART_KEYS = ("train_flops_scale", "trained_bytes_scale", "train_state_gb")


GPU_COMPUTE_STAGES = ("infer_s", "train_micro_batch_s")


def _gpu_compute(obj: Any, path: str) -> dict[str, float]:
    return _float_table(obj, path, GPU_COMPUTE_STAGES)


def _trained_parts(obj: Any, path: str) -> dict[str, dict[str, float]]:
    """{part: {train_flops_scale, trained_bytes_scale, train_state_gb}}: the training cost of
    each trainable part relative to the profile's own costs (empty: only what was measured)."""
    Fields(obj, path)
    out = {}
    for part, entry in obj.items():
        f = Fields(entry, f"{path}.{part}")
        out[part] = {k: f.float(k, min=0.0) for k in TRAINED_PART_KEYS}
        if "train_activation_gb_per_sample" in entry:  # measured (0 / absent: not counted)
            out[part]["train_activation_gb_per_sample"] = f.float("train_activation_gb_per_sample", min=0.0)
        f.done()
    return out


@dataclass(frozen=True)
class Variability:
    """Variability as coefficients of variation (std / mean) of each stage's time.

    ``env_step_cv``: one env's single step on one core (what ``executor profile`` measures); a
    lock-step group waits for its slowest core, whose expected cost follows from this spread
    (perfmodel.variability). ``infer_cv``, ``train_cv``: one inference call, one micro-batch.
    """

    env_step_cv: float = 0.0
    infer_cv: float = 0.0
    train_cv: float = 0.0

    @property
    def any(self) -> bool:
        return self.env_step_cv > 0 or self.infer_cv > 0 or self.train_cv > 0

    @classmethod
    def from_dict(cls, obj: Any, path: str) -> "Variability":
        f = Fields(obj, path)
        v = cls(
            env_step_cv=f.float("env_step_cv", 0.0, max=5.0),
            infer_cv=f.float("infer_cv", 0.0, max=5.0),
            train_cv=f.float("train_cv", 0.0, max=5.0),
        )
        f.done()
        return v


@dataclass(frozen=True)
class Uncertainty:
    """What a calibration did not pin down, stored in a fitted profile's ``provenance.uncertainty``
    so that ``predict`` gives an interval without refitting (perfmodel.calibration.uncertainty).

    ``parameters``: calibration parameter names (as in ``provenance.parameters``) whose joint
    uncertainty is ``log_covariance`` (covariance of their natural logs: Gauss-Newton from the
    fit's log-throughput residual Jacobian, with each parameter's bound range as a weak prior so
    that parameters the points cannot identify keep their plausible physical range).
    ``residual_sd_log``: scatter of log(predicted / published) at the calibrated points (model
    error a new point also carries). ``extrapolation_sd_log_per_doubling``: further model error per
    doubling of the GPU count beyond ``calibrated_gpus`` (from cross-validation, see its source).
    ``extrapolation_pair_sd_log_per_doubling``: the same for the ratio of two plans' predictions
    at one backbone and scale (what is common to both cancels); None where the cross-validation
    did not give it (a ratio then takes the two errors as independent).
    ``unidentified``: (name, low, high) of each parameter the calibrated points do not move
    (inter-node bandwidth from single-node points, say), with its bounds, its plausible physical
    range. It is kept out of ``log_covariance``: a linearised spread of a parameter over its
    whole range misstates it (the local derivative is not the change across the range), so a
    prediction brackets it instead, at both bounds.
    ``direction_ends``: for each principal direction of ``log_covariance``, the offsets of the log
    parameters (in ``parameters`` order) at its plus and its minus end: where, walking from the
    fit along the direction, the calibrated points' misfit has grown by z^2 residual variances
    (the 90 % profile likelihood; shorter at a bound). A prediction evaluates the plan there.
    Empty: the ends are z standard deviations of the covariance (its Gaussian approximation).
    """

    method: str
    coverage: float = 0.9
    parameters: tuple[str, ...] = ()
    log_covariance: tuple[tuple[float, ...], ...] = ()
    residual_sd_log: float = 0.0
    extrapolation_sd_log_per_doubling: float = 0.0
    extrapolation_source: str = ""
    calibrated_gpus: tuple[int, ...] = ()
    calibrated_nodes: tuple[int, ...] = ()
    extrapolation_pair_sd_log_per_doubling: float | None = None
    unidentified: tuple[tuple[str, float, float], ...] = ()
    direction_ends: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...] = ()

    @classmethod
    def from_dict(cls, obj: Any, path: str) -> "Uncertainty":
        f = Fields(obj, path)
        method = f.str("method")
        coverage = f.float("coverage", 0.9, min=0.0, max=1.0, strict_min=True)
        names = f.any("parameters", [])
        cov = f.any("log_covariance", [])
        resid = f.float("residual_sd_log", 0.0, min=0.0)
        per_doubling = f.float("extrapolation_sd_log_per_doubling", 0.0, min=0.0)
        source = f.str("extrapolation_source", "")
        gpus = f.any("calibrated_gpus", [])
        nodes = f.any("calibrated_nodes", [])
        pair = f.any("extrapolation_pair_sd_log_per_doubling", None)
        raw_unidentified = f.any("unidentified", [])
        raw_ends = f.any("direction_ends", [])
        f.done()
        if pair is not None:
            pair = check_float(f"{path}.extrapolation_pair_sd_log_per_doubling", pair, min=0.0)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"{path}.parameters", "must be a list of parameter names")
        unidentified = tuple(_unidentified(e, f"{path}.unidentified[{i}]")
                             for i, e in enumerate(check_list(f"{path}.unidentified", raw_unidentified)))
        if len({u[0] for u in unidentified}) != len(unidentified):
            raise ConfigError(f"{path}.unidentified", "must name each parameter once")
        ends = tuple(_direction_end(e, f"{path}.direction_ends[{i}]", len(names))
                     for i, e in enumerate(check_list(f"{path}.direction_ends", raw_ends)))
        if len(ends) > len(names):
            raise ConfigError(f"{path}.direction_ends", f"must have at most one entry per parameter ({len(names)})")
        if (not isinstance(cov, list) or len(cov) != len(names)
                or any(not isinstance(r, list) or len(r) != len(names) for r in cov)):
            raise ConfigError(f"{path}.log_covariance", f"must be a {len(names)} x {len(names)} matrix (one row per parameter)")
        rows = tuple(tuple(check_float(f"{path}.log_covariance[{i}][{j}]", v, min=None) for j, v in enumerate(r))
                     for i, r in enumerate(cov))
        if any(rows[i][i] < 0 or abs(rows[i][j] - rows[j][i]) > 1e-9 * (1 + abs(rows[i][j]))
               for i in range(len(rows)) for j in range(len(rows))):
            raise ConfigError(f"{path}.log_covariance", "must be symmetric with a non-negative diagonal")
        for key, vals in (("calibrated_gpus", gpus), ("calibrated_nodes", nodes)):
            if not isinstance(vals, list) or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in vals):
                raise ConfigError(f"{path}.{key}", "must be a list of integers >= 1")
        if {u[0] for u in unidentified} & set(names):
            raise ConfigError(f"{path}.unidentified", "must not repeat a parameter of the covariance")
        return cls(method, coverage, tuple(names), rows, resid, per_doubling, source,
                   tuple(sorted(set(gpus))), tuple(sorted(set(nodes))), pair, unidentified, ends)

    def lacking_values(self, parameters: Any) -> str | None:
        """Why ``parameters`` (a profile's ``provenance.parameters``: name -> {"value": number})
        cannot serve this uncertainty, or None: a prediction rebuilds the profile around every
        fitted value (in log space: each finite and > 0), and the covariance's and the bracketed
        parameters must be among them."""
        needed = list(self.parameters) + [n for n, _, _ in self.unidentified]
        if not needed:
            return None
        if not isinstance(parameters, dict):
            return "needs provenance.parameters (the fitted values its parameters refer to)"
        missing = [n for n in needed if n not in parameters]
        if missing:
            return f"names parameters without a fitted value in provenance.parameters: {', '.join(missing)}"
        for name, entry in parameters.items():
            value = entry.get("value") if isinstance(entry, dict) else None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                return f"needs provenance.parameters.{name}.value, a fitted value > 0; got {value!r}"
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "coverage": self.coverage, "parameters": list(self.parameters),
                "log_covariance": [list(r) for r in self.log_covariance],
                "residual_sd_log": self.residual_sd_log,
                "extrapolation_sd_log_per_doubling": self.extrapolation_sd_log_per_doubling,
                "extrapolation_source": self.extrapolation_source,
                "calibrated_gpus": list(self.calibrated_gpus), "calibrated_nodes": list(self.calibrated_nodes),
                **({"extrapolation_pair_sd_log_per_doubling": self.extrapolation_pair_sd_log_per_doubling}
                   if self.extrapolation_pair_sd_log_per_doubling is not None else {}),
                **({"unidentified": [{"name": n, "low": lo, "high": hi} for n, lo, hi in self.unidentified]}
                   if self.unidentified else {}),
                **({"direction_ends": [{"plus": list(p), "minus": list(m)} for p, m in self.direction_ends]}
                   if self.direction_ends else {})}


MAX_LOG_OFFSET = 20.0  # a direction end beyond e^20 of a fitted value is no calibration's


def _direction_end(obj: Any, path: str, n: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """One ``Uncertainty.direction_ends`` entry: {"plus", "minus"}, each ``n`` log offsets."""
    f = Fields(obj, path)
    sides = []
    for side in ("plus", "minus"):
        v = check_list(f"{path}.{side}", f.any(side))
        if len(v) != n:
            raise ConfigError(f"{path}.{side}", f"must have {n} log offsets, one per parameter")
        sides.append(tuple(check_float(f"{path}.{side}[{i}]", x, min=-MAX_LOG_OFFSET, max=MAX_LOG_OFFSET)
                           for i, x in enumerate(v)))
    f.done()
    return sides[0], sides[1]


def _unidentified(obj: Any, path: str) -> tuple[str, float, float]:
    """One ``Uncertainty.unidentified`` entry: {"name", "low", "high"}, 0 < low <= high."""
    f = Fields(obj, path)
    name = f.str("name")
    low = f.float("low", min=0.0, strict_min=True)
    high = f.float("high", min=low)
    f.done()
    return name, low, high


@dataclass(frozen=True)
class Profile:
    """Costs of one backbone on one kind of node, with provenance and assumptions.

    ``node`` is the hardware the costs belong to (gpus_per_node, cpu_cores_per_node,
    node_ram_gb, intra/inter-node bandwidth): a plan's cluster defaults to it.
    ``envs_per_gpu`` sets the default workload's env count: total_num_envs = envs_per_gpu * gpus
    (the assumption that the env count grows with the cluster; recorded in ``assumptions``).
    """

    name: str
    backbone: str
    costs: Costs
    node: dict[str, Any]
    provenance: dict[str, Any]
    assumptions: dict[str, Any] = field(default_factory=dict)
    variability: Variability = Variability()
    default_workload: dict[str, Any] = field(default_factory=dict)
    envs_per_gpu: int = 48
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def backbone_uncalibrated(self) -> bool:
        """No published point calibrates this profile's backbone: its per-backbone parameters are
        bracketed over the calibrated backbones' (perfmodel.calibration.uncalibrated marks it so)."""
        return self.provenance.get("backbone_calibrated") is False

    @classmethod
    def from_dict(cls, obj: Any, path: str = "profile") -> "Profile":
        f = Fields(obj, path)
        version = f.int("schema_version")
        if version != SCHEMA_VERSION:
            raise ConfigError(f.sub("schema_version"), f"must be {SCHEMA_VERSION}, got {version}")
        name = f.str("name")
        if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):  # printed: a newline would forge a line
            raise ConfigError(f.sub("name"), f"must be a name without control characters, got {name!r}")
        backbone = f.str("backbone")
        costs = Costs.from_dict(f.any("costs"), f.sub("costs"))
        node = f.any("node")
        Fields(node, f.sub("node"))  # must be an object; its fields are checked as a Cluster
        prov = f.any("provenance")
        pf = Fields(prov, f.sub("provenance"))
        pf.str("kind", choices=PROVENANCE_KINDS)
        for required in ("date", "method"):
            pf.str(required)
        if "uncertainty" in prov:
            unc_path = f"{f.sub('provenance')}.uncertainty"
            reason = Uncertainty.from_dict(prov["uncertainty"], unc_path).lacking_values(prov.get("parameters"))
            if reason:
                raise ConfigError(unc_path, reason)
        assumptions = f.any("assumptions", {})
        Fields(assumptions, f.sub("assumptions"))
        variability = Variability.from_dict(f.any("variability", {}), f.sub("variability"))
        workload = f.any("default_workload", {})
        Fields(workload, f.sub("default_workload"))
        envs_per_gpu = f.int("envs_per_gpu", 48)
        extra = f.any("extra", {})
        Fields(extra, f.sub("extra"))
        f.done()
        return cls(name, backbone, costs, dict(node), dict(prov), dict(assumptions), variability,
                   dict(workload), envs_per_gpu, dict(extra))

    @property
    def uncertainty(self) -> "Uncertainty | None":
        """The calibration's stored uncertainty (``provenance.uncertainty``), if any."""
        raw = self.provenance.get("uncertainty")
        return None if raw is None else Uncertainty.from_dict(raw, "profile.provenance.uncertainty")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "backbone": self.backbone,
            "provenance": self.provenance,
            "assumptions": self.assumptions,
            "node": self.node,
            "envs_per_gpu": self.envs_per_gpu,
            "default_workload": self.default_workload,
            "costs": self.costs.to_dict(),
            "variability": self.variability.__dict__.copy(),
            "extra": self.extra,
        }

    def save(self, path: str | Path) -> None:
        write_json_atomic(path, self.to_dict())


def bundled_profiles() -> list[str]:
    return sorted(p.stem for p in BUNDLED_DIR.glob("*.json"))


def user_profiles() -> list[str]:
    d = user_profile_dir_if_any()
    return sorted(p.stem for p in d.glob("*.json")) if d is not None and d.is_dir() else []


def load_profile(name_or_path: str, what: str = "profile") -> Profile:
    """A profile by name (the user's profile directory first, then the bundled ones) or a
    profile file by path; errors name ``what`` (the option or key that gave it)."""
    p = Path(name_or_path)
    # A name (no .json, no '/') is looked up by name first: a file or folder ``pi05`` in the
    # working directory does not shadow the bundled profile.
    if p.suffix != ".json" and (os.sep not in name_or_path or not p.exists()):
        for d in (user_profile_dir_if_any(), BUNDLED_DIR):
            candidate = d / f"{name_or_path}.json" if d is not None else None
            if candidate is not None and candidate.is_file():
                p = candidate
                break
        else:
            if p.is_file():
                return Profile.from_dict(load_json(p, what), what)
            mine = user_profiles()
            raise ConfigError(what, f"no bundled profile {name_or_path!r} (bundled: {', '.join(bundled_profiles())}"
                              + (f"; yours in {user_profile_dir_if_any()}: {', '.join(mine)}" if mine else "")
                              + ") and no such file")
    return Profile.from_dict(load_json(p, what), what)
