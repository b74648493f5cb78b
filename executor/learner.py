"""PPO (actor-critic with GAE) and GRPO updates for the VLA policies, CleanRL style.

A *sample* is one env at one chunk step (one policy call): observation, the flow's starting noise,
the executed chunk, its log-probability and value under the behaviour policy, advantage, return.
One update: ``update_epoch`` passes over the samples; each pass is cut into global batches of
``global_batch_size`` samples (``global_batch_size / world_size`` on each data-parallel rank), each
global batch into micro-batches of ``micro_batch_size`` whose gradients accumulate; after the last
micro-batch, gradients are averaged over ranks (torch.distributed all-reduce: gloo on CPU, NCCL on
GPU), clipped, and one optimizer step is applied.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from perfmodel.schema.errors import ConfigError


@dataclass(frozen=True)
class LearnerConfig:
    algorithm: str = "ppo"  # ppo | grpo
    update_epoch: int = 1
    micro_batch_size: int = 4
    global_batch_size: int = 8
    lr: float = 1e-4
    clip_coef: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    max_grad_norm: float = 1.0
    gamma: float = 0.99
    gae_lambda: float = 0.95
    group_size: int = 1
    norm_adv: bool = True
    seed: int = 0

    def check(self, world_size: int = 1) -> None:
        if self.algorithm not in ("ppo", "grpo"):
            raise ConfigError("algorithm", f"must be ppo or grpo, got {self.algorithm!r}")
        for name in ("update_epoch", "micro_batch_size", "global_batch_size", "group_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(name, f"must be an integer >= 1, got {v!r}")
        if self.global_batch_size % (self.micro_batch_size * world_size):
            raise ConfigError("global_batch_size", f"must be a multiple of micro_batch_size x ranks "
                              f"({self.micro_batch_size} x {world_size}), got {self.global_batch_size}")


# ---------------------------------------------------------------------------------------------
# Advantages


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, last_value: torch.Tensor,
                gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over chunk steps. rewards, values, dones: (T, N) (dones[t] = episode ended after step
    t); last_value: (N,) bootstrap. Returns advantages (T, N) and returns (T, N)."""
    T = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    last_gae = torch.zeros_like(last_value)
    for t in reversed(range(T)):
        not_done = 1.0 - dones[t].float()
        next_value = last_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_value * not_done - values[t]
        last_gae = delta + gamma * lam * not_done * last_gae
        adv[t] = last_gae
    return adv, adv + values


def grpo_advantages(episode_returns: torch.Tensor, group_size: int) -> torch.Tensor:
    """Group-relative advantages: (N,) returns of N episodes, consecutive groups of ``group_size``
    episodes from the same initial state -> (N,) (R - group mean) / (group std + eps)."""
    n = episode_returns.shape[0]
    if group_size < 2 or n % group_size:
        raise ConfigError("group_size", f"must be >= 2 and divide the {n} episodes, got {group_size}")
    g = episode_returns.float().view(n // group_size, group_size)
    return ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + 1e-6)).view(n)


# ---------------------------------------------------------------------------------------------
# Batches


def index_batch(batch: dict[str, Any], idx: torch.Tensor) -> dict[str, Any]:
    """Select samples ``idx`` from a batch whose values are tensors/arrays (S, ...) or the obs dict."""
    out: dict[str, Any] = {}
    for k, v in batch.items():
        if isinstance(v, dict):
            out[k] = index_batch(v, idx)
        elif isinstance(v, torch.Tensor):
            out[k] = v[idx.to(v.device)]
        elif isinstance(v, np.ndarray):
            out[k] = v[idx.cpu().numpy()]
        else:
            out[k] = [v[i] for i in idx.tolist()]
    return out


def batch_size(batch: dict[str, Any]) -> int:
    return int(batch["logprob"].shape[0])


# ---------------------------------------------------------------------------------------------
# The update


def compute_losses(policy, mb: dict[str, Any], cfg: LearnerConfig, use_value: bool) -> dict[str, torch.Tensor]:
    """Clipped surrogate + value + entropy losses of one micro-batch of M samples."""
    newlogp, entropy, newvalue = policy.evaluate(mb["obs"], mb["noise"], mb["actions"])  # (M,) each
    oldlogp = mb["logprob"].to(newlogp.device)  # (M,)
    adv = mb["advantages"].to(newlogp.device)  # (M,) normalised per global batch by the caller
    logratio = newlogp - oldlogp
    ratio = logratio.exp()
    pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
    if use_value:
        v_loss = 0.5 * (newvalue - mb["returns"].to(newvalue.device)).pow(2).mean()
    else:
        v_loss = torch.zeros((), device=newlogp.device)
    ent = entropy.mean()
    loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent
    with torch.no_grad():
        approx_kl = ((ratio - 1) - logratio).mean()  # k3 estimator of KL(old || new)
        clipfrac = ((ratio - 1).abs() > cfg.clip_coef).float().mean()
    return {"loss": loss, "policy": pg_loss, "value": v_loss, "entropy": ent, "approx_kl": approx_kl,
            "clipfrac": clipfrac}


