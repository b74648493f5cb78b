"""Cost prediction: durations of each stage for one plan, from a profile (no simulation here).

This is the narrow interface between profiling and simulation: the simulator asks only these
methods for durations. Every formula is physical (work / capacity, bytes / bandwidth).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile
from perfmodel.schema.rules import micro_batching
from perfmodel.variability import lockstep_barrier_factor


@dataclass(frozen=True)
class StageCosts:
    plan: Plan
    profile: Profile

    def __post_init__(self) -> None:
        # The profile's costs belong to its own GPU; carry them to the plan's (perfmodel/gpu.py).
        from perfmodel.gpu import profile_on

        object.__setattr__(self, "profile", profile_on(self.profile, self.plan.cluster.gpu))

    # --- env workers (CPU) ---
    @property
    def cores_per_worker(self) -> float:
        """CPU cores of one env worker (see ``Plan.env_cores_per_worker``), at least one."""
        return max(1.0, self.plan.env_cores_per_worker)

    def env_cores_used(self, n_envs: int) -> float:
        return min(float(n_envs), self.cores_per_worker)

    def _cpu_time(self, n_envs: int, per_env_s: float) -> float:
        """Wall time for ``n_envs`` env processes each doing ``per_env_s`` of single-core work on
        ``min(n_envs, cores)`` cores, at the profile's multi-core efficiency."""
        active = self.env_cores_used(n_envs)
        eff = 1.0 if active <= 1 else self.profile.costs.env_core_efficiency
        return per_env_s * n_envs / (active * eff)

    def env_chunk_s(self, n_envs: int, lockstep: bool = True) -> float:
        """``num_action_chunks`` env steps of ``n_envs`` envs of one worker; a lock-step group
        also waits for its slowest env at every step."""
        k = self.plan.workload.num_action_chunks
        barrier = 1.0 + (self.profile.costs.env_lockstep_slowdown if lockstep else 0.0)
        if lockstep:
            # The slowest core of the group sets the pace: the order statistic of the per-env
            # step-time spread (perfmodel.variability; 1.0 without variability).
            barrier *= lockstep_barrier_factor(n_envs, self.cores_per_worker, k,
                                               self.profile.variability.env_step_cv)
        return self._cpu_time(n_envs, k * self.profile.costs.env_step_core_s) * barrier

    def env_reset_s(self, n_envs: int) -> float:
        return self._cpu_time(n_envs, self.profile.costs.env_reset_s)

    # --- generators (rollout GPUs) ---
    def infer_s(self, batch: int) -> float:
        return self.profile.costs.infer_s(batch)

    # --- actor (training GPUs), one data-parallel group ---
    def micro_batching(self, batch: int) -> tuple[int, int]:
        """(micro-steps, samples per rank per micro-step) for a global batch of ``batch``
        samples over the actor ranks: micro-batches of ``micro_batch_size``, smaller when the
        batch's share per rank is smaller than that."""
        return micro_batching(batch, self.plan.actor_gpus, self.plan.workload.micro_batch_size)

    def micro_batch_s(self, samples: int) -> float:
        """Forward + backward of one micro-batch on each rank, with FSDP's weight all-gathers."""
        return self.profile.costs.train_micro_batch_s(samples) + self.fsdp_gather_s()

    def _ring_s(self, nbytes: float, passes: int) -> float:
        """Hierarchical ring collective over the actor ranks: a ring inside each node, then a
        ring across nodes on each GPU's 1/local share. ``passes``: 1 for an all-gather or a
        reduce-scatter, 2 for an all-reduce."""
        if self.plan.actor_gpus == 1 or nbytes <= 0:
            return 0.0
        c = self.plan.cluster
        pl = self.plan.placement
        local, nodes = pl.actor_ranks_per_node, pl.actor_nodes
        t = passes * (local - 1) / local * nbytes / (c.intra_node_bw_GBps * 1e9) if local > 1 else 0.0
        if nodes > 1:
            t += passes * (nodes - 1) / nodes * (nbytes / local) / (c.inter_node_bw_GBps * 1e9)
        return t + self.profile.costs.comm_latency_s

    def allreduce_s(self) -> float:
        """Gradient all-reduce over the actor ranks, once per optimizer step."""
        return self._ring_s(self.profile.costs.grad_allreduce_bytes, 2)

    def fsdp_gather_s(self) -> float:
        """FSDP's parameter all-gathers of one micro-batch."""
        return self._ring_s(self.profile.costs.fsdp_gather_bytes, 1)

    def optimizer_step_s(self) -> float:
        """Gradient all-reduce plus the optimizer update, once per global batch."""
        return self.allreduce_s() + self.profile.costs.optimizer_step_s

    # --- weight sync and model swaps ---
    def weight_sync_s(self) -> float:
        """Actor ranks send the bf16 weights to every generator. Each generator receives the
        whole model on its link; the actor ranks' links carry generators/actors copies each.
        Colocated: the weights are already on the device."""
        p, c = self.plan, self.plan.cluster
        if not p.mechanisms.disaggregated:
            return 0.0
        # A cross-node transfer once the cluster spans nodes: the actor's FSDP shards live on
        # every actor node, so some of every generator's weights come from another node.
        same_node = c.nodes == 1
        bw = (c.intra_node_bw_GBps if same_node else min(c.inter_node_bw_GBps, c.intra_node_bw_GBps)) * 1e9
        nbytes = self.profile.costs.weight_sync_bytes
        fan_out = max(1.0, p.rollout_gpus / p.actor_gpus)
        return self.profile.costs.comm_latency_s + nbytes * fan_out / bw

    def phase_switch_s(self) -> float:
        """Colocated: offload one phase's models and reload the other's, on every device."""
        return self.profile.costs.offload_s + self.profile.costs.reload_s

    # --- memory ---
    def env_memory_per_node_gb(self) -> float:
        p = self.plan
        envs_per_node = p.envs_per_worker * min(p.rollout_gpus, p.cluster.gpus_per_node)
        return envs_per_node * self.profile.costs.env_memory_gb
