"""The shared worker entities of every mode, one class each, with SimPy generator processes.

- ``EnvWorker``: one per rollout GPU; its envs in ``groups`` (pipeline stages, or the finer
  groups of asynchronous rollout), stepped by action chunks on the worker's CPU cores (a
  ``simpy.Container`` of cores). Event granularity: one env group per chunk step.
- ``Generator``: rollout inference on one GPU (a ``simpy.Resource``), fed by a ``simpy.Store``
  of requests; lock-step (one group's request per call) or dynamic batching (``b_max``/``t_max``).
- ``Actor``: the data-parallel training group; takes samples from the ``SampleBuffer`` (a
  ``simpy.Container``) by global batch, or by micro-batch when streaming.
- ``WeightStore``: published policy versions; a rollout iteration waits for the version its
  staleness bound requires and pays the weight sync when it picks up a newer one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generator as Gen

import simpy

from perfmodel.costs import StageCosts
from perfmodel.sim.durations import Durations
from perfmodel.schema.rules import global_batches, required_weight_version
from perfmodel.schema.timeline import Recorder


class WeightStore:
    """Policy versions published by the actor (version k+1 after training iteration k)."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.version = 0
        self._waiting: list[tuple[int, simpy.Event]] = []

    def publish(self, version: int) -> None:
        self.version = version
        still = []
        for need, ev in self._waiting:
            (ev.succeed() if need <= version else still.append((need, ev)))
        self._waiting = still

    def wait_for(self, version: int) -> simpy.Event:
        ev = self.env.event()
        if version <= self.version:
            ev.succeed()
        else:
            self._waiting.append((version, ev))
        return ev


@dataclass
class InferenceRequest:
    envs: int
    done: simpy.Event


class Generator:
    """Rollout inference on one GPU.

    Lock-step modes call ``infer`` directly: one env group's observations are one call.
    Dynamic batching (``run``): requests queue; a batch fires once ``b_max`` envs wait or
    ``t_max`` has passed since the first of them arrived, whichever comes first.
    """

    def __init__(self, env: simpy.Environment, name: str, gpu: simpy.Resource, dur: Durations,
                 rec: Recorder, b_max: int, t_max: float) -> None:
        self.env, self.name, self.gpu, self.dur, self.rec = env, name, gpu, dur, rec
        self.b_max, self.t_max = b_max, t_max
        self.queue: list[InferenceRequest] = []
        self.waiting_envs = 0
        self._wake: tuple[int, simpy.Event] | None = None  # (envs needed, event)
        self.calls = 0
        self.batched_envs = 0

    def infer(self, envs: int) -> Gen:
        with self.gpu.request() as slot:
            yield slot
            start = self.env.now
            yield self.env.timeout(self.dur.infer(envs))
            self.rec.span("inference", self.name, "inference", start, self.env.now, batch=envs)
        self.calls += 1
        self.batched_envs += envs

    def submit(self, envs: int) -> simpy.Event:
        req = InferenceRequest(envs, self.env.event())
        self.queue.append(req)
        self.waiting_envs += envs
        if self._wake is not None and self.waiting_envs >= self._wake[0]:
            self._wake[1].succeed()
            self._wake = None
        return req.done

    def _until(self, envs: int) -> simpy.Event:
        ev = self.env.event()
        self._wake = (envs, ev)
        return ev

    def run(self) -> Gen:
        env = self.env
        while True:
            if not self.queue:
                yield self._until(1)
            if self.waiting_envs < self.b_max and self.t_max > 0:
                # The timer runs from the first request's arrival, not from now.
                yield env.timeout(self.t_max) | self._until(self.b_max)
                self._wake = None
            batch, n = [], 0
            while self.queue and (n == 0 or n + self.queue[0].envs <= self.b_max):
                req = self.queue.pop(0)
                batch.append(req)
                n += req.envs
            self.waiting_envs -= n
            yield from self.infer(n)
            for r in batch:
                r.done.succeed()


class SampleBuffer:
    """Finished trajectories waiting for the actor, counted in samples (env x chunk step)."""

    def __init__(self, env: simpy.Environment) -> None:
        self.level = simpy.Container(env)
        self.produced = 0

    def put(self, samples: int) -> simpy.Event:
        self.produced += samples
        return self.level.put(samples)

    def get(self, samples: int) -> simpy.Event:
        return self.level.get(samples)


class RolloutLog:
    """What the rollout side did: env steps, when each worker finished each iteration, the
    behaviour policy version used, and an event per iteration that fires once all workers
    have finished it (what synchronous modes' actor waits for)."""

    def __init__(self, env: simpy.Environment, workers: int) -> None:
        self.env, self.workers = env, workers
        self.env_steps = 0
        self.iteration_done: dict[int, list[float]] = {}
        self.behaviour_version: dict[int, list[int]] = {}
        self._all_done: dict[int, simpy.Event] = {}

    def all_done(self, k: int) -> simpy.Event:
        if k not in self._all_done:
            self._all_done[k] = self.env.event()
        return self._all_done[k]

    def worker_done(self, k: int) -> None:
        done = self.iteration_done.setdefault(k, [])
        done.append(self.env.now)
        if len(done) == self.workers:
            self.all_done(k).succeed()


