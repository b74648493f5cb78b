"""Choose the best plan for a GPU budget from a sweep, and explain the choice.

Objectives:
- ``throughput``: the most env steps/s using exactly N GPUs.
- ``cost``: the most env steps per GPU-hour (so per dollar at any fixed price) using at most N
  GPUs: a smaller cluster that scales better can be cheaper per env step.
- ``time``: fewest GPU-hours (so fewest dollars at one GPU-hour price) to reach a target of
  env steps within a deadline, on at most N GPUs: the plans that finish in time, cheapest first.
  The answer is printed as time and money (hours to the target, GPU-hours, dollars).
Ties go to the higher throughput, then to the earlier sweep row.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.modes import MODE_TABLE
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile
from perfmodel.planning.sweep import (RLINF_REFUSES, SweepSpec, best_of, leader, run_sweep, runner_up_margin, simplest_within_model_error,  # noqa: F401
                                      ties, waiting_limited)

from perfmodel.planning import OBJECTIVES  # noqa: E402,F401 - one list, re-exported
TOP_CANDIDATES = 5  # rows of the plan table (the runner-up and colocated are added when below them)


def _budget_ok(r: dict[str, Any], gpus: int, objective: str) -> bool:
    return r["gpus"] == gpus if objective == "throughput" else r["gpus"] <= gpus


def hours_to(r: dict[str, Any], env_steps: float) -> float:
    """Wall-clock hours for a plan to run ``env_steps`` env steps at its predicted throughput, times
    the env steps its mode needs per env step of a synchronous run (``env_steps_factor``, set by
    ``--sample-efficiency``; 1 unless stated)."""
    return env_steps * r.get("env_steps_factor", 1.0) / r["throughput_env_steps_per_s"] / 3600.0


def hours_at_low_end(r: dict[str, Any], env_steps: float) -> float:
    """``hours_to`` at the low end of the plan's 90 % interval (the point where it has none): the
    conservative end by which the time objective judges a deadline (issue 41)."""
    low = r.get("throughput_low")
    return hours_to(r, env_steps) if not low else hours_to({**r, "throughput_env_steps_per_s": low}, env_steps)


def time_and_money(r: dict[str, Any], env_steps: float, price: float | None) -> dict[str, Any]:
    hours = hours_to(r, env_steps)
    out = {"env_steps": env_steps * r.get("env_steps_factor", 1.0), "hours": hours, "gpu_hours": hours * r["gpus"],
           "hours_at_low_end": hours_at_low_end(r, env_steps)}
    out["dollars"] = out["gpu_hours"] * price if price else None
    return out


def objective_key(objective: str):
    if objective == "throughput":
        return lambda r: (r["throughput_env_steps_per_s"], -r["index"])
    if objective in ("cost", "time"):  # fewest GPU-hours per env step = most env steps per GPU-hour
        # (per env step a synchronous run would need: --sample-efficiency's factor, 1 unless stated)
        return lambda r: (r["env_steps_per_gpu_hour"] / r.get("env_steps_factor", 1.0), r["throughput_env_steps_per_s"],
                          -r["index"])
    raise ConfigError("--objective", f"must be one of {', '.join(OBJECTIVES)}; got {objective!r}")


def candidates(rows: list[dict[str, Any]], gpus: int, objective: str,
               target: tuple[float, float] | None = None) -> list[dict[str, Any]]:
    """The feasible rows the objective may choose from, best first. ``target`` (env steps,
    hours) keeps, for the time objective, the rows that reach the env steps in time."""
    ok = [r for r in rows if r["status"] == "ok" and _budget_ok(r, gpus, objective)]
    if objective == "time" and target is not None:
        ok = [r for r in ok if hours_at_low_end(r, target[0]) <= target[1]]  # in time even at the low end
    ranked = sorted(ok, key=objective_key(objective), reverse=True)
    if not ranked:
        return ranked
    # A tie (within TIE_REL on the objective's measures) goes to the earliest row of the sweep,
    # not to the float rounding; the sweep's best per GPU count follows the same rule (best_of).
    lead = best_of(ranked, objective)
    return [lead] + [r for r in ranked if r is not lead]


def check_target(objective: str, target: tuple[float, float] | None) -> None:
    if objective == "time":
        if target is None:
            raise ConfigError("--env-steps", "and --within-hours are required for --objective time")
        steps, hours = target
        if not (steps > 0 and hours > 0 and math.isfinite(steps) and math.isfinite(hours)):
            raise ConfigError("--env-steps", f"and --within-hours must be positive numbers, got {steps} and {hours}")
        # bounds (issue 44: a refusal printed "needs inf h"): 10^15 env steps is 10^6 times the
        # largest published run's; 10^6 h is over a century
        if steps > 1e15:
            raise ConfigError("--env-steps", f"must be at most 1e15, got {steps:g}")
        if hours > 1e6:
            raise ConfigError("--within-hours", f"must be at most 1e6 (hours), got {hours:g}")
    elif target is not None:
        raise ConfigError("--env-steps", "and --within-hours go with --objective time")


def choose(doc: dict[str, Any], gpus: int, objective: str = "throughput",
           target: tuple[float, float] | None = None, profile: Profile | None = None,
           sample_efficiency: dict[str, float] | None = None) -> dict[str, Any]:
    """The best row for ``gpus`` under ``objective``, the runner-up (the best row of another
    mode, or the second-best row when only one mode is feasible) and the explanation. With the
    sweep's ``profile``, also the interval of the best's throughput over the runner-up's
    (``runner_up_ratio``): whether the model can order the two at all. ``sample_efficiency``:
    mode -> env steps it needs per env step of a synchronous run to reach the same success
    (``--sample-efficiency``): the cost and time objectives rank, and time and money to the
    target count, env steps times it."""
    objective_key(objective)
    for r in doc["rows"]:
        f = (sample_efficiency or {}).get(r["mode"])
        if f is not None:
            r["env_steps_factor"] = f
        else:
            r.pop("env_steps_factor", None)
    check_target(objective, target)
    cands = candidates(doc["rows"], gpus, objective, target)
    if not cands and objective == "time":
        ok = [r for r in doc["rows"] if r["status"] == "ok" and r["gpus"] <= gpus]
        if ok:
            fastest = min(ok, key=lambda r: hours_at_low_end(r, target[0]))
            raise ConfigError("--within-hours", f"no plan on at most {gpus} GPUs reaches {target[0]:g} env steps in "
                                                f"{target[1]:g} h at its interval's low end; the fastest there, "
                                                f"{_describe(fastest)}, needs {hours_at_low_end(fastest, target[0]):.1f} "
                                                f"h ({hours_to(fastest, target[0]):.1f} h at its prediction)")
    refused = [r for r in doc["rows"] if r.get("reason_kind") == RLINF_REFUSES and _budget_ok(r, gpus, objective)]
    if not cands and refused:  # name the key to change, as RLinf would
        key, _, why = refused[0]["reason"].partition(": ")
        raise ConfigError(key, f"{why} (no plan {'at' if objective == 'throughput' else 'at or below'} {gpus} GPUs "
                               f"runs in RLinf as written: {len(refused)} refused for their batch split, "
                               f"{sum(r['status'] != 'ok' for r in doc['rows']) - len(refused)} infeasible otherwise)")
    if not cands:
        swept = sorted({r["gpus"] for r in doc["rows"]})
        what = f"at {gpus} GPUs" if objective == "throughput" else f"at or below {gpus} GPUs"
        raise ConfigError("--gpus", f"no feasible plan {what} (swept GPU counts: {swept}; in the whole sweep "
                                    f"{sum(r['status'] != 'ok' for r in doc['rows'])} combinations infeasible)")
    best = cands[0]
    others = [r for r in cands[1:] if r["mode"] != best["mode"]] or cands[1:]
    runner = others[0] if others else None
    colocated = [r for r in cands if r["mode"] == "colocated" and r["gpus"] == best["gpus"]]
    price = doc.get("spec", {}).get("gpu_hour_price")
    goal = None
    if objective == "time":
        goal = {"target_env_steps": target[0], "within_hours": target[1], "gpu_hour_price": price,
                "best": time_and_money(best, target[0], price),
                "runner_up": time_and_money(runner, target[0], price) if runner else None}
    ratio = over_colocated = ratio_unavailable = None
    if profile is not None:
        # the runner-up may be the colocated row itself: each plan once
        compared = list({id(r): r for r in (runner, colocated[0] if colocated and best["mode"] != "colocated" else None)
                         if r}.values())
        spec = doc.get("spec", {})
        ratios = ratios_to(best, compared, profile, spec.get("seed", 0), replications=spec.get("replications", 1))
        if isinstance(ratios, str):
            ratio_unavailable = ratios
        else:
            got = dict(zip(map(id, compared), ratios))
            # the cost and time objectives compare env steps per GPU-hour (plans on different GPU counts)
            ratio = per_objective(got[id(runner)], best, runner, objective) if runner else None
            over_colocated = got.get(id(colocated[0])) if colocated else None
    margin = runner_up_margin(best, runner, objective) if runner else None
    if margin is not None and margin["tie"]:
        # every other mode that ties too (three modes tie where the actor is the bottleneck)
        seen, also = {best["mode"], runner["mode"]}, []
        for r in cands[1:]:
            if r["mode"] not in seen and runner_up_margin(best, r, objective)["tie"]:
                also.append(r["mode"])
            seen.add(r["mode"])
        margin["tied_modes"] = [best["mode"], runner["mode"], *also]
    explanation = explain(best, runner, colocated[0] if colocated else None, objective, gpus, price, len(cands),
                          margin, ratio, over_colocated)
    top = max(cands, key=objective_key(objective))
    m = runner_up_margin(best, top, objective) if top is not best and top["mode"] != best["mode"] else None
    if m is not None and not m["tie"] and m["model_error_pct"] is not None:
        explanation += (f" {best['mode']} is chosen over {top['mode']}, which predicts {m['gap_pct']:.1f}% more "
                        f"{m['measure']}, less than the model's residual error ({m['model_error_pct']:.1f}%): the "
                        "model cannot tell them apart, and the simpler mode changes less.")
    if goal is not None:
        explanation = _time_sentence(goal, best, runner) + " " + explanation
    not_run: dict[str, int] = {}
    for r in doc["rows"]:
        if r["status"] != "ok" and _budget_ok(r, gpus, objective):
            not_run[r.get("reason_kind", "other")] = not_run.get(r.get("reason_kind", "other"), 0) + 1
    if not_run:  # what the user could change to get more candidates
        explanation += (f" Not feasible: {sum(not_run.values())} more combination(s) ("
                        + "; ".join(f"{n} {k}" for k, n in sorted(not_run.items(), key=lambda kv: -kv[1]))
                        + "); perfmodel sweep --show-infeasible gives each one's reason.")
    return {
        "goal": goal,
        "objective": objective,
        "top_candidates": top_candidates(cands, runner, colocated[0] if colocated else None, objective),
        "infeasible_reasons": dict(sorted(not_run.items(), key=lambda kv: -kv[1])),
        "gpus_budget": gpus,
        "best": best,
        "runner_up": runner,
        "runner_up_margin": margin,
        "runner_up_ratio": ratio,
        "colocated_ratio": over_colocated,
        "ratio_unavailable": ratio_unavailable,
        "colocated": colocated[0] if colocated else None,
        "candidates": len(cands),
        "swept_gpus": sorted({r["gpus"] for r in doc["rows"]}),
        "infeasible": sum(r["status"] != "ok" for r in doc["rows"]
                          if (r["gpus"] == gpus if objective == "throughput" else r["gpus"] <= gpus)),
        "explanation": explanation,
        "searched": {k: doc.get("spec", {}).get(k) for k in SEARCHED},
    }


# What a choice records of the space it chose from (the sweep's spec): plan and sweep search the
# same space for the same inputs (issue 41), which tests/test_planner.py checks on these fields.
SEARCHED = ("modes", "ratios", "pipeline_stages", "b_max", "t_max_s", "envs_per_gpu", "micro_batch_sizes",
            "staleness", "max_staleness", "scale_global_batch", "node", "gpu", "profile_ref")


def top_candidates(cands: list[dict[str, Any]], runner: dict[str, Any] | None, colocated: dict[str, Any] | None,
                   objective: str) -> list[dict[str, Any]]:
    """The leading candidates for the plan table: the first TOP_CANDIDATES, then the runner-up
    and colocated if they rank below, each with its ``rank`` among the candidates, its
    ``max_staleness`` and ``tie_with_best`` (the same predicted measure as the best,
    ``runner_up_margin``); without the full prediction and plan."""
    rank = {id(r): i + 1 for i, r in enumerate(cands)}
    shown = cands[:TOP_CANDIDATES] + [r for r in (runner, colocated)
                                      if r is not None and rank[id(r)] > TOP_CANDIDATES]
    out = []
    for r in list({id(r): r for r in shown}.values()):
        tie = r is not cands[0] and runner_up_margin(cands[0], r, objective)["tie"]
        out.append({"rank": rank[id(r)], **{k: v for k, v in r.items() if k not in ("prediction", "plan")},
                    "max_staleness": (r.get("plan") or {}).get("max_staleness"), "tie_with_best": tie})
    return out


def _money(t: dict[str, Any]) -> str:
    s = f"{t['hours']:.2f} h, {t['gpu_hours']:.1f} GPU-hours"
    return s + (f", ${t['dollars']:,.2f}" if t["dollars"] is not None else "")


def _time_sentence(goal: dict[str, Any], best: dict[str, Any], runner: dict[str, Any] | None) -> str:
    s = (f"To reach {goal['target_env_steps']:g} env steps within {goal['within_hours']:g} h: {_describe(best)} takes "
         f"{_money(goal['best'])} (fewest GPU-hours of the plans that finish in time"
         + (", so fewest dollars at one price" if goal["gpu_hour_price"] else "") + ").")
    if runner is not None and goal["runner_up"] is not None:
        s += f" Runner-up {_describe(runner)}: {_money(goal['runner_up'])}."
    return s


def _describe(r: dict[str, Any]) -> str:
    s = f"{r['mode']} on {r['gpus']} GPUs"
    if r["allocation_ratio"]:
        s += f" at {r['allocation_ratio']} (rollout {r['rollout_gpus']} : actor {r['actor_gpus']})"
    if r["pipeline_stage_num"] != 1:
        s += f", {r['pipeline_stage_num']} pipeline stages"
    if MODE_TABLE[r["mode"]].dynamic_batching:  # b_max / t_max are dynamic batching's knobs
        s += f", b_max {r['b_max'] if r['b_max'] is not None else 'one worker'}, t_max {r['t_max_s']:g} s"
    return s


def _thr(r: dict[str, Any]) -> str:
    s = f"{r['throughput_env_steps_per_s']:.1f} env steps/s"
    beyond = [what for what, flag in (
        ("extrapolated beyond the calibrated scale", r.get("beyond_calibrated_scale", r.get("extrapolation"))),
        (f"on a GPU type not calibrated ({(r.get('plan') or {}).get('cluster', {}).get('gpu', '?')})",
         r.get("beyond_calibrated_gpu_type")),
        ("backbone not calibrated: docs/backbones.md", r.get("backbone_not_calibrated"))) if flag]
    if r.get("throughput_low") is not None:
        s += f" (90% interval {r['throughput_low']:.1f}..{r['throughput_high']:.1f}" + "".join(
            f", {b}" for b in beyond) + ")"
    elif beyond:
        s += f" ({', '.join(beyond)})"
    if r.get("throughput_ci95"):
        lo, hi = r["throughput_ci95"]
        s += f" (95% CI {lo:.1f}..{hi:.1f})"
    return s


# Why the simulator ties these two modes (docs/metrics.md: when streamer beats rollout_async).
STREAMING_TIE = ("streaming training only lets the trainer start on a global batch before all of it has "
                 "arrived, which gains nothing when the samples arrive in whole global batches (every env "
                 "group ends its episodes together) or when the trainer has no idle time to fill; the "
                 "published 8- and 16-GPU runs show streamer 0-4% faster than rollout_async, which this model "
                 "does not reproduce. Stock RLinf (0.3.0) streams training only in its synchronous runner "
                 "(runner.use_training_pipeline), so rollout_async with streaming needs the RL-VLA3 fork.")


# A sweep row re-simulated on the profile that is to give its ratio intervals must give the
# sweep's number (a deterministic profile, or the first replication of a random one when the sweep
# ran one); else the profile changed since the sweep. With several replications of a random
# profile the sweep's number is their mean: one replication must fall within this many of its
# 95 % confidence half-widths x sqrt(replications) (about 3 standard deviations of one).
SAME_PROFILE_REL = 1e-6
SAME_PROFILE_SPREAD = 1.5


def ratios_to(best: dict[str, Any], others: list[dict[str, Any]], profile: Profile,
              seed: int = 0, replications: int = 1) -> list[dict[str, Any] | None] | str:
    """The 90 % interval of best / other throughput on ``profile`` for each of ``others``
    (uncertainty.ratio_intervals: what moves both plans alike cancels; the best's changes
    simulated once), from the first replication of each as the point intervals are; None where
    the profile gives no interval. The rows' own throughputs must be what the profile gives them
    now (a sweep file read back may be older than the profile), else why not (a string)."""
    from perfmodel.calibration.uncertainty import ratio_intervals
    from perfmodel.simulate import simulated_throughput

    def run(pl: Plan, pr: Profile) -> float:
        return simulated_throughput(pl, pr, seed=seed if pr.variability.any else None)

    a = Plan.from_dict(best["plan"], "plan")
    plans = [Plan.from_dict(o["plan"], "plan") for o in others]
    thr = [run(p, profile) for p in [a, *plans]]
    for row, t in zip([best, *others], thr):
        mean, tol = row["throughput_env_steps_per_s"], SAME_PROFILE_REL * row["throughput_env_steps_per_s"]
        ci = row.get("throughput_ci95")
        if profile.variability.any and replications > 1 and ci:
            tol += SAME_PROFILE_SPREAD * (ci[1] - ci[0]) / 2 * math.sqrt(replications)
        if abs(t - mean) > tol:
            return (f"profile {profile.name} now gives {row['mode']} on {row['gpus']} GPUs {t:.2f} env steps/s, the "
                    f"sweep {mean:.2f}: the profile or the model changed since the sweep, so the sweep's numbers, and "
                    "the choice made from them, may be out of date (sweep again)")
    got = ratio_intervals(a, thr[0], list(zip(plans, thr[1:])), profile, run)
    return [None if iv is None else {**iv, "measure": "throughput"} for iv, _ in got]


def per_objective(iv: dict[str, Any] | None, best: dict[str, Any], other: dict[str, Any],
                  objective: str) -> dict[str, Any] | None:
    """A throughput ratio interval as the objective measures it: for cost and time, env steps per
    GPU-hour (the throughput ratio x other's GPUs / best's, an exact factor)."""
    if iv is None or objective == "throughput":
        return iv
    f = other["gpus"] / best["gpus"]
    out = {**iv, "ratio": iv["ratio"] * f, "low": iv["low"] * f, "high": iv["high"] * f,
           "measure": "env steps per GPU-hour"}
    if out["resolved"] is not None:
        out["resolved"] = bool(out["low"] > 1.0 or out["high"] < 1.0)
    return out


def explain(best: dict[str, Any], runner: dict[str, Any] | None, colocated: dict[str, Any] | None,
            objective: str, gpus: int, price: float | None, n_candidates: int,
            margin: dict[str, Any] | None = None, ratio: dict[str, Any] | None = None,
            over_colocated: dict[str, Any] | None = None) -> str:
    """The choice in words; ``margin`` (``runner_up_margin``) is given whenever ``runner`` is."""
    pred = best["prediction"]
    res = pred["utilization"]["resources"]
    busiest = max(res, key=res.get)
    stages = {k: v for k, v in pred["stage_time_s"].items() if v > 0}
    top_stage = max(stages, key=stages.get) if stages else "-"
    by = {"throughput": "throughput", "cost": "env steps per GPU-hour (cost)",
          "time": "GPU-hours to the target within the deadline (time)"}[objective]
    parts = [f"Best plan for {'exactly' if objective == 'throughput' else 'at most'} {gpus} GPUs by "
             f"{by}, out of "
             f"{n_candidates} feasible candidates: {_describe(best)}"
             + f", predicted {_thr(best)}, {best['env_steps_per_gpu_hour']:.0f} env steps per GPU-hour"
             + (f" ({best['env_steps_per_dollar']:.0f} per dollar at ${price:g}/GPU-hour)" if price else "") + "."]
    parts.append(f"The bottleneck is {best['bottleneck']} (by the analytic bound, "
                 f"{best['bound_env_steps_per_s']:.1f} env steps/s); in the simulation the busiest resource is "
                 f"{busiest} at {100 * res[busiest]:.0f}% utilization "
                 f"({', '.join(f'{k} {100 * v:.0f}%' for k, v in res.items() if k != busiest)}), and the "
                 f"longest stage per iteration is {top_stage} ({stages.get(top_stage, 0):.1f} s per unit).")
    below = 1 - best["throughput_env_steps_per_s"] / best["bound_env_steps_per_s"]
    if waiting_limited(best):
        parts.append(f"The simulation is {100 * below:.0f}% below that bound with no resource saturated: waiting "
                     "(each chunk step's inference round trip, lock-step barriers, the synchronous hand-offs), not "
                     "capacity, limits this plan; more envs per GPU (if they fit) would fill the gaps.")
    if runner is not None:
        rel = 100 * (runner["throughput_env_steps_per_s"] / best["throughput_env_steps_per_s"] - 1)
        cost_rel = 100 * (runner["env_steps_per_gpu_hour"] / best["env_steps_per_gpu_hour"] - 1)
        parts.append(f"The runner-up, {_describe(runner)}"
                     + f", would give {_thr(runner)} ({rel:+.1f}% throughput, {cost_rel:+.1f}% env steps per "
                     f"GPU-hour), bottleneck {runner['bottleneck']}{_changed(runner, best)}.")
        if margin["tie"]:
            tied = margin.get("tied_modes") or [best["mode"], runner["mode"]]
            who = "The two tie" if len(tied) == 2 else f"{', '.join(tied[:-1])} and {tied[-1]} tie"
            parts.append(f"{who} (the same predicted {margin['measure']}), so which comes first is not a prediction"
                         + (f": {STREAMING_TIE}" if set(tied) == {"rollout_async", "streamer"} else
                            ": the actor is the bottleneck, so neither dynamic batching nor streaming adds anything "
                            "there." if set(tied) >= {"train_async", "rollout_async"} else "."))
        elif ratio is not None:
            lo, hi = 100 * (ratio["low"] - 1), 100 * (ratio["high"] - 1)
            verdict = ("the measured profile's spread only, without the model's own error, so it cannot say "
                       "whether the model orders the two" if ratio["resolved"] is None else
                       "the model orders the two" if ratio["resolved"] else
                       "the interval includes 0, so the model cannot order the two")
            parts.append(f"Best over runner-up: {100 * (ratio['ratio'] - 1):+.1f}% {ratio['measure']} "
                         f"({100 * ratio['coverage']:.0f}% interval {lo:+.1f}%..{hi:+.1f}%, what moves both alike "
                         f"cancelled): {verdict}.")
        elif not margin["resolvable"]:
            parts.append(f"The model cannot tell the two apart: they differ by less than its residual error at the "
                         f"calibrated points ({margin['model_error_pct']:.1f}%).")
    else:
        parts.append("There is no runner-up: no other combination was feasible.")
    if colocated is not None and best["mode"] != "colocated":
        parts.append(f"Colocated on the same {best['gpus']} GPUs would give {_thr(colocated)}, so this plan is "
                     f"{best['gain_over_colocated_pct']:+.1f}% over colocated"
                     + (f" ({100 * over_colocated['coverage']:.0f}% interval {100 * (over_colocated['low'] - 1):+.1f}%.."
                        f"{100 * (over_colocated['high'] - 1):+.1f}%"
                        + (", measurement spread only" if over_colocated["resolved"] is None else "") + ")"
                        if over_colocated else "") + _changed(colocated, best) + "."
                     + (" That interval includes 0: the model cannot order this plan and colocated."
                        if over_colocated and over_colocated["resolved"] is False else ""))
    n = structural_note(best)
    if n:
        parts.append(f"Its interval: {n}.")
    return " ".join(parts)


def algorithm_changes(before: Plan, after: Plan) -> list[str]:
    """What ``after`` changes in the RL algorithm of ``before`` (what may change the env steps to a
    success rate, not only their speed): the global batch, synchronous or not and the staleness
    bound, the epochs. Empty when the two train alike."""
    out = []
    wb, wa = before.workload, after.workload
    was, now = before.mechanisms.async_training, after.mechanisms.async_training
    if was != now:
        out.append(f"synchronous -> asynchronous (staleness_threshold {after.max_staleness})" if now
                   else f"asynchronous (staleness_threshold {before.max_staleness}) -> synchronous")
    elif now and before.max_staleness != after.max_staleness:
        out.append(f"staleness_threshold {before.max_staleness} -> {after.max_staleness}")
    for key in ("global_batch_size", "rollout_epoch", "update_epoch"):
        a, b = getattr(wb, key), getattr(wa, key)
        if a != b:
            out.append(f"{key} {a} -> {b}")
    return out


def _changed(other: dict[str, Any], best: dict[str, Any]) -> str:
    """A gain sentence's tail naming what the best plan changes in the algorithm of ``other``."""
    if not (other.get("plan") and best.get("plan")):
        return ""
    changes = algorithm_changes(Plan.from_dict(other["plan"], "plan"), Plan.from_dict(best["plan"], "plan"))
    return f"; algorithm changed: {', '.join(changes)}" if changes else ""


