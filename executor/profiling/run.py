"""``executor profile``: measure the per-stage costs of the real components into a profile.

Every number in the profile is measured here (with warm-up and repeated samples) or counted from
the policy's shapes; the cost curves are least-squares linear fits whose raw samples and fit
errors are kept. The profile follows ``perfmodel.schema.profile`` (``Profile.from_dict`` accepts it).
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import asdict
from datetime import datetime, timezone


from perfmodel.backbones import get_backbone, train_state_bytes
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.hardware import accelerator_of_device
from perfmodel.schema.plan import PUBLISHED_GPUS, PUBLISHED_WORKLOAD, Workload
from perfmodel.schema.profile import Costs, Curve, EnvDensityCurve, Profile, Variability

from executor.profiling.config import ProfileConfig
from executor.profiling.host import busy_warnings, hardware, ram_gb
from executor.profiling.envcosts import load_env_costs
from executor.profiling.envs import measure_envs
from executor.profiling.driver import measure_driver
from executor.profiling.model import measure_model
from executor.profiling.sync import measure_comm

# ---------------------------------------------------------------------------------------------


def run_profile(cfg: ProfileConfig, progress: bool = True) -> Profile:
    from tqdm import tqdm

    cfg.check()
    from executor.envs import set_render_env

    set_render_env()
    backbone = get_backbone(cfg.backbone, cfg.scale)
    chunk = backbone.action_chunk
    on_gpu = cfg.device.startswith("cuda")
    if cfg.gpus_per_node is not None:
        slots = cfg.gpus_per_node
    elif on_gpu:
        import torch

        slots = torch.cuda.device_count()
    else:
        slots = min(2, os.cpu_count() or 1)
    steps = (0 if cfg.env_profile else 2 + len(cfg.env_counts) + (1 in cfg.env_counts and len(cfg.env_counts) > 1)) + len(cfg.batch_sizes) + len(cfg.train_sizes) + 2 + 1 + (2 if cfg.driver_chunk_steps > 0 and not cfg.env_profile else 0) + len(cfg.run_share)
    started = time.perf_counter()
    load_before = os.getloadavg()
    with tqdm(total=steps, file=sys.stderr, disable=not progress, unit="stage") as bar:
        envs = load_env_costs(cfg.env_profile) if cfg.env_profile else measure_envs(cfg, chunk, bar)
        model = measure_model(cfg, slots, bar)
        comm = measure_comm(cfg, model["weight_sync_bytes"], bar)
        driver = measure_driver(cfg, chunk, bar) if not cfg.env_profile else envs.get("driver")
        bar.set_description("done")
    ram = ram_gb()
    cores = os.cpu_count() or 1
    # envs per device slot: what this node's RAM holds (20 % kept for the policy and learner),
    # capped by the largest env count measured per worker
    ram_cap = int(0.8 * ram / envs["env_memory_gb"]) // slots
    if on_gpu:  # the published setup; envs run on the CPU side of the node, RAM permitting
        envs_per_gpu = PUBLISHED_WORKLOAD.total_num_envs // PUBLISHED_GPUS
    else:
        envs_per_gpu = max(1, min(ram_cap, max(cfg.env_counts) // slots))
    if on_gpu:
        wl = dict(asdict(PUBLISHED_WORKLOAD), num_action_chunks=chunk, total_num_envs=envs_per_gpu * PUBLISHED_GPUS)
    else:
        wl = dict(total_num_envs=envs_per_gpu * slots, max_episode_steps=4 * chunk, num_action_chunks=chunk,
                  rollout_epoch=1, update_epoch=1, micro_batch_size=4, global_batch_size=8, group_size=1,
                  algorithm="ppo")
    Workload.from_dict(wl, "default_workload")
    bw = comm["bandwidth_GBps"]
    costs = Costs(
        env_step_core_s=envs["env_step_core_s"],
        env_core_efficiency=envs["env_core_efficiency"],
        env_reset_s=envs["env_reset_s"],
        env_memory_gb=envs["env_memory_gb"],
        infer_s=Curve.from_dict(model["infer_s"], "costs.infer_s"),
        train_micro_batch_s=Curve.from_dict(model["train_micro_batch_s"], "costs.train_micro_batch_s"),
        optimizer_step_s=model["optimizer_step_s"],
        grad_allreduce_bytes=model["grad_allreduce_bytes"],
        weight_sync_bytes=model["weight_sync_bytes"],
        offload_s=model["offload_s"],
        reload_s=model["reload_s"],
        comm_latency_s=comm["latency_s"],
        env_density={k: EnvDensityCurve.from_dict(v, f"costs.env_density.{k}") for k, v in envs["env_density"].items()},
        driver_chunk_step_s=dict(driver["driver_chunk_step_s"]) if driver else {},
        # what was measured, and only that: a plan training another part is refused (StageCosts)
        trained_parts={cfg.trained_part: measured_part(model["extra"]["params"])},
    )
    hw = hardware(cfg.device)
    name = os.path.splitext(os.path.basename(cfg.out))[0]
    profile = Profile(
        name=name,
        backbone=cfg.backbone,
        provenance={
            "kind": "measured",
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "method": cfg.command or "executor profile",
            "scale": cfg.scale,
            "suite": cfg.suite,
            "task_id": cfg.task_id,
            "image_size": cfg.image_size,
            "hardware": hw,
            "duration_s": round(time.perf_counter() - started, 1),
            "loadavg_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
            "warnings": busy_warnings(load_before[0], {"extra": {}} if cfg.env_profile else envs),
        },
        assumptions={
            "device_slot": (f"one CUDA device ({hw.get('gpu', '')})" if on_gpu else
                            f"a 'GPU' of this CPU node is a slot of {max(1, cores // slots)} core(s): "
                            f"{slots} slots on {cores} cores; inference and training ran with "
                            f"{model['extra']['torch_threads']} torch thread(s)"),
            "env_placement": "each env in its own process pinned to one core (env i on core i mod cores); "
                             "llvmpipe with one rasteriser thread (LP_NUM_THREADS=1)",
            "env_step": f"one rendered step (physics + agentview and wrist cameras at {cfg.image_size}px); "
                        "env_step_core_s = CPU seconds per step of one env alone on one core (CPU-bound "
                        "process: equals wall time on an idle core); efficiency = that / CPU seconds per "
                        "step with every core busy",
            "env_reset": "reset() with hard reset (scene rebuild) + init state of the suite + 15 zero-action "
                         "settle steps, one env alone; CPU seconds of the env process (wall seconds in "
                         "extra.env_reset_wall_samples_s)",
            "env_memory": "RSS of one env process after stepping (renderer included)",
            **({"env_costs": f"envs run on CPU workers: env costs copied from {cfg.env_profile} "
                             f"(measured on its own machine), not measured in this run"} if cfg.env_profile else {}),
            **({"gpus_per_node": f"{slots} set by --gpus-per-node; this machine has "
                                 f"{hw.get('gpu_count', cores if not on_gpu else 1)} device(s); cpu cores and RAM "
                                 f"are this machine's"} if cfg.gpus_per_node is not None else {}),
            "inter_node_bw": "not measurable on one machine: set equal to the measured intra-node bandwidth",
            "bandwidth": f"torch.distributed {comm['backend']} broadcast between two processes on this "
                         "machine (loopback), linear fit: intercept = comm_latency_s, 1/slope = bandwidth",
            "weights": f"random weights in {model['extra']['dtype']}, {cfg.scale} scale of the backbone "
                       "shapes in perfmodel.backbones; step time does not depend on weight values",
            "model_timing": ("CPU: process CPU seconds of one call with one torch thread = its time on a "
                             "dedicated core (not counting preemption by other processes); wall samples "
                             "in extra.wall_samples_s" if not on_gpu else "wall seconds, CUDA synchronised"),
            "train_micro_batch": "forward of the full denoising chain + backward of the trained part + PPO "
                                 f"losses, no optimizer step; trained part: {cfg.trained_part} (plan.trained_part)",
            "offload": "policy weights .to('cpu') / back to the device" if on_gpu else "0 on CPU (no device memory)",
            "envs_per_gpu": (f"published LIBERO example (384 envs on 8 GPUs); at {envs['env_memory_gb']:.2f} GB "
                             f"per env that is {48 * envs['env_memory_gb']:.0f} GB of env RAM per GPU" if on_gpu else
                             f"the largest env count measured on this node ({max(cfg.env_counts)}) over its "
                             f"{slots} slots, within 80 % of node RAM at {envs['env_memory_gb']:.2f} GB per env"),
            "env_density": "costs.env_density: at each env count n that fills the worker's cores, n / cores "
                           "envs per core, the mean CPU seconds of one env's step in a lock-step group "
                           "(step_lockstep), of one env stepping by itself with no barrier (step_free) and of "
                           "one env's reset with all n resetting at once (reset); raw samples kept",
            **({"driver": driver["assumption"]} if driver else {}),
        },
        node={
            **({"gpu": gpu} if (gpu := accelerator_of_device(hw.get("gpu", "")) if on_gpu else None) else {}),
            "gpus_per_node": slots,
            "cpu_cores_per_node": cores,
            "node_ram_gb": round(ram, 2),
            "intra_node_bw_GBps": bw,
            "inter_node_bw_GBps": bw,
        },
        envs_per_gpu=envs_per_gpu,
        default_workload=wl,
        costs=costs,
        variability=Variability(env_step_cv=envs["env_step_cv"], infer_cv=model["infer_cv"],
                                train_cv=model["train_cv"]),
        extra={**envs["extra"], **model["extra"], "weight_sync_broadcast_s_vs_bytes": comm["curve"],
               "weight_sync_bandwidth_GBps": bw, **({"driver_samples": driver["extra"]} if driver else {})},
    )
    if cfg.run_share:  # after every stage measurement: the runs use the envs and policy measured above
        profile = with_run_share(profile, cfg, wl, slots, ram, progress)
    Profile.from_dict(profile.to_dict())  # the schema's checks, as any reader applies them, before writing
    profile.save(cfg.out)
    return profile


def with_run_share(profile: Profile, cfg: ProfileConfig, workload: dict, slots: int, ram: float,
                   progress: bool) -> Profile:
    """``profile`` with ``Costs.env_cpu_share`` measured by a short run of each ``cfg.run_share``
    mode on this host (executor.profiling.runshare), raw records in ``extra.run_share``."""
    from dataclasses import replace

    from tqdm import tqdm

    from executor.profiling.runshare import RUN_SHARE_ITERATIONS, measure_run_share
    from executor.runtime.modes import RunOptions

    opts = RunOptions(backbone=cfg.backbone, scale=cfg.scale, device=cfg.device, image_size=cfg.image_size,
                      suite=cfg.suite)
    with tqdm(total=len(cfg.run_share), file=sys.stderr, disable=not progress, unit="run") as bar:
        got = measure_run_share(cfg.run_share, workload, slots, profile.name, ram, opts, bar)
    return replace(
        profile,
        costs=replace(profile.costs, env_cpu_share={m: {k: g[k] for k in ("env_step", "env_reset")}
                                                    for m, g in got.items()}),
        assumptions={**profile.assumptions,
                     "env_cpu_share": f"measured per mode ({', '.join(got)}) by a {RUN_SHARE_ITERATIONS}-iteration "
                                      "run of the default workload on this host: CPU seconds the env processes got "
                                      "over the wall seconds x cores the plan gives them (the rest went to the "
                                      "driver, Ray and the actors); modes not measured: 1.0"},
        extra={**profile.extra, "run_share": {m: g["raw"] for m, g in got.items()}})


def add_run_share(base: Profile, modes: tuple[str, ...], out: str, device: str, command: str,
                  progress: bool) -> Profile:
    """``executor profile --run-share MODES --base-profile P``: ``base`` (a profile this executor
    measured) with ``Costs.env_cpu_share`` of ``modes`` measured on this host, every other cost kept
    as measured; the runs use ``base``'s own backbone, scale, suite and image size, its default
    workload on its device slots. Written to ``out`` (atomically), the provenance saying when and how."""
    from dataclasses import replace

    prov = base.provenance
    if prov.get("kind") != "measured":
        raise ConfigError("--base-profile", f"with --run-share it must be a profile executor profile measured "
                                          f"(provenance.kind measured), got {prov.get('kind')!r}: the envs' share "
                                          "of this host's cores says nothing of costs measured elsewhere")
    from executor.policies import resolve_device
    from executor.runtime.probe import this_host

    device = str(resolve_device(device))  # as the base profile recorded it (cpu, cuda:0)
    hw, here = prov.get("hardware") or {}, this_host()
    if {k: hw.get(k) for k in here} != here or hw.get("device") != device:
        raise ConfigError("--base-profile", "with --run-share it must be measured on this host and device (its "
                                          f"{hw.get('cpu_model')!r}, {hw.get('cpu_cores')} cores, {hw.get('device')}; "
                                          f"here {here['cpu_model']!r}, {here['cpu_cores']} cores, {device}): the "
                                          "share is of this host's cores")
    cfg = ProfileConfig(backbone=base.backbone, scale=prov.get("scale", "tiny"), out=out, device=device,
                        suite=prov.get("suite", "libero_spatial"), task_id=int(prov.get("task_id", 0)),
                        image_size=int(prov.get("image_size", 128)), run_share=modes, command=command)
    cfg.check()
    load = os.getloadavg()[0]
    profile = with_run_share(base, cfg, dict(base.default_workload), int(base.node["gpus_per_node"]),
                             float(base.node["node_ram_gb"]), progress)
    profile = replace(profile, provenance={**prov, "run_share_added": {
        "method": command, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "modes": list(modes), "loadavg_before_after": [round(load, 2), round(os.getloadavg()[0], 2)]}})
    Profile.from_dict(profile.to_dict())
    profile.save(out)
    return profile


def measured_part(params: dict[str, int]) -> dict[str, float]:
    """``Costs.trained_parts`` entry of the part a profile measured: its own costs (scales 1) and
    the training state of the measured policy's weights (``params``: total and trained), counted
    as the model counts it (perfmodel.backbones.train_state_bytes)."""
    return {"train_flops_scale": 1.0, "trained_bytes_scale": 1.0,
            "train_state_gb": train_state_bytes(params["total"], params["trained"]) / 1e9}


def command_line(argv: list[str]) -> str:
    return "executor " + " ".join(shlex.quote(a) for a in argv)

