"""The Ray actors of a real run, one class per worker kind. Plain classes: ``modes.wire``
wraps them with ``ray.remote`` and places them in the plan's placement group.

- ``EnvGroupsActor``: one per rollout device slot; its envs in groups (pipeline stages, or the
  finer groups of asynchronous rollout), each group an ``executor.envs.EnvProcessGroup`` (one
  subprocess per env), so a dead env process is restarted without touching the other groups.
- ``InferenceActor``: rollout inference with the policy; loads versioned weights.
- ``TrainerRankActor``: one data-parallel rank of the RL trainer (torch.distributed gloo on
  CPU): ``executor.learner``'s update, micro-batch by micro-batch, then all-reduce + step.

Every method returns its own wall-clock start and end (``time.time()``) so the driver records
spans of the work itself, not of the Ray round trip.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np

# What a dead or broken env process raises on its pipe (EnvProcessGroup turns EOF into RuntimeError).
ENV_FAULTS = (RuntimeError, OSError, EOFError)
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def normal_priority() -> None:
    """Ray starts workers at niceness 15; the profile was measured at 0, and on a shared machine
    a niced env process loses its core to every other tenant. Back to 0 where allowed."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) > 0:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
    except (OSError, AttributeError):
        pass


def _sync(device: str) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _torch_threads(n: int) -> None:
    normal_priority()
    import torch

    torch.set_num_threads(n)


def rendezvous_address() -> tuple[str, int]:
    """This node's IP and a port free on it, for the trainer ranks' process group: run in rank
    0's placement bundle, so ranks on other nodes reach it (127.0.0.1 only works on one node)."""
    import socket

    import ray

    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    return ray.util.get_node_ip_address(), port


def node_cores(positions: list[int] | None) -> list[int] | None:
    """Positions in this node's usable cores (as ``modes.worker_cores`` splits a node) -> core
    ids on this node: the driver may run on another node, with other core ids."""
    if not positions:
        return None
    try:
        avail = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return None
    return [avail[p % len(avail)] for p in positions]


def group_firsts(first_env: int, sizes: list[int]) -> list[int]:
    """The index of each env group's first env, for a worker whose envs start at ``first_env``."""
    return [first_env + sum(sizes[:g]) for g in range(len(sizes))]


def env_process_cores(cores: list[int] | None, firsts: list[int], sizes: list[int]) -> list[int | None]:
    """The core of each env process of groups starting at env indices ``firsts`` with ``sizes``
    envs, on a worker's ``cores``: env i on cores[i % len(cores)] (None: not pinned). The run's
    env workers and the host probe (``probe.probe_layout``) place envs by it."""
    return [cores[(f + j) % len(cores)] if cores else None for f, n in zip(firsts, sizes) for j in range(n)]


class EnvGroupsActor:
    """A rollout slot's envs: one ``executor.envs.EnvProcessGroup`` per env group."""

    def __init__(self, index: int, cfg: Any, group_sizes: list[int], first_env: int,
                 cores: list[int] | None) -> None:
        from executor.envs import EnvProcessGroup, _benchmark, num_tasks

        normal_priority()  # before the env processes are spawned: they inherit it
        self.index, self.cfg, self.cores = index, cfg, node_cores(cores)
        self.group_sizes = list(group_sizes)
        self.first = group_firsts(first_env, group_sizes)
        suite = _benchmark(cfg.suite)
        n_tasks = num_tasks(cfg.suite)
        self.language = [[suite.get_task((f + j) % n_tasks).language for j in range(n)]
                         for f, n in zip(self.first, self.group_sizes)]
        self._EnvProcessGroup = EnvProcessGroup
        with ThreadPoolExecutor(len(group_sizes)) as pool:  # env processes start in parallel
            self.groups = list(pool.map(self._make, range(len(group_sizes))))
        self.restarts = 0

    def _make(self, g: int):
        from executor.envs import num_tasks

        f = self.first[g]
        cfg = replace(self.cfg, task_id=f % num_tasks(self.cfg.suite), seed=self.cfg.seed + f)
        cores = env_process_cores(self.cores, [f], [self.group_sizes[g]])
        return self._EnvProcessGroup(cfg, self.group_sizes[g], cores=tuple(cores) if self.cores else None)

    def ready(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "env_pids": [w.pids for w in self.groups]}

    def _restart(self, g: int, err: str) -> dict[str, Any]:
        try:
            self.groups[g].close()
        except Exception:
            pass
        self.groups[g] = self._make(g)
        self.restarts += 1
        return {"fault": err}

    def _cpu_s(self, g: int) -> float:
        """CPU seconds (user + system) used so far by group ``g``'s env processes."""
        total = 0.0
        for pid in self.groups[g].pids:
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / _TICKS
            except (OSError, IndexError, ValueError):
                pass
        return total

    def reset(self, g: int, epoch: int) -> dict[str, Any]:
        t0, c0 = time.time(), self._cpu_s(g)
        try:
            res = self.groups[g].reset()
        except ENV_FAULTS as e:
            return self._restart(g, f"{type(e).__name__}: {e}")
        obs = res["obs"]
        obs["language"] = self.language[g]
        return {"obs": obs, "t0": t0, "t1": time.time(), "cpu_s": self._cpu_s(g) - c0}

    def chunk(self, g: int, actions: np.ndarray) -> dict[str, Any]:
        t0, c0 = time.time(), self._cpu_s(g)
        try:
            res = self.groups[g].chunk_step(actions)
        except ENV_FAULTS as e:
            return self._restart(g, f"{type(e).__name__}: {e}")
        obs = res["obs"]
        obs["language"] = self.language[g]
        return {"obs": obs, "rewards": res["rewards"], "success": res["success"],
                "steps": int(res["rewards"].size), "t0": t0, "t1": time.time(), "cpu_s": self._cpu_s(g) - c0}

    def kill_env(self, g: int, j: int = 0) -> int:
        """Fault injection: SIGKILL env ``j`` of group ``g`` (tests, ``--inject-env-fault``)."""
        pid = self.groups[g].pids[j]
        os.kill(pid, signal.SIGKILL)
        return pid

    def close(self) -> None:
        for w in self.groups:
            try:
                w.close()
            except Exception:
                pass


