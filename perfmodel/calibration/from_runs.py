"""Calibrate a profile of the user's own cluster from their runs (RLinf logs, or ``executor run``
records in RLinf's layout): ``perfmodel calibrate --from-rlinf-run LOGDIR ...``.

Each run is a calibration point just like a published one (``calibrate.fit``), with its own plan
(the RLinf importer's, from the run's ``config.yaml``) instead of the published setup: its
measured iteration throughput (env steps per iteration over the mean ``time/step`` after warm-up,
perfmodel.rlinf.logs). In the synchronous modes, where RLinf's phases do not overlap, two stage
timers are points too, as rates (env steps per iteration over the time) so that every residual is
a log ratio: ``time/actor_training`` against the model's actor time per iteration
(bound.actor_iteration_s: micro-batches and optimizer steps), and ``time/generate_rollouts``
against its rollout (the closed form's iteration less training and the weight sync or swaps).

The parameters are calibrate.PARAMS, built into a profile by calibrate.build_profile with the
user's node (GPUs per node from the config, CPU cores per node from ``--cpu-cores-per-node``: an
RLinf config does not say it). A few runs cannot pin a dozen parameters, so the fit is a
maximum a posteriori one: the bundled (published) calibration's values are the prior's centre,
with the same log-uniform-range spread the interval analysis uses (uncertainty.analyse), and the
runs' residuals weigh in at the bundled residual scatter (or the run's own step-to-step scatter,
if larger). A parameter no run moves keeps its bundled value, as in calibrate.fit. The intervals
come from uncertainty.analyse on the runs, with the residual scatter floored at the bundled one
and the bundled cross-validated extrapolation error per doubling.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, Callable

import numpy as np

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.metrics import error_pct
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile, load_profile

# Simulations of all the run points per fit (a budget, not a fitted number): the pairs of runs in
# docs/own-runs.md converge within it (colocated 73, rollout_async 44, the identification probes
# included); a fit that spends it all says so (--max-evals to give it more).
DEFAULT_MAX_EVALS = 80
# A fit whose predictions move less than this (%) over the second half of its budget has converged
# for what it is for (the predictions), whatever its parameters still do (issue 41).
CONVERGED_PCT = 1.0
# Parameters the stage timers identify through the model (documented in the provenance).
STAGES_SYNC_ONLY = "synchronous modes only: the asynchronous runner overlaps rollout and training"


@dataclass(frozen=True)
class RunPoint:
    """A calibration point from a run: ``kind`` 'throughput' (time/step) or a stage timer name
    (perfmodel.rlinf.logs.STAGE_KEYS). ``throughput_env_steps_per_s`` is the measured rate (env
    steps per iteration over the timer's mean), the name calibrate's residuals read."""

    mode: str
    backbone: str
    gpus: int
    allocation_ratio: str | None
    throughput_env_steps_per_s: float
    plan: Plan = field(compare=False)
    given: dict[str, Any] = field(compare=False)  # the cluster fields the run fixes
    kind: str = "throughput"
    run: int = 0  # index of the run it came from

    def plan_on(self, prof: Profile) -> Plan:
        from perfmodel.calibration.reference import complete_cluster

        return complete_cluster(self.plan, self.given, prof)

    def predict_on(self, prof: Profile) -> float:
        from perfmodel.bound import actor_iteration_s, closed_form_iteration_s
        from perfmodel.calibration.calibrate import predict_plan
        from perfmodel.costs import StageCosts

        plan = self.plan_on(prof)
        if self.kind == "throughput":
            return predict_plan(plan, prof)
        costs = StageCosts(plan, prof)
        steps = plan.workload.env_steps_per_iteration
        actor = actor_iteration_s(costs)
        if self.kind == "actor_training":
            return steps / actor
        extra = costs.weight_sync_s() if plan.mechanisms.disaggregated else 2 * costs.phase_switch_s()
        return steps / (closed_form_iteration_s(costs) - actor - extra)


def node_facts(plan: Plan, cpu_cores_per_node: int | None) -> dict[str, Any]:
    """What the user's cluster's node is, as far as the run says: its GPUs per node (the
    config's ``cluster``), CPU cores per node (``--cpu-cores-per-node``, else the plan's), and
    its GPU type (``vlaperf.gpu``, default H100-class) with that GPU's memory: the fitted costs
    are that GPU's, so the profile says so (perfmodel.extrapolation.calibrated_gpu_type)."""
    return {"gpus_per_node": plan.cluster.gpus_per_node,
            "cpu_cores_per_node": int(cpu_cores_per_node or plan.cluster.cpu_cores_per_node),
            "gpu": plan.cluster.gpu, "gpu_memory_gb": plan.cluster.gpu_memory_gb}


def run_points(runs: list, facts: dict[str, Any]) -> list[RunPoint]:
    """The calibration points of ``runs`` (perfmodel.rlinf.logs.RunLog) on a node of ``facts``."""
    out = []
    given = dict(facts)
    for i, r in enumerate(runs):
        plan = r.plan
        cluster = replace(plan.cluster, **facts)
        plan = plan.with_(cluster=cluster)
        base = dict(mode=plan.mode, backbone=r.imported.backbone, gpus=plan.cluster.gpus,
                    allocation_ratio=plan.allocation_ratio, plan=plan, given={**given, "gpus": plan.cluster.gpus},
                    run=i)
        out.append(RunPoint(throughput_env_steps_per_s=r.throughput_env_steps_per_s, **base))
        sync = not plan.mechanisms.async_training and plan.pipeline_stage_num == 1
        for stage in ("actor_training", "generate_rollouts"):
            t = r.stage_mean_s(stage)
            if sync and t:
                out.append(RunPoint(throughput_env_steps_per_s=r.env_steps_per_iteration / t, kind=stage, **base))
    return out


def prior_of(backbones: list[str]) -> tuple[dict[str, float], float, dict[str, Any]]:
    """The bundled (published) calibration as the prior: its fitted values by parameter name
    (calibrate.parameter_names), its residual scatter, and its extrapolation error."""
    values: dict[str, float] = {}
    sd, extra = 0.0, {}
    from perfmodel.calibration.calibrate import PARAMS

    shared = {p.name for p in PARAMS if p.shared}
    for b in backbones:
        prof = load_profile(b, "backbone")
        params = prof.provenance.get("parameters") or {}
        for n, rec in params.items():
            values[n if n in shared else f"{b}.{n}"] = float(rec["value"])
        u = prof.provenance.get("uncertainty") or {}
        sd = max(sd, float(u.get("residual_sd_log", 0.0)))
        extra = {k: u[k] for k in ("extrapolation_sd_log_per_doubling", "extrapolation_source",
                                   "extrapolation_pair_sd_log_per_doubling") if k in u}
    return values, sd, extra


def finite_or_none(x: float | None) -> float | None:
    """A number for a JSON document: JSON has no Infinity (None: not measured, ``converged`` says
    the rest)."""
    return x if x is None or math.isfinite(x) else None


@dataclass
class RunFit:
    values: dict[str, float]
    points: list[RunPoint]
    predicted: list[float]
    evaluations: int
    seconds: float
    not_identified: list[str]
    on_bound: list[str]
    data_sd_log: float
    # How far the fit's predictions moved over the second half of its budget (the largest
    # |final / half-budget - 1| over the points, in %), when it spent the whole budget; None otherwise.
    moved_last_half_pct: float | None = None

    @property
    def converged(self) -> bool:
        """The one convergence criterion calibrate speaks by: the fit stopped within its budget, or
        its predictions moved less than CONVERGED_PCT over the budget's second half."""
        return self.moved_last_half_pct is None or self.moved_last_half_pct < CONVERGED_PCT

    @property
    def errors_pct(self) -> list[float]:
        return [error_pct(p, pt.throughput_env_steps_per_s) for p, pt in zip(self.predicted, self.points)]

    def misfit(self, backbone: str | None = None) -> float:
        """The data's part of the MAP objective: squared log(predicted / measured) over
        ``data_sd_log``, summed over the points (of ``backbone``, if given)."""
        return float(sum((math.log(p / pt.throughput_env_steps_per_s) / self.data_sd_log) ** 2
                         for p, pt in zip(self.predicted, self.points) if backbone in (None, pt.backbone)))


def fit_runs(points: list[RunPoint], facts: dict[str, Any], *, max_evals: int = DEFAULT_MAX_EVALS,
             data_sd_log: float | None = None, prior_values: dict[str, float] | None = None,
             fixed: dict[str, float] | None = None,
             progress: Callable[[int, float], None] | None = None) -> RunFit:
    """The maximum a posteriori parameters for ``points`` (see the module docstring).
    ``prior_values``: the prior's centre by parameter name (default: the bundled calibration's);
    ``fixed``: parameters outside calibrate.PARAMS held at the given values (a structural
    member's growth parameter, runs_structural)."""
    from scipy.optimize import least_squares

    from perfmodel.backbones import get_backbone
    from perfmodel.calibration.calibrate import (IDENT_TOL, _param, build_profile, capped, identification_probe,
                                                 measured_env_memory_gb, on_physical_bound, parameter_names,
                                                 predict_points)

    backbones = sorted({p.backbone for p in points})
    prior, bundled_sd, _ = prior_of(backbones)
    prior = {**prior, **(prior_values or {})}
    s = max(bundled_sd, data_sd_log or 0.0, 1e-3)
    names = parameter_names(backbones)
    mem, _ = measured_env_memory_gb()
    lo = np.log([_param(n).lo for n in names])
    hi = np.log([_param(n).hi for n in names])
    x_prior = np.clip(np.log([prior.get(n, _param(n).init) for n in names]), lo, hi)
    prior_sd = (hi - lo) / math.sqrt(12.0)
    measured = np.array([p.throughput_env_steps_per_s for p in points])
    specs = {b: get_backbone(b) for b in backbones}
    evals = 0
    t0 = time.time()

    def predict_log(x: np.ndarray) -> np.ndarray:
        vals = {**dict(zip(names, np.exp(x))), **(fixed or {})}
        profs = {b: build_profile(specs[b], vals, mem, {}, node_facts=facts) for b in backbones}
        return np.log(np.array(predict_points(profs, points)) / measured)

    r0 = predict_log(x_prior)
    free = []
    for i in range(len(names)):
        x = x_prior.copy()
        x[i] = identification_probe(x_prior[i], lo[i], hi[i])
        if float(np.max(np.abs(predict_log(x) - r0))) > IDENT_TOL:
            free.append(i)
    evals += 1 + len(names)
    idx = np.array(free, dtype=int)

    class Budget(Exception):
        pass

    best = [float(np.sum((r0 / s) ** 2)), x_prior[idx].copy()]
    at_half: list[np.ndarray] = []  # the best point when half the budget was spent

    def full(xf: np.ndarray) -> np.ndarray:
        x = x_prior.copy()
        x[idx] = xf
        return x

    def residuals(xf: np.ndarray) -> np.ndarray:
        nonlocal evals
        if evals >= max_evals:
            raise Budget
        evals += 1
        if evals == max_evals // 2:
            at_half.append(best[1].copy())
        r = np.concatenate([predict_log(full(xf)) / s, (xf - x_prior[idx]) / prior_sd[idx]])
        cost = float(r @ r)
        if cost < best[0]:
            best[0], best[1] = cost, xf.copy()
        if progress:
            progress(evals, cost)
        return r

    if evals >= max_evals // 2:  # the identification probes spent half the budget already
        at_half.append(best[1].copy())
    if len(idx):
        try:
            least_squares(residuals, x_prior[idx], bounds=(lo[idx], hi[idx]), diff_step=1e-2, x_scale=1.0)
        except Budget:
            pass  # the best point seen within the budget
    x_best = full(best[1])
    values = {**capped({n: float(v) for n, v in zip(names, np.exp(x_best))}), **(fixed or {})}
    predicted = list(np.exp(predict_log(x_best)) * measured)
    on_bound = [names[i] for i in free if on_physical_bound(names[i], values[names[i]])]
    moved = None
    if evals >= max_evals:  # the budget ran out: did the predictions still move?
        half = np.exp(predict_log(full(at_half[0]))) * measured
        moved = float(100 * np.max(np.abs(np.array(predicted) / half - 1)))
        if evals - 1 - len(names) <= 0 < len(idx):
            moved = math.inf  # the probes spent it all: no fit step was taken
    return RunFit(values, points, [float(p) for p in predicted], evals, time.time() - t0,
                  [names[i] for i in range(len(names)) if i not in free], on_bound, s, moved)


# A bundled structural member is kept when its refit misfit to the runs is within z^2 of the best
# (z = 1.645: the 90 % profile-likelihood criterion structural.growth_upper_end uses for the
# published points), so the runs rule out only what they contradict at 90 %.
RUNS_MEMBER_Z = 1.645


def runs_structural(points: list[RunPoint], facts: dict[str, Any], base: RunFit, *,
                    max_evals: int = DEFAULT_MAX_EVALS) -> dict[str, dict[str, Any]]:
    """``provenance.structural`` of each backbone's profile from the runs: every member of the
    bundled profile's ensemble (a growth mechanism the published points cannot exclude,
    calibration.structural) refitted to the runs as the bundled model is (MAP, the member's own
    published values as the prior, its growth parameter held), and kept unless the runs
    contradict it. Runs that cannot tell the members apart (one node, say) keep them all, so a
    prediction beyond the runs is as wide as the bundled one's; runs across more nodes rule some
    out and narrow it. Each member says how its misfit compares."""
    from perfmodel.calibration.calibrate import GROWTH_PARAMS, PARAMS
    from perfmodel.calibration.structural import SETTLE, TOLERANCE_PP, members_of

    shared = {p.name for p in PARAMS if p.shared}
    out = {}
    for b in sorted({p.backbone for p in points}):
        pts = [p for p in points if p.backbone == b]
        members = members_of(load_profile(b, "backbone"))
        if not members:
            continue
        fits = []
        for m in members:
            g = GROWTH_PARAMS[m.mechanism].name
            prior = {(n if n in shared else f"{b}.{n}"): v for n, v in m.values.items() if n != g}
            fits.append((m, fit_runs(pts, facts, max_evals=max_evals, data_sd_log=base.data_sd_log,
                                     prior_values=prior, fixed={g: m.values[g]})))
        base_misfit = base.misfit(b)
        best = min([base_misfit] + [f.misfit() for _, f in fits])
        limit = best + RUNS_MEMBER_Z ** 2
        kept, rejected = [], []
        for m, f in fits:
            entry = {"mechanism": m.mechanism, "end": m.end, "group_out_mape_pct": m.group_out_mape_pct,
                     "scale_mape_pct": m.scale_mape_pct, "runs_misfit": round(f.misfit(), 4),
                     "runs_errors_pct": [round(e, 3) for e in f.errors_pct]}
            if f.misfit() <= limit:
                vals = {n.split(".")[-1]: v for n, v in f.values.items() if "." not in n or n.startswith(f"{b}.")}
                kept.append({**entry, "values": vals, "settle": SETTLE.get(m.mechanism, "")})
            else:
                rejected.append({**entry, "why": f"your runs contradict it: misfit {f.misfit():.2f} against the "
                                                 f"best {best:.2f} (more than {RUNS_MEMBER_Z}^2 apart, 90 %)"})
        nodes = sorted({math.ceil(p.gpus / facts["gpus_per_node"]) for p in pts})
        out[b] = {"tolerance_pp": TOLERANCE_PP,
                  "source": f"the bundled profile's members (profiles/{b}.json provenance.structural), each refitted "
                            "to your runs",
                  "criterion": f"a member is kept unless its refit misfit to the runs exceeds the best (today's fit "
                               f"or a member) by more than {RUNS_MEMBER_Z}^2 (90 %)",
                  "runs_nodes": nodes, "base_runs_misfit": round(base_misfit, 4),
                  "members": kept, "rejected": rejected}
    return out


def step_scatter_log(runs: list) -> float:
    """The runs' own measurement noise: the standard error of log mean time/step, largest over
    runs (0 with one used step)."""
    out = 0.0
    for r in runs:
        x = np.array(r.step_s)
        if len(x) > 1:
            out = max(out, float(np.std(x, ddof=1) / math.sqrt(len(x)) / np.mean(x)))
    return out


def build_profiles(fitres: RunFit, runs: list, facts: dict[str, Any], command: str, name: str | None = None,
                   analyse_progress: Callable[[int, int], None] | None = None,
                   structural: dict[str, dict[str, Any]] | None = None) -> dict[str, Profile]:
    """The user's cluster's profile per backbone: the fitted values built on their node, with
    provenance naming each run, the stored uncertainty (intervals) and the structural members
    the runs keep (``structural``, runs_structural)."""
    from perfmodel.backbones import get_backbone
    from perfmodel.calibration.calibrate import build_profile, measured_env_memory_gb, parameter_records
    from perfmodel.calibration.uncertainty import Uncertainty, analyse, attach

    mem, mem_src = measured_env_memory_gb()
    backbones = sorted({p.backbone for p in fitres.points})
    _, bundled_sd, extra = prior_of(backbones)
    unc = analyse(fitres.values, fitres.points, progress=analyse_progress,
                  residual_sd_floor=fitres.data_sd_log, node_facts=facts)
    out = {}
    for b in backbones:
        params = parameter_records(fitres.values, b, fitres.not_identified, fitres.on_bound,
                                   unidentified_note="no run moves it: held at the bundled (published) "
                                                     "calibration's value")
        mine = [(pt, pred) for pt, pred in zip(fitres.points, fitres.predicted) if pt.backbone == b]
        provenance = {
            "kind": "fitted",
            "date": date.today().isoformat(),
            "method": command,
            "source": "the user's own runs (RLinf logs: config.yaml and tensorboard timers)",
            "reference": "prior: the bundled calibration to RL-VLA3's published LIBERO throughput (profiles/"
                         f"{b}.json); data: the runs below",
            "objective": "maximum a posteriori: squared log(predicted / measured) over s = "
                         f"{fitres.data_sd_log:.4f} plus the prior's (log(value / bundled value) / (log-range / "
                         "sqrt 12))^2; stage timers " + STAGES_SYNC_ONLY,
            "parameters": params,
            "node_facts": dict(facts),
            "runs": [r.provenance() for r in runs if r.imported.backbone == b],
            "env_memory_gb_source": mem_src,
            **({"structural": structural[b]} if structural and b in structural else {}),
            "fit": {"points": [{"run": pt.run, "kind": pt.kind, "mode": pt.mode, "gpus": pt.gpus,
                                "measured": round(pt.throughput_env_steps_per_s, 4), "predicted": round(pred, 4),
                                "error_pct": round(error_pct(pred, pt.throughput_env_steps_per_s), 3)}
                               for pt, pred in mine],
                    "evaluations": fitres.evaluations},
        }
        prof = build_profile(get_backbone(b), fitres.values, mem, provenance, node_facts=facts)
        envs_per_gpu, workload = runs_workload([r for r in runs if r.imported.backbone == b])
        prof = replace(prof, name=name or f"{b}_cluster", envs_per_gpu=envs_per_gpu, default_workload=workload,
                       assumptions={**prof.assumptions,
                                    "nodes": f"{facts['gpus_per_node']} GPUs per node (the runs' config); "
                                             f"{facts['cpu_cores_per_node']} CPU cores per node (--cpu-cores-per-node "
                                             "or the plan's)"})
        u = replace(unc[b], **{k: v for k, v in extra.items() if k in Uncertainty.__dataclass_fields__})
        out[b] = attach(prof, u)
        try:  # what predict will load: a fit the profile's own checks refuse is refused here
            Profile.from_dict(json.loads(json.dumps(out[b].to_dict())), "profile")
        except ConfigError as e:
            raise ConfigError(f"{runs[0].folder}", f"the runs ask for a profile vlaperf refuses ({e.field}: "
                                                   f"{e.message}): a stage timer or a run the model cannot "
                                                   "represent; check the runs' timers and configs") from None
    return out


# A parameter that moves more than this factor from the bundled value on this few runs is flagged:
# a run or two identify a combination of parameters weakly, and a large move of one of them may be
# the fit trading it against another, not a fact of the cluster (issue 41).
LARGE_MOVE_FACTOR, FEW_RUNS = 2.0, 2


def moved_text(values: dict[str, float], prior: dict[str, float], not_identified: list[str] | tuple[str, ...],
               runs: int) -> str:
    """The parameters the runs moved (more than 1 %) from the bundled calibration, in words; each
    that moved more than LARGE_MOVE_FACTOR on FEW_RUNS runs or fewer is flagged."""
    out = []
    for n, v in values.items():
        if n in not_identified or abs(math.log(v / prior[n])) <= 0.01:
            continue
        text = f"{n} {prior[n]:.4g} -> {v:.4g}"
        if runs <= FEW_RUNS and abs(math.log(v / prior[n])) > math.log(LARGE_MOVE_FACTOR):
            text += (f" (x{v / prior[n]:.3g} from {runs} run(s): weakly identified, it may trade against another "
                     "parameter; a run at another scale or mode would pin it)")
        out.append(text)
    return "; ".join(out) if out else "nothing (> 1 %)"


def runs_workload(runs: list) -> tuple[int, dict[str, Any]]:
    """(envs per GPU, the other workload fields) the runs ran: the profile's default workload and
    so its calibrated one (perfmodel.extrapolation.calibrated_workload), so that a prediction on
    the profile answers for the user's workload, and warns away from it, not from the published
    one (issue 41). Runs of several workloads give each field its most common value (ties: the
    first run's)."""
    from collections import Counter
    from dataclasses import asdict

    def common(values: list) -> Any:
        counts = Counter(values)
        return max(values, key=lambda v: (counts[v], -values.index(v)))

    dicts = [asdict(r.plan.workload) for r in runs]
    workload = {k: common([d[k] for d in dicts]) for k in dicts[0] if k != "total_num_envs"}
    envs = common([max(1, round(r.plan.workload.total_num_envs / r.plan.cluster.gpus)) for r in runs])
    return envs, workload


def leave_one_run_out(runs: list, facts: dict[str, Any], *, max_evals: int = DEFAULT_MAX_EVALS,
                      data_sd_log: float | None = None) -> list[dict[str, Any]]:
    """Each run predicted by a fit on the others, beside the naive baseline: the nearest other
    run of the same mode and backbone scaled linearly in GPUs (crossval.baselines' ``linear``)."""
    rows = []
    for i, r in enumerate(runs):
        train = [x for j, x in enumerate(runs) if j != i]
        pts = run_points(train, facts)
        if not any(p.backbone == r.imported.backbone for p in pts):
            rows.append({"run": str(r.folder), "note": "no other run of its backbone"})
            continue
        fr = fit_runs([p for p in pts if p.backbone == r.imported.backbone], facts, max_evals=max_evals,
                      data_sd_log=data_sd_log)
        from perfmodel.backbones import get_backbone
        from perfmodel.calibration.calibrate import build_profile, measured_env_memory_gb

        mem, _ = measured_env_memory_gb()
        prof = build_profile(get_backbone(r.imported.backbone), fr.values, mem, {}, node_facts=facts)
        target = run_points([r], facts)[0]
        pred = target.predict_on(prof)
        meas = r.throughput_env_steps_per_s
        same = [x for x in train if x.plan.mode == r.plan.mode and x.imported.backbone == r.imported.backbone]
        linear = None
        if same:
            near = min(same, key=lambda x: (abs(math.log(r.plan.cluster.gpus / x.plan.cluster.gpus)),
                                            x.plan.cluster.gpus))
            lp = near.throughput_env_steps_per_s * r.plan.cluster.gpus / near.plan.cluster.gpus
            linear = {"predicted": lp, "error_pct": error_pct(lp, meas), "from": str(near.folder)}
        rows.append({"run": str(r.folder), "mode": r.plan.mode, "gpus": r.plan.cluster.gpus, "measured": meas,
                     "predicted": pred, "error_pct": error_pct(pred, meas), "linear": linear})
    return rows


def format_loro(rows: list[dict[str, Any]]) -> list[str]:
    out = ["leave-one-run-out (fit on the other runs, predict this one; baseline: nearest other run of the "
           "mode, linear in GPUs):",
           f"  {'run':<40} {'mode':<14} {'gpus':>4} {'measured':>9} {'model':>9} {'error':>7} {'linear':>9} {'error':>7}"]
    model_err, lin_err = [], []
    for r in rows:
        if "note" in r:
            out.append(f"  {r['run']:<40} {r['note']}")
            continue
        lin = r["linear"]
        model_err.append(abs(r["error_pct"]))
        if lin:
            lin_err.append(abs(lin["error_pct"]))
        run = r["run"] if len(r["run"]) <= 40 else "..." + r["run"][-37:]
        out.append(f"  {run:<40} {r['mode']:<14} {r['gpus']:>4} {r['measured']:>9.2f} {r['predicted']:>9.2f} "
                   f"{r['error_pct']:>+6.1f}% " + (f"{lin['predicted']:>9.2f} {lin['error_pct']:>+6.1f}%"
                                                   if lin else f"{'n/a':>9} {'':>7}"))
    if model_err:
        out.append(f"  MAPE: model {np.mean(model_err):.2f}%"
                   + (f", linear baseline {np.mean(lin_err):.2f}% ({len(lin_err)} runs)" if lin_err else
                      ", linear baseline n/a (no other run of the same mode)"))
    return out


def read_runs(paths: list[str], option: str, profile_ref: str | None = None, gpu: str | None = None,
              node: dict[str, Any] | None = None) -> list:
    from perfmodel.rlinf.logs import read_run

    if not paths:
        raise ConfigError(option, "give at least one run folder")
    return [read_run(p, profile_ref=profile_ref, gpu=gpu, option=option, node=node) for p in paths]


def check_node(runs: list, cpu_cores_per_node: int | None) -> dict[str, Any]:
    """One node shape for all the runs (a profile describes one cluster)."""
    if cpu_cores_per_node is not None and not 1 <= cpu_cores_per_node <= 100_000:
        raise ConfigError("--cpu-cores-per-node", f"must be an integer in 1..100000, got {cpu_cores_per_node}")
    facts = [node_facts(r.plan, cpu_cores_per_node) for r in runs]
    for r, f in zip(runs[1:], facts[1:]):
        if f != facts[0]:
            raise ConfigError(f"{r.folder}/config.yaml:cluster", f"node {f} differs from {runs[0].folder}'s "
                                                                 f"{facts[0]}: calibrate one cluster at a time")
    return facts[0]


def calibrate_command(paths: list[str], option: str, *, out_dir: str | None, cpu_cores_per_node: int | None,
                      max_evals: int | None, as_json: bool, quiet: bool, name: str | None, command: str,
                      echo: Callable[..., None], gpu: str | None = None,
                      node: dict[str, Any] | None = None) -> dict[str, Any]:
    """``perfmodel calibrate --from-rlinf-run`` / ``--from-run``: read, fit, write the profile(s),
    print (text or one JSON object). Returns the JSON document."""
    import json
    from pathlib import Path

    from perfmodel.cliutil import check_name, check_outputs_apart, check_writable
    from perfmodel.rlinf.logs import WARMUP_RULE
    from perfmodel.schema.profile import user_profile_dir

    max_evals = DEFAULT_MAX_EVALS if max_evals is None else max_evals
    if not 1 <= max_evals <= 100_000:
        raise ConfigError("--max-evals", f"must be an integer in 1..100000, got {max_evals}")
    if name is not None:
        check_name("--name", name)
    if out_dir is not None and not str(out_dir).strip():
        raise ConfigError("--out-dir", "must be a directory path, got '' (leave the option out for the default)")
    runs = read_runs(paths, option, gpu=gpu, node=node)  # on --gpu's node, with the node options given
    facts = check_node(runs, cpu_cores_per_node)
    if node and "node_ram_gb" in node:
        facts["node_ram_gb"] = node["node_ram_gb"]
    backbones = sorted({r.imported.backbone for r in runs})
    if name is not None and len(backbones) > 1:
        raise ConfigError("--name", f"the runs are of {len(backbones)} backbones ({', '.join(backbones)}): one "
                                    "profile each, named <backbone>_cluster; calibrate them apart to name them")
    out = Path(out_dir) if out_dir else user_profile_dir()
    if out.exists() and not out.is_dir():
        raise ConfigError("--out-dir", f"must be a directory, {out} is a file")
    outputs = [str(out / f"{name or b + '_cluster'}.json") for b in backbones]
    check_outputs_apart({option: [f for r in runs for f in r.inputs]}, {"--out-dir": outputs})
    for path in outputs:
        check_writable("--out-dir", path)
    for r in runs:
        for t in r.truncated if not quiet else ():
            echo(f"warning: {r.folder}: {t}; the steps before it are used", err=True)
    data_sd = step_scatter_log(runs)
    if not quiet:
        echo(f"fitting {len(runs)} run(s) (warm-up dropped: {WARMUP_RULE}) ...", err=True)
    fr = fit_runs(run_points(runs, facts), facts, max_evals=max_evals, data_sd_log=data_sd)
    if not quiet:
        echo("refitting the structural members (growth mechanisms the published points cannot exclude) ...", err=True)
    if not quiet:
        echo("prediction-interval analysis ...", err=True)
    points = run_points(runs, facts)
    structural = runs_structural(points, facts, fr, max_evals=max_evals)
    profiles = build_profiles(fr, runs, facts, command, name, structural=structural)
    written = []
    for b, prof in profiles.items():
        path = out / f"{prof.name}.json"
        prof.save(path)
        written.append(str(path))
    loro = leave_one_run_out(runs, facts, max_evals=max_evals, data_sd_log=data_sd) if len(runs) >= 2 else None
    doc = {"kind": "perfmodel.calibration.runs", "wrote": written, "node": facts, "warmup_rule": WARMUP_RULE,
           "runs": [r.provenance() for r in runs], "evaluations": fr.evaluations, "max_evals": max_evals,
           "values": fr.values, "not_identified": fr.not_identified, "on_bound": fr.on_bound,
           "moved_last_half_pct": finite_or_none(fr.moved_last_half_pct), "converged": fr.converged,
           "points": [{"run": pt.run, "kind": pt.kind, "measured": pt.throughput_env_steps_per_s, "predicted": p,
                       "error_pct": e} for pt, p, e in zip(fr.points, fr.predicted, fr.errors_pct)],
           "leave_one_run_out": loro,
           "structural": {b: {"kept": [f"{m['mechanism']}:{m['end']}" for m in d["members"]],
                              "rejected": [f"{m['mechanism']}:{m['end']}" for m in d["rejected"]],
                              "runs_nodes": d["runs_nodes"]} for b, d in structural.items()}}
    if as_json:
        echo(json.dumps(doc, indent=2))
        return doc
    for path in written:
        echo(f"wrote {path}")
    echo(f"node: {facts['gpus_per_node']} x {facts['gpu']} GPUs, {facts['cpu_cores_per_node']} CPU cores")
    echo(f"{'run':<3} {'path':<44} {'mode':<14} {'gpus':>4} {'steps used':>11} {'env steps/s':>11}")
    for i, r in enumerate(runs):
        p = str(r.folder) if len(str(r.folder)) <= 44 else "..." + str(r.folder)[-41:]
        echo(f"{i:<3} {p:<44} {r.plan.mode:<14} {r.plan.cluster.gpus:>4} "
             f"{f'{r.used[0]}-{r.used[-1]} ({len(r.used)})':>11} {r.throughput_env_steps_per_s:>11.2f}")
    echo(f"{'run':<3} {'timer':<22} {'measured s':>10} {'fitted s':>10} {'error':>7}   (seconds per iteration; "
         "error = fitted / measured - 1)")
    for pt, p in zip(fr.points, fr.predicted):
        steps = pt.plan.workload.env_steps_per_iteration  # a point's rate is env steps per iteration / its time
        measured_s, fitted_s = steps / pt.throughput_env_steps_per_s, steps / p
        timer = "time/step" if pt.kind == "throughput" else f"time/{pt.kind}"
        echo(f"{pt.run:<3} {timer:<22} {measured_s:>10.2f} {fitted_s:>10.2f} {100 * (fitted_s / measured_s - 1):>+6.1f}%")
    prior, _, _ = prior_of(backbones)
    echo("moved from the bundled calibration: " + moved_text(fr.values, prior, fr.not_identified, len(runs)))
    if fr.moved_last_half_pct == math.inf:
        echo(f"the fit spent its whole budget ({max_evals} simulations) on probing before any fit step: "
             "not converged, --max-evals gives it more")
    elif fr.moved_last_half_pct is not None:
        echo(f"the fit spent its whole budget ({max_evals} simulations); its predictions moved "
             f"{fr.moved_last_half_pct:.2f}% over the second half: "
             + ("stable (< 1 %)" if fr.converged else "not converged, --max-evals gives it more"))
    if fr.not_identified:
        echo("held at the bundled values (no run moves them): " + ", ".join(fr.not_identified))
    if fr.on_bound:
        echo("on a bound (a mechanism the model lacks): " + ", ".join(fr.on_bound))
    for b, d in structural.items():
        kept = ", ".join(f"{m['mechanism']}:{m['end']}" for m in d["members"]) or "none"
        gone = ", ".join(f"{m['mechanism']}:{m['end']}" for m in d["rejected"])
        echo(f"structural members ({b}; growth mechanisms the published points cannot exclude): kept {kept}"
             + (f"; your runs rule out {gone}" if gone else "")
             + ("" if len(d["runs_nodes"]) > 1 or gone else
                " (runs on one node count cannot tell them apart: runs on two node counts would)"))
    if loro:
        for line in format_loro(loro):
            echo(line)
    for b, prof in profiles.items():
        echo(f"next: perfmodel predict --profile {prof.name} --mode <mode> --gpus <gpus>   (or plan/sweep --profile "
             f"{prof.name})")
    return doc


def cli_runs(rlinf_runs: tuple[str, ...], executor_runs: tuple[str, ...], more: tuple[str, ...],
             cpu_cores_per_node: int | None = None, name: str | None = None,
             name_option: str = "--name") -> tuple[list[str], str]:
    """The run folders of ``calibrate``'s options (LOGDIRs may follow the option unrepeated)."""
    if not (rlinf_runs or executor_runs or more):
        option = "--cpu-cores-per-node" if cpu_cores_per_node is not None else name_option
        raise ConfigError(option, "only with --from-rlinf-run or --from-run (the published fit writes the "
                                  "bundled profiles' names on their node)")
    if rlinf_runs and executor_runs:
        raise ConfigError("--from-run", "give runs with --from-rlinf-run or with --from-run, not both "
                                        "(an executor run folder works with either)")
    if more and not (rlinf_runs or executor_runs):
        raise ConfigError("calibrate", f"unexpected argument {more[0]!r} (run folders follow --from-rlinf-run "
                                       "or --from-run)")
    if executor_runs:
        return [*executor_runs, *more], "--from-run"
    return [*rlinf_runs, *more], "--from-rlinf-run"