def allreduce_grads(params: list[torch.nn.Parameter], world_size: int) -> None:
    """Average gradients over data-parallel ranks in one flat buffer (one collective)."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= world_size
    offset = 0
    for p, g in zip(params, grads):
        n = g.numel()
        p.grad = flat[offset: offset + n].view_as(p).clone()
        offset += n


def policy_update(policy, optimizer: torch.optim.Optimizer, batch: dict[str, Any], cfg: LearnerConfig,
                  use_value: bool) -> dict[str, float]:
    """The one update loop shared by PPO and GRPO. ``batch`` holds this rank's S samples:
    obs (dict of (S, ...)), noise / actions (S, chunk, adim), logprob / values / advantages /
    returns (S,). Returns namespaced metrics averaged over micro-batches."""
    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    cfg.check(world)
    params = [p for p in policy.parameters() if p.requires_grad]
    S = batch_size(batch)
    local_global = cfg.global_batch_size // world  # samples per optimizer step on this rank
    n_micro = local_global // cfg.micro_batch_size  # gradient-accumulation steps
    if S < local_global:
        raise ConfigError("global_batch_size", f"needs {local_global} samples per rank, this rank has {S}")
    gen = torch.Generator().manual_seed(cfg.seed)
    sums: dict[str, float] = {}
    n_mb = 0
    steps = 0
    grad_norm = torch.zeros(())
    policy.train()
    for _epoch in range(cfg.update_epoch):
        perm = torch.randperm(S, generator=gen)
        for start in range(0, S - local_global + 1, local_global):  # one optimizer step each
            gidx = perm[start: start + local_global]  # (local_global,)
            gbatch = index_batch(batch, gidx)
            adv = gbatch["advantages"].float()
            if cfg.norm_adv and adv.numel() > 1:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            gbatch["advantages"] = adv
            optimizer.zero_grad(set_to_none=True)
            for m in range(n_micro):  # gradient accumulation over micro-batches
                mb = index_batch(gbatch, torch.arange(m * cfg.micro_batch_size, (m + 1) * cfg.micro_batch_size))
                losses = compute_losses(policy, mb, cfg, use_value)
                (losses["loss"] / n_micro).backward()
                for k, v in losses.items():
                    sums[k] = sums.get(k, 0.0) + float(v.detach())
                n_mb += 1
            if world > 1:
                allreduce_grads(params, world)
            grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
            steps += 1
    metrics = {f"losses/{'total' if k == 'loss' else k}": v / max(1, n_mb) for k, v in sums.items()}
    metrics.update({"train/grad_norm": float(grad_norm), "train/optimizer_steps": float(steps),
                    "train/micro_batches": float(n_mb)})
    return metrics


def ppo_update(policy, optimizer, batch, cfg: LearnerConfig) -> dict[str, float]:
    """PPO actor-critic: clipped surrogate on GAE advantages + value regression on returns."""
    return policy_update(policy, optimizer, batch, cfg, use_value=True)


def grpo_update(policy, optimizer, batch, cfg: LearnerConfig) -> dict[str, float]:
    """GRPO: the same clipped surrogate on group-relative advantages (``grpo_advantages``), no
    critic (the value head gets no loss)."""
    return policy_update(policy, optimizer, batch, cfg, use_value=False)


def make_optimizer(policy, cfg: LearnerConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=0.0)


@torch.no_grad()
def evaluate_loss(policy, batch: dict[str, Any], cfg: LearnerConfig, use_value: bool) -> float:
    """The update's loss on the whole batch (advantages normalised as in the update)."""
    b = dict(batch)
    adv = b["advantages"].float()
    b["advantages"] = (adv - adv.mean()) / (adv.std() + 1e-8) if cfg.norm_adv and adv.numel() > 1 else adv
    return float(compute_losses(policy, b, cfg, use_value)["loss"])


# ---------------------------------------------------------------------------------------------
# Distributed helpers


def init_distributed(rank: int, world_size: int, backend: str | None = None, port: int = 29511,
                     addr: str = "127.0.0.1") -> None:
    """Start a process group: gloo on CPU, NCCL when CUDA is available (unless ``backend``)."""
    os.environ.setdefault("MASTER_ADDR", addr)
    os.environ.setdefault("MASTER_PORT", str(port))
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    dist.init_process_group(backend, rank=rank, world_size=world_size)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_batch(policy, n: int, image_size: int = 128, seed: int = 0) -> dict[str, Any]:
    """A fixed batch of ``n`` samples drawn from ``policy`` on random observations, with random
    rewards turned into advantages/returns (tests and the profiler's train-time measurements)."""
    rng = np.random.default_rng(seed)
    obs = {
        "images": rng.integers(0, 256, (n, policy.backbone.images, image_size, image_size, 3), dtype=np.uint8),
        "state": rng.standard_normal((n, 9)).astype(np.float32),
        "language": ["put the bowl on the plate"] * n,
    }
    out = policy.generate(obs, generator=torch.Generator().manual_seed(seed))
    rewards = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
    return {"obs": obs, "noise": out.noise, "actions": out.actions, "logprob": out.logprob,
            "values": out.value, "advantages": rewards - out.value, "returns": rewards}
