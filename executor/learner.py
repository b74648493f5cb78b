"""PPO (actor-critic with GAE) and GRPO updates for the VLA policies, CleanRL style: the one
update that tests check and that ``executor run``'s trainer ranks perform.

A *sample* is one env at one chunk step (one policy call): observation, the flow's starting noise,
the executed chunk, its log-probability and value under the behaviour policy, advantage, return.
One update: ``update_epoch`` passes over the samples; each pass is cut into global batches of
``global_batch_size`` samples (``global_batch_size / world_size`` on each data-parallel rank), each
global batch into micro-steps of one ``micro_batch_size`` micro-batch per rank
(``perfmodel.schema.rules``, as the simulator splits it) whose gradients accumulate; advantages
are normalised over the global batch; after the last micro-step, gradients are averaged over
ranks (torch.distributed all-reduce: gloo on CPU, NCCL on GPU), clipped, and one optimizer step
is applied. Metric names follow CleanRL: ``losses/*``, ``charts/*``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import EXECUTED_ALGORITHMS
from perfmodel.schema.rules import global_batches, micro_batching


@dataclass(frozen=True)
class LearnerConfig:
    algorithm: str = "ppo"  # ppo | grpo | nft | opd | dagger (perfmodel.schema.plan.EXECUTED_ALGORITHMS)
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
    trained_part: str = "action_expert"  # plan.trained_part: which weights the ranks train

    def check(self, world_size: int = 1) -> None:
        if self.algorithm not in EXECUTED_ALGORITHMS:
            raise ConfigError("algorithm", f"must be one of {', '.join(EXECUTED_ALGORITHMS)}, got {self.algorithm!r}")
        for name in ("update_epoch", "micro_batch_size", "global_batch_size", "group_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(name, f"must be an integer >= 1, got {v!r}")
        # Any global / micro batch sizes are valid: rules.micro_batching cuts a global batch that
        # the ranks' micro-batches do not divide into a shorter last micro-step.

    @classmethod
    def from_plan(cls, plan: Any, seed: int = 0, **overrides: Any) -> "LearnerConfig":
        """The run's learner configuration: batch sizes and algorithm from the plan's workload,
        the rest (gamma, lambda, clip, lr, ...) from these defaults or ``overrides``."""
        w = plan.workload
        return cls(**{**dict(algorithm=w.algorithm, update_epoch=w.update_epoch,
                                micro_batch_size=w.micro_batch_size, global_batch_size=w.global_batch_size,
                                group_size=w.group_size, seed=seed, trained_part=plan.trained_part),
                             **overrides})


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
#
# One update = ``update_epoch`` passes; each pass cuts the samples into global batches
# (``rules.global_batches``); each global batch is cut into micro-steps, each micro-step into one
# micro-batch per data-parallel rank (``rules.micro_batching``). ``update_global_batch`` is the
# update of one global batch; the executor's trainer ranks run it one micro-batch at a time
# (``micro_batch_backward`` as samples arrive, then ``optimizer_step``), the same two functions.


def _floats(x: Any) -> torch.Tensor:
    """A tensor, array or list of numbers as a float32 CPU tensor."""
    if isinstance(x, torch.Tensor):
        return x.detach().float().cpu()
    return torch.as_tensor(np.asarray(x, dtype=np.float32))


def advantage_stats(advantages: Any) -> tuple[float, float]:
    """(mean, std) that normalise a global batch's advantages (std unbiased, as torch.std);
    std = 1 when fewer than 2 samples (nothing to normalise)."""
    a = _floats(advantages).reshape(-1)  # (B,)
    if a.numel() < 2:
        return float(a.mean()) if a.numel() else 0.0, 1.0
    return float(a.mean()), float(a.std())


def micro_batch_slice(batch: int, ranks: int, micro_batch_size: int, step: int, rank: int) -> tuple[int, int]:
    """Sample range [lo, hi) of a global batch of ``batch`` samples that ``rank`` trains on in
    micro-step ``step``: micro-step m takes samples [m x P x R, (m + 1) x P x R), rank r the r-th
    run of P = samples per rank per micro-step (``rules.micro_batching``). The last micro-step
    may be short, some ranks' slices empty (lo == hi)."""
    _, per_rank = micro_batching(batch, ranks, micro_batch_size)
    base = step * per_rank * ranks
    lo = min(batch, base + rank * per_rank)
    return lo, min(batch, lo + per_rank)


