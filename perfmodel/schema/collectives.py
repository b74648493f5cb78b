"""Measured collective costs (``executor profile --comm``): all-reduce, all-gather and broadcast
over torch.distributed at increasing rank counts, with raw samples, and the cost a model can
read from them.

Where it lives: a standalone file (``{"kind": "collective_costs", ...}``) or a profile's
``extra["collectives"]`` (``executor profile --comm --base-profile P --out Q``).

Calibration hook: ``collectives_of(profile)`` gives a ``CollectiveTable`` or None;
``table.cost_s(op, nbytes, ranks, nodes)`` is the measured time of one collective. A measured
(op, ranks, node class) point is interpolated in bytes (linear between measured sizes); other
rank counts use an alpha-beta ring model fitted to every row of that op and node class:
``t = alpha * steps(op, r) + bytes_factor(op, r) * nbytes / bw`` (steps and bytes factors as
nccl-tests' bus-bandwidth conventions: all-reduce 2(r-1) and 2(r-1)/r, all-gather r-1 and
(r-1)/r of the gathered bytes, broadcast ceil(log2 r) and 1). Node class: "intra" (all ranks on
one node) or "inter" (ranks span nodes); inter-node rows exist only when measured with
``--address`` on a cluster, so ``has(op, inter=True)`` tells a caller whether to keep fitting
the inter-node bandwidth.

This module imports nothing else of the project but the schema's errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from perfmodel.schema.errors import ConfigError

KIND = "collective_costs"
SCHEMA_VERSION = 1
OPS = ("all_reduce", "all_gather", "broadcast")


def steps(op: str, ranks: int) -> float:
    if op == "all_reduce":
        return 2.0 * (ranks - 1)
    if op == "all_gather":
        return float(ranks - 1)
    return float(math.ceil(math.log2(ranks))) if ranks > 1 else 0.0


def bytes_factor(op: str, ranks: int) -> float:
    """Bytes each rank moves per byte of the op's size (nccl-tests' bus-bandwidth factors)."""
    if op == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if op == "all_gather":
        return (ranks - 1) / ranks
    return 1.0 if ranks > 1 else 0.0


@dataclass(frozen=True)
class Row:
    op: str
    ranks: int
    nodes: int
    nbytes: int
    median_s: float
    samples_s: tuple[float, ...]

    @property
    def inter(self) -> bool:
        return self.nodes > 1


@dataclass(frozen=True)
class CollectiveTable:
    rows: tuple[Row, ...]
    backend: str
    device: str

    @classmethod
    def from_dict(cls, obj: Any, path: str = "collectives") -> "CollectiveTable":
        if not isinstance(obj, dict):
            raise ConfigError(path, "must be an object with kind, backend, device and rows")
        if obj.get("kind") != KIND:
            raise ConfigError(f"{path}.kind", f"must be {KIND!r}, got {obj.get('kind')!r}")
        rows = []
        for i, r in enumerate(obj.get("rows") or []):
            p = f"{path}.rows[{i}]"
            try:
                row = Row(str(r["op"]), int(r["ranks"]), int(r["nodes"]), int(r["bytes"]), float(r["median_s"]),
                          tuple(float(x) for x in r["samples_s"]))
            except (KeyError, TypeError, ValueError) as e:
                raise ConfigError(p, f"must have op, ranks, nodes, bytes, median_s, samples_s ({e})") from None
            if row.op not in OPS or row.ranks < 2 or row.nodes < 1 or row.nbytes < 1 or not row.median_s > 0 \
                    or not math.isfinite(row.median_s):
                raise ConfigError(p, f"op in {', '.join(OPS)}, ranks >= 2, nodes >= 1, bytes >= 1, "
                                  "finite median_s > 0")
            rows.append(row)
        if not rows:
            raise ConfigError(f"{path}.rows", "must hold at least one measured row")
        return cls(tuple(rows), str(obj.get("backend", "")), str(obj.get("device", "")))

    def has(self, op: str, inter: bool) -> bool:
        return any(r.op == op and r.inter == inter for r in self.rows)

    def alpha_beta(self, op: str, inter: bool) -> tuple[float, float]:
        """(alpha s per step, bandwidth bytes/s) least-squares fit over the op's rows of one node
        class, both kept positive (a non-positive fit falls back to the one-parameter fits)."""
        pts = [(steps(op, r.ranks), bytes_factor(op, r.ranks) * r.nbytes, r.median_s)
               for r in self.rows if r.op == op and r.inter == inter]
        if not pts:
            raise KeyError(f"no measured {op} rows ({'inter' if inter else 'intra'}-node)")
        sxx = sum(a * a for a, _, _ in pts)
        syy = sum(b * b for _, b, _ in pts)
        sxy = sum(a * b for a, b, _ in pts)
        sxt = sum(a * t for a, _, t in pts)
        syt = sum(b * t for _, b, t in pts)
        det = sxx * syy - sxy * sxy
        if det > 0:
            alpha = (sxt * syy - syt * sxy) / det
            inv_bw = (sxx * syt - sxy * sxt) / det
            if alpha > 0 and inv_bw > 0:
                return alpha, 1.0 / inv_bw
        inv_bw = syt / syy if syy else 0.0
        if inv_bw > 0:
            return 0.0, 1.0 / inv_bw
        return (sxt / sxx if sxx else 0.0), math.inf

    def cost_s(self, op: str, nbytes: float, ranks: int, nodes: int = 1) -> float:
        """Measured time of one ``op`` of ``nbytes`` over ``ranks`` ranks spanning ``nodes``."""
        if ranks <= 1:
            return 0.0
        inter = nodes > 1
        same = sorted((r for r in self.rows if r.op == op and r.ranks == ranks and r.inter == inter),
                      key=lambda r: r.nbytes)
        if len(same) >= 2 and same[0].nbytes <= nbytes <= same[-1].nbytes:
            for a, b in zip(same, same[1:]):
                if a.nbytes <= nbytes <= b.nbytes:
                    f = (nbytes - a.nbytes) / (b.nbytes - a.nbytes) if b.nbytes > a.nbytes else 0.0
                    return a.median_s + f * (b.median_s - a.median_s)
        alpha, bw = self.alpha_beta(op, inter)
        return alpha * steps(op, ranks) + bytes_factor(op, ranks) * nbytes / bw


def collectives_of(profile: Any) -> CollectiveTable | None:
    """The measured collective table a profile carries (``extra["collectives"]``), or None."""
    extra = getattr(profile, "extra", None) or {}
    obj = extra.get("collectives")
    return None if obj is None else CollectiveTable.from_dict(obj, "profile.extra.collectives")
