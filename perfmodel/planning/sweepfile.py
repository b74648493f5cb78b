"""Reading a sweep JSON written by ``perfmodel sweep -o`` back in, checked row by row.

A file with the right ``kind`` can still hold rows that a hand edit, a truncated merge or
another version broke; every row field the planner reads is checked here, so a bad row is one
line naming ``sweep.rows[i].<field>`` instead of a KeyError deep inside the choice.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.jsonio import check_float, check_int, check_object, json_kind, load_json
from perfmodel.schema.modes import MODE_TABLE, MODES
from perfmodel.schema.plan import MAX_GPUS, MAX_PIPELINE_STAGES, Plan, check_gpu_hour_price, ratio_parts

SWEEP_KIND = "perfmodel.planning.sweep"
SWEEP_SCHEMA_VERSION = 1  # what perfmodel.planning.sweep writes
STATUSES = ("ok", "infeasible", "error")

# Raised whenever a change to the model moves predictions that sweep files already hold, so that
# `plan --sweep` can say a file predates it (2: a plan on part of a node has that part of its cores
# and RAM, 2026-12-04; 3: intervals beyond the calibrated scale hold the structural ensemble,
# perfmodel.calibration.structural, 2026-12-04; 4: the ensemble holds the actor's trajectory
# intake through the node-0 channel, asynchronous rollout's env groups start spread over a chunk
# step, and envs that do not divide over the workers are rounded, issues 28 and 32, 2026-12-05;
# 5: rows are plans RLinf runs as emitted (the micro-batch lowered, or refused), and --gpu NAME
# runs on NAME's typical node, issue 41, 2026-12-06).
MODEL_REVISION = 5


def _check_ci95(ci: Any, field: str) -> None:
    """A replicated prediction's 95 % interval: a pair of numbers, or absent."""
    if ci is None:
        return
    if not isinstance(ci, list) or len(ci) != 2:
        raise ConfigError(field, "must be a pair [low, high] or absent")
    for j, v in enumerate(ci):
        _number(f"{field}[{j}]", v)


def _number(field: str, v: Any, *, positive: bool = False, allow_none: bool = False) -> None:
    if v is None and allow_none:
        return
    check_float(field, v, min=0.0 if positive else None, strict_min=positive)


def check_warnings(v: Any, where: str) -> None:
    """A list of warning lines (strings), or absent."""
    if v is None:
        return
    if not isinstance(v, list) or not all(isinstance(w, str) for w in v):
        raise ConfigError(where, f"must be a list of strings, got {json_kind(v)}")


def check_interval_fields(r: Any, where: str) -> None:
    """The optional interval fields of a prediction or row that reports read: the model's
    ``throughput_interval`` (low, high, coverage), the replications' ``throughput_ci95`` and the
    ``extrapolation`` block's calibrated GPU counts."""
    r = check_object(where, r)
    for src, at in ((r, where), (r.get("prediction"), f"{where}.prediction")):
        if not isinstance(src, dict):
            continue
        ti = src.get("throughput_interval")
        if ti is not None:
            ti = check_object(f"{at}.throughput_interval", ti)
            for k in ("low", "high"):
                if ti.get(k) is not None:
                    check_float(f"{at}.throughput_interval.{k}", ti[k], min=0.0)
            if ti.get("coverage") is not None:
                check_float(f"{at}.throughput_interval.coverage", ti["coverage"], min=0.0, max=1.0, strict_min=True)
            _check_structural(ti.get("structural"), f"{at}.throughput_interval.structural")
        _check_structural(src.get("interval_structural"), f"{at}.interval_structural")
        _check_ci95(src.get("throughput_ci95"), f"{at}.throughput_ci95")
        ex = src.get("extrapolation")
        if ex is not None and not isinstance(ex, bool):  # a sweep row's is a flag, a prediction's a block
            ex = check_object(f"{at}.extrapolation", ex)
            gpus = ex.get("calibrated_gpus")
            if gpus is not None:
                if not isinstance(gpus, list):
                    raise ConfigError(f"{at}.extrapolation.calibrated_gpus", f"must be a list, got {json_kind(gpus)}")
                for j, g in enumerate(gpus):
                    check_int(f"{at}.extrapolation.calibrated_gpus[{j}]", g, min=1, max=MAX_GPUS)


