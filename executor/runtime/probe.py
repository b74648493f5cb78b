"""A host-speed probe before ``executor run --compare``: how fast this machine steps and resets
LIBERO envs now, against the profile the prediction is made from.

A shared host's speed drifts (other tenants of the physical machine; up to 30 % within the hour on
the 2-core development machines), other processes may hold its cores (a CPU hog, another job), and a
profile may come from another host: a prediction made from the profile alone cannot say whether a
miss is the model's or the machine's. The probe steps, before anything of the run starts, the
env processes the plan puts on this node, each pinned to the core the run pins it to
(``probe_layout``: every env worker's envs on its cores, as ``actors.EnvGroupsActor`` places them;
at most ``PROBE_MAX_ENVS`` a core and what most of the free memory holds), all together, so that the
cores contend as the run's do (shared caches, memory bandwidth, the host's memory). Real LIBERO
scenes, stepped as the run steps its own: rendered unless the run is not, with actions spread as
the stand-in policy's (``executor.envs.policy_like_actions``), for a few chunks and one reset. It
times them by the wall clock, per env step (each env's own wall seconds over the envs sharing its
core, ``core_seconds_per_unit``): the core seconds an env step costs on this host now, what other
processes take from the core included, as the run's envs will pay them. Divided by the profile's CPU seconds at the same density
(``StageCosts.env_cost``), that gives the ratios the prediction the run is judged by scales the
profile's env costs with (``Costs.env_scaled``); the unscaled prediction is kept beside it. The CPU
seconds the envs used are kept too: their ratio is the host's speed alone, and CPU over wall is
the share of the core the envs got (1.0 on a quiet host).

What it does not see: what the run's own driver, Ray and actors will take from the env cores (the
profile's ``env_cpu_share``, measured by ``executor profile --run-share``, and the record's
``env_cpu.*.cpu_share``), and what the actors' work does to the env cores while it overlaps them.
Nor what the host's speed does between the probe and the run's measured window: how far apart the
two are on this host, with no model involved, is ``benchmarks/probe_noise.py``'s measurement.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any

from executor.runtime.preflight import available_ram_gb
from perfmodel.schema.plan import Plan

PROBE_MAX_ENVS = 4  # envs a core: enough for the densities runs here use, ~2 GB each
PROBE_CHUNKS = 6  # measured chunk steps after one warm-up chunk (the host's speed varies by 10 % within seconds)
PROBE_RESETS = 1  # measured resets of every probe env after one warm-up reset (the first is cold)


@dataclass(frozen=True)
class HostProbe:
    """What the probe measured (raw samples kept) and its ratio to the profile."""

    envs: int  # envs stepped together, on ``cores``
    density: float  # envs per core the probe stepped (the plan's, unless capped), the profile read there
    cores: tuple[int | None, ...]  # each env's core (None: not pinned), as the run places them
    step_cpu_s: list[float]  # one per env step (CPU seconds)
    reset_cpu_s: list[float]  # one per env reset
    step_wall_s: list[float]  # one per lock-step chunk: core seconds per env step (core_seconds_per_unit)
    reset_wall_s: list[float]  # one per lock-step reset of the group: core seconds per env reset
    profile_step_cpu_s: float  # the profile's CPU seconds per step at the probe's density
    profile_reset_cpu_s: float
    wall_s: float  # the probe's own duration, env creation included
    loadavg_1min: float
    env_not_as_rlinf: tuple[str, ...] = ()  # the run's flags the probe's envs stepped under too

    @property
    def where(self) -> str:
        """The cores, in words: 'core 1', 'cores 0,1', or 'unpinned cores'."""
        used = sorted({c for c in self.cores if c is not None})
        if not used:
            return "unpinned cores"
        return f"core {used[0]}" if len(used) == 1 else "cores " + ",".join(map(str, used))

    @property
    def cores_used(self) -> int:
        return cores_in_use(self.cores)

    @property
    def ratio(self) -> dict[str, float]:
        """This host now over the profile, per env stage (1.0: as measured in the profile): wall
        seconds per env step and reset here, what other processes take included, over the
        profile's CPU seconds."""
        return _over_profile(self, self.step_wall_s, self.reset_wall_s)

    @property
    def cpu_ratio(self) -> dict[str, float]:
        """The host's speed alone: CPU seconds here over the profile's."""
        return _over_profile(self, self.step_cpu_s, self.reset_cpu_s)

    @property
    def core_share(self) -> dict[str, float]:
        """The share of its core the probe's envs got (CPU over wall seconds; 1.0: the core whole)."""
        return {s: min(1.0, self.cpu_ratio[s] / self.ratio[s]) for s in ("env_step", "env_reset")}

    def to_dict(self) -> dict[str, Any]:
        return {"envs": self.envs, "density_envs_per_core": self.density, "cores": list(self.cores), "where": self.where,
                "step_wall_s_mean": statistics.fmean(self.step_wall_s),
                "reset_wall_s_mean": statistics.fmean(self.reset_wall_s),
                "step_cpu_s_mean": statistics.fmean(self.step_cpu_s),
                "reset_cpu_s_mean": statistics.fmean(self.reset_cpu_s),
                "profile_step_cpu_s": self.profile_step_cpu_s, "profile_reset_cpu_s": self.profile_reset_cpu_s,
                "ratio": self.ratio, "cpu_ratio": self.cpu_ratio, "core_share": self.core_share,
                "wall_s": self.wall_s, "loadavg_1min": self.loadavg_1min,
                "samples": {"step_wall_s": self.step_wall_s, "reset_wall_s": self.reset_wall_s,
                            "step_cpu_s": self.step_cpu_s, "reset_cpu_s": self.reset_cpu_s},
                "method": f"{self.envs} LIBERO env(s) in lock-step on {self.where}"
                          f"{' (' + ' '.join(self.env_not_as_rlinf) + ')' if self.env_not_as_rlinf else ', rendered'}: "
                          f"{PROBE_CHUNKS} chunk steps and {PROBE_RESETS} reset(s) each after one warm-up "
                          "of each; ratio: wall seconds per env step and per reset (whatever else holds the "
                          "core included) over the profile's CPU seconds at the plan's envs per core "
                          "(StageCosts.env_cost); cpu_ratio: CPU seconds over the profile's"}


