"""Driver-side mechanisms shared by every mode, mirroring ``perfmodel.sim.workers``.

The driver (the ``executor run`` process) runs one thread per env group, one per env worker,
one per dynamic batcher and one for the actor; they call the Ray actors and block on their
results, so the real work runs in the actors' processes and the driver only orchestrates.
Spans are recorded with the actors' own start/end times, relative to the run's start.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from perfmodel.schema.plan import REPLAY_ALGORITHMS, Plan
from perfmodel.schema.rules import batch_fires, micro_batching, required_weight_version, training_runs
from perfmodel.schema.timeline import Recorder
from perfmodel.sim.workers import TrainLog as SimTrainLog


class Stopped(Exception):
    """The run is being torn down (an error elsewhere, or Ctrl-C)."""


@dataclass
class Context:
    """What every mechanism shares: the plan, the recorder, the clock, the stop flag."""

    plan: Plan
    rec: Recorder
    t0: float
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[BaseException] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    weight_syncs: list[dict[str, Any]] = field(default_factory=list)
    initial_weight_checksum: float | None = None
    # per env stage: [CPU s of the env processes, wall s x cores the stage was given, envs done]
    env_cpu: dict[str, list[float]] = field(default_factory=lambda: {"env_reset": [0.0, 0.0, 0],
                                                                     "env_step": [0.0, 0.0, 0]})

    # seconds of the run's own orchestration per chunk step of an env group (EnvWorkerLoop._group)
    driver_s: list[float] = field(default_factory=list)

    def env_cpu_add(self, stage: str, res: dict[str, Any], work: int) -> None:
        with self.lock:
            a = self.env_cpu[stage]
            a[0] += res.get("cpu_s", 0.0)
            a[2] += work
    progress: Callable[[int], None] | None = None

    def rel(self, t: float) -> float:
        return t - self.t0

    def span(self, stage: str, resource: str, lane: str, res: dict[str, Any], units: float = 1.0,
             **args: Any) -> None:
        with self.lock:
            self.rec.span(stage, resource, lane, self.rel(res["t0"]), self.rel(res["t1"]), units=units, **args)

    def wait(self, cond: threading.Condition, pred: Callable[[], bool]) -> None:
        """Wait on ``cond`` (held by the caller) until ``pred``; raise Stopped on teardown."""
        while not pred():
            if self.stop.is_set():
                raise Stopped()
            cond.wait(0.2)
        if self.stop.is_set():
            raise Stopped()

    def get(self, ref: Any) -> Any:
        """ray.get that gives up when the run is stopped."""
        import ray

        while True:
            ready, _ = ray.wait([ref], timeout=0.5)
            if ready:
                return ray.get(ready[0])
            if self.stop.is_set():
                raise Stopped()

    def fail(self, e: BaseException) -> None:
        with self.lock:
            if not isinstance(e, Stopped):
                self.errors.append(e)
        self.stop.set()


class WeightStore:
    """Policy versions published by the actor (version k+1 after training iteration k), as
    Ray object refs of ``executor.weight_sync.VersionedWeights``."""

    def __init__(self, ctx: Context) -> None:
        self.ctx, self.version, self.ref = ctx, 0, None
        self.cond = threading.Condition()

    def publish(self, version: int, ref: Any) -> None:
        with self.cond:
            self.version, self.ref = version, ref
            self.cond.notify_all()

    def wait_for(self, version: int) -> tuple[int, Any]:
        with self.cond:
            self.ctx.wait(self.cond, lambda: self.version >= version)
            return self.version, self.ref


class SampleBuffer:
    """Finished trajectories' samples waiting for the actor (one sample = env x chunk step)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx, self.items, self.produced = ctx, [], 0
        self.cond = threading.Condition()

    def put(self, samples: list[dict[str, Any]]) -> None:
        with self.cond:
            self.items.extend(samples)
            self.produced += len(samples)
            self.ctx.rec.counter("samples_waiting/actor", self.ctx.rel(time.time()), len(self.items))
            self.cond.notify_all()

    def get(self, n: int) -> list[dict[str, Any]]:
        with self.cond:
            self.ctx.wait(self.cond, lambda: len(self.items) >= n)
            out, self.items = self.items[:n], self.items[n:]
            self.ctx.rec.counter("samples_waiting/actor", self.ctx.rel(time.time()), len(self.items))
            return out


