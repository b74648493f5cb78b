"""Stage durations drawn by the simulator: the cost model's mean, with variability.

The simulator asks this one object for every duration, so a change to how durations vary
(per-stage distributions, lock-step barriers waiting for the slowest env) lives here and not in
the worker processes (perfmodel.sim.workers).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from perfmodel.costs import StageCosts
from perfmodel.variability import group_mean_cv

if TYPE_CHECKING:  # numpy only when costs vary (a plain prediction starts faster without it)
    import numpy as np


class Durations:
    """Stage durations: the cost model's mean, times a lognormal factor when the profile has
    variability (mean-preserving, so deterministic runs are the cv = 0 special case)."""

    def __init__(self, costs: StageCosts, rng: np.random.Generator | None) -> None:
        self.costs = costs
        self.var = costs.profile.variability
        self.rng = rng
        if rng is None:  # deterministic: each duration is its mean, computed once per argument
            self.env_chunk = _memo(self.env_chunk)  # type: ignore[method-assign]
            self.env_reset = _memo(self.env_reset)  # type: ignore[method-assign]
            self.infer_gpu = _memo(self.infer_gpu)  # type: ignore[method-assign]
            self.micro_batch = _memo(self.micro_batch)  # type: ignore[method-assign]

    def _noisy(self, mean: float, cv: float) -> float:
        if cv <= 0 or self.rng is None or mean <= 0:
            return mean
        sigma2 = math.log1p(cv * cv)
        return mean * float(self.rng.lognormal(-sigma2 / 2, math.sqrt(sigma2)))

    # ``env_step_cv`` is the spread of one env's single step (as the CPU profiles measure it). A
    # group event stands for n envs x k steps, so its own time varies far less (the mean's cv);
    # the lock-step barrier's expected cost is already in the mean (StageCosts.env_chunk_s).
    def env_chunk(self, n: int, lockstep: bool) -> float:
        k = self.costs.plan.workload.num_action_chunks
        return self._noisy(self.costs.env_chunk_s(n, lockstep), group_mean_cv(self.var.env_step_cv, n, k))

    def env_reset(self, n: int) -> float:
        return self._noisy(self.costs.env_reset_s(n), group_mean_cv(self.var.env_step_cv, n, 1))

    def infer_gpu(self, batch: int) -> float:
        """The GPU part of a call; ``infer_cv`` is its spread (the host-path latency is the mean)."""
        return self._noisy(self.costs.infer_gpu_s(batch), self.var.infer_cv)

    def infer_latency(self) -> float:
        """The host-path part of every call (off the GPU; Costs.infer_latency_s)."""
        return self.costs.infer_latency_s

    def micro_batch(self, samples: int) -> float:
        return self._noisy(self.costs.micro_batch_s(samples), self.var.train_cv)


def _memo(f):
    """``f`` remembering its results by argument (the same float, looked up instead of recomputed)."""
    cache: dict = {}

    def get(*args):
        v = cache.get(args)
        if v is None:
            v = cache[args] = f(*args)
        return v

    return get
