"""The report's inputs: each file is recognised by what it is, and a file of another kind than
its option expects is refused with one line naming both (a prediction given as a run record, a
plan given as a sweep). Executor output is read as files only; nothing here imports executor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.backbones import BACKBONES
from perfmodel.planning.sweepfile import check_interval_fields, check_sweep, check_warnings
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.jsonio import check_float, check_int, check_object, json_kind, load_json
from perfmodel.schema.modes import MODES
from perfmodel.schema.plan import MAX_GPUS, Plan, check_gpu_hour_price
from perfmodel.schema.profile import load_profile

REFERENCE_BACKBONES = tuple(BACKBONES)

# kind -> what it is, for messages
KINDS = {
    "sweep": "a sweep (`perfmodel sweep -o`)",
    "choice": "a plan choice (`perfmodel plan --details`)",
    "prediction": "a prediction (`perfmodel predict --json`)",
    "run": "a run record (record.json of `executor run`, or an RLinf run directory)",
    "plan": "a plan (plan.json)",
    "trace": "a Chrome trace (`perfmodel predict --trace`, trace.json of `executor run`)",
    "cross_validation": "a cross-validation result (`perfmodel validate --cross-validate --json`)",
    "profile": "a profile",
    "unknown": "an unrecognised JSON document",
}
OPTION_KIND = {"--sweep": "sweep", "--choice": "choice", "--prediction": "prediction", "--run": "run",
               "--trace-sim": "trace", "--trace-run": "trace", "--cross-validation": "cross_validation"}
DEFAULT_TARGET_ENV_STEPS = 100_000_000


def detect_kind(doc: Any) -> str:
    if not isinstance(doc, dict):
        return "unknown"
    kind = doc.get("kind")
    if kind == "perfmodel.planning.sweep":
        return "sweep"
    if kind == "perfmodel.plan_choice":
        return "choice"
    if kind == "cross_validation":
        return "cross_validation"
    if isinstance(doc.get("traceEvents"), list):
        return "trace"
    if doc.get("source") == "executor" and "status" in doc:
        return "run"
    if "throughput_env_steps_per_s" in doc and ("bound_env_steps_per_s" in doc or "replications" in doc):
        return "prediction"
    if isinstance(doc.get("workload"), dict) and isinstance(doc.get("cluster"), dict) and "mode" in doc:
        return "plan"
    if isinstance(doc.get("costs"), dict) and "backbone" in doc:
        return "profile"
    return "unknown"


def rlinf_run_folder(p: Path) -> bool:
    """Whether ``p`` is an RLinf run folder as perfmodel.rlinf.logs reads one: ``config.yaml`` in
    it, its ``tensorboard/`` or ``tensorboard/all/``."""
    from perfmodel.rlinf.logs import CONFIG_NAME, SUBDIRS

    return any((p / sub / CONFIG_NAME).is_file() for sub in SUBDIRS)


def load_rlinf_run(path: str) -> dict[str, Any]:
    """An RLinf run directory as the report reads a run: its plan (RLinf's importer) and its
    measured throughput (env steps per iteration over the mean ``time/step`` after warm-up), by
    perfmodel.rlinf.logs.read_run, the reader ``perfmodel calibrate --from-rlinf-run`` uses. RLinf
    logs no utilization: the run is a point of the predicted-vs-measured figure, not a timeline."""
    from perfmodel.rlinf.logs import WARMUP_RULE, read_run

    r = read_run(path, option="--run")
    plan = r.plan
    return {"source": "rlinf", "status": "ok", "mode": plan.mode, "backbone": r.imported.backbone,
            "profile": plan.profile, "gpus": plan.cluster.gpus, "allocation_ratio": plan.allocation_ratio,
            "pipeline_stage_num": plan.pipeline_stage_num, "total_num_envs": plan.workload.total_num_envs,
            "throughput_env_steps_per_s": r.throughput_env_steps_per_s, "iteration_time_s": r.iteration_s,
            "run_dir": str(r.folder), "plan": plan.to_dict(), "steps_used": [r.used[0], r.used[-1]],
            "warmup_rule": WARMUP_RULE,
            "warnings": [f"{t}; the steps before it are used" for t in r.truncated]}


def load_kind(option: str, path: str) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir() and option == "--run" and (p / "record.json").is_file():
        p = p / "record.json"  # an executor run directory: its record (issue 41)
    elif p.is_dir() and option == "--run" and rlinf_run_folder(p):
        return load_rlinf_run(path)  # an RLinf run directory: config.yaml and its event files (issue 41)
    elif p.is_dir():
        hint = (" with neither an executor record (record.json) nor an RLinf run (config.yaml beside its "
                "tensorboard event files, in it or its tensorboard/ or tensorboard/all/)" if option == "--run" else "")
        raise ConfigError(option, f"{path} is a directory, not a file{hint}")
    doc = load_json(p, option)
    want, got = OPTION_KIND[option], detect_kind(doc)
    if got != want:
        raise ConfigError(option, f"expected {KINDS[want]}, got {KINDS[got]}: {path}")
    CHECKS.get(want, lambda d, w: None)(doc, option)
    return doc


# What the report reads of each kind, checked on reading (a hand-edited or truncated file is one
# line naming the option and the field, never a traceback or a report drawn from nonsense).
def check_predicted(r: Any, where: str) -> None:
    """A prediction, or a plan choice's row: mode, GPUs, a positive throughput, utilization and
    stage times as numbers."""
    r = check_object(where, r)
    if r.get("mode") not in MODES:
        raise ConfigError(f"{where}.mode", f"must be one of {', '.join(MODES)}; got {r.get('mode')!r}")
    check_int(f"{where}.gpus", r.get("gpus"), min=1)
    check_float(f"{where}.throughput_env_steps_per_s", r.get("throughput_env_steps_per_s"), min=0.0, strict_min=True)
    pred = r.get("prediction", r)  # a choice's rows carry the prediction beside the row's fields
    util = check_object(f"{where}.utilization", check_object(where, pred).get("utilization"))
    for k, v in check_object(f"{where}.utilization.resources", util.get("resources")).items():
        check_float(f"{where}.utilization.resources.{k}", v, min=0.0)
    for k, v in check_object(f"{where}.utilization.stages", util.get("stages", {})).items():
        check_float(f"{where}.utilization.stages.{k}", v, min=0.0)
    for k, v in check_object(f"{where}.stage_time_s", pred.get("stage_time_s")).items():
        check_float(f"{where}.stage_time_s.{k}", v, min=0.0)
    for key in ("throughput_low", "throughput_high"):
        if r.get(key) is not None:
            check_float(f"{where}.{key}", r[key], min=0.0)
    check_interval_fields(r, where)
    check_warnings(r.get("warnings"), f"{where}.warnings")
    if isinstance(r.get("prediction"), dict):
        check_warnings(r["prediction"].get("warnings"), f"{where}.prediction.warnings")


def _check_choice(doc: dict[str, Any], option: str) -> None:
    from perfmodel.planning.choice import OBJECTIVES

    if doc.get("objective") not in OBJECTIVES:
        raise ConfigError(f"{option}: objective", f"must be one of {', '.join(OBJECTIVES)}; got {doc.get('objective')!r}")
    check_int(f"{option}: gpus_budget", doc.get("gpus_budget"), min=1, max=MAX_GPUS)
    if not isinstance(doc.get("explanation"), str):
        raise ConfigError(f"{option}: explanation", f"must be a string, got {json_kind(doc.get('explanation'))}")
    best = check_object(f"{option}: best", doc.get("best"))
    # what the report's chosen-plan table reads of the best row
    for key in ("rollout_gpus", "actor_gpus", "total_num_envs"):
        check_int(f"{option}: best.{key}", best.get(key), min=1)
    for key in ("iteration_time_s", "bound_env_steps_per_s"):
        check_float(f"{option}: best.{key}", best.get(key), min=0.0, strict_min=True)
    if not isinstance(best.get("bottleneck"), str):
        raise ConfigError(f"{option}: best.bottleneck", f"must be a string, got {json_kind(best.get('bottleneck'))}")
    margin = doc.get("runner_up_margin")
    if margin is not None:
        margin = check_object(f"{option}: runner_up_margin", margin)
        tied = margin.get("tied_modes")
        if tied is not None and (not isinstance(tied, list) or not all(m in MODES for m in tied)):
            raise ConfigError(f"{option}: runner_up_margin.tied_modes", f"must be a list of modes, got {tied!r}")
        if not isinstance(margin.get("measure", ""), str):
            raise ConfigError(f"{option}: runner_up_margin.measure", "must be a string")
    for key in ("runner_up_ratio", "colocated_ratio"):  # the intervals of the best over another plan
        if doc.get(key) is None:
            continue
        r = check_object(f"{option}: {key}", doc[key])
        for k in ("ratio", "low", "high"):
            check_float(f"{option}: {key}.{k}", r.get(k), min=0.0, strict_min=True)
        check_float(f"{option}: {key}.coverage", r.get("coverage"), min=0.0, max=1.0, strict_min=True)
        if r.get("resolved") not in (True, False, None) or "resolved" not in r:
            raise ConfigError(f"{option}: {key}.resolved", f"must be true, false or null, got {r.get('resolved')!r}")
    Plan.from_dict(check_object(f"{option}: plan", doc.get("plan")), f"{option}: plan")
    check_predicted(doc.get("best"), f"{option}: best")
    for key in ("runner_up", "colocated"):
        if doc.get(key) is not None:
            check_predicted(doc[key], f"{option}: {key}")


def _check_trace(doc: dict[str, Any], option: str) -> None:
    for i, ev in enumerate(doc["traceEvents"]):
        where = f"{option}: traceEvents[{i}]"
        ev = check_object(where, ev)
        if ev.get("ph") == "X":
            if not isinstance(ev.get("name"), str):
                raise ConfigError(f"{where}.name", f"must be a string, got {ev.get('name')!r}")
            check_float(f"{where}.ts", ev.get("ts"), min=None)
            check_float(f"{where}.dur", ev.get("dur"), min=0.0)


def _check_run(doc: dict[str, Any], option: str) -> None:
    """A run record that measured a throughput is read as a prediction is (a failed run's is
    refused by load_inputs, saying so)."""
    if isinstance(doc.get("throughput_env_steps_per_s"), (int, float)):
        check_predicted(doc, f"{option}: run")


CHECKS = {
    "sweep": lambda d, option: check_sweep(d, option),
    "run": _check_run,
    "choice": _check_choice,
    "prediction": lambda d, option: check_predicted(d, f"{option}: prediction"),
    "trace": _check_trace,
}


def headline_design(doc: dict[str, Any]) -> dict[str, Any]:
    """The fold design a cross-validation result names as its headline (``perfmodel validate
    --cross-validate``: the ``group_out`` block, equal information), else the top-level folds
    (the ``scale`` design, or a result with only those)."""
    block = doc.get(doc.get("headline") or "")
    return block if isinstance(block, dict) and isinstance(block.get("folds"), list) else doc


@dataclass
class Inputs:
    sweeps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    choice: tuple[str, dict[str, Any]] | None = None
    predictions: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    runs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    trace_sim: tuple[str, dict[str, Any]] | None = None
    trace_run: tuple[str, dict[str, Any]] | None = None
    references: list[str] = field(default_factory=list)
    reference_profiles: dict[str, str] = field(default_factory=dict)
    cross_validation: tuple[str, dict[str, Any]] | None = None
    gpus: int | None = None
    iteration: int | None = None
    target_env_steps: int = DEFAULT_TARGET_ENV_STEPS
    gpu_hour_price: float | None = None
    title: str = "vlaperf capacity-planning report"

    @property
    def empty(self) -> bool:
        return not (self.sweeps or self.choice or self.predictions or self.runs or self.trace_sim
                    or self.trace_run or self.references or self.cross_validation)

    @property
    def price(self) -> float | None:
        """$ per GPU-hour: --gpu-hour-price, else the sweep's."""
        if self.gpu_hour_price:
            return self.gpu_hour_price
        for _, d in self.sweeps:
            if d.get("spec", {}).get("gpu_hour_price"):
                return float(d["spec"]["gpu_hour_price"])
        return None


NO_INPUT = ("inputs", "no input given: pass at least one of --sweep, --choice, --prediction, --run, "
                      "--trace-sim, --trace-run, --reference, --cross-validation")


def load_inputs(*, sweeps=(), choice=None, predictions=(), runs=(), trace_sim=None, trace_run=None,
                references=(), reference_profiles=(), cross_validation=None, gpus=None, iteration=None,
                target_env_steps=None, gpu_hour_price=None, title=None, allow_empty: bool = False) -> Inputs:
    """Read and check every input file; bad input is a ConfigError naming the option."""
    inp = Inputs(gpus=gpus, iteration=iteration, gpu_hour_price=gpu_hour_price)
    if iteration is not None and not (trace_sim or trace_run or choice):
        raise ConfigError("--iteration", "only with --trace-sim, --trace-run or --choice (it picks the timeline's "
                                         "iteration, and there is no timeline without them)")
    if title:
        inp.title = title
    if target_env_steps is not None:
        if not 1 <= target_env_steps <= 1e18:  # also NaN and inf
            raise ConfigError("--target-env-steps", f"must be a number of env steps in 1..1e18, got {target_env_steps:g}")
        inp.target_env_steps = int(target_env_steps)
    if gpu_hour_price is not None:
        check_gpu_hour_price("--gpu-hour-price", gpu_hour_price)
    inp.sweeps = [(s, load_kind("--sweep", s)) for s in sweeps]
    if choice:
        inp.choice = (choice, load_kind("--choice", choice))
    inp.predictions = [(p, load_kind("--prediction", p)) for p in predictions]
    for r in runs:
        doc = load_kind("--run", r)
        if not isinstance(doc.get("throughput_env_steps_per_s"), (int, float)):
            raise ConfigError("--run", f"a run record with a measured throughput (status ok), got one with status "
                              f"{doc.get('status')!r} and no throughput: {r}")
        inp.runs.append((r, doc))
    if trace_sim:
        inp.trace_sim = (trace_sim, load_kind("--trace-sim", trace_sim))
    if trace_run:
        inp.trace_run = (trace_run, load_kind("--trace-run", trace_run))
    if cross_validation:
        doc = headline_design(load_kind("--cross-validation", cross_validation))
        if not isinstance(doc.get("folds"), list):
            raise ConfigError("--cross-validation", f"a cross-validation result with folds, got none: {cross_validation}")
        inp.cross_validation = (cross_validation, doc)
    for ref in references:
        if not Path(ref).is_file():
            raise ConfigError("--reference", f"file not found: {ref}")
        inp.references.append(ref)
    for item in reference_profiles:
        if "=" not in item:
            raise ConfigError("--reference-profile", f"must look like BACKBONE=PROFILE.json, got {item!r}")
        b, path = (x.strip() for x in item.split("=", 1))
        if b not in REFERENCE_BACKBONES:
            raise ConfigError("--reference-profile", f"backbone must be one of {', '.join(REFERENCE_BACKBONES)} "
                                                     f"(the reference CSV's), got {b!r}")
        load_profile(path, "--reference-profile")  # a missing or broken file is refused here, not skipped
        inp.reference_profiles[b] = path
    if inp.empty and not allow_empty:
        raise ConfigError(*NO_INPUT)
    return inp