def _check_structural(s: Any, where: str) -> None:
    """A structural envelope's fields its note reads (perfmodel.calibration.structural.note);
    found by the fuzz campaign: a number there was an internal error."""
    if not s:
        return
    s = check_object(where, s)
    if "differs_pct" in s:
        check_float(f"{where}.differs_pct", s["differs_pct"], min=None)
    for k in ("drives_width", "drives_width_end"):
        if k in s and not isinstance(s[k], str):
            raise ConfigError(f"{where}.{k}", f"must be a string, got {json_kind(s[k])}")


def check_row(row: Any, where: str) -> None:
    """One sweep row: the fields ``perfmodel plan --sweep`` reads."""
    r = check_object(where, row)
    # every row has its combination's fields (null where they do not apply): the selection reads them
    for key in ("index", "status", "mode", "gpus", "allocation_ratio", "pipeline_stage_num", "b_max", "t_max_s"):
        if key not in r:
            raise ConfigError(f"{where}.{key}", "missing required field")
    check_int(f"{where}.index", r["index"], min=0)
    lo, hi = r.get("throughput_low"), r.get("throughput_high")  # the interval's ends: both, or neither
    if (lo is None) != (hi is None):
        raise ConfigError(f"{where}.{'throughput_high' if hi is None else 'throughput_low'}",
                          "must be a number where the other end of the interval is (or both null)")
    for k, v in (("throughput_low", lo), ("throughput_high", hi)):
        if v is not None:
            check_float(f"{where}.{k}", v, min=0.0)
    if r["status"] not in STATUSES:
        raise ConfigError(f"{where}.status", f"must be one of {', '.join(STATUSES)}; got {r['status']!r}")
    if r["mode"] not in MODES:
        raise ConfigError(f"{where}.mode", f"must be one of {', '.join(MODES)}; got {r['mode']!r}")
    check_int(f"{where}.gpus", r["gpus"], min=1, max=MAX_GPUS)
    ratio = r.get("allocation_ratio")
    if ratio is not None and not isinstance(ratio, str):
        raise ConfigError(f"{where}.allocation_ratio", f"must be a string R:A or null, got {ratio!r}")
    if MODE_TABLE[r["mode"]].disaggregated:
        if ratio is None:
            raise ConfigError(f"{where}.allocation_ratio", f"must be a string R:A for {r['mode']}, got null")
        ratio_parts(ratio, f"{where}.allocation_ratio")
    check_int(f"{where}.pipeline_stage_num", r.get("pipeline_stage_num"), min=1, max=MAX_PIPELINE_STAGES)
    if r.get("b_max") is not None:
        check_int(f"{where}.b_max", r["b_max"], min=1)
    _number(f"{where}.t_max_s", r.get("t_max_s"))
    if r["status"] != "ok":
        if not isinstance(r.get("reason_kind"), str):
            raise ConfigError(f"{where}.reason_kind", "must be a string (why the combination cannot run)")
        return
    for key in ("throughput_env_steps_per_s", "env_steps_per_gpu_hour", "bound_env_steps_per_s",
                "iteration_time_s"):
        if key not in r:
            raise ConfigError(f"{where}.{key}", "missing required field")
        _number(f"{where}.{key}", r[key], positive=True)
    for key in ("scaling_efficiency", "gain_over_colocated_pct", "env_steps_per_dollar"):
        if key in r and r[key] is not None:
            check_float(f"{where}.{key}", r[key], min=None)
    for key in ("rollout_gpus", "actor_gpus"):
        check_int(f"{where}.{key}", r.get(key), min=1, max=MAX_GPUS)
    check_interval_fields(r, where)
    if not isinstance(r.get("bottleneck"), str):
        raise ConfigError(f"{where}.bottleneck", f"must be a string, got {r.get('bottleneck')!r}")
    _check_ci95(r.get("throughput_ci95"), f"{where}.throughput_ci95")
    if "plan" not in r:
        raise ConfigError(f"{where}.plan", "missing required field")
    plan = Plan.from_dict(r["plan"], f"{where}.plan")
    if plan.mode != r["mode"] or plan.cluster.gpus != r["gpus"]:
        raise ConfigError(f"{where}.plan", f"is {plan.mode} on {plan.cluster.gpus} GPUs but the row says "
                                           f"{r['mode']} on {r['gpus']} GPUs")
    pred = check_object(f"{where}.prediction", r.get("prediction"))
    util = check_object(f"{where}.prediction.utilization", pred.get("utilization"))
    res = check_object(f"{where}.prediction.utilization.resources", util.get("resources"))
    if not res:
        raise ConfigError(f"{where}.prediction.utilization.resources", "must name at least one resource")
    for k, v in res.items():
        _number(f"{where}.prediction.utilization.resources.{k}", v)
    check_warnings(pred.get("warnings"), f"{where}.prediction.warnings")
    stages = check_object(f"{where}.prediction.stage_time_s", pred.get("stage_time_s"))
    for k, v in stages.items():
        _number(f"{where}.prediction.stage_time_s.{k}", v)


