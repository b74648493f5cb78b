"""Each mode is one declarative wiring of the shared driver mechanisms and Ray actors,
as in ``perfmodel.sim.modes``, from the same mode table and placement (``perfmodel.schema``), so the
executor groups envs exactly as the simulator does).

| mode          | device slots        | rollout waits for        | actor trains         | inference        |
|---------------|---------------------|--------------------------|----------------------|------------------|
| colocated     | shared, phase swaps | weights of iteration k-1 | after whole rollout  | lock-step        |
| disaggregated | rollout : actor     | weights of iteration k-1 | after whole rollout  | lock-step        |
| train_async   | rollout : actor     | staleness bound          | per global batch     | lock-step        |
| rollout_async | rollout : actor     | staleness bound          | per global batch     | dynamic batching |
| streamer      | rollout : actor     | staleness bound          | per micro-batch      | dynamic batching |

Placement: one placement-group bundle per device slot (``{"CPU": 1}`` on a CPU node,
``{"GPU": 1, "CPU": c}`` with CUDA). Rollout slot i holds env worker i and generator i; the
actor's ranks take the remaining slots (colocated: the same slots as the rollout).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from perfmodel.schema.plan import Plan
from executor.runtime.driver import (Actor, Context, EnvWorker, Generator, RolloutLog, SampleBuffer,
                                     TrainLog, WeightStore)


@dataclass(frozen=True)
class RunOptions:
    backbone: str = "pi05"
    scale: str = "tiny"
    device: str = "cpu"
    image_size: int = 128
    suite: str = "libero_spatial"
    seed: int = 0
    torch_threads: int = 1
    hard_reset: bool = True
    inject_env_fault: tuple[int, int] | None = None  # (iteration, env worker): kill one env once
    inject_actor_fault: int | None = None  # iteration at which generator 0's Ray actor is killed


@dataclass
class Wiring:
    workers: list[EnvWorker]
    generators: list[Generator]
    actor: Actor
    buffer: SampleBuffer
    weights: WeightStore
    rollout_log: RolloutLog
    train_log: TrainLog
    dynamic_batching: bool
    handles: dict[str, list[Any]]
    placement_group: Any


def group_sizes(plan: Plan) -> list[int]:
    return plan.placement.group_sizes


def worker_cores(plan: Plan, index: int) -> list[int] | None:
    """Cores to pin env worker ``index``'s env processes to: the node's cores split evenly
    over its env workers (``Plan.env_cores_per_worker``), as the simulator gives each worker
    its share. None when the node has fewer cores than the plan says (no pinning)."""
    try:
        avail = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return None
    per = max(1, int(plan.env_cores_per_worker))
    local = index % max(1, min(plan.rollout_gpus, plan.cluster.gpus_per_node))
    cores = [avail[(local * per + j) % len(avail)] for j in range(per)]
    return cores


def bundles(plan: Plan, cuda: bool) -> list[dict[str, float]]:
    if cuda:
        return [{"GPU": 1, "CPU": 1} for _ in range(plan.cluster.gpus)]
    return [{"CPU": 1} for _ in range(plan.cluster.gpus)]


def wire(ctx: Context, opts: RunOptions, learner_cfg: Any) -> Wiring:
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from executor.envs import EnvConfig
    from executor.learner import free_port
    from executor.runtime.actors import EnvWorkerActor, GeneratorActor, TrainerActor

    plan = ctx.plan
    m = plan.mechanisms
    w = plan.workload
    cuda = opts.device.startswith("cuda")
    pg = placement_group(bundles(plan, cuda), strategy="PACK")
    ray.get(pg.ready(), timeout=120)

    def on(slot: int, gpu: float = 0.0):
        return dict(scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_bundle_index=slot), num_cpus=0.01,
            num_gpus=gpu)

    g_r, g_a = plan.rollout_gpus, plan.actor_gpus
    actor_slots = list(range(g_r)) if not m.disaggregated else list(range(g_r, g_r + g_a))
    sizes = group_sizes(plan)
    env_cfg = EnvConfig(suite=opts.suite, image_size=opts.image_size, max_episode_steps=w.max_episode_steps,
                        num_action_chunks=w.num_action_chunks, hard_reset=opts.hard_reset, seed=opts.seed)
    share = 0.5 if cuda else 0.0  # generator and actor rank share a GPU in colocated mode
    gpu_gen = (share if not m.disaggregated else 1.0) if cuda else 0.0
    env_actors = [ray.remote(EnvWorkerActor).options(max_concurrency=len(sizes) + 4, **on(i)).remote(
        i, env_cfg, sizes, i * plan.envs_per_worker, worker_cores(plan, i)) for i in range(g_r)]
    gen_actors = [ray.remote(GeneratorActor).options(max_concurrency=4, **on(i, gpu_gen)).remote(
        opts.backbone, opts.scale, opts.device if not cuda else "cuda", opts.seed, opts.torch_threads)
        for i in range(g_r)]
    port = free_port()
    gpu_act = (share if not m.disaggregated else 1.0) if cuda else 0.0
    ranks = [ray.remote(TrainerActor).options(**on(s, gpu_act)).remote(
        r, g_a, port, opts.backbone, opts.scale, opts.device if not cuda else "cuda", opts.seed,
        opts.torch_threads, learner_cfg) for r, s in enumerate(actor_slots)]
    ready = ray.get([a.ready.remote() for a in env_actors + gen_actors + ranks])
    ctx.initial_weight_checksum = ready[len(env_actors)]["checksum"]

    buffer, weights = SampleBuffer(ctx), WeightStore(ctx)
    rollout_log, train_log = RolloutLog(ctx, g_r), TrainLog()
    staleness = plan.max_staleness if m.async_training else 0
    generators = [Generator(ctx, f"rollout_gpu_{i}", h, b_max=plan.effective_b_max, t_max=plan.t_max_s)
                  for i, h in enumerate(gen_actors)]
    cores = max(1.0, plan.env_cores_per_worker)
    fault = opts.inject_env_fault
    workers = [EnvWorker(ctx, i, h, sizes, cores, gen, buffer, weights, rollout_log, staleness,
                         dynamic=m.dynamic_batching,
                         inject_fault=(fault[0], 0) if fault is not None and fault[1] == i else None,
                         kill_generator_at=opts.inject_actor_fault if i == 0 else None)
               for i, (h, gen) in enumerate(zip(env_actors, generators))]
    actor = Actor(ctx, ranks, buffer, weights, train_log,
                  rollout_done=None if m.async_training else rollout_log.wait_all_done,
                  stream=m.streaming,
                  swap=gen_actors if (cuda and not m.disaggregated) else None, device="cuda")
    return Wiring(workers, generators, actor, buffer, weights, rollout_log, train_log, m.dynamic_batching,
                  {"env_workers": env_actors, "generators": gen_actors, "trainers": ranks}, pg)
