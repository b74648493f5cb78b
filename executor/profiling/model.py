"""Suite: the stand-in policy's inference, training step and optimizer step, on the profile's device."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Callable

import numpy as np


from executor.profiling.config import ProfileConfig
from executor.profiling.fit import cv, fit_linear, timed

# ---------------------------------------------------------------------------------------------
# Model measurements


def measure_model(cfg: ProfileConfig, slots: int, bar) -> dict[str, Any]:
    import torch

    from executor.learner import LearnerConfig, advantage_stats, make_optimizer, micro_batch_backward, random_batch
    from executor.policies import make_policy
    from executor.weight_sync import WeightPublisher, WeightReceiver

    dev = torch.device(cfg.device)
    if dev.type == "cpu":  # one device slot = cpu_count / slots cores
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // slots))
    # one torch thread on CPU: CPU seconds = seconds on a dedicated core (robust to other tenants)
    cpu_time = dev.type == "cpu" and torch.get_num_threads() == 1
    wall_samples: dict[str, list] = {"infer_s": [], "train_micro_batch_s": []}

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    peak_gb: dict[str, list] = {"infer": [], "train_micro_batch": []}  # CUDA: peak allocated per size

    def reset_peak() -> None:
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)

    def record_peak(stage: str, size: int) -> None:
        if dev.type == "cuda":
            peak_gb[stage].append([size, round(torch.cuda.max_memory_allocated(dev) / 1e9, 3)])

    bar.set_description("building policy")
    policy = make_policy(cfg.backbone, cfg.scale, cfg.device, trained_part=cfg.trained_part)
    policy.eval()
    rng = np.random.default_rng(1)

    def obs(n: int) -> dict[str, Any]:
        return {"images": rng.integers(0, 256, (n, 2, cfg.image_size, cfg.image_size, 3), dtype=np.uint8),
                "state": rng.standard_normal((n, 9)).astype(np.float32), "language": ["put the bowl on the plate"] * n}

    infer_samples = []
    for b in cfg.batch_sizes:
        bar.set_description(f"inference batch {b}")
        o = obs(b)
        walls: list[float] = []
        reset_peak()
        infer_samples.append((float(b), timed(lambda: policy.generate(o), cfg.repeats, 2, sync, cpu_time, walls)))
        record_peak("infer", b)
        wall_samples["infer_s"].append([float(b), walls])
        bar.update(1)

    lcfg = LearnerConfig(trained_part=cfg.trained_part)
    opt = make_optimizer(policy, lcfg)
    train_samples = []
    for m in cfg.train_sizes:
        bar.set_description(f"train micro-batch {m}")
        batch = random_batch(policy, m, cfg.image_size, seed=m)
        policy.train()

        stats = advantage_stats(batch["advantages"])

        def fwd_bwd() -> None:  # the trainer ranks' micro-batch work (learner.micro_batch_backward)
            opt.zero_grad(set_to_none=True)
            micro_batch_backward(policy, batch, stats, lcfg, True, 1)

        walls = []
        reset_peak()
        train_samples.append((float(m), timed(fwd_bwd, cfg.repeats, 1, sync, cpu_time, walls)))
        record_peak("train_micro_batch", m)
        wall_samples["train_micro_batch_s"].append([float(m), walls])
        bar.update(1)
    bar.set_description("optimizer step")
    opt_s = timed(opt.step, cfg.repeats, 1, sync, cpu_time)  # gradients of the last micro-batch are present
    bar.update(1)
    opt.zero_grad(set_to_none=True)
    counts = policy.param_counts()
    weight_bytes, grad_bytes = policy.weight_bytes(), policy.grad_bytes()
    # in-process versioned weight sync actor -> generator on the same device
    bar.set_description("weight sync (in-process)")
    pub = WeightPublisher(policy)
    gen_policy = make_policy(cfg.backbone, cfg.scale, cfg.device, seed=1)
    recv = WeightReceiver(gen_policy)
    inproc = []
    for _ in range(2 if dev.type == "cuda" else 3):
        t0 = time.perf_counter()
        recv.load(pub.publish())
        sync()
        inproc.append(time.perf_counter() - t0)
    del gen_policy, recv
    offload, reload = [0.0], [0.0]
    host_link: dict[str, Any] = {}
    if dev.type == "cuda":
        bar.set_description("offload / reload")
        del opt
        torch.cuda.empty_cache()
        offload, reload = [], []
        for _ in range(2):
            t0 = time.perf_counter()
            policy.to("cpu")
            sync()
            offload.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            policy.to(dev)
            sync()
            reload.append(time.perf_counter() - t0)
        host_link = measure_host_link(dev, min(weight_bytes, 2e9), sync)
    bar.update(1)
    infer = fit_linear(infer_samples)
    train = fit_linear(train_samples)
    b_big, m_big = max(cfg.batch_sizes), max(cfg.train_sizes)
    t_inf = statistics.fmean(dict(infer_samples)[float(b_big)])
    t_tr = statistics.fmean(dict(train_samples)[float(m_big)])
    return {
        "infer_s": infer,
        "train_micro_batch_s": train,
        "optimizer_step_s": statistics.fmean(opt_s),
        "grad_allreduce_bytes": float(grad_bytes),
        "weight_sync_bytes": float(weight_bytes),
        "offload_s": statistics.fmean(offload),
        "reload_s": statistics.fmean(reload),
        "infer_cv": statistics.fmean(cv(ys) for _, ys in infer_samples),
        "train_cv": statistics.fmean(cv(ys) for _, ys in train_samples),
        "extra": {
            "params": counts,
            "dtype": str(policy.dtype).replace("torch.", ""),
            "torch_threads": torch.get_num_threads(),
            "inference_flops_per_sample": policy.inference_flops(1),
            "train_flops_per_sample": policy.train_flops(1),
            "inference_bytes_per_call_batch1": policy.inference_bytes(1),
            "achieved_inference_tflops": policy.inference_flops(b_big) / t_inf / 1e12,
            "achieved_train_tflops": policy.train_flops(m_big) / t_tr / 1e12,
            "optimizer_step_samples_s": opt_s,
            "timing": "process CPU seconds (one torch thread)" if cpu_time else "wall seconds (device synchronised)",
            "wall_samples_s": wall_samples,
            "weight_sync_inprocess_s": inproc,
            "offload_samples_s": offload,
            "reload_samples_s": reload,
            "peak_memory_gb": peak_gb if dev.type == "cuda" else {},
            "host_link": host_link,
        },
    }




def measure_host_link(dev: Any, nbytes: float, sync: Callable[[], None], repeats: int = 3) -> dict[str, Any]:
    """Host<->device copy bandwidth of one ``nbytes`` buffer, pinned and pageable host memory: what
    bounds offload/reload (``policy.to`` above copies pageable memory) and a host-path collective."""
    import torch

    n = int(nbytes)
    out: dict[str, Any] = {"bytes": n}
    try:
        gpu = torch.empty(n, dtype=torch.uint8, device=dev)
        for kind, pinned in (("pinned", True), ("pageable", False)):
            host = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
            for name, copy in (("h2d", lambda: gpu.copy_(host, non_blocking=pinned)),
                               ("d2h", lambda: host.copy_(gpu, non_blocking=pinned))):
                secs = timed(copy, repeats, 1, sync)
                out[f"{kind}_{name}_GBps"] = round(n / statistics.median(secs) / 1e9, 3)
                out[f"{kind}_{name}_samples_s"] = secs
            del host
        del gpu
    except (RuntimeError, MemoryError) as e:  # an extra reading: the profile stands without it, and says why
        out["error"] = f"{type(e).__name__}: {e}"
    return out