def nft_losses(policy, mb: dict[str, Any]) -> dict[str, torch.Tensor]:
    """NFT's loss of one micro-batch (the shape of RLinf's embodied_nft, mse form): the implicit
    positive and negative policies v_old +- (v - v_old) regressed on the flow target, weighted
    by the advantage mapped to [0, 1] (r = sigmoid(advantage); RLinf maps its own way)."""
    actions = torch.as_tensor(mb["actions"]).float()
    noise = torch.as_tensor(mb["noise"]).float()
    gen = torch.Generator().manual_seed(int(actions.abs().sum() * 1e3) % (2**31))
    tau = torch.rand(actions.shape[0], generator=gen)  # resampled timestep per sample
    v, v_old, target = policy.nft_velocities(mb["obs"], actions, tau, noise)
    v, v_old, target = v.float(), v_old.float(), target.float().to(v.device)
    delta = v - v_old
    r = torch.sigmoid(torch.as_tensor(mb["advantages"]).float().to(v.device))[:, None, None]
    loss = (r * (v_old + delta - target).pow(2) + (1 - r) * (v_old - delta - target).pow(2)).mean()
    zero = torch.zeros((), device=v.device)
    return {"total": loss, "policy": loss, "value": zero, "entropy": zero, "approx_kl": zero, "clipfrac": zero}


def dagger_losses(policy, mb: dict[str, Any]) -> dict[str, torch.Tensor]:
    """DAgger's supervised loss of one micro-batch (RLinf 0.3.0 fsdp_dagger_policy_worker.py
    forward_actor -> openpi sft_forward): flow matching on the expert's chunk (the sample's
    ``actions``, relabelled by the expert in the rollout): one velocity evaluation at a random
    timestep regressed on the flow's target, no denoising chain."""
    actions = torch.as_tensor(mb["actions"]).float()
    noise = torch.as_tensor(mb["noise"]).float()
    gen = torch.Generator().manual_seed(int(actions.abs().sum() * 1e3) % (2**31))
    tau = torch.rand(actions.shape[0], generator=gen)
    v, _, target = policy.nft_velocities(mb["obs"], actions, tau, noise, old=False)
    loss = (v.float() - target.float().to(v.device)).pow(2).mean()
    zero = torch.zeros((), device=v.device)
    return {"total": loss, "policy": loss, "value": zero, "entropy": zero, "approx_kl": zero, "clipfrac": zero}


def compute_losses(policy, mb: dict[str, Any], cfg: LearnerConfig, use_value: bool) -> dict[str, torch.Tensor]:
    """Clipped surrogate + value + entropy losses of one micro-batch of M samples (NFT and DAgger:
    their own, ``nft_losses``, ``dagger_losses``; OPD: the surrogate on the teacher's advantages)."""
    if cfg.algorithm == "nft":
        return nft_losses(policy, mb)
    if cfg.algorithm == "dagger":
        return dagger_losses(policy, mb)
    newlogp, entropy, newvalue = policy.evaluate(mb["obs"], mb["noise"], mb["actions"])  # (M,) each
    oldlogp = torch.as_tensor(mb["logprob"]).to(newlogp.device)  # (M,)
    adv = torch.as_tensor(mb["advantages"]).float().to(newlogp.device)  # (M,) normalised per global batch
    logratio = newlogp - oldlogp
    ratio = logratio.exp()
    pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
    if use_value:
        v_loss = 0.5 * (newvalue - torch.as_tensor(mb["returns"]).to(newvalue.device)).pow(2).mean()
    else:
        v_loss = torch.zeros((), device=newlogp.device)
    ent = entropy.mean()
    loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent
    with torch.no_grad():
        approx_kl = ((ratio - 1) - logratio).mean()  # k3 estimator of KL(old || new)
        clipfrac = ((ratio - 1).abs() > cfg.clip_coef).float().mean()
    return {"total": loss, "policy": pg_loss, "value": v_loss, "entropy": ent, "approx_kl": approx_kl,
            "clipfrac": clipfrac}


