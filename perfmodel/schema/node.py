"""A cluster's node as a user describes it (issue 32): CPU cores, GPUs, NIC bandwidth per GPU and
host RAM per node, from command-line options (predict, plan, sweep) or the ``vlaperf:`` block of
an RLinf config (whose own schema cannot say them). What is not given is the profile's node (the
calibrated one, on the plan's GPU type), and the commands print those assumed values."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from perfmodel.schema.errors import ConfigError

# Cluster field -> (command-line option, element type, unit for the assumed-values note).
NODE_FIELDS: dict[str, tuple[str, type, str]] = {
    "cpu_cores_per_node": ("--cpu-cores-per-node", int, "CPU cores per node"),
    "gpus_per_node": ("--gpus-per-node", int, "GPUs per node"),
    "inter_node_bw_GBps": ("--nic-gbps", float, "GB/s NIC bandwidth per GPU"),
    "node_ram_gb": ("--node-ram-gb", float, "GB host RAM per node"),
}
NODE_MAX = {"cpu_cores_per_node": 1_000_000, "gpus_per_node": 1024, "inter_node_bw_GBps": 100_000.0,
            "node_ram_gb": 1_000_000.0}


def check_node(values: Mapping[str, Any], names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The node fields given (None = not given), each checked; ``names``: how the user named a
    field (an option or a ``vlaperf.`` key), for the error."""
    out: dict[str, Any] = {}
    for f, v in values.items():
        if v is None:
            continue
        if f not in NODE_FIELDS:
            raise ConfigError(f, f"is not a node field (allowed: {', '.join(NODE_FIELDS)})")
        option, kind, unit = NODE_FIELDS[f]
        name = (names or {}).get(f, option)
        low = 1
        if (isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not float(v).is_integer())
                or not math.isfinite(v) or not low <= v <= NODE_MAX[f]):
            what = "an integer" if kind is int else "a number"
            raise ConfigError(name, f"must be {what} in {low}..{NODE_MAX[f]:.0f} ({unit}), got {v!r}")
        out[f] = kind(v)
    return out


def with_node(cluster: Any, node: Mapping[str, Any]) -> Any:
    """``cluster`` with the node fields given; the cores an actor GPU keeps stay the same fraction
    of a GPU's share of the node (as perfmodel.calibration.reference.complete_cluster keeps them)."""
    if not node:
        return cluster
    out = replace(cluster, **node)
    if "cpu_cores_per_node" in node or "gpus_per_node" in node:
        out = replace(out, actor_cpu_cores_per_gpu=cluster.actor_cpu_cores_per_gpu * out.cpu_cores_per_gpu
                      / cluster.cpu_cores_per_gpu)
    return out


def assumed_note(cluster: Any, given: Mapping[str, Any], gpu: str | None = None) -> str | None:
    """The stderr note naming the node values that were assumed (not given), or None: the
    profile's node, or with ``gpu`` (``--gpu``) that GPU's typical node; ``perfmodel gpus``
    prints the same values (perfmodel.commands.gpus.assumed_nodes)."""
    left = [f for f in NODE_FIELDS if f not in given]
    if not left:
        return None
    parts = [f"{getattr(cluster, f):.4g} {NODE_FIELDS[f][2]} ({NODE_FIELDS[f][0]})" for f in left]
    source = "the profile's" if gpu is None else f"{gpu}'s typical node"
    return f"node assumed ({source}; perfmodel gpus lists them): " + ", ".join(parts)
