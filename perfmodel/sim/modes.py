"""Each mode is one declarative wiring of the shared workers; the modes are cumulative.

| mode          | GPUs                | rollout waits for       | actor trains          | inference        |
|---------------|---------------------|-------------------------|-----------------------|------------------|
| colocated     | shared, phase swaps | weights of iteration k-1 | after whole rollout  | lock-step        |
| disaggregated | rollout : actor     | weights of iteration k-1 | after whole rollout  | lock-step        |
| train_async   | rollout : actor     | staleness bound          | per global batch     | lock-step        |
| rollout_async | rollout : actor     | staleness bound          | per global batch     | dynamic batching |
| streamer      | rollout : actor     | staleness bound          | per micro-batch      | dynamic batching |
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from perfmodel.costs import StageCosts
from perfmodel.schema.timeline import Recorder
from perfmodel.sim.durations import Durations
from perfmodel.sim.workers import (Actor, EnvWorker, Generator, RolloutLog,
                                   SampleBuffer, TrainLog, WeightStore)

# Env workers are identical replicas (same envs, cores and costs) that interact only through
# the actor and the weights, so a few simulated workers, each standing for W / simulated real
# ones, give the same timeline as all W (exactly, with deterministic costs; with variability,
# barrier stragglers are drawn over the simulated replicas only). This keeps large clusters fast.
DEFAULT_MAX_SIMULATED_WORKERS = 2


def simulated_workers(workers: int, cap: int) -> int:
    """The largest divisor of ``workers`` not above ``cap``, so each replica stands for a whole
    number of real workers."""
    return max(d for d in range(1, min(workers, max(cap, 1)) + 1) if workers % d == 0)


@dataclass
class Wiring:
    workers: list[EnvWorker]
    generators: list[Generator]
    actor: Actor
    buffer: SampleBuffer
    weights: WeightStore
    rollout_log: RolloutLog
    train_log: TrainLog
    dynamic_batching: bool
    simulated_workers: int


def wire(env: simpy.Environment, costs: StageCosts, dur: Durations, rec: Recorder,
         max_workers: int = DEFAULT_MAX_SIMULATED_WORKERS) -> Wiring:
    plan = costs.plan
    m = plan.mechanisms
    g_r = plan.rollout_gpus
    n_sim = simulated_workers(g_r, max_workers)
    replicas = g_r // n_sim

    # One GPU per simulated env worker; colocated's actor trains on these same GPUs.
    rollout_gpus = [simpy.Resource(env, 1) for _ in range(n_sim)]
    # The data-parallel ranks move in lock-step (every step ends in a collective), so one
    # Resource stands for the actor's GPUs; colocated's actor takes the rollout GPUs.
    actor_gpus = [simpy.Resource(env, 1)] if m.disaggregated else rollout_gpus

    buffer, weights = SampleBuffer(env), WeightStore(env)
    rollout_log, train_log = RolloutLog(env, n_sim), TrainLog()
    staleness = plan.max_staleness if m.async_training else 0
    groups = plan.placement.env_groups

    generators = [
        Generator(env, f"rollout_gpu_{i}", gpu, dur, rec, b_max=plan.effective_b_max, t_max=plan.t_max_s)
        for i, gpu in enumerate(rollout_gpus)
    ]
    workers = [
        EnvWorker(env, i, plan.envs_per_worker, groups, costs, dur, rec, gen, buffer, weights,
                  rollout_log, staleness, dynamic=m.dynamic_batching, replicas=replicas)
        for i, gen in enumerate(generators)
    ]

    actor = Actor(env, actor_gpus, costs, dur, rec, buffer, weights, train_log,
                  rollout_done=None if m.async_training else rollout_log.all_done,
                  stream=m.streaming,
                  switch_s=0.0 if m.disaggregated else costs.phase_switch_s())
    return Wiring(workers, generators, actor, buffer, weights, rollout_log, train_log,
                  m.dynamic_batching, n_sim)
