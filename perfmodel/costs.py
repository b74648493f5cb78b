"""Cost prediction: durations of each stage for one plan, from a profile (no simulation here).

This is the narrow interface between profiling and simulation: the simulator asks only these
methods for durations. Every formula is physical (work / capacity, bytes / bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile
from perfmodel.schema.rules import batch_split_is_whole, micro_batching
from perfmodel.variability import lockstep_barrier_factor


def batch_split_warning(plan: Plan) -> str | None:
    """What a plan whose global batch does not split wholly over its actor GPUs is costed as,
    or None (RLinf refuses such a split; rules.batch_split_is_whole)."""
    w, ranks = plan.workload, plan.actor_gpus
    if batch_split_is_whole(w.global_batch_size, ranks, w.micro_batch_size):
        return None
    steps, per_rank = micro_batching(w.global_batch_size, ranks, w.micro_batch_size)
    return (f"workload.global_batch_size: {w.global_batch_size} is not a multiple of micro_batch_size x actor GPUs "
            f"({w.micro_batch_size} x {ranks}), which RLinf refuses; costed as {steps} "
            f"micro-batch{'es' if steps > 1 else ''} of {per_rank} per rank (--scale-global-batch, or set "
            "micro_batch_size or global_batch_size so that it divides)")


def policy_shape_scales(plan: Plan, profile: Profile) -> tuple[float, float] | None:
    """(inference, training) FLOP ratio of the plan's denoising steps and action horizon
    (``plan.denoising_steps``, ``plan.action_horizon``) to the profile's backbone's own, or None
    when the plan keeps them or the profile's backbone has no shapes here (a name perfmodel.backbones
    does not know: nothing to rescale by)."""
    algo = plan.workload.algorithm
    if plan.denoising_steps is None and plan.action_horizon is None and algo in ("ppo", "grpo", "opd"):
        return None
    from perfmodel.backbones import BACKBONES, DsrlNets, default_trained_part, with_denoising, with_trained_part

    spec = BACKBONES.get(profile.backbone)
    if spec is None:
        return None
    part = plan.trained_part if spec.has_action_expert else default_trained_part(spec)
    own = with_trained_part(spec, part)
    new = with_denoising(own, plan.denoising_steps, plan.action_horizon)
    # NFT trains on one velocity evaluation per sample and its no-grad twin (Backbone.nft_train_flops),
    # DAgger on one velocity evaluation (sft_train_flops), DSRL only its small nets (DsrlNets):
    # none of them the denoising chain.
    train = {"nft": new.nft_train_flops, "dagger": new.sft_train_flops,
             "dsrl": DsrlNets().train_flops}.get(algo, new.train_flops)()
    return new.inference_flops() / own.inference_flops(), train / own.train_flops()


# Model passes per inference call beside the policy's own. OPD: the teacher's forward on every
# student sample, in the rollout worker, which builds the teacher (``rollout.expert_model``) from
# the student's model config with another path (rlinf 0.3.0 workers/rollout/hf/huggingface_worker.py
# init_worker): the student's shapes. DAgger as RLinf's LIBERO config runs it (classic DAgger,
# ``dagger.only_save_expert: False``; huggingface_worker.py predict): with probability beta the
# expert acts (one pass), else the student acts and the expert relabels (two), so 2 - beta
# passes; beta decays each iteration to ``beta_min`` (RLinf's default 0.05), the steady state costed.
DAGGER_BETA_MIN = 0.05
INFERENCE_PASSES = {"opd": 2.0, "dagger": 2.0 - DAGGER_BETA_MIN}


def with_policy_shape(plan: Plan, profile: Profile) -> Profile:
    """``profile`` with its inference and training slopes (the per-sample work) rescaled to the
    plan's denoising steps and action horizon by FLOPs; the fixed per-call and per-micro-batch
    times (host path, launches) are kept."""
    scales = policy_shape_scales(plan, profile) or (1.0, 1.0)
    passes = INFERENCE_PASSES.get(plan.workload.algorithm, 1.0)
    if scales == (1.0, 1.0) and passes == 1.0:
        return profile
    from dataclasses import replace

    def scaled(c, f: float):
        if c.model == "linear":
            return replace(c, slope=c.slope * f, samples=())
        return replace(c, points=tuple((x, y * f) for x, y in c.points), samples=())

    costs = profile.costs
    infer = scaled(costs.infer_s, scales[0])
    if passes != 1.0:
        # a second model's pass per call: the call's GPU part (its fixed launches and its
        # per-sample work) runs ``passes`` times; the host path (infer_latency_s) once
        lat = costs.infer_latency_s
        if infer.model == "linear":
            infer = replace(infer, intercept=lat + (infer.intercept - lat) * passes, slope=infer.slope * passes)
        else:
            infer = replace(infer, points=tuple((x, lat + (y - lat) * passes) for x, y in infer.points))
    return replace(profile, costs=replace(costs, infer_s=infer,
                                          train_micro_batch_s=scaled(costs.train_micro_batch_s, scales[1])))


def rlinf_batch_repair(plan: Plan) -> tuple[Plan | None, str | None]:
    """(the plan as RLinf runs it, what changed) for a plan whose global batch does not split
    wholly over its actor GPUs: the micro-batch lowered so that it does, with the same global
    batch (rules.whole_micro_batch), or (None, which key must change) when no micro-batch can.
    A whole split comes back unchanged with no note."""
    from dataclasses import replace

    from perfmodel.schema.rules import whole_micro_batch

    w, ranks = plan.workload, plan.actor_gpus
    if batch_split_is_whole(w.global_batch_size, ranks, w.micro_batch_size):
        return plan, None
    m = whole_micro_batch(w.global_batch_size, ranks, w.micro_batch_size)
    if m is None:
        return None, (f"actor.global_batch_size: {w.global_batch_size} does not split over {ranks} actor GPUs with any "
                      f"micro_batch_size, which RLinf refuses; set it to a multiple of {ranks} x micro_batch_size "
                      f"(e.g. {-(-w.global_batch_size // (ranks * w.micro_batch_size)) * ranks * w.micro_batch_size}, "
                      "--scale-global-batch) or choose another rollout:actor ratio")
    fixed = plan.with_(workload=replace(w, micro_batch_size=m))
    same = micro_batching(w.global_batch_size, ranks, m) == micro_batching(w.global_batch_size, ranks,
                                                                           w.micro_batch_size)
    return fixed, (f"actor.micro_batch_size {w.micro_batch_size} -> {m}: global batch {w.global_batch_size} now splits "
                   f"whole over {ranks} actor GPUs, as RLinf requires"
                   + (" (the prediction costed these micro-batches already)" if same else
                      f" (the prediction costed {w.micro_batch_size}-sample micro-batches: re-check it with "
                      "perfmodel predict --rlinf-config on the fragment)"))


@dataclass(frozen=True)
class StageCosts:
    plan: Plan
    profile: Profile

    def __post_init__(self) -> None:
        # The profile's costs belong to its own GPU; carry them to the plan's (perfmodel/gpu.py).
        from perfmodel.gpu import profile_on

        object.__setattr__(self, "profile", profile_on(self.profile, self.plan.cluster.gpu))
        object.__setattr__(self, "profile", with_policy_shape(self.plan, self.profile))

    # --- env workers (CPU) ---
    @property
    def cores_per_worker(self) -> float:
        """CPU cores of one env worker (see ``Plan.env_cores_per_worker``), at least one."""
        return max(1.0, self.plan.env_cores_per_worker)

    def env_cores_used(self, n_envs: int) -> float:
        return min(float(n_envs), self.cores_per_worker)

    @property
    def env_density(self) -> float:
        """Envs per core of an env worker: all its envs over its cores (the envs of its groups and
        pipeline stages share them), at least one (an env never has more than a core)."""
        return max(1.0, self.plan.envs_per_worker / self.cores_per_worker)

    def env_cost(self, kind: str) -> tuple[float, float]:
        """(CPU seconds of one env's step or reset, multi-core efficiency) at the plan's envs per
        core: the profile's measured curve at that density (contention is in it: efficiency 1),
        else its scalar (one env alone on a core) with ``env_core_efficiency``."""
        c = self.profile.costs
        curve = c.env_density.get(kind)
        if curve is not None:
            return curve.at(self.env_density)[0], 1.0
        return (c.env_reset_s if kind == "reset" else c.env_step_core_s), c.env_core_efficiency

    @property
    def warnings(self) -> list[str]:
        """What the prediction's env costs are not measured for: a plan's envs per core that the
        profile's curves do not have (interpolated or the nearest point, said so), or a measured
        profile without curves read at another density than the one env alone it measured.
        Fitted profiles carry no curves: their env costs are effective per-core costs fitted at the
        calibrated setups, used as they are."""
        c, d, out, missing = self.profile.costs, self.env_density, [], []
        kinds = ("step_free" if self.plan.mechanisms.dynamic_batching else "step_lockstep", "reset")
        for kind in kinds:
            curve = c.env_density.get(kind)
            if curve is not None:
                note = curve.at(d)[1]
                if note:
                    out.append(f"env cost {kind}: {note} (profile {self.profile.name})")
            elif self.profile.provenance.get("kind") == "measured" and abs(d - 1.0) > 0.02:
                missing.append(kind)
        if missing:
            out.append(f"env costs ({', '.join(missing)}): profile {self.profile.name} has no curve over envs per "
                       f"core (it measured one env alone on a core) but the plan runs {d:.3g} envs per core: "
                       "the single-env costs are used (re-measure with executor profile)")
        split = batch_split_warning(self.plan)
        if split:
            out.append(split)
        cl, pl = self.plan.cluster, self.plan.placement
        # one GPU's share of its node; a plan on part of a node has that part of its cores
        share = cl.cpu_cores_per_gpu
        if (self.plan.mechanisms.disaggregated and cl.actor_cpu_cores_per_gpu > share * (1 + 1e-9)
                and not any(n.actor and n.rollout for n in pl.nodes)):
            out.append(f"cluster.actor_cpu_cores_per_gpu: {cl.actor_cpu_cores_per_gpu:g} is more than one GPU's share "
                       f"of the node ({cl.cpu_cores_per_node} cores / {cl.gpus_per_node} GPUs = {share:g}); no node of "
                       "this plan holds both actor GPUs and env workers, so it has no effect here, but on a shared "
                       "node it would starve the env workers")
        elif (self.plan.mechanisms.disaggregated and any(n.actor and n.rollout for n in pl.nodes)
                and cl.actor_cpu_cores_per_gpu > share * (1 + 1e-9)):
            # Calibration keeps it within one GPU's share; a node edited to fewer cores with the
            # profile's count kept would starve the env workers without a word.
            out.append(f"cluster.actor_cpu_cores_per_gpu: {cl.actor_cpu_cores_per_gpu:g} is more than one GPU's share "
                       f"of the node ({cl.cpu_cores_per_node} cores / {cl.gpus_per_node} GPUs = "
                       f"{share:g}), so env workers on the actor's node get {self.plan.env_cores_per_worker:.3g} cores "
                       "each; for a node of another shape, scale the profile's value by the new share over the profile's, "
                       "or leave the field out of the plan file (predict --plan then scales it)")
        act = self._train_activation_gb_per_sample
        if act[1]:
            out.append(f"GPU memory: training activations of {self.plan.trained_part} are not measured for "
                       f"{self.profile.name}; the check counts {act[1]}'s ({act[0]:.3g} GB per sample), a floor")
        return out

    @property
    def _train_activation_gb_per_sample(self) -> tuple[float, str | None]:
        """(GB per micro-batch sample, the part it was measured for when not the plan's). A part
        not measured gets the smallest measured part's: training more weights never holds fewer
        activations, so it is a floor (and says so in ``warnings``)."""
        if self.plan.workload.algorithm == "dsrl":
            # DSRL's training passes run its small nets on 64 x 64 images (under a megabyte of
            # activations a sample), not the VLA: nothing the GPU check needs to count
            return 0.0, None
        parts = self.profile.costs.trained_parts
        own = parts.get(self.plan.trained_part, {}).get("train_activation_gb_per_sample")
        if own is not None:
            return own, None
        measured = [(e["train_activation_gb_per_sample"], n) for n, e in parts.items()
                    if "train_activation_gb_per_sample" in e]
        return min(measured) if measured else (0.0, None)

    def env_cpu_s(self, kind: str, n_envs: int) -> float:
        """CPU seconds of one env's step or reset as charged in a group of ``n_envs`` envs: what
        ``_cpu_time`` spreads over the cores (the single-env cost over the efficiency once more
        than one core works). What a run's measured CPU seconds per unit compare with."""
        cost, eff = self.env_cost(kind)
        return cost / (1.0 if self.env_cores_used(n_envs) <= 1 else eff)

    def _cpu_time(self, n_envs: int, per_env_s: float, eff: float) -> float:
        """Wall time for ``n_envs`` env processes each doing ``per_env_s`` of single-core work on
        ``min(n_envs, cores)`` cores, at multi-core efficiency ``eff``."""
        active = self.env_cores_used(n_envs)
        return per_env_s * n_envs / (active * (1.0 if active <= 1 else eff))

    def env_chunk_s(self, n_envs: int, lockstep: bool = True) -> float:
        """``num_action_chunks`` env steps of ``n_envs`` envs of one worker, plus the policy's host
        work per observation on the same cores; a lock-step group also waits for its slowest env
        at every step."""
        k = self.plan.workload.num_action_chunks
        barrier = 1.0 + (self.profile.costs.env_lockstep_slowdown if lockstep else 0.0)
        if lockstep:
            # The slowest core of the group sets the pace: the order statistic of the per-env
            # step-time spread (perfmodel.variability; 1.0 without variability).
            barrier *= lockstep_barrier_factor(n_envs, self.cores_per_worker, k,
                                               self.profile.variability.env_step_cv)
        step, eff = self.env_cost("step_lockstep" if lockstep else "step_free")
        # The policy's host work per observation (Costs.obs_cpu_s) runs on the same cores.
        return (self._cpu_time(n_envs, k * step + self.profile.costs.obs_cpu_s, eff) * barrier
                / self.env_cpu_share("env_step"))

    def env_reset_s(self, n_envs: int) -> float:
        reset, eff = self.env_cost("reset")
        return self._cpu_time(n_envs, reset, eff) / self.env_cpu_share("env_reset")

    def env_cpu_share(self, stage: str) -> float:
        """The share of their cores the plan's env processes get in a run of its mode
        (Costs.env_cpu_share, measured by executor profile --run-share; 1.0 where not measured):
        wall time, not CPU seconds, is divided by it."""
        return self.profile.costs.env_cpu_share.get(self.plan.mode, {}).get(stage, 1.0)

    def driver_chunk_s(self) -> float:
        """The run's orchestration per chunk step of an env group (profile's measured
        ``driver_chunk_step_s``; 0 when not measured): between a group's chunk step and its
        next inference, outside every stage."""
        d = self.profile.costs.driver_chunk_step_s
        return d.get("dynamic" if self.plan.mechanisms.dynamic_batching else "lockstep", 0.0)

    # --- generators (rollout GPUs) ---
    def infer_s(self, batch: int) -> float:
        """A call's whole time: host path (``infer_latency_s``, with the channel's hops) and GPU."""
        return self.profile.costs.infer_s(batch) + self.channel_s

    @property
    def infer_latency_s(self) -> float:
        """The part of every call off the GPU (Costs.infer_latency_s, plus ``channel_s``)."""
        return self.profile.costs.infer_latency_s + self.channel_s

    @property
    def env_workers_off_node0(self) -> int:
        """Env workers (rollout slots) on nodes other than node 0, where RLinf hosts the channels."""
        rollout, _ = self.plan.placement.slots()
        return sum(1 for d in rollout if d // self.plan.cluster.gpus_per_node != 0)

    @cached_property
    def channel_s(self) -> float:
        """Host-path time the node-0 data channels add to every inference request of the workers
        off node 0 (``Costs.channel_hop_s``; 0 unless a calibration alternative fitted it).
        RLinf hosts every channel as one process on node 0 (runners/embodied_runner.py:94-98,
        scheduler/channel/channel.py:182-187) and ``send_to`` puts every shard through it unless
        ``enable_p2p`` (scheduler/worker/worker.py:842-935): an observation batch goes env worker
        -> node 0 -> generator and its actions back, two round trips to node 0 per request. The
        process serves the messages one at a time, so a request also waits, on average, behind
        half of the other off-node workers' messages of the same round (they step in phase):
        ``2 x hop x (1 + (W_off - 1) / 2)``, growing linearly with the workers off node 0. All
        workers are given the slowest ones' time (they pace the rollout, as the env cores do);
        0 when every worker is on node 0 (one node, or the packed placement's 16-GPU rollout)."""
        hop = self.profile.costs.channel_hop_s
        if hop <= 0:
            return 0.0
        off = self.env_workers_off_node0
        return 0.0 if off == 0 else 2.0 * hop * (1.0 + (off - 1) / 2.0)

    def infer_gpu_s(self, batch: int) -> float:
        """The part of a call that holds the GPU."""
        return max(0.0, self.infer_s(batch) - self.infer_latency_s)

    # --- actor (training GPUs), one data-parallel group ---
    def micro_batching(self, batch: int) -> tuple[int, int]:
        """(micro-steps, samples per rank per micro-step) for a global batch of ``batch``
        samples over the actor ranks: micro-batches of ``micro_batch_size``, smaller when the
        batch's share per rank is smaller than that."""
        return micro_batching(batch, self.plan.actor_gpus, self.plan.workload.micro_batch_size)

    # --- what trains, and how it is sharded (plan fields; defaults = the published setup) ---
    @property
    def _part(self) -> dict[str, float]:
        """Scales of the plan's trained part relative to the profile's costs (a profile built from
        shapes lists each part; a measured profile describes only what it measured: scale 1)."""
        return self._trained

    @cached_property
    def _trained(self) -> dict[str, float]:
        parts = self.profile.costs.trained_parts
        if not parts:
            own = {"train_flops_scale": 1.0, "trained_bytes_scale": 1.0}
        elif self.plan.trained_part not in parts:
            from perfmodel.schema.errors import ConfigError

            raise ConfigError("plan.trained_part", f"profile {self.profile.name} has costs for "
                              f"{', '.join(sorted(parts))}; got {self.plan.trained_part!r}")
        else:
            own = parts[self.plan.trained_part]
        dsrl = self.dsrl
        if dsrl is None:
            return own
        # DSRL trains its small nets only: their gradients, Adam state and weight sync; the actor
        # holds the frozen VLA twice (the model and its target) and a float32 shadow of the
        # target (fsdp_sac_policy_worker.py init_worker, _init_target_shadow).
        spec, nets = dsrl
        from perfmodel.backbones import BF16_BYTES, train_state_bytes

        total = spec.params + nets.params
        state = train_state_bytes(total, nets.params) + total * (BF16_BYTES + 4)
        return {**own, "trained_bytes_scale": own["trained_bytes_scale"] * nets.params / spec.trained_params,
                "train_state_gb": state / 1e9}

    @cached_property
    def dsrl(self):
        """(the VLA's shapes as the plan trains them, DSRL's nets) for a DSRL plan whose profile's
        backbone has shapes here, else None."""
        if self.plan.workload.algorithm != "dsrl":
            return None
        from perfmodel.backbones import BACKBONES, DsrlNets, default_trained_part, with_denoising, with_trained_part

        spec = BACKBONES.get(self.profile.backbone)
        if spec is None:
            return None
        part = self.plan.trained_part if spec.has_action_expert else default_trained_part(spec)
        spec = with_denoising(with_trained_part(spec, part), self.plan.denoising_steps, self.plan.action_horizon)
        return spec, DsrlNets()

    def soft_update_s(self) -> float:
        """DSRL's target-model EMA at every gradient step, over every parameter of the model, the
        frozen VLA's included (backbones.SOFT_UPDATE_BYTES_PER_PARAM): memory-bound, at the
        plan's GPU's HBM bandwidth, on each actor rank (no_shard: each holds the whole model)."""
        if self.dsrl is None:
            return 0.0
        from perfmodel.backbones import SOFT_UPDATE_BYTES_PER_PARAM
        from perfmodel.schema.hardware import accelerator

        spec, nets = self.dsrl
        nbytes = SOFT_UPDATE_BYTES_PER_PARAM * (spec.params + nets.params)
        if self.full_shard:
            nbytes /= self.plan.actor_gpus
        return nbytes / (accelerator(self.plan.cluster.gpu).hbm_GBps * 1e9)

    @property
    def full_shard(self) -> bool:
        return self.plan.sharding_strategy == "full_shard" and self.plan.actor_gpus > 1

    def train_compute_s(self, samples: int) -> float:
        """Forward + backward of one micro-batch of ``samples`` on one rank: a fixed part (kernel
        launches, FSDP/autograd hooks, host work: the curve's intercept) plus per-sample work, so
        GPU efficiency saturates with the per-rank batch instead of being a line through zero."""
        c = self.profile.costs.train_micro_batch_s
        if c.model != "linear":
            return c(samples)
        return c.intercept + c.slope * samples * self._part["train_flops_scale"]

    def micro_batch_s(self, samples: int) -> float:
        """One micro-batch on each rank, with FSDP's parameter all-gathers when sharded."""
        return self.train_compute_s(samples) + self.fsdp_gather_s()

    def _ring_s(self, nbytes: float, passes: int) -> float:
        """Hierarchical ring collective over the actor ranks, on the nodes the placement puts them
        (``plan.placement``): a ring inside each node at the node's collective bandwidth (NVLink,
        or host memory when ``cluster.p2p`` is false: NCCL_P2P_DISABLE=1), then a ring across
        nodes on each GPU's 1/local share. ``passes``: 1 for an all-gather or a reduce-scatter,
        2 for an all-reduce."""
        if self.plan.actor_gpus == 1 or nbytes <= 0:
            return 0.0
        c = self.plan.cluster
        pl = self.plan.placement
        local, nodes = pl.actor_ranks_per_node, pl.actor_nodes
        t = passes * (local - 1) / local * nbytes / (c.local_bw_GBps * 1e9) if local > 1 else 0.0
        if nodes > 1:
            t += passes * (nodes - 1) / nodes * (nbytes / local) / (c.inter_node_bw_GBps * 1e9)
        # Per ring step (Costs.ring_step_s; 0 unless a calibration alternative fitted it): a ring
        # over R ranks takes R - 1 steps per pass, each a host-path hop with P2P disabled
        # (NCCL_P2P_DISABLE=1), so the fixed part grows with the actor's ranks.
        t += passes * (self.plan.actor_gpus - 1) * self.profile.costs.ring_step_s
        return t + self.profile.costs.comm_latency_s

    def grad_bytes(self) -> float:
        return self.profile.costs.grad_allreduce_bytes * self._part["trained_bytes_scale"]

    def allreduce_s(self) -> float:
        """Gradient reduction once per optimizer step (gradient accumulation runs without sync,
        RLinf fsdp.yaml enable_gradient_accumulation): a reduce-scatter into the shards with
        full_shard, an all-reduce with no_shard."""
        return self._ring_s(self.grad_bytes(), 1 if self.full_shard else 2)

    def fsdp_gather_s(self) -> float:
        """full_shard: every micro-batch all-gathers the sharded weights (the whole model for
        forward, the trained part again for backward: reshard_after_forward). no_shard: none."""
        if not self.full_shard:
            return 0.0
        c = self.profile.costs
        # The profile's bytes are for its trained part; another part changes the backward gather.
        extra = (self._part["trained_bytes_scale"] - 1.0) * c.grad_allreduce_bytes
        return self._ring_s(c.fsdp_gather_bytes + extra, 1)

    def optimizer_step_s(self) -> float:
        """Once per global batch: gradient reduction, the Adam update of this rank's shard (the
        whole trained part without sharding), and a fixed time (gradient clipping's norm
        all-reduce, scheduler, host synchronisation). Optimizer steps per iteration grow with
        the env count at a fixed global batch, so this fixed time grows with the cluster."""
        return self._optimizer_step_s

    @cached_property
    def _optimizer_step_s(self) -> float:
        # computed once per plan and profile: the trainer asks for it at every block of batches
        c = self.profile.costs
        adam = c.optimizer_step_s * self._part["trained_bytes_scale"]
        if self.full_shard:
            adam /= self.plan.actor_gpus
        if self.dsrl is not None:
            # a DSRL gradient step (fsdp_sac_policy_worker.py update_one_epoch) also soft-updates
            # the target model; its two clip-and-step pairs (critic, actor) on the same FSDP-wrapped
            # model are costed as the profile's one fixed optimizer-step time, which was fitted for
            # RLinf's actor on this model: not measured for DSRL's steps
            return self.allreduce_s() + adam + c.optimizer_fixed_s + self.soft_update_s()
        return self.allreduce_s() + adam + c.optimizer_fixed_s

    @property
    def actor_ranks_off_node0(self) -> int:
        """Actor ranks on nodes other than node 0, where RLinf hosts the channels."""
        _, actor = self.plan.placement.slots()
        return sum(1 for d in actor if d // self.plan.cluster.gpus_per_node != 0)

    def intake_s(self, batch: int) -> float:
        """The actor's intake of one global batch of ``batch`` trajectory samples through the
        node-0 channel (``Costs.intake_per_sample_s``; 0 unless a calibration alternative fitted
        it). Env workers put their trajectories into the actor channel
        (workers/env/env_worker.py:899-909, RLinf 0.3.0), one process on node 0
        (runners/embodied_runner.py:94-98, scheduler/channel/channel.py:182-187), and each actor
        rank gets its split from it (workers/actor/fsdp_actor_worker.py:1137-1155): the samples of
        ranks off node 0 cross the network through that one process, one message after another,
        while the ranks' compute is parallel. So the intake of a global batch is the same at any
        actor size while its training shrinks with the ranks: a serial share that grows with the
        actor (16 GPUs 1:1: 1 actor node; 32: 2). RLinf's synchronous runner awaits it before
        training; its asynchronous PPO worker receives in a thread (async_ppo_fsdp_worker.py:78-104),
        where this is the reading in which the channel does not keep ahead of the actor (the
        structural ensemble's bracket, not the point prediction)."""
        per = self.profile.costs.intake_per_sample_s
        if per <= 0:
            return 0.0
        return per * batch * self.actor_ranks_off_node0 / self.plan.actor_gpus

    # --- weight sync and model swaps ---
    def weight_sync_s(self) -> float:
        """The actor sends the bf16 weights to every generator (RLinf: each rollout rank
        receives the whole model). Each generator's link takes one copy; the actor ranks' links
        together send rollout/actor copies each. Over the inter-node network when a generator
        sits on a node without the actor (packed placement at 16+ GPUs) or the actor spans
        nodes; else inside the node (NVLink, or host memory without P2P). Colocated: the weights
        are already on the device."""
        p = self.plan
        if not p.mechanisms.disaggregated:
            return 0.0
        pl, c = p.placement, p.cluster
        bw = c.local_bw_GBps
        if pl.sync_crosses_nodes:
            bw = min(c.inter_node_bw_GBps, bw)
        nbytes = self.profile.costs.weight_sync_bytes
        if self.dsrl is not None:
            # RLinf syncs the parameters that train (collect_param_names_need_sync): DSRL's nets
            nbytes = self.dsrl[1].params * 2
        fan_out = max(1.0, p.rollout_gpus / p.actor_gpus)
        # Costs.sync_per_generator_s (0 unless a calibration alternative fitted it): actor rank 0
        # sends to every rollout rank (fsdp_actor_worker.py:1098-1110) over host paths
        # (NCCL_P2P_DISABLE=1), one generator after another: a fixed time per generator.
        serial = self.profile.costs.sync_per_generator_s * p.rollout_gpus
        return self.profile.costs.comm_latency_s + nbytes * fan_out / (bw * 1e9) + serial

    def phase_switch_s(self) -> float:
        """Colocated: offload one phase's models and reload the other's, on every device, when
        ``plan.enable_offload``; without offload (the published LIBERO setup) every model stays
        resident (``gpu_memory_gb`` checks that it fits) and a switch costs nothing. Modes without
        alternating phases on shared GPUs (``Mode.swaps_phases``) never switch."""
        if not self.plan.enable_offload or not self.plan.mechanisms.swaps_phases:
            return 0.0
        return self.profile.costs.offload_s + self.profile.costs.reload_s

    # --- memory ---
    def env_memory_by_node(self) -> list[tuple[int, float, float]]:
        """(envs, GB they need, GB the node has) for each kind of node holding env workers; a
        node used only in part has that part of its RAM (Placement.node_fraction)."""
        p, pl = self.plan, self.plan.placement
        return [(n.rollout * p.envs_per_worker, n.rollout * p.envs_per_worker * self.profile.costs.env_memory_gb,
                 p.cluster.node_ram_gb * pl.node_fraction(n)) for n in pl.nodes if n.rollout]

    @property
    def max_infer_batch(self) -> int:
        """The largest inference call of the plan: a lock-step stage's envs, or dynamic batching's cap."""
        if self.plan.mechanisms.dynamic_batching:
            return max(self.plan.effective_b_max, 1)
        return self.plan.envs_per_stage

    def gpu_memory_gb(self, activations: bool = True) -> float:
        """Peak memory of the fullest GPU: weights and training state, plus the activations of
        the largest inference call and of one training micro-batch where the profile measured
        them (Costs.infer_activation_gb_per_sample, trained_parts.*.train_activation_gb_per_sample).
        A generator holds its weights and its call's activations, an actor its state and a
        micro-batch's; colocated without offload keeps both models resident through both phases,
        with offload each phase holds its own. train_async on shared GPUs keeps both resident and
        may run a micro-batch and an inference call at once (two processes time-sharing the GPU
        each hold their activations), so it needs both activations. 0 when the profile lacks sizes."""
        c, p = self.profile.costs, self.plan
        state = self._part.get("train_state_gb", 0.0)
        if c.weights_gb <= 0 or state <= 0:
            return 0.0
        # DAgger's expert and OPD's teacher sit beside the policy in the rollout worker
        # (huggingface_worker.py init_worker: rollout.expert_model, the policy's shapes)
        weights = c.weights_gb * (2 if p.workload.algorithm in INFERENCE_PASSES else 1)
        actor = state / (p.actor_gpus if self.full_shard else 1)
        infer_act, train_act = self.activation_gb() if activations else (0.0, 0.0)
        if p.mechanisms.disaggregated or p.enable_offload:
            return max(weights + infer_act, actor + train_act)
        both = infer_act + train_act if p.mechanisms.trains_beside_rollout else max(infer_act, train_act)
        return actor + weights + both

    def activation_gb(self) -> tuple[float, float]:
        """(GB of the largest inference call's activations, GB of one training micro-batch's per rank)."""
        c, p = self.profile.costs, self.plan
        return (c.infer_activation_gb_per_sample * self.max_infer_batch,
                self._train_activation_gb_per_sample[0] * self.micro_batching(p.workload.global_batch_size)[1])

    def check_gpu_memory(self) -> None:
        need, have = self.gpu_memory_gb(), self.plan.cluster.gpu_memory_gb
        if need <= have:
            return
        from perfmodel.schema.errors import ConfigError

        if self.gpu_memory_gb(activations=False) <= have:  # the models fit; a micro-batch's activations do not
            infer_act, train_act = self.activation_gb()
            raise ConfigError("plan.workload.micro_batch_size",
                              f"{need:.0f} GB per GPU exceed cluster.gpu_memory_gb {have:g} with the activations of a "
                              f"training micro-batch of {self.micro_batching(self.plan.workload.global_batch_size)[1]} "
                              f"samples per rank ({train_act:.0f} GB) and of an inference call of {self.max_infer_batch} "
                              f"({infer_act:.0f} GB): a smaller micro_batch_size holds fewer")
        m = self.plan.mechanisms
        if m.trains_beside_rollout:  # offload is refused there (both run at once): only apart do they fit
            raise ConfigError("plan.allocation_ratio", f"{self.plan.mode} on shared GPUs keeps both models resident: "
                                                       f"{need:.0f} GB of models and activations per GPU exceed "
                                                       f"cluster.gpu_memory_gb {have:g}; put actor and rollout apart "
                                                       "(a rollout:actor split such as 1:1)")
        what = f"{self.plan.mode} without offload keeps every model resident: " if (
            not m.disaggregated and not self.plan.enable_offload) else ""
        raise ConfigError("plan.enable_offload" if what else "plan.sharding_strategy",
                          f"{what}{need:.0f} GB of models and activations per GPU exceed cluster.gpu_memory_gb {have:g}")