class EnvWorker:
    """One env worker (per rollout GPU): ``groups`` env groups on ``cores`` CPU cores, each
    group cycling inference request -> chunk step, resetting at each rollout epoch."""

    def __init__(self, env: simpy.Environment, index: int, envs: int, groups: int,
                 costs: StageCosts, dur: Durations, rec: Recorder, generator: Generator,
                 buffer: SampleBuffer, weights: WeightStore, log: RolloutLog,
                 staleness: int, dynamic: bool, replicas: int = 1) -> None:
        self.env, self.index, self.costs, self.dur, self.rec = env, index, costs, dur, rec
        self.group_envs = envs // groups
        self.groups = groups
        self.generator, self.buffer, self.weights, self.log = generator, buffer, weights, log
        self.staleness = staleness
        self.dynamic = dynamic
        self.replicas = replicas  # real workers this simulated one stands for
        self.name = f"env_worker_{index}"
        self.cores = simpy.Container(env, capacity=costs.cores_per_worker, init=costs.cores_per_worker)
        self.version = 0

    def run(self, iterations: int) -> Gen:
        env = self.env
        for k in range(iterations):
            # Synchronous modes (staleness 0) wait for the weights trained on iteration k-1.
            yield self.weights.wait_for(required_weight_version(k, self.staleness))
            if self.weights.version > self.version:
                start = env.now
                yield env.timeout(self.costs.weight_sync_s())
                self.rec.span("weight_sync", self.generator.name, "weight_sync", start, env.now,
                              version=self.weights.version)
                self.version = self.weights.version
            self.log.behaviour_version.setdefault(k, []).append(self.version)
            yield env.all_of([env.process(self._group(k, g)) for g in range(self.groups)])
            self.log.worker_done(k)

    def _cpu(self, stage: str, lane: str, seconds: float, n: int) -> Gen:
        if seconds <= 0:
            return
        cores = self.costs.env_cores_used(n)
        shared = self.groups > 1  # a lone group never waits for its own cores
        if shared:
            yield self.cores.get(cores)
        start = self.env.now
        yield self.env.timeout(seconds)
        self.rec.span(stage, self.name, lane, start, self.env.now, units=cores)
        if shared:
            yield self.cores.put(cores)

    def _group(self, k: int, g: int) -> Gen:
        w, n = self.costs.plan.workload, self.group_envs
        lane = f"group_{g}"
        for _epoch in range(w.rollout_epoch):
            yield from self._cpu("env_reset", lane, self.dur.env_reset(n), n)
            for _chunk in range(w.chunk_steps_per_epoch):
                if self.dynamic:
                    yield self.generator.submit(n)
                else:
                    yield from self.generator.infer(n)
                yield from self._cpu("env_step", lane, self.dur.env_chunk(n, not self.dynamic), n)
            self.log.env_steps += self.replicas * n * w.max_episode_steps
            # A trajectory is complete at the end of the episode (full horizon, no early reset).
            yield self.buffer.put(self.replicas * n * w.chunk_steps_per_epoch)


@dataclass
class TrainLog:
    iteration_done: list[float] = field(default_factory=list)
    optimizer_steps: int = 0
    micro_batches: int = 0
    samples: int = 0


class Actor:
    """The data-parallel training group on ``gpus`` (all taken for each global batch).

    ``wait_whole_rollout``: synchronous modes train only once the iteration's rollout is done.
    ``stream``: the first pass over a global batch starts per micro-batch as samples arrive.
    ``switch_s``: colocated's offload/reload around the training phase.
    """

    def __init__(self, env: simpy.Environment, gpus: list[simpy.Resource], costs: StageCosts,
                 dur: Durations, rec: Recorder, buffer: SampleBuffer, weights: WeightStore,
                 log: TrainLog, rollout_done: Callable[[int], simpy.Event] | None,
                 stream: bool, switch_s: float) -> None:
        self.env, self.gpus, self.costs, self.dur, self.rec = env, gpus, costs, dur, rec
        self.buffer, self.weights, self.log = buffer, weights, log
        self.rollout_done, self.stream, self.switch_s = rollout_done, stream, switch_s
        self.name = "actor"
        self.ranks = costs.plan.actor_gpus

    def run(self, iterations: int) -> Gen:
        env, w = self.env, self.costs.plan.workload
        per_iter = w.samples_per_iteration
        for k in range(iterations):
            if self.rollout_done is not None:
                yield self.rollout_done(k)
            if self.switch_s > 0:
                yield from self._switch("to_train")
            for size in global_batches(per_iter, w.global_batch_size):
                yield from self._global_batch(size)
            if self.switch_s > 0:
                yield from self._switch("to_rollout")
            self.log.iteration_done.append(env.now)
            self.weights.publish(k + 1)

    def _switch(self, direction: str) -> Gen:
        start = self.env.now
        yield self.env.timeout(self.switch_s)
        self.rec.span("phase_switch", "all_gpus", "phase_switch", start, self.env.now,
                      units=len(self.gpus), direction=direction)

    def _global_batch(self, size: int) -> Gen:
        env, w = self.env, self.costs.plan.workload
        micro_steps, per_rank = self.costs.micro_batching(size)
        per_step = per_rank * self.ranks  # samples of one micro-batch on every rank
        if not self.stream:
            yield self.buffer.get(size)
        slots = [gpu.request() for gpu in self.gpus]
        yield env.all_of(slots)
        try:
            for p in range(w.update_epoch):
                got = 0
                for _ in range(micro_steps):
                    if self.stream and p == 0:
                        take = min(per_step, size - got)
                        got += take
                        yield self.buffer.get(take)
                    start = env.now
                    yield env.timeout(self.dur.micro_batch(per_rank))
                    self.rec.span("train", self.name, "train", start, env.now, units=self.ranks)
                    self.log.micro_batches += 1
                start = env.now
                yield env.timeout(self.costs.optimizer_step_s())
                self.rec.span("optimizer_step", self.name, "train", start, env.now, units=self.ranks)
                self.log.optimizer_steps += 1
            self.log.samples += size
        finally:
            for gpu, slot in zip(self.gpus, slots):
                gpu.release(slot)
