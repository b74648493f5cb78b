"""Measured GPU seconds of the stand-in policies (``profiles/<backbone>_full_gpu.json``, written by
``benchmarks/profile_gpu.sh`` on a GPU) as the calibration reads them: the marginal seconds per
sample at the largest measured sizes (where a stage is compute-bound; the small sizes are
launch-bound and belong to the fixed part), carried from the measuring GPU to the calibrated one
by the datasheets' bf16 ratio (perfmodel.schema.hardware)."""

from __future__ import annotations

import functools
import statistics
from pathlib import Path

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.hardware import DEFAULT_GPU, GPU_NAMES, scale_factors
from perfmodel.schema.profile import BUNDLED_DIR, Curve, load_profile

STAGES = ("infer_s", "train_micro_batch_s")
PUBLISHED_TRAINED_PART = "action_expert"  # what the fitted training slopes describe (calibrate.py)


def marginal_per_sample_s(curve: Curve, where: str = "samples") -> float:
    """Seconds per extra sample between the two largest measured sizes (medians of the raw
    samples); ``where`` names the curve in errors."""
    pts = sorted((x, statistics.median(ys)) for x, ys in curve.samples)
    if len(pts) < 2:
        raise ConfigError(where, "a measured curve needs raw samples at two sizes or more")
    (x0, y0), (x1, y1) = pts[-2], pts[-1]
    if y1 <= y0:
        raise ConfigError(where, f"time does not grow from size {x0:g} to {x1:g} ({y0:.4g} s, {y1:.4g} s): "
                                 "measure larger sizes or more repeats")
    return (y1 - y0) / (x1 - x0)


def measured_gpu_profile_path(backbone: str) -> Path:
    return BUNDLED_DIR / f"{backbone}_full_gpu.json"


@functools.lru_cache(maxsize=None)  # bundled files, read once: a fit builds profiles thousands of times
def gpu_seconds_per_sample(backbone: str, stage: str, gpu: str = DEFAULT_GPU) -> float:
    """The full-scale stand-in's measured GPU seconds per sample of ``stage`` (``infer_s`` or
    ``train_micro_batch_s``), carried to ``gpu`` (compute-bound: by peak bf16 FLOP/s)."""
    if stage not in STAGES:
        raise ConfigError("stage", f"must be one of {', '.join(STAGES)}; got {stage!r}")
    path = measured_gpu_profile_path(backbone)
    prof = load_profile(str(path), what="measured GPU profile")
    for field, ok, want in (("provenance.kind", prof.provenance.get("kind") == "measured", "measured"),
                            ("provenance.scale", prof.provenance.get("scale") == "full", "full"),
                            ("node.gpu", prof.node.get("gpu") in GPU_NAMES, f"one of {', '.join(GPU_NAMES)}"),
                            ("costs.trained_parts", set(prof.costs.trained_parts) == {PUBLISHED_TRAINED_PART},
                             f"only {PUBLISHED_TRAINED_PART} (the published trained part the fit describes)")):
        if not ok:
            raise ConfigError(f"{path.name}: {field}", f"must be {want} for the calibration to read it")
    curve = marginal_per_sample_s(getattr(prof.costs, stage), f"{path.name}: costs.{stage}.samples")
    return curve * scale_factors(str(prof.node["gpu"]), gpu).compute_time


def measured_gpu_compute(backbone: str, gpu: str = DEFAULT_GPU) -> dict[str, float]:
    """``Costs.gpu_compute_per_sample_s`` for ``backbone`` on ``gpu``: each stage's measured GPU
    seconds per sample, or {} when no measured GPU profile of the backbone is bundled."""
    if not measured_gpu_profile_path(backbone).exists():
        return {}
    return {stage: gpu_seconds_per_sample(backbone, stage, gpu) for stage in STAGES}


def _marginal_points(points: list, where: str) -> float:
    """Per-sample growth between the two largest sizes of [[size, value], ...]."""
    pts = sorted((float(x), float(y)) for x, y in points)
    if len(pts) < 2 or pts[-1][1] <= pts[-2][1]:
        raise ConfigError(where, "needs values at two sizes or more that grow with the size")
    (x0, y0), (x1, y1) = pts[-2], pts[-1]
    return (y1 - y0) / (x1 - x0)


@functools.lru_cache(maxsize=None)  # as gpu_seconds_per_sample; callers copy the dict
def measured_activation_gb(backbone: str) -> tuple[float, dict[str, float]]:
    """(inference GB per sample of a call, {trained part: training GB per micro-batch sample}):
    the growth of the measured peak GPU memory between the two largest sizes
    (``extra.peak_memory_gb``) of ``<backbone>_full_gpu.json`` (the published trained part) and,
    where measured, ``<backbone>_full_gpu_trained_full.json``. (0, {}) when none is bundled."""
    if not measured_gpu_profile_path(backbone).exists():
        return 0.0, {}
    gpu_seconds_per_sample(backbone, "infer_s")  # the same checks of what the file measured
    path = measured_gpu_profile_path(backbone)
    peaks = load_profile(str(path), what="measured GPU profile").extra["peak_memory_gb"]
    infer = _marginal_points(peaks["infer"], f"{path.name}: extra.peak_memory_gb.infer")
    train = {PUBLISHED_TRAINED_PART: _marginal_points(peaks["train_micro_batch"],
                                                      f"{path.name}: extra.peak_memory_gb.train_micro_batch")}
    full = BUNDLED_DIR / f"{backbone}_full_gpu_trained_full.json"
    if full.exists():
        prof = load_profile(str(full), what="measured GPU profile")
        if set(prof.costs.trained_parts) != {"full"}:
            raise ConfigError(f"{full.name}: costs.trained_parts", "must be only full")
        train["full"] = _marginal_points(prof.extra["peak_memory_gb"]["train_micro_batch"],
                                         f"{full.name}: extra.peak_memory_gb.train_micro_batch")
    return infer, train
