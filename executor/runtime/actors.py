"""The Ray actors of a real run, one class per worker kind. Plain classes: ``modes.wire``
wraps them with ``ray.remote`` and places them in the plan's placement group.

- ``EnvWorkerActor``: one per rollout device slot; its envs in groups (pipeline stages, or the
  finer groups of asynchronous rollout), each group an ``executor.envs.EnvWorker`` (one
  subprocess per env), so a dead env process is restarted without touching the other groups.
- ``GeneratorActor``: rollout inference with the policy; loads versioned weights.
- ``TrainerActor``: one data-parallel rank of the actor (torch.distributed gloo on CPU):
  micro-batch forward + backward with gradient accumulation, then all-reduce + optimizer step.

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

# What a dead or broken env process raises on its pipe (EnvWorker turns EOF into RuntimeError).
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


class EnvWorkerActor:
    def __init__(self, index: int, cfg: Any, group_sizes: list[int], first_env: int,
                 cores: list[int] | None) -> None:
        from executor.envs import EnvWorker, _benchmark, num_tasks

        normal_priority()  # before the env processes are spawned: they inherit it
        self.index, self.cfg, self.cores = index, cfg, cores
        self.group_sizes = list(group_sizes)
        self.first = [first_env + sum(group_sizes[:g]) for g in range(len(group_sizes))]
        suite = _benchmark(cfg.suite)
        n_tasks = num_tasks(cfg.suite)
        self.language = [[suite.get_task((f + j) % n_tasks).language for j in range(n)]
                         for f, n in zip(self.first, self.group_sizes)]
        self._EnvWorker = EnvWorker
        with ThreadPoolExecutor(len(group_sizes)) as pool:  # env processes start in parallel
            self.groups = list(pool.map(self._make, range(len(group_sizes))))
        self.restarts = 0

    def _make(self, g: int):
        from executor.envs import num_tasks

        f = self.first[g]
        cfg = replace(self.cfg, task_id=f % num_tasks(self.cfg.suite), seed=self.cfg.seed + f)
        cores = None
        if self.cores:
            cores = tuple(self.cores[(f + j) % len(self.cores)] for j in range(self.group_sizes[g]))
        return self._EnvWorker(cfg, self.group_sizes[g], cores=cores)

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


class GeneratorActor:
    def __init__(self, backbone: str, scale: str, device: str, seed: int, threads: int) -> None:
        _torch_threads(threads)
        import torch

        from executor.policies import make_policy
        from executor.weight_sync import WeightReceiver

        self.policy = make_policy(backbone, scale, device=device, seed=seed).eval()
        self.receiver = WeightReceiver(self.policy)
        self.gen = torch.Generator().manual_seed(seed + 1)
        self.calls = 0

    def ready(self) -> dict[str, Any]:
        from executor.weight_sync import flatten

        return {"pid": os.getpid(), "version": self.receiver.version,
                "checksum": float(flatten(self.policy).double().sum())}

    def to_device(self, device: str) -> dict[str, Any]:
        """Colocated on GPU: offload the policy to host memory (``cpu``) or reload it."""
        t0 = time.time()
        self.policy.to(device)
        _sync(device)
        return {"t0": t0, "t1": time.time()}

    def generate(self, obs: dict[str, Any]) -> dict[str, Any]:
        t0 = time.time()
        out = self.policy.generate(obs, generator=self.gen)
        self.calls += 1
        return {"actions": out.actions.cpu().numpy(), "noise": out.noise.cpu().numpy(),
                "logprob": out.logprob.cpu().numpy(), "value": out.value.cpu().numpy(),
                "version": self.receiver.version, "t0": t0, "t1": time.time()}

    def load(self, weights: Any) -> dict[str, Any]:
        t0 = time.time()
        loaded = self.receiver.load(weights)
        t1 = time.time()
        return {"loaded": loaded, "version": self.receiver.version, "bytes": weights.nbytes,
                "checksum": float(weights.flat.double().sum()), "t0": t0, "t1": t1}


class TrainerActor:
    def __init__(self, rank: int, world: int, port: int, backbone: str, scale: str, device: str,
                 seed: int, threads: int, learner: Any) -> None:
        _torch_threads(threads)
        from executor.learner import init_distributed, make_optimizer
        from executor.policies import make_policy
        from executor.weight_sync import WeightPublisher

        self.rank, self.world, self.cfg = rank, world, learner
        if world > 1:
            os.environ["MASTER_ADDR"] = "127.0.0.1"
            os.environ["MASTER_PORT"] = str(port)
            init_distributed(rank, world, backend="gloo", port=port)
        self.policy = make_policy(backbone, scale, device=device, seed=seed)  # same init as generators
        self.params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = make_optimizer(self.policy, learner)
        self.publisher = WeightPublisher(self.policy)
        self.use_value = learner.algorithm == "ppo"
        self.optimizer.zero_grad(set_to_none=True)
        self.metrics: dict[str, float] = {}

    def ready(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "rank": self.rank}

    def micro_batch(self, mb: dict[str, Any] | None, accumulation: int) -> dict[str, Any]:
        """Forward + backward of this rank's share of one micro-batch; the loss is divided by
        the accumulation steps of the global batch, gradients accumulate until ``step``."""
        import torch

        from executor.learner import compute_losses

        t0 = time.time()
        if mb is not None:
            self.policy.train()
            adv = torch.as_tensor(mb["advantages"]).float()
            if self.cfg.norm_adv and adv.numel() > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            batch = {"obs": mb["obs"], "noise": torch.as_tensor(mb["noise"]),
                     "actions": torch.as_tensor(mb["actions"]), "logprob": torch.as_tensor(mb["logprob"]),
                     "advantages": adv, "returns": torch.as_tensor(mb["returns"])}
            losses = compute_losses(self.policy, batch, self.cfg, self.use_value)
            (losses["loss"] / accumulation).backward()
            self.metrics = {k: float(v.detach()) for k, v in losses.items()}
        return {"t0": t0, "t1": time.time()}

    def step(self) -> dict[str, Any]:
        """Gradient all-reduce over the ranks (collective), clip, one optimizer step."""
        import torch

        from executor.learner import allreduce_grads

        t0 = time.time()
        if self.world > 1:
            allreduce_grads(self.params, self.world)
        norm = torch.nn.utils.clip_grad_norm_(self.params, self.cfg.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"t0": t0, "t1": time.time(), "grad_norm": float(norm), **self.metrics}

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

    def weight_checksum(self) -> float:
        return float(sum(float(p.detach().double().sum()) for p in self.policy.parameters()))
