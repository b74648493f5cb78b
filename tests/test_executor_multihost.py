"""executor run across two hosts (slow; root: CI runs it): two network namespaces joined by a veth
pair, each with its own address, a Ray head started in one (``ray start --head``) and a worker node
in the other (``ray start --address``), as a user starts a cluster. The run joins it with
``--address``: the rollout slot (env worker, generator) lands on one node and the actor slot on the
other, so the channel, the weight sync and the trajectory intake cross the veth. The counts are
exact and the record names both nodes by address; a killed actor ends the run in one line naming
it and its node; killing every process of the worker's namespace mid-run ends the run in a
partial record naming the lost node, well within 30 s. Each time the namespaces hold the same
processes after the run as before (nothing left behind).

Only the namespaces' own addresses (10.200.0.0/24, on the veth inside them) and their loopbacks
are used; the namespaces, the veth pair and every process in them go in the fixture's teardown."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from quick_envs import QUICK_ENV_FLAGS
from run_processes import RunProcesses, finish

from perfmodel.schema.plan import Plan
from tests.test_executor_faults import LONG_RUN, wait_for_first_iteration
from tests.test_executor_multinode import two_node_plan
from tests.test_executor_run import ROOT, check_record, output_lines, write_plan

pytestmark = pytest.mark.slow

HEAD_IP, WORKER_IP, PORT = "10.200.0.1", "10.200.0.2", 6379
# The namespaces are this machine's own: token authentication (Ray's default for a cluster) would
# need a token shared by hand; the docs show it for a real cluster.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_DISABLE_USAGE_STATS": "1"}
# A bound on a hang, not a measurement: the limit for a lost node
NODE_LOSS_EXIT_S = 30


def sh(*args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, check=check, env=env, timeout=180)


def netns_pids(ns: str) -> set[int]:
    r = sh("ip", "netns", "pids", ns, check=False)
    return {int(x) for x in r.stdout.split()}


def kill_netns(ns: str) -> None:
    """SIGKILL every process of ``ns`` (never ``ray stop``: it ends every Ray on the machine)."""
    for _ in range(3):
        pids = netns_pids(ns)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        time.sleep(0.5)


class TwoHosts:
    """Two namespaces, a veth between them, a Ray node in each."""

    def __init__(self, tag: str, tmp: Path) -> None:
        self.head, self.worker = f"vlp{tag}h", f"vlp{tag}w"
        self.tmp = tmp
        self.env = {**os.environ, **RAY_ENV, "PYTHONPATH": str(ROOT)}
        self.env.pop("RAY_ADDRESS", None)
        self.address = f"{HEAD_IP}:{PORT}"

    def up(self) -> None:
        for ns in (self.head, self.worker):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        # the veth pair is made inside the namespaces: nothing appears on this host's own network
        sh("ip", "link", "add", "veth0", "netns", self.head, "type", "veth", "peer", "name", "veth1",
           "netns", self.worker)
        for ns, dev, ip in ((self.head, "veth0", HEAD_IP), (self.worker, "veth1", WORKER_IP)):
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        ray = str(Path(sys.executable).with_name("ray"))
        sh("ip", "netns", "exec", self.head, ray, "start", "--head", "--node-ip-address", HEAD_IP,
           "--port", str(PORT), "--num-cpus", "1", "--include-dashboard", "false",
           "--temp-dir", str(self.tmp / "h"), env=self.env)
        sh("ip", "netns", "exec", self.worker, ray, "start", "--address", self.address, "--node-ip-address",
           WORKER_IP, "--num-cpus", "1", "--temp-dir", str(self.tmp / "w"), env=self.env)

    def down(self) -> None:
        for ns in (self.head, self.worker):
            kill_netns(ns)
            sh("ip", "netns", "del", ns, check=False)  # its end of the veth pair goes with it
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run(self, plan: str, out: Path, iterations: int, extra: tuple[str, ...] | list[str] = ()) -> subprocess.Popen:
        """``executor run`` from the head's namespace, joining the cluster by address."""
        return subprocess.Popen(["ip", "netns", "exec", self.head, sys.executable, "-m", "executor.cli", "run",
                                 plan, "--address", self.address, "--out", str(out), "--iterations",
                                 str(iterations), "--image-size", "64", *QUICK_ENV_FLAGS, "--no-progress", *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env,
                                cwd=out.parent)


@pytest.fixture(scope="module")
def hosts():
    pytest.importorskip("ray")
    pytest.importorskip("libero")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (ip netns add); CI runs this as root")
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2) to make network namespaces")
    tag = str(os.getpid())[-6:]
    h = TwoHosts(tag, Path(f"/tmp/vlp{tag}"))  # short: Ray's socket paths live under it
    try:
        h.up()
        yield h
    finally:
        h.down()
    assert h.head not in sh("ip", "netns", "list").stdout