class InferenceActor:
    """Rollout inference on one rollout slot: the policy's ``generate``; loads versioned weights."""

    def __init__(self, backbone: str, scale: str, device: str, seed: int, threads: int,
                 shape: dict[str, Any] | None = None, algorithm: str = "ppo") -> None:
        _torch_threads(threads)
        import torch

        from executor.policies import make_policy
        from executor.weight_sync import WeightReceiver

        # shape: the plan's denoising_steps / action_horizon (None: the backbone's own)
        self.policy = make_policy(backbone, scale, device=device, seed=seed, **(shape or {})).eval()
        self.receiver = WeightReceiver(self.policy)
        self.rng = torch.Generator().manual_seed(seed + 1)
        # DAgger's expert, OPD's teacher: a second policy of the same shapes beside the student
        # (RLinf 0.3.0 huggingface_worker.py init_worker builds rollout.expert_model from the
        # policy's config), never updated; random weights of its own
        self.algorithm = algorithm
        self.teacher = (make_policy(backbone, scale, device=device, seed=seed + 7919, **(shape or {})).eval()
                        if algorithm in ("dagger", "opd") else None)

    def ready(self) -> dict[str, Any]:
        from executor.weight_sync import flatten

        return {"pid": os.getpid(), "version": self.receiver.version,
                "checksum": float(flatten(self.policy).double().sum())}

    def to_device(self, device: str) -> dict[str, Any]:
        """Colocated on GPU: offload the policy to host memory (``cpu``) or reload it."""
        t0 = time.time()
        self.policy.to(device)
        if self.teacher is not None:
            self.teacher.to(device)
        _sync(device)
        return {"t0": t0, "t1": time.time()}

    def generate(self, obs: dict[str, Any]) -> dict[str, Any]:
        import torch

        t0 = time.time()
        extra: dict[str, Any] = {}
        if self.algorithm == "dagger":
            # classic DAgger (RLinf huggingface_worker.py predict, only_save_expert False): the
            # expert acts with probability beta, else the student acts and the expert relabels;
            # beta at its floor, as perfmodel costs it (perfmodel.costs.DAGGER_BETA_MIN)
            from perfmodel.costs import DAGGER_BETA_MIN

            if float(torch.rand(1, generator=self.rng)) < DAGGER_BETA_MIN:
                out = self.teacher.generate(obs, generator=self.rng)
                target = out.actions
            else:
                out = self.policy.generate(obs, generator=self.rng)
                target = self.teacher.generate(obs, generator=self.rng).actions
            extra["target"] = target.cpu().numpy()
        else:
            out = self.policy.generate(obs, generator=self.rng)
        if self.algorithm == "opd":
            # the teacher scores the student's chunk: its log-probability of it (one forward of
            # the same shapes); the sample's advantage is teacher minus student (reverse KL)
            with torch.no_grad():
                extra["teacher_logprob"] = self.teacher.evaluate(obs, out.noise, out.actions)[0].float().cpu().numpy()
        return {"actions": out.actions.cpu().numpy(), "noise": out.noise.cpu().numpy(),
                "logprob": out.logprob.cpu().numpy(), "value": out.value.cpu().numpy(),
                "version": self.receiver.version, "t0": t0, "t1": time.time(), **extra}

    def load(self, weights: Any) -> dict[str, Any]:
        t0 = time.time()
        loaded = self.receiver.load(weights)
        t1 = time.time()
        return {"loaded": loaded, "version": self.receiver.version, "bytes": weights.nbytes,
                "checksum": float(weights.flat.double().sum()), "t0": t0, "t1": t1}


