"""Where a plan's components run: one object, derived once from a plan, that the costs, the
bound, the simulator and the executor all read (RLinf's ``component_placement`` as data).

Devices are numbered globally, node after node (device d is on node d // gpus_per_node). A
rollout slot holds one env worker and its generator; an actor slot holds one data-parallel
actor rank. Colocated: every device is both a rollout and an actor slot (phases time-share it).

Two strategies (``plan.placement_strategy``):
- ``packed`` (the default, as RLinf's scheduler/placement/packed.py places components: contiguous
  global GPU ranges such as ``rollout: 0-7, actor: 8-15``, a node filled before the next): the
  rollout slots take devices 0..R-1 and the actor's R..R+A-1. With 1:1 the actor fits one node at
  16 GPUs (no inter-node collective) and spans two at 32; the env workers of a node without actor
  ranks get all of its cores.
- ``split``: each node is divided by the allocation ratio when its GPUs allow it, so every node
  holds env workers and actor ranks alike; otherwise rollout slots are packed first, then the
  actor's.

Colocated with the rollout on fewer GPUs than the actor (``plan.colocated_rollout_gpus``, RLinf's
``actor: 0-7`` with ``env,rollout: 4-7``): the actor trains on every device, the rollout slots are
packed (its first devices; which of the node's GPUs they are does not change a cost).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfmodel.schema.rules import env_groups


@dataclass(frozen=True)
class NodeShare:
    """``count`` identical nodes, each with ``rollout`` rollout slots and ``actor`` actor slots."""

    count: int
    rollout: int
    actor: int


@dataclass(frozen=True)
class Placement:
    gpus: int
    gpus_per_node: int
    rollout_gpus: int
    actor_gpus: int
    colocated: bool
    nodes: tuple[NodeShare, ...]  # run-length over the nodes, in node order
    env_cores_per_worker: float
    envs_per_worker: int
    env_groups: int  # env groups per worker (pipeline stages, or finer for dynamic batching)

    @property
    def envs_per_group(self) -> int:
        return self.envs_per_worker // self.env_groups

    @property
    def group_sizes(self) -> list[int]:
        return [self.envs_per_group] * self.env_groups

    def node_split(self) -> list[tuple[int, int]]:
        """(rollout slots, actor slots) on each node, in node order."""
        return [(n.rollout, n.actor) for n in self.nodes for _ in range(n.count)]

    @property
    def actor_nodes(self) -> int:
        """Nodes that hold at least one actor rank (a collective over the actor crosses these)."""
        return sum(n.count for n in self.nodes if n.actor)

    @property
    def actor_ranks_per_node(self) -> int:
        """The most actor ranks on one node (the intra-node ring's length)."""
        return max((n.actor for n in self.nodes if n.actor), default=0)

    @property
    def sync_crosses_nodes(self) -> bool:
        """Whether weights reach some generator over the inter-node network: a rollout slot on
        a node without actor ranks, or an actor spread over several nodes."""
        if self.colocated:
            return False
        return self.actor_nodes > 1 or any(n.rollout and not n.actor for n in self.nodes)

    @property
    def rollout_nodes(self) -> int:
        return sum(n.count for n in self.nodes if n.rollout)

    @property
    def max_workers_per_node(self) -> int:
        return max((n.rollout for n in self.nodes), default=0)

    def node_fraction(self, n: NodeShare) -> float:
        """The part of a node a plan's node of share ``n`` uses: 1 for a whole node; a plan on
        fewer GPUs than a node gets that part of the node's cores and RAM, as smaller cloud
        instances of the same GPU do."""
        return node_part(n.actor if self.colocated else n.rollout + n.actor, self.gpus_per_node)

    def slots(self) -> tuple[list[int], list[int]]:
        """Global device indices of the rollout slots and the actor slots (rank order)."""
        rollout: list[int] = []
        actor: list[int] = []
        base = 0
        for share in self.nodes:
            for _ in range(share.count):
                rollout += range(base, base + share.rollout)
                if self.colocated:
                    actor += range(base, base + share.actor)
                else:
                    actor += range(base + share.rollout, base + share.rollout + share.actor)
                base += self.gpus_per_node
        return rollout, actor


def node_part(used: int, gpus_per_node: int) -> float:
    """The part of a node whose ``used`` GPUs a plan has (its cores and RAM go with it)."""
    return min(1.0, used / gpus_per_node)


def env_cores_of(n: NodeShare, cpu_cores_per_node: float, gpus_per_node: int, actor_cpu_cores_per_gpu: float) -> float:
    """Cores each env worker on a (disaggregated) node of share ``n`` gets: the plan's part of the
    node's cores, less what its actor GPUs keep, over its env workers."""
    return (cpu_cores_per_node * node_part(n.rollout + n.actor, gpus_per_node)
            - n.actor * actor_cpu_cores_per_gpu) / n.rollout


def _run_length(split: list[tuple[int, int]], counts: list[int]) -> tuple[NodeShare, ...]:
    out: list[NodeShare] = []
    for (r, a), c in zip(split, counts):
        if out and (out[-1].rollout, out[-1].actor) == (r, a):
            out[-1] = NodeShare(out[-1].count + c, r, a)
        elif c:
            out.append(NodeShare(c, r, a))
    return tuple(out)


def node_shares(gpus: int, gpus_per_node: int, rollout: int, actor: int, ratio: tuple[int, int] | None
                ) -> tuple[NodeShare, ...]:
    """The per-node split (see the module docstring), as a few node kinds for any cluster size."""
    full, rest = divmod(gpus, gpus_per_node)
    sizes = [(full, gpus_per_node)] + ([(1, rest)] if rest else [])
    sizes = [(c, s) for c, s in sizes if c]
    if ratio is None:
        return tuple(NodeShare(c, s, s) for c, s in sizes)
    r, a = ratio
    if all(s % (r + a) == 0 for _, s in sizes):
        return tuple(NodeShare(c, s // (r + a) * r, s // (r + a) * a) for c, s in sizes)
    # Rollout slots first, then the actor's: whole rollout nodes, one mixed node, actor nodes.
    split: list[tuple[int, int, int]] = []  # (count, rollout, actor)
    left = rollout
    for count, size in sizes:
        whole = min(count, left // size)
        if whole:
            split.append((whole, size, 0))
            left -= whole * size
        if whole < count:
            split.append((1, left, size - left))
            left = 0
            if count - whole - 1:
                split.append((count - whole - 1, 0, size))
    return _run_length([(r_, a_) for _, r_, a_ in split], [c for c, _, _ in split])


def packed_shares(gpus: int, gpus_per_node: int, rollout: int, actor_everywhere: bool = False
                  ) -> tuple[NodeShare, ...]:
    """Contiguous ranges: devices 0..rollout-1 roll out, the rest train (or, ``actor_everywhere``,
    every device trains); per node, run-length."""
    nodes = math.ceil(gpus / gpus_per_node)
    split, counts = [], []
    for i in range(nodes):
        size = min(gpus_per_node, gpus - i * gpus_per_node)
        r = min(size, max(0, rollout - i * gpus_per_node))
        split.append((r, size if actor_everywhere else size - r))
        counts.append(1)
    return _run_length(split, counts)


def placement_of(gpus: int, gpus_per_node: int, cpu_cores_per_node: int, actor_cpu_cores_per_gpu: float,
                 rollout_gpus: int, actor_gpus: int, colocated: bool, ratio: tuple[int, int] | None,
                 total_num_envs: int, pipeline_stage_num: int, dynamic_batching: bool,
                 strategy: str = "packed") -> Placement:
    if colocated and rollout_gpus < gpus:
        shares = packed_shares(gpus, gpus_per_node, rollout_gpus, actor_everywhere=True)
    elif colocated or strategy == "split":
        shares = node_shares(gpus, gpus_per_node, rollout_gpus, actor_gpus, None if colocated else ratio)
    else:
        shares = packed_shares(gpus, gpus_per_node, rollout_gpus)
    if colocated:
        # The actor never runs during rollout, so the env workers share the (used part of the) node.
        cores = cpu_cores_per_node / gpus_per_node if rollout_gpus == gpus else min(
            cpu_cores_per_node * node_part(n.actor, gpus_per_node) / n.rollout for n in shares if n.rollout)
    else:
        # Workers on different nodes may get different shares; all are given the smallest, the
        # one that paces the rollout. A node used only in part (a plan smaller than a node) has
        # that part of its cores (Placement.node_fraction).
        cores = min((env_cores_of(n, cpu_cores_per_node, gpus_per_node, actor_cpu_cores_per_gpu)
                     for n in shares if n.rollout), default=math.inf)
    envs_per_worker = total_num_envs // rollout_gpus
    groups = env_groups(envs_per_worker, pipeline_stage_num, dynamic_batching)
    return Placement(gpus, gpus_per_node, rollout_gpus, actor_gpus, colocated, shares, cores,
                     envs_per_worker, groups)
