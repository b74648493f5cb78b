"""Run the discrete-event model of one plan (``simulate``). A prediction with its interval is
composed one layer above, in perfmodel.prediction: the simulator imports nothing from the
calibration that fits it."""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from perfmodel.costs import StageCosts
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.metrics import run_counts, staleness, window_metrics, window_throughput
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile
from perfmodel.schema.timeline import Recorder
from perfmodel.sim.durations import Durations
from perfmodel.sim.modes import DEFAULT_MAX_SIMULATED_WORKERS, Wiring, wire

DEFAULT_ITERATIONS = 3
DEFAULT_WARMUP = 1
# What one simulation can answer in seconds: the rollout side has an event per env group and
# chunk step, the trainer's first pass per micro-batch when streaming. The largest RLinf LIBERO
# configs use 820 chunk steps per iteration (512 steps / 5 chunks x 8 epochs) and 2 update epochs.
MAX_CHUNK_STEPS_PER_ITERATION = 10_000
MAX_UPDATE_EPOCH = 1_000
MAX_MICRO_BATCHES_PER_GLOBAL_BATCH = 10_000


@dataclass
class SimResult:
    plan: Plan
    iteration_time_s: float
    throughput_env_steps_per_s: float
    window: tuple[float, float]
    measured_iterations: int
    stage_time_s: dict[str, float]
    utilization: dict[str, dict[str, float]]
    counts: dict[str, int]
    staleness: dict[str, float]
    recorder: Recorder
    events: int = 0  # SimPy events scheduled (the simulation's cost, independent of timing)


def check_fits(plan: Plan, costs: StageCosts) -> None:
    """Refuse plans whose envs do not fit a node's RAM (an env holds GBs of memory)."""
    costs.check_gpu_memory()
    envs, need, have = max(costs.env_memory_by_node(), key=lambda e: e[1] / e[2])
    if need > have:
        part = "" if have >= plan.cluster.node_ram_gb else f" (this plan's part of a {plan.cluster.node_ram_gb:g} GB node)"
        raise ConfigError(
            "plan.workload.total_num_envs",
            f"the fullest node's {envs} envs ({plan.envs_per_worker} per env worker) need {need:.0f} GB at "
            f"{costs.profile.costs.env_memory_gb:.3g} GB each but have {have:g} GB{part} (cluster.node_ram_gb): "
            "use fewer envs per GPU, or another ratio or placement",
        )


def check_simulable(plan: Plan) -> None:
    """Refuse sizes the simulator cannot answer in seconds (one line naming the field)."""
    w = plan.workload
    per_iter = w.chunk_steps_per_epoch * w.rollout_epoch
    if per_iter > MAX_CHUNK_STEPS_PER_ITERATION:
        field = "max_episode_steps" if w.chunk_steps_per_epoch > w.rollout_epoch else "rollout_epoch"
        raise ConfigError(f"plan.workload.{field}",
                          f"max_episode_steps / num_action_chunks x rollout_epoch must be <= "
                          f"{MAX_CHUNK_STEPS_PER_ITERATION} chunk steps per iteration, got {per_iter}")
    if w.update_epoch > MAX_UPDATE_EPOCH:
        raise ConfigError("plan.workload.update_epoch", f"must be <= {MAX_UPDATE_EPOCH}, got {w.update_epoch}")
    if w.global_batch_size // w.micro_batch_size > MAX_MICRO_BATCHES_PER_GLOBAL_BATCH:
        raise ConfigError("plan.workload.global_batch_size",
                          f"must be <= {MAX_MICRO_BATCHES_PER_GLOBAL_BATCH} x micro_batch_size "
                          f"({MAX_MICRO_BATCHES_PER_GLOBAL_BATCH * w.micro_batch_size}), got {w.global_batch_size}")


