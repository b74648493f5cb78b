"""``perfmodel gpus``: the accelerators ``--gpu`` accepts, with their datasheet numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfmodel.schema.profile import Profile


def gpus() -> dict[str, dict[str, Any]]:
    """Each accelerator's datasheet numbers and typical node, by name (``perfmodel gpus --json``)."""
    from perfmodel.schema.hardware import ACCELERATORS

    return {k: a.__dict__ for k, a in ACCELERATORS.items()}


def assumed_nodes(profile: "Profile") -> list[dict[str, object]]:
    """The node a plan on ``profile`` assumes without node options: the profile's own (no
    ``--gpu``), then each GPU's of the table (``--gpu NAME``, ``gpu_node``), as the commands'
    notes print it (perfmodel.schema.node.NODE_FIELDS)."""
    from perfmodel.calibration.reference import default_cluster
    from perfmodel.gpu import gpu_node
    from perfmodel.schema.hardware import ACCELERATORS
    from perfmodel.schema.node import NODE_FIELDS

    own = default_cluster(profile, 1)
    rows = [("(no --gpu)", f"{profile.name}'s node", own)]
    rows += [(f"--gpu {g}", f"{g}'s typical node", gpu_node(own, g)) for g in ACCELERATORS]
    return [{"option": opt, "node": what, "gpu": c.gpu, **{f: getattr(c, f) for f in NODE_FIELDS}}
            for opt, what, c in rows]


def assumed_node_table(profile_ref: str = "pi05") -> str:
    """The node a plan assumes without node options (perfmodel.commands.gpus.assumed_nodes), the one table
    the commands' notes and ``--help`` point to."""
    from perfmodel.schema.node import NODE_FIELDS
    from perfmodel.schema.profile import load_profile

    rows = assumed_nodes(load_profile(profile_ref))
    head = ["option", "node", "gpu", *(f"{NODE_FIELDS[f][2]} ({NODE_FIELDS[f][0]})" for f in NODE_FIELDS)]
    out = ["| " + " | ".join(head) + " |", "|---|---|---|" + "---:|" * len(NODE_FIELDS)]
    out += ["| " + " | ".join([str(r["option"]), str(r["node"]), str(r["gpu"]),
                               *(f"{r[f]:.4g}" for f in NODE_FIELDS)]) + " |" for r in rows]
    return "\n".join(out)


NODE_NOTE = ("The node a plan assumes where no node option is given (the bundled profiles'; predict's, plan's and "
             "sweep's notes print the same): without --gpu the profile's node (for the bundled ones the published "
             "cluster: its CPU cores, and its NIC bandwidth the effective one fitted to the published runs, not a "
             "datasheet number); with --gpu NAME that GPU's typical node above (CPU cores, RAM, GPUs per node), its "
             "links the profile's effective bandwidths times the datasheet ratio.")


def format_gpus() -> str:
    from perfmodel.schema.hardware import ACCELERATORS, table_markdown

    return "\n".join([table_markdown(), *(f"{a.name}: {a.source}" for a in ACCELERATORS.values()), "",
                      NODE_NOTE, assumed_node_table()])
