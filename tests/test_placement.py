"""The placement object: node split, slots and env-worker cores derived once from a plan."""

from __future__ import annotations

import pytest

from perfmodel.calibration.reference import published_plan
from perfmodel.schema.profile import load_profile
from perfmodel.schema.placement import NodeShare, node_shares
from perfmodel.schema.rules import batch_fires, global_batches, micro_batching, required_weight_version


def test_packed_fills_a_node_before_the_next():
    """RLinf scheduler/placement/packed.py: contiguous ranges, rollout 0-15 then actor 16-31."""
    pi05 = load_profile("pi05")
    at16 = published_plan(pi05, "rollout_async", 16, "1:1").placement
    assert at16.nodes == (NodeShare(1, 8, 0), NodeShare(1, 0, 8))
    assert at16.actor_nodes == 1 and at16.actor_ranks_per_node == 8 and at16.sync_crosses_nodes
    at32 = published_plan(pi05, "rollout_async", 32, "1:1").placement
    assert at32.nodes == (NodeShare(2, 8, 0), NodeShare(2, 0, 8)) and at32.actor_nodes == 2
    rollout, actor = at32.slots()
    assert rollout == list(range(16)) and actor == list(range(16, 32))
    at8 = published_plan(pi05, "rollout_async", 8, "1:1").placement
    assert at8.nodes == (NodeShare(1, 4, 4),) and not at8.sync_crosses_nodes
    # A node without actor ranks gives its env workers all its cores.
    assert at16.env_cores_per_worker == 128 / 8
    assert at8.env_cores_per_worker == (128 - 4 * pi05.node["actor_cpu_cores_per_gpu"]) / 4


def test_a_shared_node_gives_env_workers_at_least_their_gpus_share():
    """The calibrated actor's kept cores sit at or below the per-GPU share, their prior and bound
    (perfmodel/calibration/calibrate.py): an 8-GPU env worker, on the actor's node, has at least
    the 16 cores a 16-GPU one has on a node of its own."""
    from perfmodel.calibration.calibrate import NODE, _param

    share = NODE["cpu_cores_per_node"] / NODE["gpus_per_node"]
    p = _param("actor_cpu_cores_per_gpu")
    assert p.hi == p.init == share == 16
    for backbone in ("pi05", "gr00t_n15"):
        prof = load_profile(backbone)
        at8 = published_plan(prof, "rollout_async", 8, "1:1").placement
        at16 = published_plan(prof, "rollout_async", 16, "1:1").placement
        assert at8.env_cores_per_worker >= at16.env_cores_per_worker == share


def test_an_actor_keeping_more_than_its_share_is_named():
    """A plan whose node was edited to fewer cores but kept the profile's actor count leaves env
    workers a sliver of a core: the prediction says so (a warning naming the field and the share);
    within the share it says nothing."""
    import json

    from perfmodel.schema.plan import Plan
    from perfmodel.prediction import predict

    prof = load_profile("pi05")
    plan = published_plan(prof, "rollout_async", 8, "1:1")
    assert not any("actor_cpu_cores_per_gpu" in w for w in predict(plan, prof, interval=False)["warnings"])
    d = json.loads(json.dumps(plan.to_dict()))
    d["cluster"]["cpu_cores_per_node"] = 64
    out = predict(Plan.from_dict(d), prof, interval=False)
    w = [w for w in out["warnings"] if w.startswith("cluster.actor_cpu_cores_per_gpu:")]
    assert len(w) == 1 and "64 cores / 8 GPUs = 8" in w[0]


def test_cluster_fields_a_plan_file_leaves_out_come_from_the_profile():
    """A plan file without the calibrated node values gets the profile's, not the schema's generic
    defaults (0 kept cores: +40 % at 8 GPUs): the actor's kept cores as the same fraction of a
    GPU's share on a node of another shape; what the file gives stays."""
    import json

    from perfmodel.calibration.reference import complete_cluster
    from perfmodel.schema.plan import Plan

    prof = load_profile("pi05")
    full = published_plan(prof, "rollout_async", 8, "1:1")
    d = json.loads(json.dumps(full.to_dict()))
    for k in ("actor_cpu_cores_per_gpu", "inter_node_bw_GBps"):
        d["cluster"].pop(k)
    bare = Plan.from_dict(d)
    assert bare.cluster.actor_cpu_cores_per_gpu == 0.0  # the schema alone cannot know the profile
    done = complete_cluster(bare, d["cluster"], prof)
    assert done.cluster == full.cluster
    d["cluster"]["cpu_cores_per_node"] = 64
    half = complete_cluster(Plan.from_dict(d), d["cluster"], prof)
    assert half.cluster.actor_cpu_cores_per_gpu == pytest.approx(prof.node["actor_cpu_cores_per_gpu"] / 2)
    assert half.env_cores_per_worker == pytest.approx(full.env_cores_per_worker / 2)
    d["cluster"]["actor_cpu_cores_per_gpu"] = 3
    assert complete_cluster(Plan.from_dict(d), d["cluster"], prof).cluster.actor_cpu_cores_per_gpu == 3


