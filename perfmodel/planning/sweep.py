"""Capacity-planning sweep: predict every plan of modes x GPU counts x ratios x knobs.

One row per combination, in a deterministic order (GPUs, then mode in ``MODES`` order, then
ratio, pipeline stages, ``b_max``, ``t_max_s`` in the order given). Combinations that cannot run
are kept as rows with ``status: "infeasible"`` and the reason (the ratio does not split the GPUs,
the envs do not divide over the env workers or stages, the envs do not fit a node's RAM, RLinf
would refuse the batch split); they are counted, never fatal. Every feasible row is a plan RLinf
runs as emitted: a micro-batch that does not split the global batch whole is lowered until it
does (``runnable_in_rlinf``, said in the row's note). Predictions run in a process pool, the most expensive first, or as Ray tasks on a cluster
(``--address``; Ray is imported only then).

Derived columns (docs/metrics.md defines the rest):

- ``scaling_efficiency`` = (thr(N) / N) / (thr(N0) / N0), where N0 (``scaling_baseline_gpus``)
  is the smallest GPU count in the sweep at which the same configuration (mode, ratio, stages,
  b_max, t_max) was feasible; 1.0 is linear scaling.
- ``gain_over_colocated_pct`` = 100 x (thr / colocated thr - 1), colocated at the same GPU count
  and profile (its best row when several pipeline-stage settings were swept); ``None`` when
  colocated was not swept or infeasible at that count.
- ``env_steps_per_gpu_hour`` = thr x 3600 / N; ``env_steps_per_dollar`` = that / price
  (``None`` without a price).

``b_max`` and ``t_max_s`` only act in the dynamic-batching modes (rollout_async, streamer);
the other modes are swept once with the plan defaults (b_max null, t_max_s 0.02).
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

from perfmodel.cliutil import fmt_number, fmt_range
from perfmodel.planning.sweepfile import MODEL_REVISION, SWEEP_KIND, SWEEP_SCHEMA_VERSION
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.modes import MODE_TABLE, MODES
from perfmodel.schema.plan import (DEFAULT_T_MAX_S, MAX_GPUS, MAX_PIPELINE_STAGES, MAX_STALENESS, Plan,
                                   check_gpu_hour_price, ratio_parts)
from perfmodel.schema.profile import Profile
from perfmodel.schema.rules import batch_split_is_whole

DEFAULT_GPUS = (8, 16, 24, 32, 64, 128, 256)
DEFAULT_RATIOS = ("1:1", "3:1", "1:3", "2:1", "1:2")
# ``--ratios all``: every rollout:actor split of each GPU count whose shares are whole
# sixteenths or coarser (R + A <= 16 divides the GPU count): every split up to 16 GPUs.
ALL_RATIOS = "all"
ALL_RATIOS_MAX_PARTS = 16
DEFAULT_PIPELINE_STAGES = (1,)
DEFAULT_B_MAX: tuple[int | None, ...] = (None,)
DEFAULT_T_MAX = (DEFAULT_T_MAX_S,)

SCALING_NOTE = ("scaling efficiency = (thr(N)/N) / (thr(N0)/N0), N0 = the smallest GPU count in the sweep "
                "at which the same configuration (mode, ratio, stages, b_max, t_max) is feasible")
BEST_SCALING_NOTE = ("the mode's best plan at N GPUs against its best plan at the smallest GPU count it runs "
                     "(N0 = scaling_baseline_gpus), whatever their ratios and knobs: (thr(N)/N) / (thr(N0)/N0)")
GAIN_NOTE = "gain over colocated = thr / colocated thr at the same GPU count - 1"


def check_modes(modes: Iterable[str]) -> None:
    """``--modes``: at least one, each a mode."""
    modes = tuple(modes)
    if not modes:
        raise ConfigError("--modes", f"needs at least one of {', '.join(MODES)}")
    for m in modes:
        if m not in MODES:
            raise ConfigError("--modes", f"must be among {', '.join(MODES)}; got {m!r}")


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep. ``profile_ref`` is what plans record as their ``profile`` (a bundled
    name or the profile file path as the user gave it)."""

    profile_ref: str
    modes: tuple[str, ...] = MODES
    gpus: tuple[int, ...] = DEFAULT_GPUS
    ratios: tuple[str, ...] = DEFAULT_RATIOS
    pipeline_stages: tuple[int, ...] = DEFAULT_PIPELINE_STAGES
    b_max: tuple[int | None, ...] = DEFAULT_B_MAX
    t_max_s: tuple[float, ...] = DEFAULT_T_MAX
    gpu_hour_price: float | None = None
    replications: int = 1
    seed: int = 0
    max_staleness: int | None = None
    intervals: bool = True  # prediction intervals per row (a few simulations each; off for huge searches)
    # A plan to start every combination from (an imported RLinf config: its workload, cluster
    # and knobs), envs scaled with the GPU count at its envs per GPU; None = the profile's
    # published setup. ``gpu``: the accelerator (perfmodel/schema/hardware.py) when not h100.
    base_plan: dict[str, Any] | None = None
    gpu: str | None = None
    # Raise each plan's global batch to a whole split over its actor GPUs (Plan.with_whole_global_batch)
    # instead of keeping the workload's at every GPU count (the published setup; RLinf refuses
    # a split that is not whole, and the planner warns).
    scale_global_batch: bool = False
    # The node's shape where the user gave it (perfmodel/schema/node.py: CPU cores, GPUs, NIC
    # bandwidth per GPU, host RAM), over the profile's node; None or {} = the profile's.
    node: dict[str, Any] | None = None
    # Workload axes (issue 32): envs per GPU (None = the base plan's), micro_batch_size (None = the
    # base's; a value that does not divide the global batch is an infeasible row), and staleness
    # bounds for the asynchronous modes (None = ``max_staleness`` above).
    envs_per_gpu: tuple[int | None, ...] = (None,)
    micro_batch_sizes: tuple[int | None, ...] = (None,)
    staleness: tuple[int | None, ...] = (None,)

    def check(self) -> None:
        check_modes(self.modes)
        if not self.gpus or any(isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= MAX_GPUS
                                 for g in self.gpus):
            raise ConfigError("--gpus", f"must be a comma-separated list of integers in 1..{MAX_GPUS}, "
                                        f"got {list(self.gpus)}")
        if any(m != "colocated" for m in self.modes) and not self.ratios:
            raise ConfigError("--ratios", "needs at least one R:A ratio for the disaggregated modes")
        for r in self.ratios:
            if r != ALL_RATIOS:
                ratio_parts(r, "--ratios")
        if not self.pipeline_stages or any(not 1 <= p <= MAX_PIPELINE_STAGES for p in self.pipeline_stages):
            raise ConfigError("--pipeline-stages", f"must be integers in 1..{MAX_PIPELINE_STAGES}, "
                                                   f"got {list(self.pipeline_stages)}")
        if not self.b_max or any(b is not None and b < 1 for b in self.b_max):
            raise ConfigError("--b-max", f"must be integers >= 1 or 'null', got {list(self.b_max)}")
        if not self.t_max_s or any(not (t >= 0 and math.isfinite(t)) for t in self.t_max_s):
            raise ConfigError("--t-max", f"must be finite numbers >= 0 (seconds), got {list(self.t_max_s)}")
        if self.gpu_hour_price is not None:
            check_gpu_hour_price("--gpu-hour-price", self.gpu_hour_price)
        if self.replications < 1:
            raise ConfigError("--replications", f"must be an integer >= 1, got {self.replications}")
        if self.max_staleness is not None and not 0 <= self.max_staleness <= MAX_STALENESS:
            raise ConfigError("--staleness", f"must be an integer in 0..{MAX_STALENESS}, got {self.max_staleness}")
        for option, values, low, high in (("--envs-per-gpu", self.envs_per_gpu, 1, 100_000),
                                          ("--micro-batch-sizes", self.micro_batch_sizes, 1, 10**8),
                                          ("--staleness", self.staleness, 0, MAX_STALENESS)):
            if not values or any(v is not None and not low <= v <= high for v in values):
                raise ConfigError(option, f"must be a comma-separated list of integers in {low}..{high}, "
                                          f"got {list(values)}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


@dataclass(frozen=True)
class Combo:
    index: int
    mode: str
    gpus: int
    allocation_ratio: str | None
    pipeline_stage_num: int
    b_max: int | None
    t_max_s: float
    envs_per_gpu: int | None = None  # None: the base plan's (SweepSpec.envs_per_gpu)
    micro_batch_size: int | None = None
    max_staleness: int | None = None
    # colocated with the rollout on fewer GPUs than the actor's (plan.colocated_rollout_gpus):
    # only a config's plan as written (commands/plan.py as_written); the search's colocated
    # combinations roll out on every GPU
    colocated_rollout_gpus: int | None = None

    @property
    def configuration(self) -> tuple:
        """What a scaling efficiency compares across GPU counts: everything but the count."""
        return (self.mode, self.allocation_ratio, self.pipeline_stage_num, self.b_max, self.t_max_s,
                self.envs_per_gpu, self.micro_batch_size, self.max_staleness, self.colocated_rollout_gpus)


def splitting_ratios(gpus: int, max_parts: int = ALL_RATIOS_MAX_PARTS) -> list[str]:
    """Every ratio R:A in lowest terms with R + A <= ``max_parts`` dividing ``gpus`` (each a
    different split of the GPUs), by rollout share."""
    out = [(r / s, f"{r}:{s - r}") for s in range(2, max_parts + 1) if gpus % s == 0
           for r in range(1, s) if math.gcd(r, s - r) == 1]
    return [text for _, text in sorted(out)]


def _ratios_for(spec: SweepSpec, gpus: int) -> list[str]:
    out: list[str] = []
    for r in spec.ratios:
        out.extend(splitting_ratios(gpus) if r == ALL_RATIOS else [r])
    return list(dict.fromkeys(out))


def combinations(spec: SweepSpec) -> list[Combo]:
    out: list[Combo] = []
    modes = [m for m in MODES if m in spec.modes]
    for g in sorted(dict.fromkeys(spec.gpus)):
        for mode in modes:
            ratios: Iterable[str | None] = _ratios_for(spec, g) if MODE_TABLE[mode].disaggregated else [None]
            dynamic = MODE_TABLE[mode].dynamic_batching
            batching = ([(b, t) for b in dict.fromkeys(spec.b_max) for t in dict.fromkeys(spec.t_max_s)]
                        if dynamic else [(None, DEFAULT_T_MAX_S)])
            stale = dict.fromkeys(spec.staleness) if MODE_TABLE[mode].async_training else [None]
            for ratio in ratios:
                for p in dict.fromkeys(spec.pipeline_stages):
                    for b, t in batching:
                        for e in dict.fromkeys(spec.envs_per_gpu):
                            for mb in dict.fromkeys(spec.micro_batch_sizes):
                                for st in stale:
                                    out.append(Combo(len(out), mode, g, ratio, p, b, float(t), e, mb, st))
    return out


def _category(err: ConfigError) -> str:
    f = err.field
    if f.endswith("allocation_ratio"):
        return "ratio does not split the GPUs"
    if f.endswith("pipeline_stage_num"):
        return "envs per worker do not divide into the pipeline stages"
    if f.endswith("total_num_envs"):
        return "envs do not divide over the env workers"
    if f.endswith("micro_batch_size") or f.endswith("global_batch_size"):
        return "micro-batch does not divide the global batch"
    return f


# Envs rounded to a count that divides over the env workers (and their pipeline stages) when the
# nearest such count is at most this far (relative) from the one asked for: a small repair, said
# in the row's note, instead of an infeasible row (issue 32: 256 envs over 24 env workers -> 264).
ENV_REPAIR_REL = 0.1


def whole_envs(plan: Plan) -> tuple[Plan, str | None]:
    """``plan`` with total_num_envs moved to the nearest count (ties: the smaller) within
    ENV_REPAIR_REL that divides over its env workers and pipeline stages (and groups), and the
    note saying so; unchanged (no note) when it divides already or no such count is near."""
    from dataclasses import replace

    w = plan.workload
    try:
        plan.check()
        return plan, None
    except ConfigError as e:
        if not (e.field.endswith("total_num_envs") or e.field.endswith("pipeline_stage_num")):
            raise
        first = e
    unit = plan.rollout_gpus * plan.pipeline_stage_num * w.group_size // math.gcd(plan.rollout_gpus * plan.pipeline_stage_num,
                                                                                     w.group_size)
    n = w.total_num_envs
    for m in sorted({(n // unit) * unit, -(-n // unit) * unit}, key=lambda m: (abs(m - n), m)):
        if m < unit or abs(m - n) > ENV_REPAIR_REL * n:
            continue
        fixed = plan.with_(workload=replace(w, total_num_envs=m))
        try:
            fixed.check()
        except ConfigError:
            continue
        return fixed, (f"total_num_envs {n} -> {m}: {n} do not divide over {plan.rollout_gpus} env workers x "
                       f"{plan.pipeline_stage_num} stage(s); {m} is the nearest count that does")
    raise first


def build_plan(spec: SweepSpec, profile: Profile, c: Combo) -> Plan:
    return build_plan_noted(spec, profile, c)[0]


def build_plan_noted(spec: SweepSpec, profile: Profile, c: Combo) -> tuple[Plan, str | None]:
    """The combination's plan, and the note of a repair it needed (envs rounded: ``whole_envs``)."""
    from perfmodel.calibration.reference import published_plan

    knobs: dict[str, Any] = {"pipeline_stage_num": c.pipeline_stage_num, "b_max": c.b_max, "t_max_s": c.t_max_s}
    if spec.max_staleness is not None:
        knobs["max_staleness"] = spec.max_staleness
    if c.max_staleness is not None:
        knobs["max_staleness"] = c.max_staleness
    if spec.base_plan is None:
        plan = published_plan(profile, c.mode, c.gpus, c.allocation_ratio, **knobs)
    else:
        base = Plan.from_dict(spec.base_plan, "base plan")
        envs = base.workload.total_num_envs * c.gpus / base.cluster.gpus
        if not float(envs).is_integer():
            raise ConfigError("plan.workload.total_num_envs",
                              f"{base.workload.total_num_envs} envs on {base.cluster.gpus} GPUs do not scale to {c.gpus} GPUs")
        disagg = MODE_TABLE[c.mode].disaggregated
        # the config's rollout (the fork's per-env asynchronous one) carries to the synchronous
        # modes; an asynchronous mode's is its own (train_async with it is rollout_async, swept too)
        rollout = None if MODE_TABLE[c.mode].async_training else base.rollout
        # the placement is the combination's, never carried over from the base plan
        plan = base.with_(mode=c.mode, allocation_ratio=(c.allocation_ratio or "1:1") if disagg else None, rollout=rollout,
                          colocated_rollout_gpus=c.colocated_rollout_gpus,
                          workload=base.workload.__class__(**{**base.workload.__dict__, "total_num_envs": int(envs)}),
                          cluster=base.cluster.__class__(**{**base.cluster.__dict__, "gpus": c.gpus}), **knobs)
    if spec.gpu is not None and (spec.base_plan is None or plan.cluster.gpu != spec.gpu):
        # its typical node, whatever the profile's GPU type (an imported config has it already)
        from perfmodel.gpu import gpu_node

        plan = plan.with_(cluster=gpu_node(plan.cluster, spec.gpu))
    if spec.node:
        from perfmodel.schema.node import with_node

        plan = plan.with_(cluster=with_node(plan.cluster, spec.node))
    if c.envs_per_gpu is not None or c.micro_batch_size is not None:
        from dataclasses import replace

        w = plan.workload
        plan = plan.with_(workload=replace(
            w, total_num_envs=w.total_num_envs if c.envs_per_gpu is None else c.envs_per_gpu * c.gpus,
            micro_batch_size=w.micro_batch_size if c.micro_batch_size is None else c.micro_batch_size))
    plan, note = whole_envs(plan)
    if spec.scale_global_batch:
        plan = plan.with_whole_global_batch()
    return plan.with_(profile=spec.profile_ref), note


def evaluate(spec: SweepSpec, profile: Profile, c: Combo) -> dict[str, Any]:
    """One sweep row: the combination, and its prediction or why it cannot run."""
    from perfmodel.costs import StageCosts
    from perfmodel.simulate import check_fits
    from perfmodel.prediction import predict

    row: dict[str, Any] = {"index": c.index, "mode": c.mode, "gpus": c.gpus, "allocation_ratio": c.allocation_ratio,
                           "pipeline_stage_num": c.pipeline_stage_num, "b_max": c.b_max, "t_max_s": c.t_max_s}
    # the workload axes, only when swept (a sweep without them keeps its rows as they were)
    for key, value in (("envs_per_gpu", c.envs_per_gpu), ("micro_batch_size", c.micro_batch_size),
                       ("max_staleness", c.max_staleness)):
        if value is not None:
            row[key] = value
    try:
        plan, note = build_plan_noted(spec, profile, c)
    except ConfigError as e:
        return {**row, "status": "infeasible", "reason_kind": _category(e), "reason": str(e)}
    plan, repair, refusal = runnable_in_rlinf(plan, micro_swept=c.micro_batch_size is not None)
    if refusal is not None:
        return {**row, "status": "infeasible", "reason_kind": RLINF_REFUSES, "reason": refusal,
                "rlinf_runs_as_emitted": False}
    if repair is not None:
        row["micro_batch_asked"] = repair
        w = plan.workload
        note = "; ".join(n for n in (note, f"micro_batch_size {repair} -> {w.micro_batch_size}: global batch "
                                           f"{w.global_batch_size} splits whole over {plan.actor_gpus} actor GPUs, "
                                           "as RLinf requires") if n)
    if note:
        row["note"] = note
    try:
        check_fits(plan, StageCosts(plan, profile))
    except ConfigError as e:
        return {**row, "status": "infeasible", "reason_kind": "envs do not fit node RAM", "reason": str(e)}
    try:
        pred = predict(plan, profile, replications=spec.replications, seed=spec.seed, interval=spec.intervals)
    except ConfigError as e:
        return {**row, "status": "infeasible", "reason_kind": _category(e), "reason": str(e)}
    except Exception as e:  # a simulator failure on one plan must not lose the whole sweep
        return {**row, "status": "error", "reason_kind": type(e).__name__, "reason": f"{type(e).__name__}: {e}"}
    row.update({
        "status": "ok",
        "rollout_gpus": pred["rollout_gpus"],
        "actor_gpus": pred["actor_gpus"],
        "total_num_envs": pred["total_num_envs"],
        "throughput_env_steps_per_s": pred["throughput_env_steps_per_s"],
        "iteration_time_s": pred["iteration_time_s"],
        "bound_env_steps_per_s": pred["bound_env_steps_per_s"],
        "bottleneck": pred["bottleneck"],
        "plan": plan.to_dict(),
        "prediction": pred,
    })
    if "throughput_ci95" in pred:
        row["throughput_ci95"] = pred["throughput_ci95"]
    iv = pred.get("throughput_interval")
    row["throughput_low"] = iv["low"] if iv else None
    row["throughput_high"] = iv["high"] if iv else None
    # which structural alternative drives the width (perfmodel.calibration.structural), when any
    row["interval_structural"] = (iv or {}).get("structural")
    ext = pred.get("extrapolation") or {}
    row["beyond_calibrated_scale"] = bool(ext.get("beyond_calibrated_gpus") or ext.get("beyond_calibrated_nodes"))
    row["beyond_calibrated_gpu_type"] = bool(ext.get("beyond_calibrated_gpu_type"))
    row["extrapolation"] = row["beyond_calibrated_scale"] or row["beyond_calibrated_gpu_type"]
    if ext.get("backbone_not_calibrated"):  # a profile from shapes (perfmodel.calibration.uncalibrated)
        row["backbone_not_calibrated"] = True
    row["rlinf_runs_as_emitted"] = True  # (runnable_in_rlinf: a refused split is an infeasible row)
    return row


# Why a combination is not run: RLinf would refuse its batch split (runnable_in_rlinf).
RLINF_REFUSES = "RLinf refuses the batch split"


def runnable_in_rlinf(plan: Plan, micro_swept: bool = False) -> tuple[Plan, int | None, str | None]:
    """(the plan as RLinf runs it, the micro_batch_size it asked for when that was lowered, why
    RLinf refuses it or None). The sweep and the planner rank only plans RLinf runs as emitted: a
    global batch that does not split whole over the actor GPUs gets the largest micro-batch that
    splits it (costs.rlinf_batch_repair, the same global batch), unless the micro-batch was a
    swept value (``--micro-batch-sizes``: the row is that value or nothing), or none does."""
    from perfmodel.costs import rlinf_batch_repair

    fixed, why = rlinf_batch_repair(plan)
    if fixed is plan:
        return plan, None, None
    if fixed is None:
        return plan, None, why
    w = plan.workload
    if micro_swept:
        return plan, None, (f"actor.micro_batch_size: {w.micro_batch_size} x {plan.actor_gpus} actor GPUs does not "
                            f"split global batch {w.global_batch_size} whole, which RLinf refuses "
                            f"({fixed.workload.micro_batch_size} would)")
    return fixed, w.micro_batch_size, None


# Process-pool plumbing: the spec and profile go to each worker once.
_WORKER: dict[str, Any] = {}


def _init_worker(spec: SweepSpec, profile_dict: dict[str, Any]) -> None:
    import signal

    # The parent handles Ctrl-C and SIGTERM and terminates the pool: a worker just stops,
    # without a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _WORKER["spec"] = spec
    _WORKER["profile"] = Profile.from_dict(profile_dict)


def _run_one(c: Combo) -> dict[str, Any]:
    return evaluate(_WORKER["spec"], _WORKER["profile"], c)


def configuration(r: dict[str, Any]) -> tuple:
    """A row's configuration (Combo.configuration): what its scaling efficiency compares across
    GPU counts."""
    return (r["mode"], r["allocation_ratio"], r["pipeline_stage_num"], r["b_max"], r["t_max_s"],
            r.get("envs_per_gpu"), r.get("micro_batch_size"), r.get("max_staleness"))


def derive(rows: list[dict[str, Any]], price: float | None) -> None:
    """Add scaling efficiency, gain over colocated and cost columns in place."""
    ok = [r for r in rows if r["status"] == "ok"]
    base: dict[tuple, dict[str, Any]] = {}
    for r in sorted(ok, key=lambda r: (r["gpus"], r["index"])):
        base.setdefault(configuration(r), r)
    coloc: dict[int, float] = {}
    for r in ok:
        if r["mode"] == "colocated":
            coloc[r["gpus"]] = max(coloc.get(r["gpus"], 0.0), r["throughput_env_steps_per_s"])
    for r in ok:
        thr, n = r["throughput_env_steps_per_s"], r["gpus"]
        b = base[configuration(r)]
        r["scaling_baseline_gpus"] = b["gpus"]
        r["scaling_efficiency"] = (thr / n) / (b["throughput_env_steps_per_s"] / b["gpus"])
        c = coloc.get(n)
        r["colocated_throughput_env_steps_per_s"] = c
        r["gain_over_colocated_pct"] = 100.0 * (thr / c - 1.0) if c else None
        r["env_steps_per_gpu_hour"] = thr * 3600.0 / n
        r["env_steps_per_dollar"] = r["env_steps_per_gpu_hour"] / price if price else None


# Predictions closer than this (relative) are the same number: simulation rounding, not a gap.
# A tie goes to the earliest row of the sweep (the simpler mode: modes are swept in their
# cumulative order), never to the float rounding.
TIE_REL = 1e-4


def beats(a: float, b: float) -> bool:
    """Whether ``a`` is better than ``b`` by more than a tie."""
    return a > b * (1 + TIE_REL)


# A plan this far below its analytic bound, with no resource busier than WAIT_BUSY, is limited by
# waiting (latency, barriers, hand-offs), not by a resource: the plan's explanation says so, and
# the sweep table marks its bottleneck "+wait".
WAIT_BOUND_GAP, WAIT_BUSY = 0.2, 0.8


def waiting_limited(r: dict[str, Any]) -> bool:
    """Whether a feasible row is limited by waiting rather than by its bound's resource."""
    res = r["prediction"]["utilization"]["resources"]
    below = 1 - r["throughput_env_steps_per_s"] / r["bound_env_steps_per_s"]
    return below > WAIT_BOUND_GAP and max(res.values()) < WAIT_BUSY


def split_is_whole(r: dict[str, Any]) -> bool:
    """Whether a row's plan splits its global batch wholly over its actor GPUs (read from the plan,
    so sweep files written before the warning existed are judged alike)."""
    w = r["plan"]["workload"]
    return batch_split_is_whole(w["global_batch_size"], r["actor_gpus"], w["micro_batch_size"])


def ties(a: float, b: float) -> bool:
    return not beats(a, b) and not beats(b, a)


def top_tied(rows: Iterable[dict[str, Any]], measures: tuple[str, ...] = ("throughput_env_steps_per_s",)
             ) -> list[dict[str, Any]]:
    """The rows (at least one given) within TIE_REL of the top on each measure in turn: the best,
    as far as the model can tell them apart."""
    tied = list(rows)
    for m in measures:
        top = max(r[m] for r in tied)
        tied = [r for r in tied if not beats(top, r[m])]
    return tied


def leader(rows: Iterable[dict[str, Any]], measures: tuple[str, ...] = ("throughput_env_steps_per_s",)
           ) -> dict[str, Any]:
    """The best of ``rows`` (at least one): the earliest of ``top_tied`` (the one rule of the
    sweep's summary and of the plan's choice)."""
    return min(top_tied(rows, measures), key=lambda r: r["index"])


def runner_up_margin(best: dict[str, Any], runner: dict[str, Any], objective: str = "throughput") -> dict[str, Any]:
    """How far the runner-up is from the best on the objective's measure (throughput, or env
    steps per GPU-hour for cost and time), against the model's residual error at the calibrated
    points (the interval's ``model_pct`` term, one sd): a gap below it is not resolved by the
    model; a tie (within TIE_REL) leaves the choice to the sweep order."""
    from perfmodel.calibration.uncertainty import Z

    key = "throughput_env_steps_per_s" if objective == "throughput" else "env_steps_per_gpu_hour"
    gap = abs(math.log(runner[key] / best[key]))
    iv = (best.get("prediction") or {}).get("throughput_interval") or {}
    model = (iv.get("components_pct") or {}).get("model_pct")
    sd = model / (100 * Z) if model else None
    # cost and time: a tie on env steps per GPU-hour is decided by throughput (leader), so it is
    # a tie only when both are the same
    tie = ties(best[key], runner[key]) and ties(best["throughput_env_steps_per_s"], runner["throughput_env_steps_per_s"])
    return {"measure": "throughput" if objective == "throughput" else "env steps per GPU-hour",
            "gap_pct": 100 * math.expm1(gap), "tie": tie,
            "model_error_pct": None if sd is None else 100 * sd,
            "resolvable": not tie and (sd is None or gap >= sd)}


def simplest_within_model_error(lead: dict[str, Any], ranked: list[dict[str, Any]], objective: str) -> dict[str, Any]:
    """The best row of the simplest mode (``MODES`` order: fewer mechanisms, stock RLinf before
    the fork) whose gap to ``lead`` on the objective's measure is within the model's residual
    error (``runner_up_margin``: not resolvable), else ``lead``: the model cannot say the more
    complex mode is faster, and the simpler one changes less (issue 32)."""
    from perfmodel.schema.modes import MODES

    for mode in MODES[:MODES.index(lead["mode"])]:
        first = next((r for r in ranked if r["mode"] == mode), None)
        m = runner_up_margin(lead, first, objective) if first is not None else None
        if m is not None and m["model_error_pct"] is not None and not m["resolvable"]:
            return first
    return lead


def best_of(ranked: list[dict[str, Any]], objective: str = "throughput") -> dict[str, Any]:
    """The best of ``ranked`` (feasible rows, best first on the objective's measure): the one rule
    of ``perfmodel plan``'s choice and of the sweep's best per GPU count, so that both name the
    same plan: the ``leader`` (a tie to the earliest row), or the simplest mode within the
    model's residual error of it (``simplest_within_model_error``)."""
    measures = (("throughput_env_steps_per_s",) if objective == "throughput"
                else ("env_steps_per_gpu_hour", "throughput_env_steps_per_s"))
    return simplest_within_model_error(leader(ranked, measures), ranked, objective)


def best_per(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> dict[Any, dict[str, Any]]:
    """The best feasible row per group (``leader``)."""
    return {k: leader(rs) for k, rs in _groups(rows, key).items()}


def _groups(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> dict[Any, list[dict[str, Any]]]:
    """The feasible rows by ``key``."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        if r["status"] == "ok":
            groups.setdefault(key(r), []).append(r)
    return groups


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-mode best rows per GPU count (with their own scaling efficiency against the mode's
    best at its smallest GPU count), best overall per GPU count, and infeasible counts."""
    per_mode = best_per(rows, lambda r: (r["mode"], r["gpus"]))
    modes: dict[str, list[dict[str, Any]]] = {}
    for (mode, gpus), r in sorted(per_mode.items(), key=lambda kv: (MODES.index(kv[0][0]), kv[0][1])):
        modes.setdefault(mode, []).append(r)
    best_modes = []
    for mode, rs in modes.items():
        b = rs[0]
        for r in rs:
            entry = {k: r.get(k) for k in ("index", "gpus", "allocation_ratio", "pipeline_stage_num", "b_max", "t_max_s",
                                           "throughput_env_steps_per_s", "throughput_low", "throughput_high",
                                           "throughput_ci95", "gain_over_colocated_pct",
                                           "env_steps_per_gpu_hour", "env_steps_per_dollar", "bottleneck")}
            entry["mode"] = mode
            entry["scaling_efficiency"] = ((r["throughput_env_steps_per_s"] / r["gpus"])
                                           / (b["throughput_env_steps_per_s"] / b["gpus"]))
            entry["scaling_baseline_gpus"] = b["gpus"]
            best_modes.append(entry)
    per_gpus = {g: best_of(sorted(rs, key=lambda r: (-r["throughput_env_steps_per_s"], r["index"])))
                for g, rs in _groups(rows, lambda r: r["gpus"]).items()}
    infeasible: dict[str, int] = {}
    for r in rows:
        if r["status"] != "ok":
            infeasible[r["reason_kind"]] = infeasible.get(r["reason_kind"], 0) + 1
    return {
        "best_per_mode": best_modes,
        "best_per_gpus": [{"gpus": g, "index": r["index"], "mode": r["mode"], "allocation_ratio": r["allocation_ratio"],
                           "throughput_env_steps_per_s": r["throughput_env_steps_per_s"]}
                          for g, r in sorted(per_gpus.items())],
        "combinations": len(rows),
        "feasible": sum(r["status"] == "ok" for r in rows),
        "infeasible": sum(r["status"] == "infeasible" for r in rows),
        "errors": sum(r["status"] == "error" for r in rows),
        "not_run_by_reason": infeasible,
    }


def _cost_order(combos: list[Combo]) -> list[Combo]:
    """Most expensive first, so no process is left with a slow plan at the end: dynamic
    batching records its rollout event by event (several times the others). Within that, a
    configuration's GPU counts one after another: their env workers are identical, so a
    process records the worker once and replays it for the others (perfmodel.sim.workers)."""
    return sorted(combos, key=lambda c: (not MODE_TABLE[c.mode].dynamic_batching, MODES.index(c.mode),
                                         c.allocation_ratio or "", c.pipeline_stage_num,
                                         -1 if c.b_max is None else c.b_max, c.t_max_s,
                                         -1 if c.envs_per_gpu is None else c.envs_per_gpu,
                                         -1 if c.micro_batch_size is None else c.micro_batch_size,
                                         -1 if c.max_staleness is None else c.max_staleness, c.gpus, c.index))


def _chunks(combos: list[Combo], parts: int) -> list[list[Combo]]:
    """``parts`` contiguous chunks of near-equal size (neighbours share recorded workers)."""
    n = len(combos)
    return [combos[i * n // parts:(i + 1) * n // parts] for i in range(parts) if (i + 1) * n // parts > i * n // parts]


def _evaluate_chunk(spec: SweepSpec, profile_dict: dict[str, Any], chunk: list[Combo]) -> list[dict[str, Any]]:
    profile = Profile.from_dict(profile_dict)
    return [evaluate(spec, profile, c) for c in chunk]


def _run_ray(spec: SweepSpec, profile: Profile, combos: list[Combo], address: str,
             progress: Callable[[int, int], None] | None) -> list[dict[str, Any]]:
    """The combinations as Ray tasks on the cluster at ``address`` (``auto``, ``host:port`` or
    ``local`` for a new local one); Ray is imported here only."""
    if address not in ("auto", "local") and "://" not in address:
        # Ray waits minutes for an address nobody answers at: refuse it in seconds instead.
        import socket

        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=3).close()
        except (OSError, ValueError) as e:
            raise ConfigError("--address", f"must be host:port of a running Ray cluster, auto or local; "
                              f"cannot reach {address!r} ({getattr(e, 'strerror', None) or e})") from None
    import signal

    from perfmodel.cliutil import raise_on_sigterm, raises_on_sigterm

    # Ray's C++ failure handler would dump a stack on SIGTERM (Ray reads this switch on import, so
    # it is set first), and its init replaces the CLI's handler: keep the CLI's (one line, exit
    # 143), as the executor does (executor/runtime/session.py).
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    ours = raises_on_sigterm(signal.getsignal(signal.SIGTERM))
    try:
        import ray
    except ImportError:
        raise ConfigError("--address", "needs Ray installed (pip install ray)") from None
    try:
        # "local" starts a new cluster; None would join one that `ray start` left on this machine
        ray.init(address=address, ignore_reinit_error=True,
                 logging_level="ERROR", log_to_driver=False, include_dashboard=False)
        if ours:
            raise_on_sigterm()
    except Exception as e:  # a bad address must be one line, not Ray's traceback
        raise ConfigError("--address", f"must name a running Ray cluster (host:port or auto); "
                          f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    try:
        task = ray.remote(_evaluate_chunk)
        spec_ref, prof_ref = ray.put(spec), ray.put(profile.to_dict())
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        pending = [task.remote(spec_ref, prof_ref, chunk)
                   for chunk in _chunks(combos, max(1, min(len(combos), cpus * 8)))]
        rows: list[dict[str, Any]] = []
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                rows.extend(ray.get(ref))
            if progress:
                progress(len(rows), len(combos))
        return rows
    finally:
        ray.shutdown()


def run_sweep(spec: SweepSpec, profile: Profile, *, jobs: int | None = None,
              progress: Callable[[int, int], None] | None = None, address: str | None = None) -> dict[str, Any]:
    """Evaluate every combination and return the sweep document: spec, rows in combination
    order, summary, and the definitions used. In ``jobs`` processes on this machine (1 = in
    this process), or as Ray tasks on the cluster at ``address``."""
    spec.check()
    combos = combinations(spec)
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(combos) or 1))
    rows: list[dict[str, Any]] = []
    if address is not None:
        rows = _run_ray(spec, profile, _cost_order(combos), address, progress)
    elif jobs == 1:
        for c in _cost_order(combos):
            rows.append(evaluate(spec, profile, c))
            if progress:
                progress(len(rows), len(combos))
    else:
        import multiprocessing as mp

        # Small chunks keep the processes busy to the end; enough of them to show progress.
        chunk = max(1, min(16, len(combos) // (jobs * 8)))
        with mp.get_context().Pool(jobs, initializer=_init_worker, initargs=(spec, profile.to_dict())) as pool:
            for row in pool.imap_unordered(_run_one, _cost_order(combos), chunksize=chunk):
                rows.append(row)
                if progress:
                    progress(len(rows), len(combos))
    rows.sort(key=lambda r: r["index"])
    derive(rows, spec.gpu_hour_price)
    return {
        "kind": SWEEP_KIND,
        "schema_version": SWEEP_SCHEMA_VERSION,
        "model_revision": MODEL_REVISION,
        "profile": profile.name,
        "backbone": profile.backbone,
        "spec": spec.to_dict(),
        "definitions": {"scaling_efficiency": SCALING_NOTE, "gain_over_colocated_pct": GAIN_NOTE,
                        "env_steps_per_gpu_hour": "throughput x 3600 / GPUs",
                        "env_steps_per_dollar": "env_steps_per_gpu_hour / gpu_hour_price",
                        # the summary's differs from a row's: best plans, whatever their configurations
                        "summary.best_per_mode.scaling_efficiency": BEST_SCALING_NOTE},
        "rows": rows,
        "summary": summarize(rows),
    }


CSV_COLUMNS = ("index", "status", "mode", "gpus", "allocation_ratio", "rollout_gpus", "actor_gpus",
               "pipeline_stage_num", "b_max", "t_max_s", "throughput_env_steps_per_s", "throughput_low",
               "throughput_high", "extrapolation", "throughput_ci95_low",
               "throughput_ci95_high", "iteration_time_s", "bound_env_steps_per_s", "bottleneck",
               "scaling_efficiency", "scaling_baseline_gpus", "gain_over_colocated_pct",
               "env_steps_per_gpu_hour", "env_steps_per_dollar", "util_env_cpu", "util_rollout_gpu",
               "util_actor_gpu", "util_gpu", "envs_per_gpu", "micro_batch_size", "max_staleness",
               "rlinf_runs_as_emitted", "note", "reason")


def csv_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for r in doc["rows"]:
        row = {k: r.get(k) for k in CSV_COLUMNS}
        ci = r.get("throughput_ci95")
        row["throughput_ci95_low"], row["throughput_ci95_high"] = (ci if ci else (None, None))
        res = (r.get("prediction") or {}).get("utilization", {}).get("resources", {})
        for k in ("env_cpu", "rollout_gpu", "actor_gpu", "gpu"):
            row[f"util_{k}"] = res.get(k)
        p = r.get("plan")
        if p:  # the workload knobs each row ran, swept or not
            row["envs_per_gpu"] = p["workload"]["total_num_envs"] / p["cluster"]["gpus"]
            row["micro_batch_size"] = p["workload"]["micro_batch_size"]
            row["max_staleness"] = p.get("max_staleness") if MODE_TABLE[r["mode"]].async_training else None
        out.append({k: ("" if v is None else v) for k, v in row.items()})
    return out


def write_csv_atomic(path: str, doc: dict[str, Any]) -> None:
    import csv
    import io

    from perfmodel.schema.jsonio import write_atomic

    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS))
    w.writeheader()
    w.writerows(csv_rows(doc))
    write_atomic(path, buf.getvalue())


def workload_searched(spec: dict[str, Any]) -> str | None:
    """The workload axes a sweep searched beyond its base plan's own values, in words (what
    ``plan`` and ``sweep`` both say under their answer), or None."""
    parts = [f"{name} {', '.join('as configured' if v is None else str(v) for v in values)}"
             for name, values in (("envs per GPU", spec.get("envs_per_gpu") or [None]),
                                  ("micro_batch_size", spec.get("micro_batch_sizes") or [None]),
                                  ("staleness bound", spec.get("staleness") or [None]))
             if list(values) != [None]]
    return "; ".join(parts) or None


def structural_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per GPU count, the structural alternative that parts most from the point prediction
    (perfmodel.calibration.structural.note), once: what the calibration cannot tell there."""
    from perfmodel.calibration.structural import note

    widest: dict[int, dict[str, Any]] = {}
    for r in rows:
        s = r.get("interval_structural") if r.get("status") == "ok" else None
        if s and "differs_pct" in s and (r["gpus"] not in widest
                                         or abs(s["differs_pct"]) > abs(widest[r["gpus"]]["differs_pct"])):
            widest[r["gpus"]] = {**s, "mode": r["mode"]}
    out, told = [], set()
    for g in sorted(widest):
        n = note({"structural": widest[g]}, settle=widest[g]["drives_width"] not in told)
        if n:
            told.add(widest[g]["drives_width"])
            out.append(f"note: at {g} GPUs ({widest[g]['mode']}) {n}")
    return out


def format_table(doc: dict[str, Any], show_infeasible: bool = False) -> str:
    """The terminal table: one line per feasible row (infeasible ones counted at the end)."""
    price = doc["spec"]["gpu_hour_price"]
    head = (f"{'gpus':>5} {'mode':<14} {'ratio':>5} {'stg':>3} {'b_max':>5} {'t_max':>5} {'env steps/s':>12} "
            f"{'90% interval':>17} {'scal.eff':>8} {'vs coloc':>9} {'steps/GPU-h':>12} "
            f"{'steps/$':>10} {'bottleneck':<16}")
    lines = [head]
    for r in doc["rows"]:
        if r["status"] != "ok":
            if show_infeasible:
                lines.append(f"{r['gpus']:>5} {r['mode']:<14} {r['allocation_ratio'] or '-':>5} "
                             f"{r['pipeline_stage_num']:>3} not run: {r['reason']}")
            continue
        # The prediction interval (what calibration leaves open; '*' beyond the calibrated scale).
        ci_s = (fmt_range(r['throughput_low'], r['throughput_high']) if r.get("throughput_low") is not None
                else "-") + ("*" if r.get("extrapolation") else "")
        gain = r["gain_over_colocated_pct"]
        lines.append(
            f"{r['gpus']:>5} {r['mode']:<14} {r['allocation_ratio'] or '-':>5} {r['pipeline_stage_num']:>3} "
            f"{fmt_number(r['b_max'], 'd'):>5} {r['t_max_s']:>5.3g} {r['throughput_env_steps_per_s']:>12.2f} "
            f"{ci_s:>17} {r['scaling_efficiency']:>8.3f} {('-' if gain is None else f'{gain:+.1f}%'):>9} "
            f"{r['env_steps_per_gpu_hour']:>12.0f} {fmt_number(r['env_steps_per_dollar'], '.0f'):>10} "
            f"{r['bottleneck'] + ('+wait' if waiting_limited(r) else ''):<16}")
    s = doc["summary"]
    lines.append("")
    lines.append(f"{s['feasible']} of {s['combinations']} combinations predicted; {s['infeasible']} infeasible"
                 + (f", {s['errors']} failed" if s["errors"] else "")
                 + (": " + "; ".join(f"{n} {k}" for k, n in sorted(s["not_run_by_reason"].items()))
                    if s["not_run_by_reason"] else ""))
    lines.append("note: 90% interval = prediction interval from the calibration's uncertainty; "
                 "* = extrapolation beyond the calibrated GPU or node counts or GPU type (docs/metrics.md)")
    lines.append("note: bottleneck = the resource that bounds the plan analytically; +wait = the simulation is "
                 f"over {100 * WAIT_BOUND_GAP:.0f}% below that bound with no resource {100 * WAIT_BUSY:.0f}% busy: "
                 "waiting (inference round trips, barriers, hand-offs) limits it, not that resource")
    rounded = sum(1 for r in doc["rows"] if r["status"] == "ok" and "total_num_envs" in (r.get("note") or ""))
    if rounded:
        lines.append(f"note: {rounded} row(s) run total_num_envs rounded to the nearest count that divides over their "
                     f"env workers (within {100 * ENV_REPAIR_REL:.0f}%; each row's note, --json or --csv)")
    lowered = sum(1 for r in doc["rows"] if r["status"] == "ok" and r.get("micro_batch_asked"))
    if lowered:
        lines.append(f"note: {lowered} row(s) run a smaller micro_batch_size so that the global batch splits whole over "
                     "their actor GPUs, as RLinf requires (the same global batch; each row's note, --json or --csv)")
    uneven = sum(not split_is_whole(r) for r in doc["rows"] if r["status"] == "ok")
    if uneven:
        lines.append(f"warning: {uneven} row(s) split workload.global_batch_size unevenly over their actor GPUs (not a "
                     "multiple of micro_batch_size x actor GPUs), which RLinf refuses: costed with smaller or padded "
                     "micro-batches (perfmodel predict shows how); a larger cluster needs a larger global batch or a "
                     "smaller micro-batch")
    searched = workload_searched(doc["spec"])
    if searched:
        lines.append(f"note: searched {searched} (--envs-per-gpu, --micro-batch-sizes, --staleness; plan searches "
                     "the same)")
    lines += structural_lines(doc["rows"])
    lines.append(f"note: {SCALING_NOTE}")
    lines.append(f"note: {GAIN_NOTE}" + ("" if "colocated" in doc["spec"]["modes"] else " (colocated not swept: '-')"))
    if price is None:
        lines.append("note: steps/$ needs --gpu-hour-price")
    else:
        lines.append(f"note: steps/$ at ${price:g} per GPU-hour")
    for b in s["best_per_gpus"]:
        # modes the model cannot tell from the best (the same predicted throughput)
        tied = sorted({r["mode"] for r in top_tied(r for r in doc["rows"] if r["status"] == "ok"
                                                    and r["gpus"] == b["gpus"]) if r["mode"] != b["mode"]})
        lines.append(f"best at {b['gpus']:>4} GPUs: {b['mode']} {b['allocation_ratio'] or ''} "
                     f"{b['throughput_env_steps_per_s']:.2f} env steps/s"
                     + (f", tied with {', '.join(tied)}" if tied else "") + f" (rows[{b['index']}] of --json)")
    return "\n".join(lines)
