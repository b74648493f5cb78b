"""Carry a calibrated profile to another accelerator (``cluster.gpu``; table and rules in
perfmodel/schema/hardware.py).

- ``profile_on(profile, gpu)``: the profile's costs on ``gpu``. The inference and training
  curves are ``fixed + slope x batch``: the fixed part (reading the weights once per call) is
  memory-bound and scales with HBM bandwidth, the batch-proportional part is compute-bound and
  scales with peak bf16 FLOP/s; the optimizer step (streaming the optimizer state) scales with
  HBM bandwidth; offload/reload with host-device (PCIe) bandwidth. Env costs (CPU) are kept.
  ``measured_compute_only``: only the measured GPU compute per sample of each curve
  (``Costs.gpu_compute_per_sample_s``) scales with FLOP/s and the rest of the fitted slope is
  kept, as host work would be: the other end of what the fitted slopes allow (the interval
  includes both, perfmodel.calibration.uncertainty).
- ``cluster_on(cluster, gpu)``: the profile's node moved to ``gpu``'s typical node: NVLink and
  NIC bandwidths scaled by the link ratios (the calibrated values stay calibrated: an effective
  bandwidth times the ratio of datasheet bandwidths), CPU cores and RAM by the typical nodes'
  ratio, GPU memory from the table.
- ``gpu_node(cluster, gpu)``: what ``--gpu`` (or ``vlaperf.gpu``) means, also for the profile's
  own GPU type: the cluster on ``gpu``'s typical node of the table (its CPU cores, host RAM, GPUs
  per node and memory), the links as ``cluster_on`` carries them (``perfmodel gpus`` prints it
  for each GPU of the table: perfmodel.commands.gpus.assumed_nodes).
"""

from __future__ import annotations

from dataclasses import replace

from perfmodel.schema.hardware import DEFAULT_GPU, accelerator, scale_factors
from perfmodel.schema.plan import Cluster
from perfmodel.schema.profile import Costs, Curve, Profile

ASSUMPTION = ("costs carried from {src} to {dst}: compute-bound work by peak bf16 FLOP/s, memory-bound work by "
              "HBM bandwidth, links by link bandwidth (datasheets); CPU per-core speed of env physics kept")


def profile_gpu(profile: Profile) -> str:
    """The accelerator a profile's costs belong to (its node's ``gpu``; H100 by default)."""
    return str(profile.node.get("gpu", DEFAULT_GPU))


def _curve(c: Curve, fixed: float, per_item: float) -> Curve:
    if c.model == "linear":
        return replace(c, intercept=c.intercept * fixed, slope=c.slope * per_item, samples=())
    # A measured table: no split into fixed and per-item parts; the compute-bound factor for all.
    return replace(c, points=tuple((x, y * per_item) for x, y in c.points), samples=())


def _shift(c: Curve, seconds: float) -> Curve:
    """``c`` + ``seconds`` at every size (a linear curve's intercept, a table's points)."""
    if not seconds:
        return c
    if c.model == "linear":
        return replace(c, intercept=c.intercept + seconds, samples=())
    return replace(c, points=tuple((x, y + seconds) for x, y in c.points), samples=())


def _per_item(c: Curve, compute_s: float | None, compute_time: float) -> float:
    """The factor of a curve's per-sample part: all of it compute-bound, or (``compute_s``, at
    most the slope: Costs checks it) only that many seconds of its slope, the rest kept."""
    if compute_s is None or c.slope <= 0:
        return compute_time
    return (compute_s * compute_time + (c.slope - compute_s)) / c.slope


def profile_on(profile: Profile, gpu: str, measured_compute_only: bool = False) -> Profile:
    """``profile`` with its GPU costs scaled to ``gpu`` (the same object when it is its own GPU)."""
    src = profile_gpu(profile)
    if gpu == src:
        return profile
    f = scale_factors(src, gpu)
    c = profile.costs
    measured = c.gpu_compute_per_sample_s if measured_compute_only else {}
    infer_item = _per_item(c.infer_s, measured.get("infer_s"), f.compute_time)
    train_item = _per_item(c.train_micro_batch_s, measured.get("train_micro_batch_s"), f.compute_time)
    costs: Costs = replace(
        c,
        # the host-path latency of a call (Costs.infer_latency_s) is not the GPU's: kept as is
        infer_s=_shift(_curve(_shift(c.infer_s, -c.infer_latency_s), f.memory_time, infer_item),
                       c.infer_latency_s),
        train_micro_batch_s=_curve(c.train_micro_batch_s, f.memory_time, train_item),
        optimizer_step_s=c.optimizer_step_s * f.memory_time,
        offload_s=c.offload_s * f.pcie_time,
        reload_s=c.reload_s * f.pcie_time,
        gpu_compute_per_sample_s={k: v * f.compute_time for k, v in c.gpu_compute_per_sample_s.items()},
    )
    assumptions = dict(profile.assumptions)
    assumptions["gpu_scaling"] = ASSUMPTION.format(src=src, dst=gpu) + (
        "; only the measured GPU compute per sample scales, the rest of each slope kept" if measured else "")
    return replace(profile, costs=costs, node={**profile.node, "gpu": gpu}, assumptions=assumptions)


def cluster_on(cluster: Cluster, gpu: str) -> Cluster:
    """``cluster`` (a profile's node) moved to ``gpu``'s typical node."""
    if gpu == cluster.gpu:
        return cluster
    f = scale_factors(cluster.gpu, gpu)
    changes = {
        "gpu": gpu,
        "intra_node_bw_GBps": cluster.intra_node_bw_GBps * f.nvlink_bw,
        "inter_node_bw_GBps": cluster.inter_node_bw_GBps * f.nic_bw,
        "cpu_cores_per_node": max(1, round(cluster.cpu_cores_per_node * f.node_cores)),
        "node_ram_gb": cluster.node_ram_gb * f.node_ram,
        "actor_cpu_cores_per_gpu": cluster.actor_cpu_cores_per_gpu * f.node_cores,
        "gpus_per_node": accelerator(gpu).gpus_per_node,
    }
    if hasattr(cluster, "gpu_memory_gb"):
        changes["gpu_memory_gb"] = accelerator(gpu).memory_gb
    if hasattr(cluster, "host_bw_GBps"):
        changes["host_bw_GBps"] = cluster.host_bw_GBps / f.pcie_time
    return replace(cluster, **changes)


def gpu_node(cluster: Cluster, gpu: str) -> Cluster:
    """``cluster`` on ``gpu``'s typical node (``--gpu NAME``): the table's CPU cores, host RAM and
    GPUs per node (the vendor's reference system, perfmodel/schema/hardware.py) and GPU memory,
    NVLink and NIC the calibrated effective bandwidths times the datasheet ratio (``cluster_on``).
    On the profile's own GPU type too: ``--gpu h100`` is a DGX H100 node, not the published
    cluster's (issue 41). Node options (``--cpu-cores-per-node`` ...) apply after it."""
    from perfmodel.schema.node import with_node

    a = accelerator(gpu)
    return with_node(cluster_on(cluster, gpu), {"cpu_cores_per_node": a.node_cpu_cores, "node_ram_gb": a.node_ram_gb,
                                                "gpus_per_node": a.gpus_per_node})

