"""Checks before anything starts: every one ends in a one-line ``ConfigError`` (exit 2) instead
of starting Ray and failing later.

Memory: a run holds its env processes, one Ray worker per actor (env worker, generator, trainer
rank), Ray's own processes and the driver. Numbers measured on this project's 2-core CPU box
(ray 2.60, torch 2.13 CPU, tiny policies), RSS:
- a rendered LIBERO env process: 1.92 to 2.02 GB (``profiles/pi05_tiny_cpu.json`` ``env_memory_gb``,
  measured by ``executor profile``); 2.0 GB when no profile says;
- Ray's head processes (gcs_server, raylet, dashboard, agents, log monitor, two idle workers):
  0.61 GB; counted as ``RAY_BASE_GB``;
- a Ray worker that imported torch: 0.28 GB before a model; with a tiny policy, optimizer and
  received weights about 0.4 GB; counted as ``ACTOR_GB`` per actor, and once for the driver.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import EXECUTED_ALGORITHMS, GROUPED_ALGORITHMS, Plan

ENV_MEMORY_GB_DEFAULT = 2.0  # one rendered LIBERO env process, when no profile says otherwise
RAY_BASE_GB = 0.8  # Ray's head processes, measured 0.61 GB RSS (module docstring), rounded up
ACTOR_GB = 0.4  # one Ray worker with torch and a tiny policy (module docstring)
# A run that exhausts RAM is OOM-killed mid-run (records lost, env processes left behind): keep
# 10 % of what the kernel calls available for the page cache, the kernel and other tenants.
RAM_HEADROOM = 0.9
ADDRESS_TIMEOUT_S = 3.0  # a GCS that does not answer a TCP connect in 3 s is not there
# A run measures costs the plan gives whole cores to; a 1-minute load average above a quarter of
# the cores (0.5 on a 2-core box) means other processes already compete for them.
LOADED_PER_CORE = 0.25


def load_warning(load_1min: float, cores: int | None = None) -> str | None:
    """The one rule for "this machine is already loaded" (warned before a run starts and kept in
    its record): None when the load average is at most ``LOADED_PER_CORE`` x cores."""
    cores = cores or os.cpu_count() or 1
    if load_1min <= LOADED_PER_CORE * cores:
        return None
    return (f"machine already loaded: 1-minute load average {load_1min:.2f} on {cores} cores; other "
            "processes share the cores the plan's costs assume, so the measurement will be slower than "
            "a quiet machine's (--compare prints diagnoses at the CPU share and env costs the envs get)")


def device_slots() -> tuple[int, str]:
    """Device slots of this machine: CUDA devices, else CPU cores."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.device_count(), "CUDA devices"
    except ImportError:
        pass
    return os.cpu_count() or 1, "CPU cores"


def available_ram_gb() -> float:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 / 1e9  # GB, as the profile's env_memory_gb
    except OSError:
        pass
    return float("inf")


@dataclass(frozen=True)
class MemoryNeed:
    envs_gb: float
    actors_gb: float
    ray_gb: float

    @property
    def total_gb(self) -> float:
        return self.envs_gb + self.actors_gb + self.ray_gb

    def describe(self, envs: int, env_gb: float, actors: int) -> str:
        return (f"{envs} envs x {env_gb:.2f} GB + {actors} Ray actors and the driver x {ACTOR_GB:.1f} GB "
                f"+ Ray {RAY_BASE_GB:.1f} GB = {self.total_gb:.1f} GB")


def memory_need(plan: Plan, env_memory_gb: float) -> tuple[MemoryNeed, int]:
    """What a local run of ``plan`` holds in RAM (see the module docstring for the numbers)."""
    g_r, g_a = plan.rollout_gpus, plan.actor_gpus
    actors = 2 * g_r + g_a  # env worker + generator per rollout slot, one trainer per actor rank
    need = MemoryNeed(envs_gb=plan.workload.total_num_envs * env_memory_gb,
                      actors_gb=(actors + 1) * ACTOR_GB, ray_gb=RAY_BASE_GB)
    return need, actors


