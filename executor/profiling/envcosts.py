"""Env costs taken from another measured profile (``executor profile --env-profile``): envs stay
on CPU, so a GPU profile reuses a CPU one's. Apart from ``envs`` (which measures them) so that the
profile request (``config``) can check the file without a circle of imports."""

from __future__ import annotations

from typing import Any

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.profile import Profile


def load_env_costs(path: str) -> dict[str, Any]:
    """Env costs of another measured profile (envs stay on CPU: a GPU profile reuses them)."""
    from perfmodel.schema.jsonio import load_json

    src = Profile.from_dict(load_json(path, "env-profile"), "env-profile")
    if src.provenance.get("kind") != "measured":
        raise ConfigError("env-profile", f"must be a measured profile, {path} is {src.provenance.get('kind')!r}")
    c = src.costs
    keep = {k: v for k, v in src.extra.items() if k.startswith("env_") or k == "worker_cores"}
    return {
        "env_step_core_s": c.env_step_core_s,
        "env_step_cv": src.variability.env_step_cv,
        "env_core_efficiency": c.env_core_efficiency,
        "env_reset_s": c.env_reset_s,
        "env_memory_gb": c.env_memory_gb,
        "env_density": {k: v.to_dict() for k, v in c.env_density.items()},
        # the driver's orchestration runs beside the envs: copied with them
        "driver": ({"driver_chunk_step_s": dict(c.driver_chunk_step_s), "extra": src.extra.get("driver_samples", {}),
                    "assumption": f"costs.driver_chunk_step_s copied from {path} with the env costs"}
                   if c.driver_chunk_step_s else None),
        "extra": {**keep, "env_costs_from": {"path": str(path), "date": src.provenance.get("date"),
                                             "method": src.provenance.get("method"),
                                             "hardware": src.provenance.get("hardware")}},
    }


