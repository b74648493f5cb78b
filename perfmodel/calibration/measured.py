"""Measured GPU seconds of the stand-in policies (``profiles/<backbone>_full_gpu.json``, written by
``benchmarks/profile_gpu.sh`` on a GPU) as the calibration reads them: the marginal seconds per
sample at the largest measured sizes (where a stage is compute-bound; the small sizes are
launch-bound and belong to the fixed part), carried from the measuring GPU to the calibrated one
by the datasheets' bf16 ratio (perfmodel.schema.hardware)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.hardware import DEFAULT_GPU, GPU_NAMES, scale_factors
from perfmodel.schema.profile import BUNDLED_DIR, Costs, Curve, Profile, load_profile

STAGES = ("infer_s", "train_micro_batch_s")
PUBLISHED_TRAINED_PART = "action_expert"  # what the fitted training slopes describe (calibrate.py)


def _growth(pts: list[tuple[float, float]], where: str, quantity: str) -> float:
    """Per-sample growth of ``quantity`` between the two largest sizes of [(size, value), ...]."""
    pts = sorted(pts)
    if len(pts) < 2:
        raise ConfigError(where, f"needs {quantity} measured at two sizes or more")
    (x0, y0), (x1, y1) = pts[-2], pts[-1]
    if y1 <= y0:
        raise ConfigError(where, f"{quantity} does not grow from size {x0:g} to {x1:g} ({y0:.4g}, {y1:.4g}): "
                                 "measure larger sizes or more repeats")
    return (y1 - y0) / (x1 - x0)


def marginal_per_sample_s(curve: Curve, where: str = "samples") -> float:
    """Seconds per extra sample between the two largest measured sizes (medians of the raw
    samples); ``where`` names the curve in errors."""
    if len(curve.samples) < 2:
        raise ConfigError(where, "a measured curve needs raw samples at two sizes or more")
    return _growth([(x, _median(ys)) for x, ys in curve.samples], where, "time")


def _median(values: list[float]) -> float:
    """statistics.median's result, without importing statistics (fractions, decimal: ~2.5 ms of
    a prediction's start, which builds its interval's profiles from these curves)."""
    s = sorted(values)
    if not s:
        raise ValueError("no median for empty data")
    i = len(s) // 2
    return s[i] if len(s) % 2 else (s[i - 1] + s[i]) / 2


def measured_gpu_profile_path(backbone: str, trained_part: str = PUBLISHED_TRAINED_PART) -> Path:
    """``<backbone>_full_gpu.json`` (the published part), ``<backbone>_full_gpu_trained_full.json``."""
    suffix = "" if trained_part == PUBLISHED_TRAINED_PART else f"_trained_{trained_part}"
    return BUNDLED_DIR / f"{backbone}_full_gpu{suffix}.json"


def _checked(backbone: str, trained_part: str = PUBLISHED_TRAINED_PART) -> tuple[Path, Profile]:
    """The bundled measured GPU profile of ``backbone`` training ``trained_part``, refused in one
    line naming the file and field unless it is a full-scale measurement of that part on a GPU
    of the table."""
    path = measured_gpu_profile_path(backbone, trained_part)
    prof = load_profile(str(path), what="measured GPU profile")
    for key, ok, want in (("provenance.kind", prof.provenance.get("kind") == "measured", "measured"),
                          ("provenance.scale", prof.provenance.get("scale") == "full", "full"),
                          ("node.gpu", prof.node.get("gpu") in GPU_NAMES, f"one of {', '.join(GPU_NAMES)}"),
                          ("costs.trained_parts", set(prof.costs.trained_parts) == {trained_part},
                           f"only {trained_part} (the part its file name says)")):
        if not ok:
            raise ConfigError(f"{path.name}: {key}", f"must be {want} for the calibration to read it")
    return path, prof


@functools.lru_cache(maxsize=None)  # bundled files, read once: a fit builds profiles thousands of times
def gpu_seconds_per_sample(backbone: str, stage: str, gpu: str = DEFAULT_GPU) -> float:
    """The full-scale stand-in's measured GPU seconds per sample of ``stage`` (``infer_s`` or
    ``train_micro_batch_s``), carried to ``gpu`` (compute-bound: by peak bf16 FLOP/s)."""
    if stage not in STAGES:
        raise ConfigError("stage", f"must be one of {', '.join(STAGES)}; got {stage!r}")
    path, prof = _checked(backbone)
    return _seconds_per_sample(path, prof, stage, gpu)


def _seconds_per_sample(path: Path, prof: Profile, stage: str, gpu: str) -> float:
    curve = marginal_per_sample_s(getattr(prof.costs, stage), f"{path.name}: costs.{stage}.samples")
    return curve * scale_factors(str(prof.node["gpu"]), gpu).compute_time


@dataclass(frozen=True)
class MeasuredGpu:
    """What a calibrated profile takes from the measured GPU profiles (empty: none measured):
    ``Costs.gpu_compute_per_sample_s``, ``Costs.infer_activation_gb_per_sample`` and each trained
    part's ``train_activation_gb_per_sample``."""

    compute_s: dict[str, float] = field(default_factory=dict)
    infer_activation_gb: float = 0.0
    train_activation_gb: dict[str, float] = field(default_factory=dict)


def _peak_growth(path: Path, prof: Profile, stage: str) -> float:
    where = f"{path.name}: extra.peak_memory_gb.{stage}"
    return _growth([(float(x), float(y)) for x, y in prof.extra["peak_memory_gb"][stage]], where, "peak memory")


@functools.lru_cache(maxsize=None)  # as gpu_seconds_per_sample
def measured_gpu(backbone: str, gpu: str = DEFAULT_GPU) -> MeasuredGpu:
    """The bundled measurements of ``backbone`` for a profile on ``gpu``: compute per sample (the
    published part's file), activation memory per sample (the growth of the measured peak between
    the two largest sizes, ``extra.peak_memory_gb``; of every part measured)."""
    if not measured_gpu_profile_path(backbone).exists():
        return MeasuredGpu()
    path, prof = _checked(backbone)
    train = {PUBLISHED_TRAINED_PART: _peak_growth(path, prof, "train_micro_batch")}
    if measured_gpu_profile_path(backbone, "full").exists():
        full_path, full = _checked(backbone, "full")
        train["full"] = _peak_growth(full_path, full, "train_micro_batch")
    # from the file read above (gpu_seconds_per_sample would read and check it again per stage)
    return MeasuredGpu({stage: _seconds_per_sample(path, prof, stage, gpu) for stage in STAGES},
                       _peak_growth(path, prof, "infer"), train)


def measured_of(costs: Costs) -> MeasuredGpu:
    """What a profile's costs hold of the measurements (to rebuild it as it was measured)."""
    return MeasuredGpu(dict(costs.gpu_compute_per_sample_s), costs.infer_activation_gb_per_sample,
                       {part: e["train_activation_gb_per_sample"] for part, e in costs.trained_parts.items()
                        if "train_activation_gb_per_sample" in e})