def test_a_minimal_plan_file_reads_as_the_command_line_plan(tmp_path):
    """A plan file giving only the mode and the GPUs (and the GPU type) is the plan predict builds
    from --mode/--gpus/--gpu: every node field from the profile's node on that GPU type."""
    import json

    from perfmodel.calibration.reference import complete_cluster
    from perfmodel.schema.plan import Plan
    from perfmodel.gpu import cluster_on

    prof = load_profile("pi05")
    for gpu in ("h100", "a100", "h200"):
        path = tmp_path / f"{gpu}.json"
        path.write_text(json.dumps({"mode": "rollout_async", "cluster": {"gpus": 8, "gpu": gpu}}))
        plan, given = Plan.load_with_given(path)
        want = published_plan(prof, "rollout_async", 8, "1:1")
        want = want.with_(cluster=cluster_on(want.cluster, gpu))
        assert complete_cluster(plan, given, prof).cluster == want.cluster, gpu


def test_split_by_ratio_on_every_node():
    pi05 = load_profile("pi05")
    plan = published_plan(pi05, "rollout_async", 32, "1:1", placement_strategy="split")
    pl = plan.placement
    assert pl.nodes == (NodeShare(4, 4, 4),)
    assert pl.actor_nodes == 4 and pl.actor_ranks_per_node == 4
    rollout, actor = pl.slots()
    assert rollout[:4] == [0, 1, 2, 3] and actor[:4] == [4, 5, 6, 7]
    assert sorted(rollout + actor) == list(range(32))


def test_rollout_first_when_the_ratio_does_not_split_a_node():
    # 24 GPUs at 2:1: a node of 8 does not divide by 3, so rollout takes nodes 0-1, actor node 2.
    assert node_shares(24, 8, 16, 8, (2, 1)) == (NodeShare(2, 8, 0), NodeShare(1, 0, 8))
    # A partial last node: 12 GPUs at 3:1 split per node (8 -> 6:2, 4 -> 3:1).
    assert node_shares(12, 8, 9, 3, (3, 1)) == (NodeShare(1, 6, 2), NodeShare(1, 3, 1))


def test_large_cluster_is_a_few_node_kinds():
    shares = node_shares(8 * 10**6, 8, 4 * 10**6, 4 * 10**6, (1, 1))
    assert shares == (NodeShare(10**6, 4, 4),)


def test_colocated_every_device_is_both():
    pi05 = load_profile("pi05")
    plan = published_plan(pi05, "colocated", 16, None)
    rollout, actor = plan.placement.slots()
    assert rollout == actor == list(range(16))
    assert plan.env_cores_per_worker == plan.cluster.cpu_cores_per_node / plan.cluster.gpus_per_node


def test_rules():
    assert required_weight_version(5, 0) == 5 and required_weight_version(5, 1) == 4
    assert global_batches(2500, 1024) == [1024, 1024, 452]
    assert micro_batching(1024, 4, 128) == (2, 128)
    assert micro_batching(1024, 16, 128) == (1, 64)
    assert batch_fires(4, 4, 0.0, 1.0) and batch_fires(1, 4, 1.0, 1.0) and not batch_fires(1, 4, 0.5, 1.0)


def test_a_plan_smaller_than_a_node_gets_its_part_of_the_node():
    """A 4-GPU plan rents half a node: half its cores and RAM (as smaller instances of the same
    GPU do), so its env workers have what they have on a whole node, not 128 cores for two, and
    it predicts half the 8-GPU throughput instead of 81 % of it."""
    from perfmodel.costs import StageCosts
    from perfmodel.schema.errors import ConfigError
    from perfmodel.simulate import check_fits
    from perfmodel.prediction import predict

    pi05 = load_profile("pi05")
    at8, at4 = (published_plan(pi05, "rollout_async", g, "1:1") for g in (8, 4))
    assert at4.placement.node_fraction(at4.placement.nodes[0]) == 0.5
    assert at4.placement.env_cores_per_worker == pytest.approx(at8.placement.env_cores_per_worker)
    thr = lambda plan: predict(plan, pi05)["throughput_env_steps_per_s"]  # noqa: E731
    assert thr(at4) == pytest.approx(thr(at8) / 2, rel=1e-6)
    # The RAM check is the node part's too: 2 workers x 96 envs on half a node must fit in half its RAM.
    need = 192 * pi05.costs.env_memory_gb

    def on_node_ram(gb: float):
        return at4.with_(cluster=at4.cluster.__class__(**{**at4.cluster.__dict__, "node_ram_gb": gb}))

    snug = on_node_ram(2.01 * need)
    check_fits(snug, StageCosts(snug, pi05))
    tight = on_node_ram(1.5 * need)  # the whole node would hold them; this plan's half does not
    with pytest.raises(ConfigError, match=r"fullest node's 192 envs .*this plan's part of a"):
        check_fits(tight, StageCosts(tight, pi05))