def _over_profile(probe: HostProbe, step: list[float], reset: list[float]) -> dict[str, float]:
    return {"env_step": statistics.fmean(step) / probe.profile_step_cpu_s,
            "env_reset": (statistics.fmean(reset) / probe.profile_reset_cpu_s if probe.profile_reset_cpu_s > 0
                          else 1.0)}


def profile_env_costs_at_density(plan: Plan, profile: Any, density: float | None = None) -> tuple[float, float, float]:
    """(envs per core, CPU s per lock-step env step, CPU s per reset) the profile gives the plan,
    at the plan's envs per core, or at ``density`` (the probe's, where it holds fewer envs a core
    than the plan: its measured curve read there)."""
    from perfmodel.costs import StageCosts

    sc = StageCosts(plan, profile)
    if density is None or abs(density - sc.env_density) < 1e-9:
        return sc.env_density, sc.env_cost("step_lockstep")[0], sc.env_cost("reset")[0]
    curves = sc.profile.costs.env_density
    step, reset = (curves[k].at(density)[0] if k in curves else sc.env_cost(k)[0] for k in ("step_lockstep", "reset"))
    return density, step, reset


def cores_in_use(cores: tuple[int | None, ...] | list[int | None]) -> int:
    """Cores a probe's envs run on, given each env's core (unpinned envs: as many as there are
    envs, up to the CPUs)."""
    pinned = {c for c in cores if c is not None}
    return len(pinned) if pinned else min(len(cores), os.cpu_count() or 1)


