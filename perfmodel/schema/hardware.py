"""Accelerators a plan can run on, and how a calibrated profile carries over to another one.

Each row is one GPU (SXM form factor) and the typical 8-GPU node built around it (the vendor's
own reference system: DGX A100, DGX H100, DGX H200, DGX B200). Numbers are vendor datasheet
numbers (cited per row); "dense" means without 2:4 structured sparsity (datasheets print the
sparse figure, twice the dense one). Bandwidths are per GPU and per direction:

- ``nvlink_GBps``: NVLink per GPU per direction (datasheets print the bidirectional total).
- ``nic_GBps``: the node's compute-fabric NICs divided over its 8 GPUs (one NIC per GPU).
- ``pcie_GBps``: host <-> device per direction (offload / reload of models).

| gpu  | bf16 dense TFLOP/s | HBM GB/s | memory GB | NVLink GB/s | NIC GB/s | PCIe GB/s | node CPU cores | node RAM GB |
|------|-------------------:|---------:|----------:|------------:|---------:|----------:|---------------:|------------:|
| a100 | 312                | 2039     | 80        | 300         | 25       | 32        | 128            | 1024        |
| h100 | 989                | 3350     | 80        | 450         | 50       | 64        | 112            | 2048        |
| h200 | 989                | 4800     | 141       | 450         | 50       | 64        | 112            | 2048        |
| b200 | 2250               | 8000     | 180       | 900         | 50       | 64        | 112            | 2048        |

How a profile moves to another GPU (``scale_factors``): a profile's costs were measured or
fitted on its own GPU (``Profile.gpu``, default ``h100``: the published setup is H100-class).
Relative to that GPU, compute-bound work (the batch-proportional slope of the inference and
training curves) scales with peak FLOP/s, memory-bound work (the curves' fixed part, which
reads the weights once per call, and the optimizer step) with HBM bandwidth, transfers with
the link they use (NVLink, NIC, PCIe), and the node's CPU cores and RAM with the typical node.
CPU per-core speed is kept (env physics is the profile's per-core time): that is an
assumption, listed in every prediction made on another GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from perfmodel.schema.errors import ConfigError


@dataclass(frozen=True)
class Accelerator:
    name: str
    label: str
    bf16_dense_tflops: float
    hbm_GBps: float
    memory_gb: float
    nvlink_GBps: float
    nic_GBps: float
    pcie_GBps: float
    node_cpu_cores: int
    node_ram_gb: float
    gpus_per_node: int
    source: str


ACCELERATORS: dict[str, Accelerator] = {a.name: a for a in (
    Accelerator("a100", "NVIDIA A100 SXM4 80GB", 312.0, 2039.0, 80.0, 300.0, 25.0, 32.0, 128, 1024.0, 8,
                "NVIDIA A100 datasheet (BF16 tensor 312 TFLOPS dense / 624 sparse; HBM2e 2,039 GB/s; "
                "NVLink 600 GB/s bidirectional; PCIe Gen4 64 GB/s bidirectional); DGX A100 datasheet "
                "(2x AMD EPYC 7742 = 128 cores, 1 TB RAM, 8x 200 Gb/s HDR InfiniBand)"),
    Accelerator("h100", "NVIDIA H100 SXM5 80GB", 989.0, 3350.0, 80.0, 450.0, 50.0, 64.0, 112, 2048.0, 8,
                "NVIDIA H100 datasheet (BF16 tensor 1,979 TFLOPS with sparsity = 989 dense; HBM3 3.35 TB/s; "
                "NVLink 900 GB/s bidirectional; PCIe Gen5 128 GB/s bidirectional); DGX H100 datasheet "
                "(2x Xeon Platinum 8480C = 112 cores, 2 TB RAM, 8x 400 Gb/s ConnectX-7)"),
    Accelerator("h200", "NVIDIA H200 SXM 141GB", 989.0, 4800.0, 141.0, 450.0, 50.0, 64.0, 112, 2048.0, 8,
                "NVIDIA H200 datasheet (BF16 tensor 1,979 TFLOPS with sparsity = 989 dense; HBM3e 4.8 TB/s, "
                "141 GB; NVLink 900 GB/s bidirectional; PCIe Gen5 128 GB/s); DGX H200 datasheet "
                "(2x Xeon Platinum 8480C = 112 cores, 2 TB RAM, 8x 400 Gb/s ConnectX-7)"),
    Accelerator("b200", "NVIDIA B200 (HGX/DGX B200) 180GB", 2250.0, 8000.0, 180.0, 900.0, 50.0, 64.0, 112, 2048.0, 8,
                "NVIDIA HGX/DGX B200 datasheet (FP16/BF16 tensor 4.5 PFLOPS with sparsity = 2.25 dense per GPU; "
                "HBM3e 8 TB/s, 1,440 GB over 8 GPUs; NVLink 5 1.8 TB/s bidirectional; PCIe Gen5); DGX B200 "
                "(2x Xeon Platinum 8570 = 112 cores, 2 TB RAM, 8x 400 Gb/s ConnectX-7)"),
)}
GPU_NAMES: tuple[str, ...] = tuple(ACCELERATORS)
DEFAULT_GPU = "h100"


def accelerator(name: str, field: str = "cluster.gpu") -> Accelerator:
    if name not in ACCELERATORS:
        raise ConfigError(field, f"must be one of {', '.join(GPU_NAMES)}; got {name!r}")
    return ACCELERATORS[name]


def accelerator_of_device(device_name: str) -> str | None:
    """The table's accelerator a CUDA device name reports (``torch.cuda.get_device_name``, e.g.
    "NVIDIA H200" -> "h200"), or None for a device not in the table: a measured profile says which
    GPU its costs belong to, so carrying it to another type starts from the right one."""
    tokens = set(re.split(r"[^A-Z0-9]+", device_name.upper()))
    if tokens & {"PCIE", "NVL"}:  # other clocks, power and links than the table's SXM parts
        return None
    hits = [a for a in ACCELERATORS if a.upper() in tokens]  # whole words: not GH200, not RTX A1000
    return hits[0] if len(hits) == 1 else None


@dataclass(frozen=True)
class ScaleFactors:
    """Multipliers from a profile's GPU to a target GPU: time factors (< 1 = faster) for
    compute-bound, memory-bound and host-transfer work; bandwidth factors (> 1 = faster) for
    NVLink and NIC; capacity factors for the node's CPU cores and RAM."""

    compute_time: float
    memory_time: float
    pcie_time: float
    nvlink_bw: float
    nic_bw: float
    node_cores: float
    node_ram: float

    @property
    def identity(self) -> bool:
        return all(v == 1.0 for v in self.__dict__.values())


