"""executor run on more than one node (slow): a local multi-node Ray cluster
(``ray.cluster_utils.Cluster``: a head without CPU slots and two one-slot worker nodes, each its
own raylet on this machine). The plan's rollout slot and actor slot land on different nodes and
the run counts exactly; a plan node no Ray node can hold is refused; killing the actor's node
mid-run ends in a partial record and one error line naming the node (last: it leaves the
cluster one node short)."""

from __future__ import annotations

import json

import pytest
from quick_envs import QUICK_ENV_FLAGS, QUICK_ENVS

from perfmodel.schema.plan import Plan
from tests.test_executor_run import check_record, cli, output_lines, tiny_plan, write_plan

pytestmark = pytest.mark.slow


def two_node_plan() -> dict:
    """The tiny disaggregated plan on two nodes of one slot each, as the cluster below is: the
    rollout slot (env worker 0, generator 0) on node 0, the actor slot (trainer rank 0) on node 1."""
    d = tiny_plan("disaggregated")
    d["cluster"].update(gpus_per_node=1, cpu_cores_per_node=1)
    return d


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("libero")
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    # fast health checks: a killed node is declared dead in about a second, not 30 s
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "_system_config": {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                                          "health_check_failure_threshold": 3}})
    nodes = [c.add_node(num_cpus=1) for _ in range(2)]
    c.wait_for_nodes()
    yield c, nodes
    if ray.is_initialized():
        ray.shutdown()
    c.shutdown()


def run_on(cluster_address: str, tmp_path, out_name: str, after_iteration=None):
    from executor.runtime.modes import RunOptions
    from executor.runtime.session import execute

    plan = Plan.from_dict(two_node_plan())
    return plan, execute(plan, iterations=2, warmup=1, progress=False, address=cluster_address, verbose=False,
                         ray_log=tmp_path / f"{out_name}.log", after_iteration=after_iteration,
                         opts=RunOptions(image_size=64, **QUICK_ENVS))


def test_rollout_and_actor_on_different_nodes_count_exactly(cluster, tmp_path):
    c, nodes = cluster
    plan, (record, rec) = run_on(c.address, tmp_path, "ok")
    check_record(plan, record, rec)
    where = record["actor_nodes"]
    assert where["env_worker_0"] == where["generator_0"]  # rollout slot 0
    assert where["trainer_rank_0"] != where["generator_0"]  # actor slot on the other node
    ids = {n.node_id[:12] for n in nodes}
    assert {w.split("node id ")[1].rstrip(")") for w in where.values()} == ids


def test_a_plan_node_no_ray_node_holds_is_refused_in_one_line(cluster, tmp_path):
    # two slots on one node, but each Ray node has one: enough CPU in all, yet the plan's node
    # would be split over two Ray nodes (its slots are packed onto one Ray node)
    c, _ = cluster
    out = tmp_path / "run"
    r = cli(["run", write_plan(tmp_path, tiny_plan("disaggregated")), "--out", str(out), "--no-progress",
             "--address", c.address])
    assert r.exit_code == 2, r.output
    lines = output_lines(r.output)
    assert len(lines) == 1 and lines[0].startswith("error: plan.cluster.gpus_per_node: 1 node(s) of 2 device "
                                                   "slots do not fit"), r.output
    assert "nodes have 1, 1, 0 CPU" in lines[0], r.output
    assert not out.exists()


def test_killing_a_node_mid_run_names_it_in_one_line(cluster, tmp_path):
    c, nodes = cluster
    out = tmp_path / "killed"
    p = write_plan(tmp_path, two_node_plan())
    # the CLI joins the cluster by address; the node holding the actor slot is killed once the
    # first iteration is done. The CLI runs in this process, so the hook goes in through execute.
    from executor.runtime import session

    real = session.execute_session
    killed = {}

    def with_kill(*a, **kw):
        def after(k):
            if k == 0 and not killed:
                import ray
                from ray._private import state

                trainer = next(a for a in state.actors().values()
                               if a["ActorClassName"] == "TrainerRankActor" and a["State"] == "ALIVE")
                node = next(n for n in nodes if n.node_id == trainer["Address"]["NodeID"])
                killed["id"] = node.node_id
                c.remove_node(node, allow_graceful=False)
                del ray
        kw["after_iteration"] = after
        return real(*a, **kw)

    session.execute_session = with_kill
    try:
        r = cli(["run", p, "--out", str(out), "--iterations", "50", "--image-size", "64", *QUICK_ENV_FLAGS,
                 "--no-progress", "--address", c.address])
    finally:
        session.execute_session = real
    assert killed, r.output
    assert r.exit_code == 1, r.output
    lines = output_lines(r.output)
    assert len(lines) == 1 and lines[0].startswith("error: run: a Ray actor died"), r.output
    assert "trainer_rank_0" in lines[0] and killed["id"][:12] in lines[0], r.output
    record = json.loads((out / "record.json").read_text())
    assert record["status"] == "failed" and record["counts"]["iterations"] >= 1
    assert record["counts"]["env_steps"] >= 2 * 10 and record["env_steps_match"] is False
