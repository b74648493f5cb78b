"""A host-speed probe before ``executor run --compare``: how fast this machine steps and resets
LIBERO envs now, against the profile the prediction is made from.

A shared host's speed drifts (other tenants of the physical machine; up to 30 % within the hour on
the 2-core development machines) and a profile may come from another host: a prediction made from
the profile alone cannot say whether a miss is the model's or the machine's. The probe steps,
before anything of the run starts, the plan's envs per core on one core (real LIBERO scenes,
stepped as the run steps its own: rendered unless the run is not; at most ``PROBE_MAX_ENVS``), for
a few chunks and one reset, in CPU seconds (not counting time other processes took from the core),
and divides by the profile's CPU seconds at the same density (``StageCosts.env_cost``). The
prediction the run is judged by is made with the profile's env costs scaled by those ratios
(``Costs.env_scaled``), and the unscaled one is kept beside it.

What it does not see: contention between cores (the probe uses one), and what the run's own
driver, Ray and actors take from the env cores (the record's ``env_cpu.*.cpu_share``).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any

from perfmodel.schema.plan import Plan

PROBE_MAX_ENVS = 4  # envs on the probe's core: enough for the densities runs here use, ~2 GB each
PROBE_CHUNKS = 3  # measured chunk steps after one warm-up chunk
PROBE_RESETS = 1  # measured resets of every probe env after one warm-up reset (the first is cold)


@dataclass(frozen=True)
class HostProbe:
    """What the probe measured (raw samples kept) and its ratio to the profile."""

    envs: int  # envs stepped together on one core
    density: float  # the plan's envs per core, which the probe stands for
    core: int | None
    step_cpu_s: list[float]  # one per env step (CPU seconds)
    reset_cpu_s: list[float]  # one per env reset
    profile_step_cpu_s: float  # the profile's CPU seconds per step at the plan's density
    profile_reset_cpu_s: float
    wall_s: float  # the probe's own duration, env creation included
    loadavg_1min: float
    env_not_as_rlinf: tuple[str, ...] = ()  # the run's flags the probe's envs stepped under too

    @property
    def ratio(self) -> dict[str, float]:
        """This host now over the profile, per env stage (1.0: as measured in the profile)."""
        return {"env_step": statistics.fmean(self.step_cpu_s) / self.profile_step_cpu_s,
                "env_reset": (statistics.fmean(self.reset_cpu_s) / self.profile_reset_cpu_s
                              if self.profile_reset_cpu_s > 0 else 1.0)}

    def to_dict(self) -> dict[str, Any]:
        return {"envs": self.envs, "density_envs_per_core": self.density, "core": self.core,
                "step_cpu_s_mean": statistics.fmean(self.step_cpu_s),
                "reset_cpu_s_mean": statistics.fmean(self.reset_cpu_s),
                "profile_step_cpu_s": self.profile_step_cpu_s, "profile_reset_cpu_s": self.profile_reset_cpu_s,
                "ratio": self.ratio, "wall_s": self.wall_s, "loadavg_1min": self.loadavg_1min,
                "samples": {"step_cpu_s": self.step_cpu_s, "reset_cpu_s": self.reset_cpu_s},
                "method": f"{self.envs} LIBERO env(s) in lock-step on core {self.core}"
                          f"{' (' + ' '.join(self.env_not_as_rlinf) + ')' if self.env_not_as_rlinf else ', rendered'}: "
                          f"{PROBE_CHUNKS} chunk steps and {PROBE_RESETS} reset(s) each after one warm-up "
                          "of each, CPU seconds per env step and per reset over the profile's at the plan's "
                          "envs per core (StageCosts.env_cost)"}


def profile_env_costs_at_density(plan: Plan, profile: Any) -> tuple[float, float, float]:
    """(envs per core, CPU s per lock-step env step, CPU s per reset) the profile gives the plan."""
    from perfmodel.costs import StageCosts

    sc = StageCosts(plan, profile)
    return sc.env_density, sc.env_cost("step_lockstep")[0], sc.env_cost("reset")[0]


def probe_host(plan: Plan, profile: Any, opts: Any) -> HostProbe:
    """Measure this host's env costs now at the plan's density (see the module's docstring)."""
    from executor.envs import ACTION_DIM, EnvConfig, EnvProcessGroup

    import numpy as np

    density, prof_step, prof_reset = profile_env_costs_at_density(plan, profile)
    n = max(1, min(PROBE_MAX_ENVS, round(density)))
    chunk = plan.workload.num_action_chunks
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    core = cores[-1] if cores else None  # one core of this process's set (the driver starts on the first)
    cfg = EnvConfig(suite=opts.suite, image_size=opts.image_size, num_action_chunks=chunk,
                    max_episode_steps=chunk * (PROBE_CHUNKS + 2), hard_reset=opts.hard_reset, seed=opts.seed,
                    settle_steps=opts.settle_steps, render=opts.render)  # the run's envs, as the run steps them
    rng = np.random.default_rng(0)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    steps: list[float] = []
    resets: list[float] = []
    with EnvProcessGroup(cfg, num_envs=n, cores=(core,) if core is not None else None, render_threads=1) as group:
        group.reset()  # warm-up: the first reset of a process is cold
        for _ in range(PROBE_RESETS):
            resets.extend(float(x) for x in group.reset()["reset_cpu_s"])
        group.chunk_step(rng.uniform(-1, 1, (n, chunk, ACTION_DIM)))  # warm-up
        for _ in range(PROBE_CHUNKS):
            res = group.chunk_step(rng.uniform(-1, 1, (n, chunk, ACTION_DIM)))
            steps.extend(float(x) for x in np.asarray(res["step_cpu_s"]).ravel())
    from executor.runtime.modes import env_not_as_rlinf

    return HostProbe(envs=n, density=density, core=core, step_cpu_s=steps, reset_cpu_s=resets,
                     env_not_as_rlinf=tuple(env_not_as_rlinf(opts)),
                     profile_step_cpu_s=prof_step, profile_reset_cpu_s=prof_reset,
                     wall_s=time.perf_counter() - t0, loadavg_1min=load)


def scaled_profile(profile: Any, probe: HostProbe) -> Any:
    """The profile with its env costs scaled to this host now (the probe's ratios)."""
    r = probe.ratio
    return replace(profile, costs=profile.costs.env_scaled(r["env_step"], r["env_reset"]))


def this_host() -> dict[str, Any]:
    """CPU model and cores of this machine, as ``executor profile`` records them."""
    from executor.profiling.host import cpu_model

    return {"cpu_model": cpu_model(), "cpu_cores": os.cpu_count()}


def other_host(profile: Any, backbone: str, scale: str) -> str | None:
    """A warning when the profile was measured on another host (CPU model or cores differ), with
    the command that measures it here; None when they match or the profile does not say."""
    hw = profile.provenance.get("hardware") if isinstance(profile.provenance, dict) else None
    if not isinstance(hw, dict) or not hw.get("cpu_model"):
        return None
    here = this_host()
    theirs = {"cpu_model": hw.get("cpu_model"), "cpu_cores": hw.get("cpu_cores")}
    if theirs == here:
        return None
    return (f"the profile {profile.name} was measured on another host ({theirs['cpu_model']}, "
            f"{theirs['cpu_cores']} cores; this one: {here['cpu_model'] or '?'}, {here['cpu_cores']} cores): "
            f"measure it here with `executor profile --backbone {backbone} --scale {scale} --out FILE` "
            "and pass --profile FILE (the probe's ratio shows how far apart the hosts are now)")