def simulate(plan: Plan, profile: Profile, *, iterations: int = DEFAULT_ITERATIONS,
             warmup: int = DEFAULT_WARMUP, seed: int | None = None, trace: bool = False,
             max_workers: int | None = None, collapse: bool = True) -> SimResult:
    """``max_workers``: env workers simulated (replicas of the real ones, perfmodel.sim.modes);
    by default one with deterministic costs (identical replicas give the same timeline, tested)
    and DEFAULT_MAX_SIMULATED_WORKERS with variability (stragglers at the barriers).
    ``collapse=False``: one event per step everywhere (the reference the collapsed blocks of
    perfmodel.sim.workers are tested against)."""
    rec = Recorder(keep_spans=trace)
    env, wiring = _run(plan, profile, rec, iterations, warmup, seed, max_workers, collapse)
    g_r = wiring.simulated_workers
    m = window_metrics(plan, rec, wiring.train_log.iteration_done, warmup, env_workers=g_r)
    assert m is not None  # the trainer ran every iteration
    counts = {
        **run_counts(iterations=iterations, warmup=warmup, env_steps=wiring.rollout_log.env_steps,
                     samples=wiring.train_log.samples, optimizer_steps=wiring.train_log.optimizer_steps,
                     micro_batches=wiring.train_log.micro_batches, weight_versions=wiring.weights.version,
                     inference_calls=sum(s.calls for s in wiring.servers) * (plan.rollout_gpus // g_r)),
        "simulated_env_workers": g_r,
    }
    return SimResult(plan, m.iteration_time_s, m.throughput_env_steps_per_s, m.window, m.measured_iterations,
                     m.stage_time_s, m.utilization, counts,
                     staleness(wiring.rollout_log.behaviour_version, warmup), rec,
                     next(env._eid))  # SimPy's event id counter: events scheduled so far


def simulated_throughput(plan: Plan, profile: Profile, *, iterations: int = DEFAULT_ITERATIONS,
                         warmup: int = DEFAULT_WARMUP, seed: int | None = None) -> float:
    """``simulate(...).throughput_env_steps_per_s``, the same simulation to the last bit, without
    the spans and sums only its other fields need (what a prediction interval's perturbed
    simulations ask, perfmodel.prediction)."""
    _, wiring = _run(plan, profile, Recorder(keep_busy=False), iterations, warmup, seed, None, True)
    timed = window_throughput(plan, wiring.train_log.iteration_done, warmup)
    assert timed is not None  # the trainer ran every iteration
    return timed.throughput_env_steps_per_s


def _run(plan: Plan, profile: Profile, rec: Recorder, iterations: int, warmup: int, seed: int | None,
         max_workers: int | None, collapse: bool) -> tuple[simpy.Environment, Wiring]:
    """The simulation of ``iterations`` training iterations, recorded in ``rec``."""
    if warmup >= iterations:
        raise ConfigError("iterations", f"must exceed warmup iterations ({warmup}), got {iterations}")
    check_simulable(plan)
    costs = StageCosts(plan, profile)
    check_fits(plan, costs)
    rng = None
    if seed is not None and profile.variability.any:
        import numpy as np  # only for variable costs: a plain prediction starts faster without it

        rng = np.random.default_rng(seed)
    env = simpy.Environment()
    if max_workers is None:
        max_workers = 1 if rng is None else DEFAULT_MAX_SIMULATED_WORKERS
    wiring = wire(env, costs, Durations(costs, rng), rec, max_workers, collapse)
    if plan.mechanisms.dynamic_batching:
        for server in wiring.servers:
            env.process(server.run())
    # Where training shares the rollout's GPUs the rollout goes on past the trainer's last
    # iteration, as in a real run: otherwise that iteration would have the GPUs to itself and end
    # early, and every measured window would gain about one iteration's inference.
    extra = plan.max_staleness + 1 if plan.mechanisms.trains_beside_rollout else 0
    for worker in wiring.workers:
        env.process(worker.run(iterations + extra))
    done = env.process(wiring.trainer.run(iterations))
    env.run(until=done)
    for worker in wiring.workers:
        worker.settle(env.now)
    return env, wiring
