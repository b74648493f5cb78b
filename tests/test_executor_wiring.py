"""The simulator and the executor wire every mode alike: the same env workers, env groups,
cores, device slots, staleness, batching and training rules, read from the same placement
(``plan.placement``) and mode table. Compared as data: no Ray, no envs (fast)."""

from __future__ import annotations

import copy

import pytest
import simpy

from executor.runtime.modes import layout
from perfmodel.costs import StageCosts
from perfmodel.schema.modes import MODES
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import load_profile
from perfmodel.schema.rules import global_batches, micro_batching
from perfmodel.schema.timeline import Recorder
from perfmodel.sim.durations import Durations
from perfmodel.sim.modes import wire as sim_wire

BASE = {
    "allocation_ratio": "1:1", "pipeline_stage_num": 2, "b_max": None, "t_max_s": 0.05, "max_staleness": 1,
    "profile": "pi05_tiny_cpu",
    "workload": {"total_num_envs": 16, "max_episode_steps": 20, "num_action_chunks": 5, "rollout_epoch": 1,
                 "update_epoch": 2, "micro_batch_size": 2, "global_batch_size": 12, "group_size": 1,
                 "algorithm": "ppo"},
    "cluster": {"gpus": 8, "gpus_per_node": 4, "cpu_cores_per_node": 16, "node_ram_gb": 64,
                "intra_node_bw_GBps": 2.4, "inter_node_bw_GBps": 2.4},
}
CASES = {"1:1 on 2 nodes of 4": {},
         "2:1 on 6 GPUs, nodes of 4 (rollout packed first)": {
             "allocation_ratio": "2:1", "cluster": {**BASE["cluster"], "gpus": 6},
             "workload": {**BASE["workload"], "total_num_envs": 24}},
         "1:3, 1 stage": {"allocation_ratio": "1:3", "pipeline_stage_num": 1}}


def _plan(mode: str, changes: dict) -> Plan:
    d = copy.deepcopy(BASE)
    d.update(copy.deepcopy(changes))
    d["mode"] = mode
    if mode == "colocated":
        d["allocation_ratio"] = None
    return Plan.from_dict(d)


# train_async with actor and rollout on the same GPUs (allocation_ratio null)
SHARED = {"shared GPUs, 2 nodes of 4": {"allocation_ratio": None}}


# the RL-VLA3 fork's per-env asynchronous rollout beside synchronous training (its col_as)
PER_ENV_ASYNC = {"per-env asynchronous rollout": {"rollout": "per_env_async", "pipeline_stage_num": 2}}


# RLinf's actor on every GPU with env and rollout on some (actor: 0-7, env,rollout: 4-7)
NESTED = {"rollout on 4 of the 8 GPUs": {"colocated_rollout_gpus": 4}}


@pytest.mark.parametrize("mode, case", [(m, c) for m in MODES for c in CASES]
                         + [(m, c) for m in ("train_async", "rollout_async") for c in SHARED]
                         + [("colocated", c) for c in {**PER_ENV_ASYNC, **NESTED}])
def test_simulator_and_executor_wire_a_mode_alike(mode, case):
    plan = _plan(mode, {**CASES, **SHARED, **PER_ENV_ASYNC, **NESTED}[case])
    costs = StageCosts(plan, load_profile(plan.profile))
    env = simpy.Environment()
    sim = sim_wire(env, costs, Durations(costs, None), Recorder(), max_workers=10 ** 6)  # no replicas
    ex = layout(plan)
    pl = plan.placement

    # device slots: the executor's bundles are the placement's slots, disjoint unless colocated
    rollout, actor = pl.slots()
    assert (ex.rollout_slots, ex.actor_slots) == (rollout, actor)
    assert len(ex.rollout_slots) == plan.rollout_gpus and len(ex.actor_slots) == plan.actor_gpus
    assert ex.bundles == plan.cluster.gpus and max(rollout + actor) < ex.bundles
    if plan.mechanisms.disaggregated:
        assert not set(rollout) & set(actor)
        for node, (r, a) in enumerate(pl.node_split()):  # each node holds its share of each role
            on_node = range(node * pl.gpus_per_node, (node + 1) * pl.gpus_per_node)
            assert (sum(d in on_node for d in rollout), sum(d in on_node for d in actor)) == (r, a)
    else:
        # colocated: the trainer takes the rollout's slots (and, with colocated_rollout_gpus, more),
        # as the simulator's
        assert actor[:len(rollout)] == rollout and len(actor) == plan.cluster.gpus
        assert (len(rollout) < len(actor)) == (case in NESTED)
        assert [s.gpu for s in sim.servers] == sim.trainer.gpus

    # env workers and their groups
    assert len(sim.workers) == len(ex.rollout_slots) == len(ex.first_env)
    for wk in sim.workers:
        assert wk.replicas == 1
        assert [wk.group_envs] * wk.groups == ex.group_sizes
        assert wk.staleness == ex.staleness
        assert wk.dynamic == ex.dynamic_batching
        assert wk.costs.cores_per_worker == ex.env_cores_per_worker
    assert sum(ex.group_sizes) * len(ex.first_env) == plan.workload.total_num_envs
    assert ex.first_env == sorted(set(ex.first_env))
    for cores in ex.env_cores:
        assert cores is None or len(cores) == max(1, int(pl.env_cores_per_worker))

    # inference batching, training rules
    for g in sim.servers:
        assert (g.b_max, g.t_max) == (ex.b_max, ex.t_max_s)
    assert sim.trainer.stream == ex.streaming
    assert (sim.trainer.rollout_done is not None) == ex.trains_after_rollout
    assert ex.phase_swaps == plan.mechanisms.swaps_phases == (mode == "colocated")
    if not ex.phase_swaps:
        assert sim.trainer.switch_s == 0.0
    # on shared GPUs an asynchronous trainer takes them a micro-batch at a time, between inference calls
    assert sim.trainer.shared == (case in SHARED)
    assert sim.trainer.ranks == len(ex.actor_slots)
    for k in range(4):
        assert ex.required_version(k) == k - ex.staleness


def test_counts_follow_the_shared_batch_rules():
    """The executor's trainer loop and the simulator's actor both cut an iteration by the
    shared rules: the count of optimizer steps and micro-steps per iteration agree."""
    plan = _plan("disaggregated", {})
    w = plan.workload
    batches = global_batches(w.samples_per_iteration, w.global_batch_size)
    assert sum(batches) == w.samples_per_iteration
    assert len(batches) * w.update_epoch == w.optimizer_steps_per_iteration
    steps = sum(micro_batching(b, plan.actor_gpus, w.micro_batch_size)[0] for b in batches)
    assert steps >= len(batches)