def structural_note(r: dict[str, Any]) -> str | None:
    """What the calibration cannot tell at a row's plan (perfmodel.calibration.structural: the
    alternative that drives the width of its interval), once per explanation, not per number."""
    if not r.get("interval_structural"):
        return None
    from perfmodel.calibration.structural import note

    return note({"structural": r["interval_structural"]})


def planning_spec(base: SweepSpec, gpus: int, objective: str) -> SweepSpec:
    """The sweep the planner runs: exactly ``gpus`` for throughput; for cost, the default GPU
    counts below ``gpus`` too (or the given ones, capped at ``gpus``)."""
    if objective == "throughput":
        counts = (gpus,)
    else:
        counts = tuple(sorted({g for g in base.gpus if g <= gpus} | {gpus}))
    return replace(base, gpus=counts)


def plan_best(base: SweepSpec, profile: Profile, gpus: int, objective: str = "throughput", *,
              jobs: int | None = None, progress=None, target: tuple[float, float] | None = None,
              sample_efficiency: dict[str, float] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Sweep what ``gpus`` and ``objective`` allow and choose; returns (choice, sweep doc)."""
    if gpus < 1:
        raise ConfigError("--gpus", f"must be an integer >= 1, got {gpus}")
    objective_key(objective)
    check_target(objective, target)
    doc = run_sweep(planning_spec(base, gpus, objective), profile, jobs=jobs, progress=progress)
    return choose(doc, gpus, objective, target, profile=profile if base.intervals else None,
                  sample_efficiency=sample_efficiency), doc


def chosen_plan(choice: dict[str, Any]) -> Plan:
    """The chosen row's plan, validated as ``perfmodel predict --plan`` and ``executor run`` read it."""
    return Plan.from_dict(choice["best"]["plan"], "plan")


def choice_summary(choice: dict[str, Any]) -> dict[str, Any]:
    """A JSON-ready summary of a choice (without the full sweep rows)."""
    # Scaling efficiency compares GPU counts of the sweep: with one count it is 1 by definition.
    drop = {"plan"} | ({"scaling_efficiency", "scaling_baseline_gpus"}
                       if len(choice.get("swept_gpus") or ()) == 1 else set())

    def slim(r):
        if r is None:
            return None
        return {k: v for k, v in r.items() if k not in drop}

    return {"kind": "perfmodel.plan_choice", "objective": choice["objective"], "gpus_budget": choice["gpus_budget"],
            "plan": choice["best"]["plan"], "best": slim(choice["best"]), "runner_up": slim(choice["runner_up"]),
            "runner_up_margin": choice.get("runner_up_margin"),
            "runner_up_ratio": choice.get("runner_up_ratio"), "colocated_ratio": choice.get("colocated_ratio"),
            "ratio_unavailable": choice.get("ratio_unavailable"),
            "colocated": slim(choice["colocated"]), "candidates": choice["candidates"], "goal": choice.get("goal"),
            "infeasible": choice["infeasible"], "explanation": choice["explanation"],
            "top_candidates": [{k: v for k, v in r.items() if k not in drop} for r in choice.get("top_candidates") or []],
            "infeasible_reasons": choice.get("infeasible_reasons") or {},
            "searched": choice.get("searched")}
