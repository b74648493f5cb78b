"""Weight sync from the actor to the generators, with a version number, bytes and time.

The actor publishes its weights as one flat buffer tagged with a version; a generator loads a
version only if it is newer than the one it holds. Two transports: in-process (``publish`` /
``WeightReceiver.load``, e.g. through a Ray object) and torch.distributed broadcast
(``broadcast_weights``: gloo on CPU, NCCL on GPU).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class VersionedWeights:
    version: int
    flat: torch.Tensor  # all parameters, concatenated, in the policy dtype
    nbytes: int


def flatten(module: nn.Module, device: str | torch.device = "cpu") -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).to(device) for p in module.parameters()])


@torch.no_grad()
def unflatten_into(module: nn.Module, flat: torch.Tensor) -> None:
    offset = 0
    for p in module.parameters():
        n = p.numel()
        p.copy_(flat[offset: offset + n].view_as(p))
        offset += n
    if offset != flat.numel():
        raise ValueError(f"weight buffer has {flat.numel()} elements, the policy {offset}")


class WeightPublisher:
    """The actor side: each ``publish`` snapshots the weights under the next version."""

    def __init__(self, module: nn.Module, device: str | torch.device | None = None) -> None:
        self.module = module
        self.device = device  # where snapshots live; None: the module's device
        self.version = 0
        self.last_publish_s = 0.0

    def publish(self) -> VersionedWeights:
        t0 = time.perf_counter()
        flat = flatten(self.module, self.device or next(self.module.parameters()).device)
        self.version += 1
        self.last_publish_s = time.perf_counter() - t0
        return VersionedWeights(self.version, flat, flat.numel() * flat.element_size())


class WeightReceiver:
    """The generator side: holds a policy and the version of its weights."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self.version = 0
        self.bytes_received = 0
        self.last_load_s = 0.0

    def load(self, weights: VersionedWeights) -> bool:
        """Load newer weights; returns False (and keeps its weights) for a stale version."""
        if weights.version <= self.version:
            return False
        t0 = time.perf_counter()
        unflatten_into(self.module, weights.flat.to(next(self.module.parameters()).device))
        self.version = weights.version
        self.bytes_received += weights.nbytes
        self.last_load_s = time.perf_counter() - t0
        return True


def broadcast_weights(module: nn.Module, version: int, src: int = 0, group=None) -> tuple[int, int, float]:
    """Broadcast ``module``'s weights and version from rank ``src`` to every rank of ``group``
    (collective: all ranks call it). Returns (version received, bytes, seconds)."""
    device = next(module.parameters()).device
    comm_device = device if dist.get_backend(group) == "nccl" else torch.device("cpu")
    t0 = time.perf_counter()
    ver = torch.tensor([version], dtype=torch.int64, device=comm_device)
    dist.broadcast(ver, src, group=group)
    flat = flatten(module, comm_device)
    dist.broadcast(flat, src, group=group)
    if dist.get_rank() != src:
        unflatten_into(module, flat.to(device))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return int(ver.item()), flat.numel() * flat.element_size(), time.perf_counter() - t0


def time_broadcast(nbytes: int, repeats: int, src: int = 0, device: str = "cpu") -> list[float]:
    """Seconds of ``repeats`` broadcasts of an ``nbytes`` buffer (after one warm-up); collective."""
    buf = torch.zeros(max(1, nbytes // 4), dtype=torch.float32, device=device)
    out = []
    for i in range(repeats + 1):
        dist.barrier()
        t0 = time.perf_counter()
        dist.broadcast(buf, src)
        if buf.is_cuda:
            torch.cuda.synchronize()
        if i:
            out.append(time.perf_counter() - t0)
    return out
