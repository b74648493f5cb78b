"""Each mode is one declarative wiring of the shared driver mechanisms and Ray actors,
as in ``perfmodel.sim.modes``, from the same mode table and placement (``perfmodel.schema``), so the
executor groups envs exactly as the simulator does).

| mode          | device slots        | rollout waits for        | actor trains         | inference        |
|---------------|---------------------|--------------------------|----------------------|------------------|
| colocated     | shared, phase swaps | weights of iteration k-1 | after whole rollout  | lock-step        |
| disaggregated | rollout : actor     | weights of iteration k-1 | after whole rollout  | lock-step        |
| train_async   | rollout : actor, or shared (no swaps) | staleness bound | per global batch | lock-step  |
| rollout_async | rollout : actor     | staleness bound          | per global batch     | dynamic batching |
| streamer      | rollout : actor     | staleness bound          | per micro-batch      | dynamic batching |

Placement: one placement group per node of the plan (``STRICT_PACK``: a plan node's slots share
a Ray node), one bundle per device slot on it (``{"CPU": 1}`` on a CPU node, ``{"GPU": 1,
"CPU": 1}`` with CUDA). The slots come from
``plan.placement.slots()``, as the simulator's: rollout slot i holds env worker i and its
inference actor, actor slot r trainer rank r (colocated, and train_async with allocation_ratio
null: the same slots as the rollout; on a GPU the two Ray actors of a slot each take half of it
and run at once, time-sharing it, as the simulator's shared GPU Resource).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from executor.envs import EnvConfig
from perfmodel.schema.plan import Plan
from perfmodel.schema.rules import required_weight_version
from executor.runtime.driver import (Context, EnvWorkerLoop, InferenceClient, RolloutLog, SampleBuffer,
                                     TrainerLoop, TrainLog, WeightStore)


STARTUP_TIMEOUT_S = 120  # placement group and rendezvous: a cluster without the slots fails, never hangs


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
    # LIBERO's zero-action steps after a reset (EnvConfig's default is the reference's 15) and
    # whether the cameras render: fewer, or none, measure the pipeline at less env cost (tests),
    # not what a profile's env costs are
    settle_steps: int = EnvConfig.settle_steps
    render: bool = True
    inject_env_fault: tuple[int, int] | None = None  # (iteration, env worker): kill one env once
    inject_actor_fault: int | None = None  # iteration at which generator 0's Ray actor is killed
    dump_updates: str | None = None  # directory: trainer ranks save each global batch (tests)


def env_not_as_rlinf(opts: RunOptions) -> list[str]:
    """The flags under which a run's envs do not step as RLinf's LIBERO env does (a reset
    rebuilds the scene and runs the settle steps; both cameras render every step): that run's env
    costs are not what a profile's are (perfmodel calibrate --from-run reads them)."""
    return ((["--soft-reset"] if not opts.hard_reset else [])
            + ([f"--settle-steps {opts.settle_steps}"] if opts.settle_steps != EnvConfig.settle_steps else [])
            + (["--no-render"] if not opts.render else []))


@dataclass(frozen=True)
class Layout:
    """What ``wire`` builds, as plain data read from the plan's placement and the mode table
    (compared with the simulator's wiring by tests, without starting Ray)."""

    bundles: int  # placement-group bundles, one per device slot (global device index)
    rollout_slots: list[int]  # device of env worker i and its inference actor
    actor_slots: list[int]  # device of trainer rank r
    group_sizes: list[int]  # envs per env group, the same on every worker
    first_env: list[int]  # global index of env worker i's first env
    env_cores: list[list[int]]  # cores env worker i's env processes are pinned to (positions on its node)
    env_cores_per_worker: float  # cores the model gives each worker (the span's units)
    staleness: int  # rollout iteration k needs weights version >= required_weight_version(k, staleness)
    dynamic_batching: bool
    b_max: int
    t_max_s: float
    streaming: bool
    trains_after_rollout: bool  # synchronous: the trainer waits for the whole iteration's rollout
    phase_swaps: bool  # colocated: the models of the two phases take the slots in turn (Mode.swaps_phases)

    def required_version(self, iteration: int) -> int:
        return required_weight_version(iteration, self.staleness)


