"""Per-stage time distributions: what a barrier costs when the slowest of n draws sets the pace.

A lock-step env group (RLinf's vectorised env stepped once per action chunk) returns its chunk
step only when every env of the group has finished it, so the group pays the *expected maximum*
of its envs' chunk times, not their mean. Dynamic batching (rollout_async, streamer) lets each
env go on by itself: it pays the mean. The difference grows with the envs per group and with the
spread of one env's step time.

Model: one env step takes a lognormal time of coefficient of variation ``step_cv`` (the measured
CPU profiles give it: ``variability.env_step_cv``, the spread of one env's step on one core). A
chunk of k steps on a core that runs e envs one after another sums k*e independent steps, so the
core's chunk time has cv = step_cv / sqrt(k e) (lognormal again, by moment matching); a lock-step
group on m cores waits for the slowest of m such cores. Its expected maximum over the mean is the
lognormal order statistic E[max of m] / mean, computed by quadrature (exact for the lognormal,
to 1e-9), or from raw samples by the empirical order-statistic formula.
"""

from __future__ import annotations

import math
from functools import lru_cache

# numpy is imported only when a spread is non-zero: a deterministic prediction starts faster.


@lru_cache(maxsize=1)
def _grid():
    import numpy as np

    z = np.linspace(-9.0, 9.0, 6001)  # quadrature grid for the standard normal
    phi = np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in z]))
    return z, phi, cdf


@lru_cache(maxsize=4096)
def expected_max_factor(m: int, cv: float) -> float:
    """E[max of m iid lognormal draws] / their mean, for coefficient of variation ``cv``:
    1 for m = 1 or cv = 0, growing like 1 + cv * sqrt(2 ln m) for small cv."""
    if m <= 1 or cv <= 0:
        return 1.0
    import numpy as np

    z, phi, cdf = _grid()
    sigma = math.sqrt(math.log1p(cv * cv))
    # density of the maximum's z: m Phi(z)^(m-1) phi(z); a draw over its mean is exp(sigma z - sigma^2/2)
    dens = m * np.power(cdf, m - 1) * phi
    return float(np.trapezoid(np.exp(sigma * z - 0.5 * sigma * sigma) * dens, z))


def empirical_expected_max_factor(samples: list[float] | tuple[float, ...], m: int) -> float:
    """E[max of m draws with replacement from ``samples``] / their mean (exact for the empirical
    distribution: sum over order statistics x_(i) ((i/N)^m - ((i-1)/N)^m))."""
    xs = sorted(float(x) for x in samples)
    n = len(xs)
    if n == 0 or m <= 1:
        return 1.0
    total = sum(x * ((i / n) ** m - ((i - 1) / n) ** m) for i, x in enumerate(xs, start=1))
    return total / (sum(xs) / n)


def lockstep_barrier_factor(n_envs: int, cores: float, steps_per_chunk: int, step_cv: float) -> float:
    """Expected chunk time of a lock-step group of ``n_envs`` envs on ``cores`` cores over the
    time of the same work running free (mean): the slowest core sets the pace."""
    if n_envs <= 1 or step_cv <= 0:
        return 1.0
    lanes = max(1, min(n_envs, int(math.floor(cores + 1e-9))))
    per_lane = n_envs / lanes
    return expected_max_factor(lanes, round(step_cv / math.sqrt(max(1, steps_per_chunk) * per_lane), 12))


def group_mean_cv(step_cv: float, n_envs: int, steps: int) -> float:
    """Coefficient of variation of the mean over a group's ``n_envs`` envs of ``steps`` steps each
    (what one simulated group event stands for when its envs go on by themselves)."""
    if step_cv <= 0:
        return 0.0
    return step_cv / math.sqrt(max(1, n_envs) * max(1, steps))
