"""Published reference results (CSV with the columns of ../shared/reference/rl_vla3_libero.csv)
and the plans that reproduce their setup."""

from __future__ import annotations

import csv
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.modes import MODE_TABLE, MODES
from perfmodel.schema.plan import Cluster, Plan, Workload
from perfmodel.schema.profile import Profile

COLUMNS = ("mode", "backbone", "gpus", "allocation_ratio", "throughput_env_steps_per_s")


@dataclass(frozen=True)
class ReferencePoint:
    mode: str
    backbone: str
    gpus: int
    allocation_ratio: str | None
    throughput_env_steps_per_s: float


def _split(mode: str, ratio: str | None, field: str) -> tuple[int, int] | None:
    """A published setup's split as a plan reads it (colocated: none; otherwise 1:1 when not
    given, in lowest terms, so 2:2 is 1:1), to tell two rows of one setup apart from two setups."""
    import math

    from perfmodel.schema.plan import ratio_parts

    if not MODE_TABLE[mode].disaggregated:
        return None
    r, a = ratio_parts(ratio or "1:1", field)
    g = math.gcd(r, a)
    return r // g, a // g


def load_reference(path: str | Path) -> list[ReferencePoint]:
    """Published points from a CSV; every problem (unreadable file, not CSV, a short row, a
    value out of range) is one ConfigError naming the line."""
    import io
    import math

    from perfmodel.backbones import BACKBONES
    from perfmodel.schema.jsonio import read_text
    from perfmodel.schema.plan import MAX_GPUS

    p = Path(path)
    text = read_text(p, "reference")
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError("reference", f"{p} lacks column(s) {', '.join(missing)} (needs {', '.join(COLUMNS)})")
        points = []
        first_line: dict[tuple, int] = {}
        for row in reader:
            where = f"reference line {reader.line_num}"
            if any(row.get(c) is None for c in COLUMNS):
                raise ConfigError(where, f"has fewer fields than the header ({', '.join(COLUMNS)})")
            mode = row["mode"].strip()
            if mode not in MODES:
                raise ConfigError(f"{where}.mode", f"must be one of {', '.join(MODES)}; got {mode!r}")
            backbone = row["backbone"].strip()
            if backbone not in BACKBONES:
                raise ConfigError(f"{where}.backbone", f"must be one of {', '.join(BACKBONES)}; got {backbone!r}")
            try:
                gpus = int(row["gpus"])
            except ValueError:
                gpus = 0
            if not 1 <= gpus <= MAX_GPUS:
                raise ConfigError(f"{where}.gpus", f"must be an integer in 1..{MAX_GPUS}, got {row['gpus']!r}")
            try:
                thr = float(row["throughput_env_steps_per_s"])
            except ValueError:
                thr = math.nan
            if not (thr > 0 and math.isfinite(thr)):
                raise ConfigError(f"{where}.throughput_env_steps_per_s",
                                  f"must be a finite number > 0, got {row['throughput_env_steps_per_s']!r}")
            ratio = (row["allocation_ratio"] or "").strip() or None
            key = (mode, backbone, gpus, _split(mode, ratio, f"{where}.allocation_ratio"))
            if key in first_line:  # two published values for one setup: which to fit is not ours to pick
                raise ConfigError(where, f"repeats line {first_line[key]}'s setup ({mode}, {backbone}, {gpus} GPUs"
                                         + (f", {ratio}" if ratio else "") + "): one value per setup")
            first_line[key] = reader.line_num
            points.append(ReferencePoint(mode, backbone, gpus, ratio, thr))
    except csv.Error as e:
        raise ConfigError("reference", f"not a valid CSV ({p}: {' '.join(str(e).split())})") from None
    if not points:
        raise ConfigError("reference", f"{p} has no rows")
    return points


def default_workload(profile: Profile, gpus: int) -> Workload:
    """The profile's default workload at ``gpus`` GPUs: its RLinf config with
    ``total_num_envs = envs_per_gpu * gpus`` (the profile's env-scaling assumption)."""
    fields: dict[str, Any] = dict(profile.default_workload)
    fields["total_num_envs"] = profile.envs_per_gpu * gpus
    return Workload.from_dict(fields, "profile.default_workload")


def default_cluster(profile: Profile, gpus: int) -> Cluster:
    node = dict(profile.node)
    node["gpus"] = gpus
    return Cluster.from_dict(node, "profile.node")


def complete_cluster(plan: Plan, given: dict[str, Any], profile: Profile) -> Plan:
    """``plan`` with the cluster fields its file left out (``given``: the file's ``cluster``
    object) taken from ``profile``'s node on the plan's GPU type (perfmodel.gpu.cluster_on), the
    values it was calibrated with, instead of the schema's generic defaults; the actor's kept
    cores as the same fraction of a GPU's share of the node when the file gives the node another
    shape. ``predict --plan`` and ``executor run`` read plan files through this one rule."""
    from perfmodel.gpu import cluster_on

    c = plan.cluster
    base = cluster_on(default_cluster(profile, c.gpus), c.gpu)
    changes = {f.name: getattr(base, f.name) for f in fields(Cluster)
               if f.name not in ("gpus", "gpu") and f.name not in given}
    merged = replace(c, **changes)
    if "actor_cpu_cores_per_gpu" in changes:
        merged = replace(merged, actor_cpu_cores_per_gpu=base.actor_cpu_cores_per_gpu * merged.cpu_cores_per_gpu
                         / base.cpu_cores_per_gpu)
    out = plan.with_(cluster=merged)
    if out != plan:
        out.check()
    return out


def published_plan(profile: Profile, mode: str, gpus: int, ratio: str | None, **knobs: Any) -> Plan:
    # the published trained part (the action expert), or the one part a profile has (OpenVLA-OFT: full)
    parts = profile.costs.trained_parts
    knobs.setdefault("trained_part", "action_expert" if not parts or "action_expert" in parts else next(iter(parts)))
    plan = Plan(mode=mode, workload=default_workload(profile, gpus), cluster=default_cluster(profile, gpus),
                profile=profile.name, allocation_ratio=(ratio or "1:1") if MODE_TABLE[mode].disaggregated else None,
                **knobs)
    plan.check()
    return plan