def worker_cores(plan: Plan, slot: int) -> list[int]:
    """Cores to pin the env processes of the env worker on device ``slot`` to, as positions in
    its node's usable cores (the env worker turns them into core ids on the node it runs on,
    ``actors.node_cores``): the node's cores split evenly over the node's env workers
    (``placement.env_cores_per_worker`` each, in slot order), as the simulator gives each worker
    its share."""
    pl = plan.placement
    rollout, _ = pl.slots()
    node = slot // pl.gpus_per_node
    local = sum(1 for d in rollout if d // pl.gpus_per_node == node and d < slot)
    per = max(1, int(pl.env_cores_per_worker))
    return [local * per + j for j in range(per)]


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
        streaming=m.streaming, trains_after_rollout=not m.async_training, phase_swaps=m.swaps_phases)


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
    placement_groups: list[Any]  # one per plan node
    layout: Layout | None = None


def node_bundles(plan: Plan, cuda: bool) -> list[list[dict[str, float]]]:
    """One placement group per node of the plan, one bundle per device slot on it: slot d is
    bundle ``d % gpus_per_node`` of node ``d // gpus_per_node``'s group."""
    c = plan.cluster
    one = {"GPU": 1, "CPU": 1} if cuda else {"CPU": 1}
    return [[dict(one) for _ in range(min(c.gpus_per_node, c.gpus - n * c.gpus_per_node))]
            for n in range(c.nodes)]


def wire(ctx: Context, opts: RunOptions, learner_cfg: Any) -> Wiring:
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from executor.runtime.actors import EnvGroupsActor, InferenceActor, TrainerRankActor, rendezvous_address

    plan = ctx.plan
    lay = layout(plan)
    w = plan.workload
    cuda = opts.device.startswith("cuda")
    # A plan node's slots share one Ray node (STRICT_PACK), so the rollout and actor slots sit
    # on the nodes the plan (and the simulator's placement) puts them on; a Ray node with room
    # for several plan nodes may hold them all (one local Ray runs any plan that fits).
    pgs = [placement_group(b, strategy="STRICT_PACK") for b in node_bundles(plan, cuda)]
    ray.get([pg.ready() for pg in pgs], timeout=STARTUP_TIMEOUT_S)
    per_node = plan.cluster.gpus_per_node

    def on(slot: int, gpu: float = 0.0):
        return dict(scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=pgs[slot // per_node], placement_group_bundle_index=slot % per_node),
            num_cpus=0.01, num_gpus=gpu)

    env_cfg = EnvConfig(suite=opts.suite, image_size=opts.image_size, max_episode_steps=w.max_episode_steps,
                        num_action_chunks=w.num_action_chunks, hard_reset=opts.hard_reset, seed=opts.seed,
                        settle_steps=opts.settle_steps, render=opts.render)
    device = "cuda" if cuda else opts.device
    # Shared slots on a GPU (colocated, train_async on shared GPUs): the inference actor and the
    # trainer rank share the slot's GPU.
    gpu_share = (0.5 if plan.placement.colocated else 1.0) if cuda else 0.0
    sizes = lay.group_sizes
    env_actors = [ray.remote(EnvGroupsActor).options(max_concurrency=len(sizes) + 4, **on(d)).remote(
        i, env_cfg, sizes, lay.first_env[i], lay.env_cores[i]) for i, d in enumerate(lay.rollout_slots)]
    # the plan's denoising steps and action horizon (an RLinf config's), as the prediction costs them
    shape = {"denoising_steps": plan.denoising_steps, "action_horizon": plan.action_horizon}
    inf_actors = [ray.remote(InferenceActor).options(max_concurrency=4, **on(d, gpu_share)).remote(
        opts.backbone, opts.scale, device, opts.seed, opts.torch_threads, shape, w.algorithm) for d in lay.rollout_slots]
    world = len(lay.actor_slots)
    addr, port = "127.0.0.1", 0
    if world > 1:  # the ranks' process group meets on rank 0's node, wherever Ray placed it
        addr, port = ray.get(ray.remote(rendezvous_address).options(**on(lay.actor_slots[0])).remote(),
                             timeout=STARTUP_TIMEOUT_S)
    ranks = [ray.remote(TrainerRankActor).options(**on(d, gpu_share)).remote(
        r, world, addr, port, opts.backbone, opts.scale, device, opts.seed, opts.torch_threads, learner_cfg,
        opts.dump_updates, shape) for r, d in enumerate(lay.actor_slots)]
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
                  {"env_workers": env_actors, "generators": inf_actors, "trainers": ranks}, pgs, lay)