def check_sweep(doc: Any, what: str = "--sweep", where: str = "") -> dict[str, Any]:
    """A whole sweep document (kind, spec, rows); returns it."""
    if not isinstance(doc, dict) or doc.get("kind") != SWEEP_KIND:
        raise ConfigError(what, f"{where or 'the file'} is not a sweep written by `perfmodel sweep -o` "
                                f"(kind must be {SWEEP_KIND!r})")
    version = doc.get("schema_version", SWEEP_SCHEMA_VERSION)  # absent in files older than the field
    if version != SWEEP_SCHEMA_VERSION or isinstance(version, bool):
        raise ConfigError("sweep.schema_version", f"must be {SWEEP_SCHEMA_VERSION} (this vlaperf's sweep files), "
                                                  f"got {version if json_kind(version) == 'a number' else json_kind(version)}: "
                                                  "rerun the sweep with this version")

    revision = doc.get("model_revision", 1)  # absent in files older than the field: revision 1
    if isinstance(revision, bool) or not isinstance(revision, int) or not 1 <= revision <= MODEL_REVISION:
        raise ConfigError("sweep.model_revision", f"must be an integer in 1..{MODEL_REVISION} (the model revisions "
                                                  f"this vlaperf knows), got {revision!r}")
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise ConfigError("sweep.rows", f"must be a list of rows, got {json_kind(rows)}")
    spec = check_object("sweep.spec", doc.get("spec", {}))
    price = spec.get("gpu_hour_price")
    if price is not None:
        check_gpu_hour_price("sweep.spec.gpu_hour_price", price)
    seen: set[int] = set()
    for i, row in enumerate(rows):
        check_row(row, f"sweep.rows[{i}]")
        if row["index"] in seen:
            raise ConfigError(f"sweep.rows[{i}].index", f"repeats index {row['index']} (each row has its own)")
        seen.add(row["index"])
    return doc


def load_sweep(path: str | Path, what: str = "--sweep") -> dict[str, Any]:
    """Read and check a sweep JSON file (every problem is one ConfigError naming the field)."""
    return check_sweep(load_json(path, what), what, str(path))


# Which rows a selection applies to: ratios only split disaggregated modes, and b_max / t_max
# only act with dynamic batching (a fresh sweep runs the other modes once with the defaults).
_FILTERS = {
    "modes": ("mode", lambda m: True),
    "ratios": ("allocation_ratio", lambda m: MODE_TABLE[m].disaggregated),
    "pipeline_stages": ("pipeline_stage_num", lambda m: True),
    "b_max": ("b_max", lambda m: MODE_TABLE[m].dynamic_batching),
    "t_max_s": ("t_max_s", lambda m: MODE_TABLE[m].dynamic_batching),
}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def select_rows(doc: dict[str, Any], selection: dict[str, tuple], options: dict[str, str]) -> dict[str, Any]:
    """The sweep restricted to the given values (``--modes``, ``--ratios``, ...) as a fresh
    ``perfmodel plan`` with those options would have swept them. A value the sweep never swept
    is refused (``options`` maps each key to its option name for the message)."""
    rows = doc["rows"]
    for key, wanted in selection.items():
        if wanted is None or (key == "ratios" and "all" in wanted):  # --ratios all: every swept ratio
            continue
        field, applies = _FILTERS[key]
        swept = [r[field] for r in doc["rows"] if applies(r["mode"])]
        for w in wanted:
            if not any(_same(w, v) for v in swept):
                shown = sorted({str(v) for v in swept}) or ["none"]
                raise ConfigError(options[key], f"{w if w is not None else 'null'} was not swept in this sweep "
                                                f"(swept: {', '.join(shown)}); choose among those or run "
                                                "`perfmodel plan` without --sweep")
        rows = [r for r in rows if not applies(r["mode"]) or any(_same(r[field], w) for w in wanted)]
    return {**doc, "rows": rows}
