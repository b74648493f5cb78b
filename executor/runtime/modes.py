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
``{"GPU": 1, "CPU": c}`` with CUDA), bundle index = global device index. The slots come from
``plan.placement.slots()``, as the simulator's: rollout slot i holds env worker i and its
inference actor, actor slot r trainer rank r (colocated: the same slots as the rollout).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from perfmodel.schema.plan import Plan
from perfmodel.schema.rules import required_weight_version
from executor.runtime.driver import (Context, EnvWorkerLoop, InferenceClient, RolloutLog, SampleBuffer,
                                     TrainerLoop, TrainLog, WeightStore)


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
    dump_updates: str | None = None  # directory: trainer ranks save each global batch (tests)


@dataclass(frozen=True)
class Layout:
    """What ``wire`` builds, as plain data read from the plan's placement and the mode table
    (compared with the simulator's wiring by tests, without starting Ray)."""

    bundles: int  # placement-group bundles, one per device slot (global device index)
    rollout_slots: list[int]  # device of env worker i and its inference actor
    actor_slots: list[int]  # device of trainer rank r
    group_sizes: list[int]  # envs per env group, the same on every worker
    first_env: list[int]  # global index of env worker i's first env
    env_cores: list[list[int] | None]  # cores env worker i's env processes are pinned to
    env_cores_per_worker: float  # cores the model gives each worker (the span's units)
    staleness: int  # rollout iteration k needs weights version >= required_weight_version(k, staleness)
    dynamic_batching: bool
    b_max: int
    t_max_s: float
    streaming: bool
    trains_after_rollout: bool  # synchronous: the trainer waits for the whole iteration's rollout
    phase_swaps: bool  # colocated: the models of the two phases share the slots

    def required_version(self, iteration: int) -> int:
        return required_weight_version(iteration, self.staleness)


def worker_cores(plan: Plan, slot: int) -> list[int] | None:
    """Cores to pin the env processes of the env worker on device ``slot`` to: its node's cores
    split evenly over the node's env workers (``placement.env_cores_per_worker`` each, in slot
    order), as the simulator gives each worker its share. None when this host exposes no
    affinity."""
    try:
        avail = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return None
    pl = plan.placement
    rollout, _ = pl.slots()
    node = slot // pl.gpus_per_node
    local = sum(1 for d in rollout if d // pl.gpus_per_node == node and d < slot)
    per = max(1, int(pl.env_cores_per_worker))
    return [avail[(local * per + j) % len(avail)] for j in range(per)]


def layout(plan: Plan) -> Layout:
    pl, m = plan.placement, plan.mechanisms
    rollout, actor = pl.slots()
    return Layout(
        bundles=plan.cluster.gpus, rollout_slots=list(rollout), actor_slots=list(actor),
        group_sizes=list(pl.group_sizes), first_env=[i * pl.envs_per_worker for i in range(len(rollout))],
        env_cores=[worker_cores(plan, d) for d in rollout],
        env_cores_per_worker=max(1.0, pl.env_cores_per_worker),
        staleness=plan.max_staleness if m.async_training else 0,
        dynamic_batching=m.dynamic_batching, b_max=plan.effective_b_max, t_max_s=plan.t_max_s,
        streaming=m.streaming, trains_after_rollout=not m.async_training, phase_swaps=not m.disaggregated)


@dataclass
class Wiring:
    workers: list[EnvWorkerLoop]
    generators: list[InferenceClient]
    actor: TrainerLoop
    buffer: SampleBuffer
    weights: WeightStore
    rollout_log: RolloutLog
    train_log: TrainLog
    dynamic_batching: bool
    handles: dict[str, list[Any]]
    placement_group: Any
    layout: Layout | None = None


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
    from executor.runtime.actors import EnvGroupsActor, InferenceActor, TrainerRankActor

    plan = ctx.plan
    lay = layout(plan)
    w = plan.workload
    cuda = opts.device.startswith("cuda")
    pg = placement_group(bundles(plan, cuda), strategy="PACK")
    ray.get(pg.ready(), timeout=120)

    def on(slot: int, gpu: float = 0.0):
        return dict(scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_bundle_index=slot), num_cpus=0.01,
            num_gpus=gpu)

    env_cfg = EnvConfig(suite=opts.suite, image_size=opts.image_size, max_episode_steps=w.max_episode_steps,
                        num_action_chunks=w.num_action_chunks, hard_reset=opts.hard_reset, seed=opts.seed)
    device = "cuda" if cuda else opts.device
    # Colocated on a GPU: the inference actor and the trainer rank share the slot's GPU.
    gpu_share = (0.5 if lay.phase_swaps else 1.0) if cuda else 0.0
    sizes = lay.group_sizes
    env_actors = [ray.remote(EnvGroupsActor).options(max_concurrency=len(sizes) + 4, **on(d)).remote(
        i, env_cfg, sizes, lay.first_env[i], lay.env_cores[i]) for i, d in enumerate(lay.rollout_slots)]
    inf_actors = [ray.remote(InferenceActor).options(max_concurrency=4, **on(d, gpu_share)).remote(
        opts.backbone, opts.scale, device, opts.seed, opts.torch_threads) for d in lay.rollout_slots]
    port = free_port()
    world = len(lay.actor_slots)
    ranks = [ray.remote(TrainerRankActor).options(**on(d, gpu_share)).remote(
        r, world, port, opts.backbone, opts.scale, device, opts.seed, opts.torch_threads, learner_cfg,
        opts.dump_updates) for r, d in enumerate(lay.actor_slots)]
    ready = ray.get([a.ready.remote() for a in env_actors + inf_actors + ranks])
    ctx.initial_weight_checksum = ready[len(env_actors)]["checksum"]

    buffer, weights = SampleBuffer(ctx), WeightStore(ctx)
    rollout_log, train_log = RolloutLog(ctx, len(env_actors)), TrainLog()
    clients = [InferenceClient(ctx, f"rollout_gpu_{i}", h, b_max=lay.b_max, t_max=lay.t_max_s)
               for i, h in enumerate(inf_actors)]
    fault = opts.inject_env_fault
    workers = [EnvWorkerLoop(ctx, i, h, sizes, lay.env_cores_per_worker, client, buffer, weights, rollout_log,
                             lay.staleness, dynamic=lay.dynamic_batching, learner=learner_cfg,
                             inject_fault=(fault[0], 0) if fault is not None and fault[1] == i else None,
                             kill_generator_at=opts.inject_actor_fault if i == 0 else None)
               for i, (h, client) in enumerate(zip(env_actors, clients))]
    trainer = TrainerLoop(ctx, ranks, buffer, weights, train_log,
                          rollout_done=rollout_log.wait_all_done if lay.trains_after_rollout else None,
                          stream=lay.streaming, swap=inf_actors if (cuda and lay.phase_swaps) else None,
                          device="cuda")
    return Wiring(workers, clients, trainer, buffer, weights, rollout_log, train_log, lay.dynamic_batching,
                  {"env_workers": env_actors, "generators": inf_actors, "trainers": ranks}, pg, lay)
