"""Every mode is one wiring of the shared workers, read from the plan's row of the mode table
(``plan.mechanisms``, perfmodel/schema/modes.py) and its placement (``plan.placement``):

- the placement (``plan.placement.colocated``): the trainer gets GPUs of its own, or takes the
  rollout GPUs; colocated swaps models around each training phase (``Mode.swaps_phases``), while
  train_async on shared GPUs trains as inference goes on, the two taking each GPU in turn
  (``Mode.trains_beside_rollout``, ``Trainer(shared=True)``: one Resource per GPU, first come
  first served, an inference call, a micro-batch or an optimizer step at a time: two processes
  time-sharing a GPU without MPS, as RLinf's actor and rollout workers do, whose kernels never
  overlap; the GPU's own finer time slices are not modelled, so a call waits for the running
  micro-batch to end rather than sharing its time);
- ``async_training``: rollout waits only for the staleness bound and the trainer takes global
  batches as they fill; otherwise rollout waits for the previous iteration's weights and the
  trainer for the whole rollout;
- ``dynamic_batching``: the inference server batches queued requests (``b_max``/``t_max``);
- ``streaming``: the trainer's first pass over a global batch goes micro-batch by micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from perfmodel.costs import StageCosts
from perfmodel.schema.timeline import Recorder
from perfmodel.sim.durations import Durations
from perfmodel.sim.workers import (EnvWorker, InferenceServer, RolloutLog, SampleBuffer, Trainer,
                                   TrainLog, WeightStore)

# Env workers are identical replicas (same envs, cores and costs) that interact only through
# the trainer and the weights, so a few simulated workers, each standing for W / simulated real
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
    servers: list[InferenceServer]
    trainer: Trainer
    buffer: SampleBuffer
    weights: WeightStore
    rollout_log: RolloutLog
    train_log: TrainLog
    simulated_workers: int


def wire(env: simpy.Environment, costs: StageCosts, dur: Durations, rec: Recorder,
         max_workers: int = DEFAULT_MAX_SIMULATED_WORKERS, collapse: bool = True) -> Wiring:
    plan, m, pl = costs.plan, costs.plan.mechanisms, costs.plan.placement
    n_sim = simulated_workers(pl.rollout_gpus, max_workers)
    # One GPU per simulated env worker. The trainer's data-parallel ranks move in lock-step
    # (every step ends in a collective), so one Resource stands for its GPUs when it has its own.
    rollout_gpus = [simpy.Resource(env, 1) for _ in range(n_sim)]
    trainer_gpus = rollout_gpus if pl.colocated else [simpy.Resource(env, 1)]
    buffer, weights = SampleBuffer(env), WeightStore(env)
    rollout_log, train_log = RolloutLog(env, n_sim), TrainLog()

    servers = [InferenceServer(env, f"rollout_gpu_{i}", gpu, dur, rec, plan.effective_b_max, plan.t_max_s)
               for i, gpu in enumerate(rollout_gpus)]
    workers = [EnvWorker(env, i, pl.envs_per_worker, pl.env_groups, costs, dur, rec, server, buffer, weights,
                         rollout_log, plan.max_staleness if m.async_training else 0, m.dynamic_batching,
                         replicas=pl.rollout_gpus // n_sim, collapse=collapse)
               for i, server in enumerate(servers)]
    trainer = Trainer(env, trainer_gpus, costs, dur, rec, buffer, weights, train_log,
                      rollout_done=None if m.async_training else rollout_log.all_done,
                      stream=m.streaming,
                      switch_s=costs.phase_switch_s(),
                      shared=m.trains_beside_rollout, collapse=collapse)
    return Wiring(workers, servers, trainer, buffer, weights, rollout_log, train_log, n_sim)