def check_plan_fits(plan: Plan, backbone: str, scale: str, env_memory_gb: float, local: bool,
                    ram_gb: float | None = None) -> None:
    """Refuse, with one ConfigError naming the field, a plan this machine cannot run."""
    from perfmodel.backbones import get_backbone, with_denoising

    if local:
        slots, what = device_slots()
        if plan.cluster.gpus > slots:
            raise ConfigError("plan.cluster.gpus", f"{plan.cluster.gpus} device slots but this machine has "
                              f"{slots} {what}; use at most {slots} or --address a Ray cluster")
        need, actors = memory_need(plan, env_memory_gb)
        have = available_ram_gb() if ram_gb is None else ram_gb
        if need.total_gb > RAM_HEADROOM * have:
            envs = plan.workload.total_num_envs
            raise ConfigError("plan.workload.total_num_envs",
                              f"{need.describe(envs, env_memory_gb, actors)} but this machine has "
                              f"{have:.1f} GB available (at most {RAM_HEADROOM:.0%} of it is used); use fewer envs")
    if plan.version_granularity != "iteration":  # the driver publishes a version per iteration
        raise ConfigError("plan.version_granularity", f"the executor runs 'iteration' versions only (RLinf 0.3.0's: "
                          f"version = global step); got {plan.version_granularity!r}, a perfmodel reading")
    w = plan.workload
    spec = get_backbone(backbone, scale)
    if w.algorithm not in EXECUTED_ALGORITHMS:
        raise ConfigError("plan.workload.algorithm", f"{w.algorithm} is predicted, not run: the executor trains "
                          f"{', '.join(EXECUTED_ALGORITHMS)} (DSRL's SAC learner on a frozen VLA is not in it)")
    if w.algorithm in ("nft", "dagger") and (not spec.has_action_expert or spec.parallel_decoding):
        raise ConfigError("plan.workload.algorithm", f"{w.algorithm} trains a flow-matching action head; {backbone} has none")
    chunk = with_denoising(get_backbone(backbone, scale), plan.denoising_steps, plan.action_horizon).action_chunk
    if w.num_action_chunks > chunk:
        raise ConfigError("plan.workload.num_action_chunks",
                          f"{backbone} generates chunks of {chunk} actions; must be <= {chunk}, got {w.num_action_chunks}")
    if w.algorithm in GROUPED_ALGORITHMS:
        n = plan.placement.group_sizes[0]
        if n % w.group_size:
            raise ConfigError("plan.workload.group_size",
                              f"GRPO groups must lie within one env group of {n} envs; {w.group_size} does not divide {n}")


def check_options(suite: str, image_size: int | None) -> None:
    from executor.envs import SUITES

    if suite not in SUITES:
        raise ConfigError("suite", f"must be one of {', '.join(SUITES)}; got {suite!r}")
    if image_size is not None and image_size < 1:
        raise ConfigError("image-size", f"must be an integer >= 1, got {image_size}")


def _current_cluster() -> str | None:
    """The address ``ray start --head`` on this machine left (what Ray's ``auto`` reads)."""
    p = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray" / "ray_current_cluster"
    try:
        return p.read_text().strip() or None
    except OSError:
        return None


def resolve_address(address: str | None) -> tuple[str | None, str]:
    """(address to join or None for a local Ray, where it came from). ``--address`` wins; else
    ``RAY_ADDRESS`` from the environment (as ``ray.init`` would read it); ``auto`` is the
    cluster ``ray start --head`` left on this machine. The address must answer a TCP connect
    within ``ADDRESS_TIMEOUT_S``: a wrong one is refused in seconds, not after Ray's retries."""
    source = "address"
    if not address:
        env = os.environ.get("RAY_ADDRESS", "").strip()
        if not env:
            return None, source
        address, source = env, "RAY_ADDRESS"
    if address == "local":
        return None, source
    if address == "auto":
        found = _current_cluster()
        if not found:
            raise ConfigError(source, "'auto' but no Ray cluster was started on this machine "
                              "(ray start --head); give HOST:PORT of the head's GCS")
        address = found
    if address.startswith("ray://"):
        raise ConfigError(source, f"Ray Client addresses (ray://) are not supported, got {address!r}; "
                          "run on the cluster's head node with HOST:PORT of its GCS")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(source, f"must be HOST:PORT of a Ray head (GCS), 'auto' or 'local'; got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=ADDRESS_TIMEOUT_S) as sock:
            speaks = _speaks_grpc(sock)
    except OSError as e:
        why = "timed out" if isinstance(e, socket.timeout) else (e.strerror or type(e).__name__)
        raise ConfigError(source, f"no Ray cluster answers at {address} ({why}); start one with "
                          "ray start --head, or leave it out to run locally") from None
    if not speaks:
        # ray.init would retry such an address for many minutes, silently
        raise ConfigError(source, f"something answers at {address} but not a Ray head's GCS (no gRPC reply within "
                          f"{ADDRESS_TIMEOUT_S:g} s); give HOST:PORT of the head's GCS (ray start --head prints it)")
    return address, source


# A client's HTTP/2 connection preface and an empty SETTINGS frame (RFC 9113 3.4): a gRPC server,
# as Ray's GCS, answers with its own SETTINGS frame (type 4); an HTTP/1 server, a database or a
# proxy that only accepts the connection does not.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS_FRAME_TYPE = 4


def _speaks_grpc(sock: socket.socket) -> bool:
    """Whether the peer answers the HTTP/2 preface with a frame header of SETTINGS within
    ADDRESS_TIMEOUT_S. With TLS on (RAY_USE_TLS) the GCS does not speak plain HTTP/2: not checked."""
    if os.environ.get("RAY_USE_TLS", "0") not in ("", "0"):
        return True
    sock.settimeout(ADDRESS_TIMEOUT_S)
    try:
        sock.sendall(_HTTP2_PREFACE)
        head = b""
        while len(head) < 9:
            chunk = sock.recv(9 - len(head))
            if not chunk:
                break
            head += chunk
    except OSError:
        return False
    return len(head) == 9 and head[3] == _SETTINGS_FRAME_TYPE


def resolve_backbone(plan: Plan) -> str:
    from perfmodel.schema.profile import load_profile

    return load_profile(plan.profile).backbone


def default_profile_path(backbone: str, scale: str) -> Path:
    from perfmodel.schema.profile import BUNDLED_DIR

    return BUNDLED_DIR / f"{backbone}_{scale}_cpu.json"