def micro_batch_backward(policy, mb: dict[str, Any], adv_stats: tuple[float, float], cfg: LearnerConfig,
                         use_value: bool, micro_steps: int) -> dict[str, float]:
    """Forward + backward of one micro-batch of M samples (obs dict of (M, ...), noise / actions
    (M, chunk, adim), logprob / advantages / returns (M,)): advantages normalised with the global
    batch's ``adv_stats`` (when ``cfg.norm_adv``), loss / ``micro_steps`` so that the gradients
    accumulated over the global batch's micro-steps average them. Returns the losses."""
    policy.train()
    mb = dict(mb)
    adv = _floats(mb["advantages"])  # (M,)
    if cfg.norm_adv:
        mean, std = adv_stats
        adv = (adv - mean) / (std + 1e-8)
    mb["advantages"] = adv
    mb["noise"], mb["actions"] = torch.as_tensor(mb["noise"]), torch.as_tensor(mb["actions"])
    losses = compute_losses(policy, mb, cfg, use_value)
    (losses["total"] / micro_steps).backward()
    return {k: float(v.detach()) for k, v in losses.items()}


def optimizer_step(policy, optimizer: torch.optim.Optimizer, cfg: LearnerConfig, world: int) -> float:
    """End of a global batch: average gradients over the ranks, clip, step, clear. Returns the
    gradient norm before clipping."""
    params = [p for p in policy.parameters() if p.requires_grad]
    if world > 1:
        allreduce_grads(params, world)
    grad_norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(grad_norm)


def update_global_batch(policy, optimizer: torch.optim.Optimizer, gbatch: dict[str, Any], cfg: LearnerConfig,
                        use_value: bool, rank: int = 0, world: int = 1) -> dict[str, float]:
    """One optimizer step on a global batch of B samples (every rank holds the whole global
    batch and trains its slices, ``micro_batch_slice``): advantages normalised over the B
    samples, ``micro_steps`` micro-batches of gradient accumulation, all-reduce, clip, step.
    Returns this rank's losses averaged over its micro-batches, and the gradient norm."""
    B = batch_size(gbatch)
    micro_steps, _ = micro_batching(B, world, cfg.micro_batch_size)
    stats = advantage_stats(gbatch["advantages"])
    sums: dict[str, float] = {}
    n = 0
    for m in range(micro_steps):  # gradient accumulation over micro-batches
        lo, hi = micro_batch_slice(B, world, cfg.micro_batch_size, m, rank)
        if hi <= lo:
            continue
        losses = micro_batch_backward(policy, index_batch(gbatch, torch.arange(lo, hi)), stats, cfg,
                                      use_value, micro_steps)
        for k, v in losses.items():
            sums[k] = sums.get(k, 0.0) + v
        n += 1
    grad_norm = optimizer_step(policy, optimizer, cfg, world)
    out = {f"losses/{k}": v / max(1, n) for k, v in sums.items()}
    out.update({"charts/grad_norm": grad_norm, "charts/micro_batches": float(n)})
    return out


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
    """The whole update on an iteration's S samples (every rank holds all S): ``update_epoch``
    passes, each over a random permutation cut into global batches (``rules.global_batches``),
    one ``update_global_batch`` each. Returns the metrics averaged over the optimizer steps."""
    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    rank = dist.get_rank() if world > 1 else 0
    cfg.check(world)
    S = batch_size(batch)
    gen = torch.Generator().manual_seed(cfg.seed)
    sums: dict[str, float] = {}
    steps = 0
    optimizer.zero_grad(set_to_none=True)
    for _epoch in range(cfg.update_epoch):
        perm = torch.randperm(S, generator=gen)  # (S,)
        start = 0
        for size in global_batches(S, cfg.global_batch_size):
            gbatch = index_batch(batch, perm[start: start + size])
            start += size
            for k, v in update_global_batch(policy, optimizer, gbatch, cfg, use_value, rank, world).items():
                sums[k] = sums.get(k, 0.0) + v
            steps += 1
    metrics = {k: v / max(1, steps) for k, v in sums.items() if k != "charts/micro_batches"}
    metrics.update({"charts/optimizer_steps": float(steps),
                    "charts/micro_batches": sums.get("charts/micro_batches", 0.0)})
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
    """The update's loss on the whole batch (advantages normalised over it, as in the update)."""
    b = dict(batch)
    if cfg.norm_adv:
        mean, std = advantage_stats(b["advantages"])
        b["advantages"] = (torch.as_tensor(b["advantages"]).float() - mean) / (std + 1e-8)
    return float(compute_losses(policy, b, cfg, use_value)["total"])


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
    rewards = torch.from_numpy(rng.standard_normal(n).astype(np.float32)).to(out.value.device)  # the policy's device
    return {"obs": obs, "noise": out.noise, "actions": out.actions, "logprob": out.logprob,
            "values": out.value, "advantages": rewards - out.value, "returns": rewards}
