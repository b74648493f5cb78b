"""Suite: weight-sync bandwidth, a torch.distributed broadcast between two processes on this machine."""

from __future__ import annotations

import os
from typing import Any



from executor.profiling.config import ProfileConfig
from executor.profiling.fit import fit_linear

# ---------------------------------------------------------------------------------------------
# Communication: torch.distributed broadcast between two processes on this machine


def _bcast_main(rank: int, world: int, port: int, sizes: list[int], repeats: int, backend: str, q) -> None:
    import torch

    from executor.learner import init_distributed
    from executor.weight_sync import time_broadcast

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    init_distributed(rank, world, backend)
    device = f"cuda:{rank}" if backend == "nccl" else "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank)
    res = [(n, time_broadcast(n, max(10, repeats), 0, device)) for n in sizes]
    if rank == 0:
        q.put(res)
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()


def measure_comm(cfg: ProfileConfig, weight_bytes: float, bar) -> dict[str, Any]:
    import torch
    import torch.multiprocessing as tmp

    from executor.learner import free_port

    bar.set_description("weight sync bandwidth")
    sizes = sorted({int(mb * 1e6) for mb in cfg.sync_mb} | ({int(weight_bytes)} if weight_bytes <= 256e6 else set()))
    backend = "nccl" if cfg.device.startswith("cuda") and torch.cuda.device_count() >= 2 else "gloo"
    ctx = tmp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_bcast_main, args=(r, 2, port, sizes, cfg.repeats, backend, q)) for r in range(2)]
    for p in procs:
        p.start()
    res = q.get(timeout=600)
    for p in procs:
        p.join(timeout=60)
    samples = [(float(n), ts) for n, ts in res]
    curve = fit_linear(samples)
    if curve["slope"] <= 0:  # noise swamped the size dependence: bandwidth = bytes / time
        curve = fit_linear(samples, origin=True)
    bar.update(1)
    bw = 1.0 / curve["slope"] / 1e9
    return {"curve": curve, "bandwidth_GBps": bw, "latency_s": max(0.0, curve["intercept"]), "backend": backend}


