"""Checks every ``perfmodel`` command shares: one line naming the option and what it allows
(``ConfigError``, exit code 2 on the command line). The ``field`` of each error is the option a
user types, also when the command is called from Python (perfmodel.api), so that one message
serves both."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from perfmodel.schema.errors import ConfigError

# the bundled profiles: calibrated (pi05, gr00t_n15) and from their shared calibration (issue 31)
BACKBONE_NAMES = ("pi05", "gr00t_n15", "pi0", "openvla_oft", "gr00t_n16", "mlp_policy")
MAX_REPLICATIONS = 1000
MAX_SEED = 2**32 - 1  # numpy's seed range

Say = Callable[[str], None]  # where a command's stderr lines ("warning: ...", "note: ...") go


def fail(field: str, message: str) -> None:
    raise ConfigError(field, message)


def one_of(field: str, value: str | None, allowed: Iterable[str]) -> None:
    """``value``, when given, must be one of ``allowed``."""
    allowed = tuple(allowed)
    if value is not None and value not in allowed:
        fail(field, f"must be one of {', '.join(allowed)}; got {value!r}")


def check_seed(seed: int) -> None:
    if not 0 <= seed <= MAX_SEED:
        fail("--seed", f"must be an integer in 0..{MAX_SEED}, got {seed}")


def check_price(price: float | None) -> None:
    from perfmodel.schema.plan import check_gpu_hour_price

    if price is not None:
        check_gpu_hour_price("--gpu-hour-price", price)


def check_replications(replications: int) -> None:
    if not 1 <= replications <= MAX_REPLICATIONS:
        fail("--replications", f"must be an integer in 1..{MAX_REPLICATIONS}, got {replications}")


def check_gpu(gpu: str | None) -> None:
    from perfmodel.schema.hardware import GPU_NAMES

    one_of("--gpu", gpu, GPU_NAMES)


def backbone_or_profile(backbone: str | None, profile_path: str | None) -> str | None:
    """``--backbone`` (a bundled one) or ``--profile``, not both: the one given."""
    if backbone is not None and profile_path is not None:
        fail("--profile", "give either --backbone or --profile, not both")
    one_of("--backbone", backbone, BACKBONE_NAMES)
    return profile_path or backbone


def check_backbone(backbone: str | None, profile: Any, source: str) -> None:
    """``--backbone X`` with a profile of another backbone is a contradiction, not an override."""
    if backbone is not None and profile.backbone != backbone:
        fail("--backbone", f"{backbone} contradicts {source} {profile.name!r}, a {profile.backbone} profile; "
                           "give one of them")


def load_rlinf_config(path: str, backbone: str | None, profile_path: str | None, gpu: str | None,
                      mode: str | None = None, say: Say | None = None, node: dict[str, Any] | None = None,
                      ratio: str | None = None):
    """An RLinf config (``--rlinf-config``) as a plan; its warnings go to ``say``, one a line, and
    the node values assumed (``node``: the ones the options gave; perfmodel/schema/node.py).
    ``ratio`` (``--ratio``), which the caller applies to the plan, goes to the importer for its
    notes: a config that shares every GPU between actor and rollout is then said to be costed apart."""
    from perfmodel.rlinf.importer import load_rlinf
    from perfmodel.schema.modes import MODES

    ref = backbone_or_profile(backbone, profile_path)
    one_of("--mode", mode, MODES)
    im = load_rlinf(path, profile_ref=ref, gpu=gpu, mode=mode, node=node, ratio=ratio)
    for w in im.warnings:
        (say or to_stderr)(f"warning: {w}")
    if im.assumed_node:
        (say or to_stderr)(f"note: {im.assumed_node}")
    return im


def node_options(cpu_cores_per_node: int | None = None, gpus_per_node: int | None = None,
                 nic_gbps: float | None = None, node_ram_gb: float | None = None) -> dict[str, Any]:
    """The node options given (``--cpu-cores-per-node`` ...) as checked Cluster fields."""
    from perfmodel.schema.node import check_node

    return check_node({"cpu_cores_per_node": cpu_cores_per_node, "gpus_per_node": gpus_per_node,
                       "inter_node_bw_GBps": nic_gbps, "node_ram_gb": node_ram_gb})


def to_stderr(line: str) -> None:
    """The default ``say`` of a Python caller: the line on stderr, as the command line has it."""
    import sys

    print(line, file=sys.stderr)