class TrainerRankActor:
    """One data-parallel rank of the RL trainer. It runs ``executor.learner``'s update of a
    global batch one micro-batch at a time, as the driver hands them over (``micro_batch``
    = ``learner.micro_batch_backward``, ``step`` = ``learner.optimizer_step``), so streaming can
    start before the global batch is complete. ``dump_dir``: save each global batch as trained
    (weights before, micro-batches, metrics) for the equivalence test."""

    def __init__(self, rank: int, world: int, addr: str, port: int, backbone: str, scale: str, device: str,
                 seed: int, threads: int, learner: Any, dump_dir: str | None = None,
                 shape: dict[str, Any] | None = None) -> None:
        _torch_threads(threads)
        from executor.learner import init_distributed, make_optimizer
        from executor.policies import make_policy
        from executor.weight_sync import WeightPublisher

        self.rank, self.world, self.cfg = rank, world, learner
        if world > 1:
            os.environ["MASTER_ADDR"] = addr
            os.environ["MASTER_PORT"] = str(port)
            init_distributed(rank, world, backend="gloo", port=port, addr=addr)
        self.policy = make_policy(backbone, scale, device=device, seed=seed,  # same init as generators
                                  trained_part=learner.trained_part, **(shape or {}))
        self.optimizer = make_optimizer(self.policy, learner)
        self.publisher = WeightPublisher(self.policy)
        self.use_value = learner.algorithm == "ppo"
        self.optimizer.zero_grad(set_to_none=True)
        self.sums: dict[str, float] = {}  # this global batch's losses, summed over micro-batches
        self.n_micro = 0
        self.dump_dir, self.steps = dump_dir, 0
        self.dump: dict[str, Any] | None = None

    def ready(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "rank": self.rank}

    def micro_batch(self, mb: dict[str, Any] | None, micro_steps: int,
                    adv_stats: tuple[float, float]) -> dict[str, Any]:
        """Forward + backward of this rank's micro-batch of the global batch (None: this rank's
        slice of the last micro-step is empty); gradients accumulate until ``step``."""
        from executor.learner import micro_batch_backward

        t0 = time.time()
        if self.dump_dir is not None and self.dump is None:
            self.dump = {"weights_before": {k: v.detach().clone() for k, v in self.policy.state_dict().items()},
                         "micro_batches": [], "micro_steps": micro_steps, "adv_stats": adv_stats}
        if mb is not None:
            losses = micro_batch_backward(self.policy, mb, adv_stats, self.cfg, self.use_value, micro_steps)
            for k, v in losses.items():
                self.sums[k] = self.sums.get(k, 0.0) + v
            self.n_micro += 1
            if self.dump is not None:
                self.dump["micro_batches"].append(mb)
        return {"t0": t0, "t1": time.time()}

    def step(self) -> dict[str, Any]:
        """Gradient all-reduce over the ranks (collective), clip, one optimizer step; the global
        batch's metrics, named as ``learner.update_global_batch`` names them."""
        from executor.learner import optimizer_step

        t0 = time.time()
        grad_norm = optimizer_step(self.policy, self.optimizer, self.cfg, self.world)
        metrics = {f"losses/{k}": v / max(1, self.n_micro) for k, v in self.sums.items()}
        metrics.update({"charts/grad_norm": grad_norm, "charts/micro_batches": float(self.n_micro)})
        self.sums, self.n_micro = {}, 0
        if self.dump is not None:
            import torch

            self.dump["metrics"] = metrics
            os.makedirs(self.dump_dir, exist_ok=True)
            torch.save(self.dump, os.path.join(self.dump_dir, f"rank{self.rank}_step{self.steps:04d}.pt"))
            self.dump = None
        self.steps += 1
        return {"t0": t0, "t1": time.time(), **metrics}

    def to_device(self, device: str) -> dict[str, Any]:
        """Colocated on GPU: offload the policy and optimizer state to host memory or reload."""
        t0 = time.time()
        self.policy.to(device)
        for state in self.optimizer.state.values():
            for k, v in state.items():
                if hasattr(v, "to") and getattr(v, "dim", lambda: 0)() > 0:
                    state[k] = v.to(device)
        _sync(device)
        return {"t0": t0, "t1": time.time()}

    def publish(self) -> Any:
        return self.publisher.publish()