def probe_layout(plan: Plan, env_memory_gb: float) -> list[int | None]:
    """The core of each env process the plan runs on this node, as the run pins them: the env
    workers of node 0's rollout slots (``modes.layout``), each env on its worker's cores in the
    order ``actors.EnvGroupsActor`` uses (``env_process_cores``)."""
    from executor.runtime.actors import env_process_cores, group_firsts, node_cores
    from executor.runtime.modes import layout

    lay = layout(plan)
    gpn = plan.cluster.gpus_per_node
    cores: list[int | None] = []
    for w, slot in enumerate(lay.rollout_slots):
        if slot // gpn == 0:
            cores.extend(env_process_cores(node_cores(lay.env_cores[w]), group_firsts(lay.first_env[w], lay.group_sizes),
                                           lay.group_sizes))
    # at most PROBE_MAX_ENVS a core, and as many as most of the free memory holds (the probe's envs
    # are gone before the run makes its own), the same number on every core (one density, at which
    # the profile's curve is read)
    free = available_ram_gb()
    limit = len(cores) if math.isinf(free) else max(1, int(0.8 * free / max(env_memory_gb, 0.1)))
    per_core = min(PROBE_MAX_ENVS, max(1, limit // max(1, len(set(cores)))))
    keep: list[int | None] = []
    for c in cores:
        if c is None or sum(k == c for k in keep) < per_core:
            keep.append(c)
    return keep[:limit]


def probe_host(plan: Plan, profile: Any, opts: Any) -> HostProbe:
    """Measure this host's env costs now, the plan's env layout on this node (see the module's
    docstring)."""
    from executor.envs import EnvProcessGroup

    cores = probe_layout(plan, profile.costs.env_memory_gb)
    n = len(cores)
    density, prof_step, prof_reset = profile_env_costs_at_density(plan, profile, max(1.0, n / cores_in_use(cores)))
    cfg = probe_env_config(plan, opts)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    pinned = None if any(c is None for c in cores) else tuple(cores)
    with EnvProcessGroup(cfg, num_envs=n, cores=pinned, render_threads=1) as group:
        samples = probe_steps(group, cores, plan.workload.num_action_chunks)
    from executor.runtime.modes import env_not_as_rlinf

    return HostProbe(envs=n, density=density, cores=tuple(cores), **samples, profile_step_cpu_s=prof_step,
                     profile_reset_cpu_s=prof_reset, wall_s=time.perf_counter() - t0, loadavg_1min=load,
                     env_not_as_rlinf=tuple(env_not_as_rlinf(opts)))


def probe_env_config(plan: Plan, opts: Any) -> Any:
    """The run's envs, as the run steps them, with an episode long enough for the probe's chunks."""
    from executor.envs import EnvConfig

    chunk = plan.workload.num_action_chunks
    return EnvConfig(suite=opts.suite, image_size=opts.image_size, num_action_chunks=chunk,
                     max_episode_steps=chunk * (PROBE_CHUNKS + 2), hard_reset=opts.hard_reset, seed=opts.seed,
                     settle_steps=opts.settle_steps, render=opts.render)


def probe_steps(group: Any, cores: list[int | None], chunk: int) -> dict[str, list[float]]:
    """What the probe measures on an env process group (``cores``: each env's core): one warm-up
    reset, ``PROBE_RESETS`` measured, one warm-up chunk, ``PROBE_CHUNKS`` measured, all envs in
    lock-step with policy-like actions; CPU seconds per env step and reset, and core seconds
    (``core_seconds_per_unit``) per lock-step chunk and reset."""
    from executor.envs import ACTION_DIM, policy_like_actions

    import numpy as np

    rng = np.random.default_rng(0)
    n, used = len(cores), cores_in_use(cores)
    out: dict[str, list[float]] = {"step_cpu_s": [], "reset_cpu_s": [], "step_wall_s": [], "reset_wall_s": []}
    group.reset()  # warm-up: the first reset of a process is cold
    for _ in range(PROBE_RESETS):
        res = group.reset()
        out["reset_cpu_s"].extend(float(x) for x in res["reset_cpu_s"])
        out["reset_wall_s"].append(core_seconds_per_unit(res["reset_s"], cores, used))
    group.chunk_step(policy_like_actions(rng, (n, chunk, ACTION_DIM)))  # warm-up
    for _ in range(PROBE_CHUNKS):
        res = group.chunk_step(policy_like_actions(rng, (n, chunk, ACTION_DIM)))
        out["step_wall_s"].append(core_seconds_per_unit(np.asarray(res["step_wall_s"]).sum(axis=1), cores, used) / chunk)
        out["step_cpu_s"].extend(float(x) for x in np.asarray(res["step_cpu_s"]).ravel())
    return out


def core_seconds_per_unit(env_wall_s: Any, cores: list[int | None], cores_used: int) -> float:
    """Core seconds one env's unit of work (a chunk, a reset) costs: each env's own wall seconds
    for it over the envs sharing its core (they run at once in lock-step, the core time-sliced
    among them and whatever else holds it), averaged over the envs. Not the group's wall time
    times its cores: that is paced by the slowest core, a barrier the simulator adds itself
    (``lockstep_barrier_factor``), so it would be counted twice."""
    n = len(cores)
    sharing = [sum(k == c for k in cores) if c is not None else n / cores_used for c in cores]
    return statistics.fmean(float(w) / k for w, k in zip(env_wall_s, sharing))


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