def test_rollout_and_actor_on_two_hosts_count_exactly(hosts, tmp_path):
    before = netns_pids(hosts.head)
    out = tmp_path / "run"
    proc = hosts.run(write_plan(tmp_path, two_node_plan()), out, iterations=2)
    procs = RunProcesses(proc.pid)
    _, err, exited_at = finish(proc, 600)  # a bound on a hang
    assert procs.left_behind(exited_at) == []
    assert proc.returncode == 0, err
    record = json.loads((out / "record.json").read_text())
    plan = Plan.from_dict(json.loads((out / "plan.json").read_text()))
    # exact counts, as on one host; the trace as the run wrote it
    trace = json.loads((out / "trace.json").read_text())
    check_record(plan, record, SimpleNamespace(chrome_trace=lambda _meta: trace), iterations=2)
    where = record["actor_nodes"]
    assert where["env_worker_0"] == where["generator_0"]  # the rollout slot on one host
    assert where["env_worker_0"].split()[0] != where["trainer_rank_0"].split()[0]  # the actor slot on the other
    assert {w.split()[0] for w in where.values()} == {HEAD_IP, WORKER_IP}
    assert record["options"]["ray_address"] == hosts.address
    # the actors' worker processes ended with the run: the head's namespace as before it
    deadline = time.time() + 10
    while netns_pids(hosts.head) - before and time.time() < deadline:
        time.sleep(0.5)
    assert netns_pids(hosts.head) - before == set()


def test_a_killed_actor_ends_the_run_and_leaves_both_hosts_as_they_were(hosts, tmp_path):
    before = {ns: netns_pids(ns) for ns in (hosts.head, hosts.worker)}
    out = tmp_path / "killed"
    proc = hosts.run(write_plan(tmp_path, two_node_plan()), out, iterations=2, extra=["--inject-actor-fault", "1"])
    procs = RunProcesses(proc.pid)
    _, err, exited_at = finish(proc, 600)  # a bound on a hang
    assert procs.left_behind(exited_at) == []
    assert proc.returncode == 1, err
    lines = output_lines(err)
    assert len(lines) == 1 and "a Ray actor died" in lines[0] and "generator_0 on node 10.200.0." in lines[0], err
    assert json.loads((out / "record.json").read_text())["status"] == "failed"
    deadline = time.time() + 10
    while any(netns_pids(ns) - pids for ns, pids in before.items()) and time.time() < deadline:
        time.sleep(0.5)
    assert {ns: netns_pids(ns) - pids for ns, pids in before.items()} == {ns: set() for ns in before}


def test_losing_the_worker_host_mid_run_gives_a_partial_record_naming_it(hosts, tmp_path):
    before = netns_pids(hosts.head)
    out = tmp_path / "lost"
    proc = hosts.run(write_plan(tmp_path, two_node_plan()), out, iterations=LONG_RUN)
    procs = RunProcesses(proc.pid)
    wait_for_first_iteration(proc, tmp_path, "lost")  # every actor up, the rollout crossing the veth
    killed_at = time.time()
    kill_netns(hosts.worker)  # the worker host is gone: its raylet, its actors
    _, err, exited_at = finish(proc, 120)  # a bound on a hang
    assert procs.left_behind(exited_at) == []
    print(f"driver exited {exited_at - killed_at:.1f} s after the worker host was killed "
          f"(load {os.getloadavg()[0]:.2f})")
    assert exited_at - killed_at < NODE_LOSS_EXIT_S, err
    assert proc.returncode == 1, err
    lines = output_lines(err)
    assert len(lines) == 1 and lines[0].startswith("error: run: a Ray actor died"), err
    assert f"on node {WORKER_IP}" in lines[0] and "partial record" in lines[0], err
    record = json.loads((out / "record.json").read_text())
    assert record["status"] == "failed" and record["counts"]["iterations"] >= 1
    assert WORKER_IP in record["error"] and record["env_steps_match"] is False
    deadline = time.time() + 10
    while netns_pids(hosts.head) - before and time.time() < deadline:
        time.sleep(0.5)
    assert netns_pids(hosts.head) - before == set()
