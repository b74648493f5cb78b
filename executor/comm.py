"""``executor profile --comm``: time all-reduce, all-gather and broadcast over torch.distributed
at increasing rank counts, into a collective-cost table (``perfmodel.schema.collectives``).

Ranks are Ray actors, one per device slot: gloo on CPU, NCCL on GPUs. With ``--address`` the
ranks are spread over the cluster's nodes (placement group ``SPREAD``) and each row records how
many nodes its ranks spanned; rank 0's node gives the rendezvous address. Each sample is one
collective between two barriers, timed on every rank; the sample is the slowest rank's time
(a collective is done when its last rank is). Raw samples are kept.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfmodel.schema.collectives import KIND, OPS, SCHEMA_VERSION, CollectiveTable, bytes_factor
from perfmodel.schema.errors import ConfigError


@dataclass(frozen=True)
class CommConfig:
    ranks: tuple[int, ...] = (2, 4)
    sizes_mb: tuple[float, ...] = (0.25, 1.0, 4.0, 16.0)
    repeats: int = 5
    warmup: int = 1
    device: str = "cpu"
    address: str | None = None

    def check(self) -> None:
        if not self.ranks or any(r < 2 for r in self.ranks):
            raise ConfigError("comm-ranks", f"must be rank counts >= 2, got {list(self.ranks)}")
        if not self.sizes_mb or any(not 0 < s <= 4096 for s in self.sizes_mb):
            raise ConfigError("comm-mb", f"must be sizes in (0, 4096] MB, got {list(self.sizes_mb)}")
        if self.repeats < 1:
            raise ConfigError("repeats", f"must be an integer >= 1, got {self.repeats}")


class CommRank:
    """One rank (a Ray actor): joins the process group, runs timed collectives."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.inited = False

    def where(self) -> dict[str, Any]:
        import ray

        from executor.learner import free_port

        ctx = ray.get_runtime_context()
        return {"ip": ray.util.get_node_ip_address(), "node_id": ctx.get_node_id(), "port": free_port(),
                "pid": os.getpid()}

    def init(self, rank: int, world: int, addr: str, port: int) -> bool:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        backend = "nccl" if self.device.startswith("cuda") else "gloo"
        if self.device.startswith("cuda"):
            torch.cuda.set_device(0)  # Ray sets CUDA_VISIBLE_DEVICES to this rank's GPU
        dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world)
        self.rank, self.world, self.inited = rank, world, True
        return True

    def bench(self, op: str, nbytes: int, repeats: int, warmup: int) -> list[float]:
        import torch
        import torch.distributed as dist

        dev = "cuda" if self.device.startswith("cuda") else "cpu"
        n = max(1, nbytes // 4)  # float32 elements
        if op == "all_gather":  # nbytes is the gathered total, as nccl-tests counts it
            part = torch.ones(max(1, n // self.world), device=dev)
            outs = [torch.empty_like(part) for _ in range(self.world)]
            call = lambda: dist.all_gather(outs, part)  # noqa: E731
        elif op == "all_reduce":
            t = torch.ones(n, device=dev)
            call = lambda: dist.all_reduce(t)  # noqa: E731
        else:
            t = torch.ones(n, device=dev)
            call = lambda: dist.broadcast(t, src=0)  # noqa: E731
        out = []
        for i in range(warmup + repeats):
            dist.barrier()
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            call()
            if dev == "cuda":
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            if i >= warmup:
                out.append(dt)
        return out

    def close(self) -> None:
        import torch.distributed as dist

        if self.inited:
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
            self.inited = False


def measure(cfg: CommConfig, progress: Any = None) -> dict[str, Any]:
    """The collective-cost table (``perfmodel.schema.collectives`` format) for ``cfg``."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    cuda = cfg.device.startswith("cuda")
    rows: list[dict[str, Any]] = []
    for world in cfg.ranks:
        bundle = {"GPU": 1, "CPU": 1} if cuda else {"CPU": 1}
        pg = placement_group([dict(bundle) for _ in range(world)], strategy="SPREAD" if cfg.address else "PACK")
        try:
            ray.get(pg.ready(), timeout=120)
        except Exception:  # noqa: BLE001 - GetTimeoutError: the cluster lacks the slots
            remove_placement_group(pg)
            have = ray.cluster_resources().get("GPU" if cuda else "CPU", 0)
            raise ConfigError("comm-ranks", f"{world} ranks need {world} {'GPU' if cuda else 'CPU'} slots; "
                              f"the Ray cluster has {have:g}") from None
        ranks = [ray.remote(CommRank).options(
            num_cpus=0.01, num_gpus=1 if cuda else 0,
            scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=i)
        ).remote(cfg.device) for i in range(world)]
        try:
            where = ray.get([r.where.remote() for r in ranks])
            nodes = len({w["node_id"] for w in where})
            ray.get([r.init.remote(i, world, where[0]["ip"], where[0]["port"]) for i, r in enumerate(ranks)],
                    timeout=120)
            for op in OPS:
                for mb in cfg.sizes_mb:
                    nbytes = int(mb * 1e6)
                    per_rank = ray.get([r.bench.remote(op, nbytes, cfg.repeats, cfg.warmup) for r in ranks])
                    samples = [max(s) for s in zip(*per_rank)]
                    med = statistics.median(samples)
                    alg = nbytes / med / 1e9
                    rows.append({"op": op, "ranks": world, "nodes": nodes, "bytes": nbytes,
                                 "samples_s": samples, "median_s": med, "algbw_GBps": alg,
                                 "busbw_GBps": alg * (bytes_factor(op, world) if op != "broadcast" else 1.0)})
                    if progress is not None:
                        progress(rows[-1])
        finally:
            with contextlib.suppress(Exception):
                ray.get([r.close.remote() for r in ranks], timeout=30)
            for r in ranks:
                with contextlib.suppress(Exception):
                    ray.kill(r)
            remove_placement_group(pg)
    table = {"kind": KIND, "schema_version": SCHEMA_VERSION, "backend": "nccl" if cuda else "gloo",
             "device": cfg.device, "rows": rows,
             "provenance": {"kind": "measured", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                            "method": "executor profile --comm: torch.distributed collectives between barriers, "
                                      "slowest rank per sample, median of samples",
                            "ray_address": cfg.address, "cluster_nodes": len(ray.nodes()),
                            "cpu_count": os.cpu_count(), "repeats": cfg.repeats, "warmup": cfg.warmup}}
    CollectiveTable.from_dict(table)  # what calibration will read
    return table


def run_comm_profile(cfg: CommConfig, verbose: bool = False, progress: Any = None) -> dict[str, Any]:
    """Start (or join, with ``cfg.address``) Ray, measure, shut down what was started."""
    import ray

    from executor.runtime.session import RaySession, quiet_output

    cfg.check()
    with quiet_output(None if verbose else Path(os.devnull)):
        session = RaySession(cfg.address, num_cpus=max(max(cfg.ranks), os.cpu_count() or 1))
        session.start()
        try:
            if cfg.address:
                have = ray.cluster_resources().get("GPU" if cfg.device.startswith("cuda") else "CPU", 0)
                if have < max(cfg.ranks):
                    raise ConfigError("comm-ranks", f"{max(cfg.ranks)} ranks but the Ray cluster at {cfg.address} "
                                      f"has {have:g} slots")
            return measure(cfg, progress)
        finally:
            session.stop()