def scale_factors(source: str, target: str) -> ScaleFactors:
    s, t = accelerator(source, "profile.gpu"), accelerator(target)
    return ScaleFactors(
        compute_time=s.bf16_dense_tflops / t.bf16_dense_tflops,
        memory_time=s.hbm_GBps / t.hbm_GBps,
        pcie_time=s.pcie_GBps / t.pcie_GBps,
        nvlink_bw=t.nvlink_GBps / s.nvlink_GBps,
        nic_bw=t.nic_GBps / s.nic_GBps,
        node_cores=t.node_cpu_cores / s.node_cpu_cores,
        node_ram=t.node_ram_gb / s.node_ram_gb,
    )


def table_markdown() -> str:
    """The table above, generated from ACCELERATORS (for `perfmodel gpus` and docs/guide.md)."""
    rows = ["| gpu | name | bf16 dense TFLOP/s | HBM GB/s | memory GB | NVLink GB/s/dir | NIC GB/s/GPU | "
            "PCIe GB/s | node CPU cores | node RAM GB |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for a in ACCELERATORS.values():
        rows.append(f"| {a.name} | {a.label} | {a.bf16_dense_tflops:g} | {a.hbm_GBps:g} | {a.memory_gb:g} | "
                    f"{a.nvlink_GBps:g} | {a.nic_GBps:g} | {a.pcie_GBps:g} | {a.node_cpu_cores} | {a.node_ram_gb:g} |")
    return "\n".join(rows)
