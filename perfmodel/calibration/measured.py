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
from perfmodel.schema.hardware import DEFAULT_GPU, scale_factors
from perfmodel.schema.profile import BUNDLED_DIR, Curve, load_profile

STAGES = ("infer_s", "train_micro_batch_s")


def marginal_per_sample_s(curve: Curve) -> float:
    """Seconds per extra sample between the two largest measured sizes (medians of the raw samples)."""
    pts = sorted((x, statistics.median(ys)) for x, ys in curve.samples)
    if len(pts) < 2:
        raise ConfigError("samples", "a measured curve needs raw samples at two sizes or more")
    (x0, y0), (x1, y1) = pts[-2], pts[-1]
    return max(0.0, (y1 - y0) / (x1 - x0))


def measured_gpu_profile_path(backbone: str) -> Path:
    return BUNDLED_DIR / f"{backbone}_full_gpu.json"


@functools.lru_cache(maxsize=None)  # bundled files, read once: a fit builds profiles thousands of times
def gpu_seconds_per_sample(backbone: str, stage: str, gpu: str = DEFAULT_GPU) -> float:
    """The full-scale stand-in's measured GPU seconds per sample of ``stage`` (``infer_s`` or
    ``train_micro_batch_s``), carried to ``gpu`` (compute-bound: by peak bf16 FLOP/s)."""
    if stage not in STAGES:
        raise ConfigError("stage", f"must be one of {', '.join(STAGES)}; got {stage!r}")
    prof = load_profile(str(measured_gpu_profile_path(backbone)), what="measured GPU profile")
    src = str(prof.node.get("gpu", DEFAULT_GPU))
    return marginal_per_sample_s(getattr(prof.costs, stage)) * scale_factors(src, gpu).compute_time


def measured_gpu_compute(backbone: str, gpu: str = DEFAULT_GPU) -> dict[str, float]:
    """``Costs.gpu_compute_per_sample_s`` for ``backbone`` on ``gpu``: each stage's measured GPU
    seconds per sample, or {} when no measured GPU profile of the backbone is bundled."""
    if not measured_gpu_profile_path(backbone).exists():
        return {}
    return {stage: gpu_seconds_per_sample(backbone, stage, gpu) for stage in STAGES}
