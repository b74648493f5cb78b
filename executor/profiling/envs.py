"""Suite: rendered LIBERO env steps and resets (alone, in lock-step groups, at each envs-per-core density)."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import numpy as np

from perfmodel.schema.errors import ConfigError

from executor.profiling.config import ProfileConfig
from executor.profiling.fit import cv, density_curve, fit_linear

def measure_envs(cfg: ProfileConfig, chunk: int, bar) -> dict[str, Any]:
    """Env chunk-step time vs envs per worker (rendered, each env process pinned to a core),
    reset time, memory per env process, CPU cores used; and at every env count that fills the
    cores (n >= cores: n / cores envs per core), the CPU seconds of one env's step in a lock-step
    group, of one env stepping by itself (no barrier, as under dynamic batching) and of one
    env's reset with all n resetting at once: the curves over envs per core the model reads at a
    plan's density (``Costs.env_density``)."""
    from executor.envs import ACTION_DIM, EnvConfig, EnvProcessGroup

    cores = tuple(sorted(os.sched_getaffinity(0)))
    c = len(cores)
    n_max = max(cfg.env_counts)
    # one env alone is measured first and again last, so that drift over the episode (the scene
    # settling, the arm moving) does not bias the comparison with the busy counts
    order = list(cfg.env_counts) + ([1] if 1 in cfg.env_counts and len(cfg.env_counts) > 1 else [])
    # chunks env 0 steps between resets: lock-step and free stepping at every count (resets at
    # the counts that fill the cores restart the episode; the horizon only has to be long enough)
    chunks_env0 = 2 * len(order) * (1 + cfg.env_repeats)
    env_cfg = EnvConfig(suite=cfg.suite, task_id=cfg.task_id, image_size=cfg.image_size,
                        max_episode_steps=chunk * chunks_env0, num_action_chunks=chunk, render=True)
    rng = np.random.default_rng(0)
    bar.set_description(f"creating {n_max} LIBERO envs")
    t0 = time.perf_counter()
    with EnvProcessGroup(env_cfg, num_envs=n_max, cores=cores, render_threads=1) as worker:
        create_wall = time.perf_counter() - t0
        bar.update(1)
        bar.set_description("env reset")
        worker.reset()  # warm-up: every env, in parallel
        # env 0 alone; CPU seconds as for steps (a reset is as CPU-bound: not counting preemption),
        # the wall seconds kept beside them
        alone_resets = [worker.reset(ids=[0]) for _ in range(cfg.reset_repeats)]
        resets = [float(r["reset_cpu_s"][0]) for r in alone_resets]
        reset_walls = [float(r["reset_s"][0]) for r in alone_resets]
        bar.update(1)
        chunk_walls: dict[int, list[float]] = {}
        step_wall: dict[int, list[float]] = {}
        step_cpu: dict[int, list[float]] = {}
        free_cpu: dict[int, list[float]] = {}
        reset_cpu: dict[int, list[float]] = {}
        for n in order:
            bar.set_description(f"env chunk step x{n}")
            ids = list(range(n))
            worker.chunk_step(rng.uniform(-1, 1, (n, chunk, ACTION_DIM)), ids=ids)  # warm-up
            walls, wall_steps, cpu_steps = [], [], []
            for _ in range(cfg.env_repeats):
                t0 = time.perf_counter()
                res = worker.chunk_step(rng.uniform(-1, 1, (n, chunk, ACTION_DIM)), ids=ids)
                walls.append(time.perf_counter() - t0)
                wall_steps.extend(res["step_wall_s"].ravel().tolist())
                cpu_steps.extend(res["step_cpu_s"].ravel().tolist())
            chunk_walls.setdefault(n, []).extend(walls)
            step_wall.setdefault(n, []).extend(wall_steps)
            step_cpu.setdefault(n, []).extend(cpu_steps)
            if n >= c and n not in free_cpu:
                bar.set_description(f"env free stepping x{n}")
                free = worker.free_run(lambda i: rng.uniform(-1, 1, (chunk, ACTION_DIM)), 1 + cfg.env_repeats, ids=ids)
                free_cpu[n] = free["step_cpu_s"][:, chunk:].ravel().tolist()  # the first chunk warms up
                bar.set_description(f"env reset x{n}")
                reset_cpu[n] = []
                for _ in range(cfg.reset_repeats):
                    reset_cpu[n].extend(worker.reset(ids=ids)["reset_cpu_s"].tolist())
            bar.update(1)
        chunk_samples = [(float(n), chunk_walls[n]) for n in sorted(chunk_walls)]
        # CPU seconds of all envs per wall second
        cores_used = {n: sum(step_cpu[n]) / sum(chunk_walls[n]) for n in sorted(chunk_walls)}
        rss = worker.rss_bytes()
        create_s = worker.create_s
    if 1 not in step_cpu:
        raise ConfigError("env-counts", "must include 1 (one env alone on one core)")
    # An env process is CPU-bound (one thread: MuJoCo + llvmpipe with LP_NUM_THREADS=1), so its CPU
    # seconds per step equal its wall seconds on an otherwise idle core; CPU time is used because it
    # does not count time the process was preempted by other tenants of the machine.
    alone = step_cpu[1]
    step_core_s = statistics.fmean(alone)
    # Per-core throughput with every core busy relative to one env alone: the CPU time per step
    # grows with contention for memory bandwidth / shared caches / SMT siblings when all cores are
    # busy (n >= cores); efficiency = CPU s per step alone / CPU s per step with all cores busy.
    # (Oversubscription, n > cores, is the simulator's business: it shares the cores itself.)
    busy = {n: v for n, v in step_cpu.items() if n >= c}
    eff_points = {str(n): round(step_core_s / statistics.fmean(v), 4) for n, v in busy.items()}
    efficiency = min(1.0, step_core_s / statistics.fmean([y for v in busy.values() for y in v])) if busy else 1.0
    # the same from wall time (includes any preemption by other processes on the machine)
    wall_eff = {str(int(n)): round(chunk * statistics.fmean(step_wall[1]) * n / (c * statistics.fmean(ws)), 4)
                for n, ws in chunk_samples if n >= c}
    density = {kind: curve for kind, curve in (("step_lockstep", density_curve(busy, c)),
                                               ("step_free", density_curve(free_cpu, c)),
                                               ("reset", density_curve(reset_cpu, c))) if curve is not None}
    return {
        "env_step_core_s": step_core_s,
        "env_step_cv": cv(alone),
        "env_core_efficiency": efficiency,
        "env_reset_s": statistics.fmean(resets),
        "env_memory_gb": statistics.fmean(rss) / 1e9,
        "env_density": density,
        "extra": {
            "env_chunk_step_s_vs_envs_per_worker": fit_linear(chunk_samples),
            "env_core_efficiency_points_cpu_time": eff_points,
            "env_core_efficiency_points_wall_time": wall_eff,
            "env_cpu_cores_used_vs_envs": {str(n): round(v, 3) for n, v in cores_used.items()},
            "env_step_wall_s_per_count": {str(n): [statistics.fmean(v), cv(v)] for n, v in step_wall.items()},
            "env_step_cpu_s_per_count": {str(n): [statistics.fmean(v), cv(v)] for n, v in step_cpu.items()},
            "env_reset_samples_s": resets,
            "env_reset_wall_samples_s": reset_walls,
            "env_create_s": create_s,
            "env_create_wall_s_all_parallel": create_wall,
            "env_rss_gb": [r / 1e9 for r in rss],
            "worker_cores": list(cores),
            "num_action_chunks": chunk,
        },
    }