class RolloutLog:
    def __init__(self, ctx: Context, workers: int) -> None:
        self.ctx, self.workers = ctx, workers
        self.env_steps = 0
        self.episodes = 0
        self.rerun_episodes = 0
        self.successes = 0
        self.iteration_done: dict[int, list[float]] = {}
        self.behaviour_version: dict[int, list[int]] = {}
        self.cond = threading.Condition()

    def worker_done(self, k: int) -> None:
        with self.cond:
            self.iteration_done.setdefault(k, []).append(self.ctx.rel(time.time()))
            self.cond.notify_all()

    def wait_all_done(self, k: int) -> None:
        with self.cond:
            self.ctx.wait(self.cond, lambda: len(self.iteration_done.get(k, ())) >= self.workers)


@dataclass
class TrainLog(SimTrainLog):
    """The simulator's training counts, plus the learner's last metrics."""

    last_metrics: dict[str, float] = field(default_factory=dict)


def _cat_obs(obs_list: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in obs_list[0]:
        if isinstance(obs_list[0][k], list):
            out[k] = [x for o in obs_list for x in o[k]]
        else:
            out[k] = np.concatenate([o[k] for o in obs_list])
    return out


def _slice(res: dict[str, Any], lo: int, hi: int) -> dict[str, Any]:
    return {k: (v[lo:hi] if isinstance(v, np.ndarray) else v) for k, v in res.items()}


class InferenceClient:
    """The driver's side of one rollout slot's inference (an ``InferenceActor``, one call at a time)
    (``perfmodel.sim.workers.Generator``).

    Lock-step: ``infer`` is one call per env group. Dynamic batching (``run`` in its own
    thread): requests queue; a batch fires once ``b_max`` envs wait or ``t_max`` has passed
    since the first of them arrived, whichever comes first (``rules.batch_fires``).
    """

    def __init__(self, ctx: Context, name: str, handle: Any, b_max: int, t_max: float) -> None:
        self.ctx, self.name, self.handle = ctx, name, handle
        self.b_max, self.t_max = b_max, t_max
        self.queue: list[tuple[dict[str, Any], int, Future, float]] = []
        self.cond = threading.Condition()
        self.calls = 0
        self.version = 0
        self.slot = threading.Lock()  # lock-step calls of a worker's groups queue for the slot

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        n = len(obs["state"])
        asked = time.time()
        self.ctx.rec.count(f"queue_depth/{self.name}", self.ctx.rel(asked), n)
        with self.slot:
            fired = time.time()
            self.ctx.rec.count(f"queue_depth/{self.name}", self.ctx.rel(fired), -n)
            res = self.ctx.get(self.handle.generate.remote(obs))
        res["queued_s"] = fired - asked  # waiting for the slot: queueing the simulator models
        self.ctx.span("inference", self.name, "inference", res, batch=n, version=self.version)
        with self.ctx.lock:
            self.calls += 1
        return res

    def submit(self, obs: dict[str, Any]) -> Future:
        fut: Future = Future()
        with self.cond:
            self.queue.append((obs, len(obs["state"]), fut, time.time()))
            self.ctx.rec.count(f"queue_depth/{self.name}", self.ctx.rel(time.time()), len(obs["state"]))
            self.cond.notify_all()
        return fut

    def _waiting(self) -> int:
        return sum(q[1] for q in self.queue)

    def run(self) -> None:
        try:
            while True:
                with self.cond:
                    self.ctx.wait(self.cond, lambda: bool(self.queue))
                    first = self.queue[0][3]  # t_max counts from the first request's arrival
                    while not batch_fires(self._waiting(), self.b_max, time.time() - first, self.t_max):
                        if self.ctx.stop.is_set():
                            raise Stopped()
                        self.cond.wait(max(0.0, first + self.t_max - time.time()))
                    batch, n = [], 0
                    while self.queue and (n == 0 or n + self.queue[0][1] <= self.b_max):
                        req = self.queue.pop(0)
                        batch.append(req)
                        n += req[1]
                    self.ctx.rec.count(f"queue_depth/{self.name}", self.ctx.rel(time.time()), -n)
                fired = time.time()
                res = self.infer(_cat_obs([b[0] for b in batch]))
                lo = 0
                for obs, m, fut, arrived in batch:
                    # waiting for the batch to fire (b_max / t_max) and for the slot: the simulator's queueing
                    fut.set_result(dict(_slice(res, lo, lo + m), queued_s=fired - arrived + res["queued_s"]))
                    lo += m
        except BaseException as e:  # noqa: BLE001 - reported through the context
            self.ctx.fail(e)
            with self.cond:
                for _, _, fut, _ in self.queue:
                    fut.set_exception(Stopped())

    def wait_result(self, fut: Future) -> dict[str, Any]:
        while True:
            try:
                return fut.result(timeout=0.5)
            except TimeoutError:
                if self.ctx.stop.is_set():
                    raise Stopped() from None


def trajectory_samples(cfg: Any, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One env group's episode -> samples (env x chunk step) with advantages and returns:
    PPO: GAE over chunk steps (gamma, lambda of the run's ``learner.LearnerConfig`` ``cfg``);
    GRPO: group-relative episode returns over consecutive ``cfg.group_size`` envs."""
    import torch

    from executor.learner import compute_gae, grpo_advantages

    rewards = torch.tensor(np.stack([s["rewards"] for s in steps]))  # (T, N)
    values = torch.tensor(np.stack([s["value"] for s in steps]))  # (T, N)
    T, N = rewards.shape
    dones = torch.zeros(T, N)
    dones[-1] = 1.0  # full horizon, no early reset: the episode ends at the last chunk step
    if cfg.algorithm in ("grpo", "nft"):  # NFT takes GRPO's advantages (RLinf: adv_type grpo)
        adv_env = grpo_advantages(rewards.sum(0), cfg.group_size)
        adv, ret = adv_env.expand(T, N), adv_env.expand(T, N)
    elif cfg.algorithm == "opd":  # the teacher's log-probability of the student's chunk less the student's
        adv = torch.tensor(np.stack([s["teacher_logprob"] - s["logprob"] for s in steps])).float()
        ret = adv
    elif cfg.algorithm == "dagger":  # supervised: no advantage
        adv = ret = torch.zeros(T, N)
    else:
        adv, ret = compute_gae(rewards, values, dones, torch.zeros(N), cfg.gamma, cfg.gae_lambda)
    out = []
    # DAgger trains on the expert's chunk (its relabelling), the others on the executed one
    key = "target" if cfg.algorithm == "dagger" else "actions"
    for t, s in enumerate(steps):
        for i in range(N):
            out.append({"images": s["obs"]["images"][i], "state": s["obs"]["state"][i],
                        "language": s["obs"]["language"][i], "noise": s["noise"][i],
                        "actions": s[key][i], "logprob": float(s["logprob"][i]),
                        "value": float(s["value"][i]), "advantage": float(adv[t, i]),
                        "return": float(ret[t, i]), "version": s["version"]})
    return out


def collate(samples: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not samples:
        return None
    return {"obs": {"images": np.stack([s["images"] for s in samples]),
                    "state": np.stack([s["state"] for s in samples]),
                    "language": [s["language"] for s in samples]},
            "noise": np.stack([s["noise"] for s in samples]),
            "actions": np.stack([s["actions"] for s in samples]),
            "logprob": np.array([s["logprob"] for s in samples], np.float32),
            "advantages": np.array([s["advantage"] for s in samples], np.float32),
            "returns": np.array([s["return"] for s in samples], np.float32)}


class EnvWorkerLoop:
    """The driver's loop of one env worker (per rollout device slot, an ``EnvGroupsActor``):
    its groups cycle inference -> chunk step,
    resetting at each rollout epoch; an iteration waits for the weights its staleness bound
    requires and pays the weight sync when newer ones exist (``perfmodel.sim.workers.EnvWorker``)."""

    def __init__(self, ctx: Context, index: int, handle: Any, group_sizes: list[int], cores: float,
                 generator: InferenceClient, buffer: SampleBuffer, weights: WeightStore, log: RolloutLog,
                 staleness: int, dynamic: bool, learner: Any, inject_fault: tuple[int, int] | None = None,
                 kill_generator_at: int | None = None) -> None:
        self.ctx, self.index, self.handle = ctx, index, handle
        self.group_sizes, self.cores = group_sizes, cores
        self.generator, self.buffer, self.weights, self.log = generator, buffer, weights, log
        self.staleness, self.dynamic, self.learner = staleness, dynamic, learner
        self.name = f"env_worker_{index}"
        self.version = 0
        self.inject_fault = inject_fault  # (iteration, group): kill one env process once
        self.kill_generator_at = kill_generator_at  # tests: kill this worker's generator actor

    def run(self, iterations: int) -> None:
        try:
            for k in range(iterations):
                if k == self.kill_generator_at:
                    import ray

                    ray.kill(self.generator.handle)
                self.weights.wait_for(required_weight_version(k, self.staleness))
                version, ref = self.weights.version, self.weights.ref
                if version > self.version:
                    res = self.ctx.get(self.generator.handle.load.remote(ref))
                    self.ctx.span("weight_sync", self.generator.name, "weight_sync", res,
                                  version=res["version"], bytes=res["bytes"])
                    self.version = self.generator.version = res["version"]
                    self.ctx.rec.counter(f"weight_version/{self.generator.name}", self.ctx.rel(res["t1"]), self.version)
                    with self.ctx.lock:
                        self.ctx.weight_syncs.append({"generator": self.generator.name, "iteration": k,
                                                      "version": res["version"], "bytes": res["bytes"],
                                                      "checksum": res["checksum"],
                                                      "seconds": res["t1"] - res["t0"]})
                self.ctx.rec.counter(f"staleness/{self.name}", self.ctx.rel(time.time()), k - self.version)
                with self.log.cond:
                    self.log.behaviour_version.setdefault(k, []).append(self.version)
                threads = [threading.Thread(target=self._group_safe, args=(k, g), daemon=True)
                           for g in range(len(self.group_sizes))]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                if self.ctx.stop.is_set():
                    raise Stopped()
                self.log.worker_done(k)
        except BaseException as e:  # noqa: BLE001
            self.ctx.fail(e)

    def _group_safe(self, k: int, g: int) -> None:
        try:
            self._group(k, g)
        except BaseException as e:  # noqa: BLE001
            self.ctx.fail(e)

    def _units(self, n: int) -> float:
        return min(float(n), self.cores)

    def _infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        if self.dynamic:
            return self.generator.wait_result(self.generator.submit(obs))
        return self.generator.infer(obs)

    def _group(self, k: int, g: int) -> None:
        w = self.ctx.plan.workload
        n, lane, K = self.group_sizes[g], f"group_{g}", w.num_action_chunks
        for epoch in range(w.rollout_epoch):
            while True:  # an episode whose env process died is re-run from reset
                res = self.ctx.get(self.handle.reset.remote(g, epoch))
                if "fault" in res:
                    self._fault(k, g, epoch, res["fault"], "reset")
                    continue
                self.ctx.span("env_reset", self.name, lane, res, units=self._units(n), cores=self._units(n),
                              envs=n, version=self.version)
                self.ctx.env_cpu_add("env_reset", res, n)
                obs, steps, fault = res["obs"], [], None
                last = time.time()  # the group's previous result came back to the driver
                for c in range(w.chunk_steps_per_epoch):
                    out = self._infer(obs)
                    if self.inject_fault == (k, g) and c == 0 and epoch == 0:
                        self.inject_fault = None
                        self.ctx.get(self.handle.kill_env.remote(g, 0))
                    st = self.ctx.get(self.handle.chunk.remote(g, out["actions"][:, :K]))
                    if "fault" in st:
                        fault = st["fault"]
                        break
                    self.ctx.span("env_step", self.name, lane, st, units=self._units(n), cores=self._units(n),
                                  envs=n, version=self.version)
                    self.ctx.env_cpu_add("env_step", st, st["steps"])
                    now = time.time()
                    # the chunk step's cycle less its work (inference, env step) and its modelled
                    # queueing (batch firing, the slot): the Ray calls and hand-offs of this driver
                    with self.ctx.lock:
                        self.ctx.driver_s.append((now - last) - (st["t1"] - st["t0"]) - (out["t1"] - out["t0"])
                                                 - out["queued_s"])
                    last = now
                    if self.ctx.progress:
                        self.ctx.progress(st["steps"])
                    steps.append({"obs": obs, "rewards": st["rewards"].sum(1), "noise": out["noise"],
                                  "actions": out["actions"], "logprob": out["logprob"],
                                  "value": out["value"], "version": out["version"],
                                  **{k: out[k] for k in ("target", "teacher_logprob") if k in out}})
                    obs = st["obs"]
                if fault is None:
                    break
                self._fault(k, g, epoch, fault, "chunk_step", done_steps=len(steps) * n * K)
            with self.log.cond:
                self.log.env_steps += n * w.max_episode_steps
                self.log.episodes += n
                self.log.successes += int(np.sum(st["success"]))
            self.buffer.put(trajectory_samples(self.learner, steps))

    def _fault(self, k: int, g: int, epoch: int, err: str, where: str, done_steps: int = 0) -> None:
        with self.ctx.lock:
            self.ctx.faults.append({"kind": "env_process_died", "env_worker": self.index, "group": g,
                                    "iteration": k, "rollout_epoch": epoch, "during": where, "error": err,
                                    "action": "env processes of the group restarted, episode re-run",
                                    "discarded_env_steps": done_steps, "time_s": self.ctx.rel(time.time())})
        with self.log.cond:
            self.log.rerun_episodes += self.group_sizes[g]
        if self.ctx.progress and done_steps:
            self.ctx.progress(-done_steps)


class TrainerLoop:
    """The driver's loop of the RL trainer ("actor" in RLinf), over its data-parallel
    ``TrainerRankActor`` ranks (all take part in every micro-step and step).

    ``rollout_done``: synchronous modes train only once the iteration's rollout is done.
    ``stream``: the first pass over a global batch starts per micro-batch as samples arrive.
    (``perfmodel.sim.workers.Actor``; colocated's offload/reload is 0 on CPU device slots.)
    """

    def __init__(self, ctx: Context, ranks: list[Any], buffer: SampleBuffer, weights: WeightStore,
                 log: TrainLog, rollout_done: Callable[[int], None] | None, stream: bool,
                 swap: list[Any] | None = None, device: str = "cpu") -> None:
        self.ctx, self.ranks, self.buffer, self.weights, self.log = ctx, ranks, buffer, weights, log
        self.rollout_done, self.stream = rollout_done, stream
        self.swap, self.device = swap, device  # colocated on GPU: the generators to offload

    def _switch(self, direction: str) -> None:
        """Colocated on GPU: offload one phase's models to host memory, reload the other's."""
        if not self.swap:
            return
        off, on = (self.swap, self.ranks) if direction == "to_train" else (self.ranks, self.swap)
        res = self._all([h.to_device.remote("cpu") for h in off])
        res += self._all([h.to_device.remote(self.device) for h in on])
        t = {"t0": min(r["t0"] for r in res), "t1": max(r["t1"] for r in res)}
        self.ctx.span("phase_switch", "all_gpus", "phase_switch", t, units=len(self.swap), direction=direction)

    def run(self, iterations: int) -> None:
        try:
            w = self.ctx.plan.workload
            replay = w.algorithm in REPLAY_ALGORITHMS
            runs, passes = training_runs(w.samples_per_iteration, w.global_batch_size, w.update_epoch, replay)
            pool: list[dict[str, Any]] = []  # DAgger's replay buffer (rlinf TrajectoryReplayBuffer)
            draw = np.random.default_rng(0)  # the draws of the replay buffer, the same every run
            for k in range(iterations):
                if self.rollout_done is not None:
                    self.rollout_done(k)
                if replay:  # the iteration's samples into the buffer, then batches drawn from it
                    pool.extend(self.buffer.get(w.samples_per_iteration))
                    self.log.samples += w.samples_per_iteration
                self._switch("to_train")
                for size, count in runs:
                    for _ in range(count):
                        drawn = [pool[i] for i in draw.integers(0, len(pool), size)] if replay else None
                        self._global_batch(size, passes, drawn)
                self._switch("to_rollout")
                ref = self.ranks[0].publish.remote()
                self.ctx.get(ref)  # the snapshot exists before the version is announced
                self.log.iteration_done.append(self.ctx.rel(time.time()))
                self.weights.publish(k + 1, ref)
                self.ctx.rec.counter("weight_version/actor", self.log.iteration_done[-1], k + 1)
                self.ctx.rec.iteration_done(k + 1, self.log.iteration_done[-1])
        except BaseException as e:  # noqa: BLE001
            self.ctx.fail(e)

    def _all(self, refs: list[Any]) -> list[dict[str, Any]]:
        return [self.ctx.get(r) for r in refs]

    def _span(self, stage: str, results: list[dict[str, Any]], **args: Any) -> None:
        res = {"t0": min(r["t0"] for r in results), "t1": max(r["t1"] for r in results)}
        self.ctx.span(stage, "actor", "train", res, units=len(self.ranks), **args)

    def _global_batch(self, size: int, passes: int, drawn: list[dict[str, Any]] | None = None) -> None:
        """One global batch of ``size`` samples, ``passes`` passes (``rules.training_runs``:
        update_epoch, or one for a batch ``drawn`` from DAgger's replay buffer), each one optimizer step:
        ``learner.update_global_batch`` spread over the ranks, one Ray call per rank and
        micro-step. Advantages are normalised with the global batch's statistics; streaming's
        first pass starts before the global batch is complete, so it uses those of the samples
        received so far (the whole global batch from the second pass on)."""
        from executor.learner import advantage_stats, micro_batch_slice

        w = self.ctx.plan.workload
        R, mbs = len(self.ranks), w.micro_batch_size
        micro_steps, per_rank = micro_batching(size, R, mbs)
        if drawn is not None:
            samples: list[dict[str, Any]] = list(drawn)
        else:
            samples = [] if self.stream else self.buffer.get(size)
        for p in range(passes):
            for m in range(micro_steps):
                if self.stream and p == 0:
                    samples.extend(self.buffer.get(min((m + 1) * per_rank * R, size) - len(samples)))
                stats = advantage_stats([s["advantage"] for s in samples])
                shards = [collate(samples[slice(*micro_batch_slice(size, R, mbs, m, r))]) for r in range(R)]
                self._span("train", self._all([rk.micro_batch.remote(s, micro_steps, stats)
                                               for rk, s in zip(self.ranks, shards)]),
                           batch=sum(len(samples[slice(*micro_batch_slice(size, R, mbs, m, r))]) for r in range(R)),
                           version=self.weights.version)
                self.log.micro_batches += 1
            results = self._all([rk.step.remote() for rk in self.ranks])
            self._span("optimizer_step", results, batch=size, version=self.weights.version)
            self.log.optimizer_steps += 1
            self.log.last_metrics = {k: v for k, v in results[0].items() if k not in ("t0", "t1")}
        if drawn is None:  # a drawn batch's samples were counted as they entered the buffer
            self.log.samples += size
