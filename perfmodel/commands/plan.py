"""``perfmodel plan``: choose the best plan for a GPU budget (perfmodel.planning.choice), from a
sweep run now or a saved one; ``plan`` is what the command line and a Python caller
(perfmodel.api) run, ``format_plan`` the text answer (the leading candidates as a table, then a
few lines on why the first wins and what it needs), ``emit_rlinf`` the RLinf fragment."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Collection

from perfmodel.commands.common import Say, fail, node_options, to_stderr
from perfmodel.commands.planning import (check_common, load_profile_of, portable_plan, profile_ref, rlinf_base,
                                         sweep_profile, sweep_rows, sweep_spec)
from perfmodel.schema.modes import MODE_TABLE
from perfmodel.schema.node import NODE_FIELDS
from perfmodel.planning.choice import algorithm_changes
from perfmodel.schema.plan import DEFAULT_T_MAX_S, MAX_GPUS, Plan


@dataclass
class PlanAnswer:
    """``choice``: planning.choice.choose's result (with the sweep rows it compared);
    ``summary``: what ``perfmodel plan --json`` prints and ``--details`` writes; ``plan``: the
    chosen plan (what ``--out`` writes, runnable by ``executor run``)."""

    choice: dict[str, Any]
    summary: dict[str, Any]
    plan: Plan


def plan(gpus: int | None = None, *, backbone: str | None = None, profile_path: str | None = None,
         modes: str | None = None, ratios: str | None = None, pipeline_stages: str | None = None,
         b_max: str | None = None, t_max: str | None = None, staleness: int | str | None = None,
         price: float | None = None, replications: int = 1, seed: int = 0, jobs: int | None = None,
         rlinf_config: str | None = None, gpu: str | None = None, scale_global_batch: bool = False,
         objective: str = "throughput", env_steps: float | None = None, within_hours: float | None = None,
         emit: str | None = None, sweep_path: str | None = None, out: str | None = None,
         details: str | None = None, given_options: Collection[str] = (),
         progress: Callable[[int, int], None] | None = None, say: Say | None = None,
         cpu_cores_per_node: int | None = None, gpus_per_node: int | None = None,
         nic_gbps: float | None = None, node_ram_gb: float | None = None, envs_per_gpu: str | None = None,
         micro_batch_sizes: str | None = None, sample_efficiency: Collection[str] | dict[str, float] = ()
         ) -> PlanAnswer:
    """Choose the best plan (``perfmodel plan``'s options, by name; the list options are
    comma-separated text as on the command line). ``given_options``: the parameters the caller
    set, for ``--sweep`` (an option left at its default never contradicts the sweep's).
    ``say`` receives the stderr lines (default: stderr)."""
    from perfmodel.cliutil import check_outputs_apart, check_writable
    from perfmodel.planning.choice import OBJECTIVES, check_target, choice_summary, choose, chosen_plan, plan_best
    from perfmodel.schema.jsonio import write_json_atomic

    say = say or to_stderr
    if emit is not None and emit != "rlinf":
        fail("--emit", f"must be rlinf, got {emit!r}")
    target = None
    if env_steps is not None or within_hours is not None:
        if env_steps is None or within_hours is None:
            fail("--env-steps", "and --within-hours go together (the time objective)")
        for option, v in (("--env-steps", env_steps), ("--within-hours", within_hours)):
            if not (v > 0 and math.isfinite(v)):
                fail(option, f"must be a finite number > 0, got {v}")
        target = (env_steps, within_hours)
    if objective in OBJECTIVES:
        check_target(objective, target)
    efficiency = parse_sample_efficiency(sample_efficiency)
    if efficiency and objective == "throughput":
        say("note: --sample-efficiency: the throughput objective ranks env steps/s as they are; the factors act "
            "on the cost and time objectives (env steps per GPU-hour, time and money to --env-steps)")

    if sweep_path and rlinf_config:  # the sweep fixed the workload and cluster; the config would not apply
        fail("--rlinf-config", f"contradicts --sweep {sweep_path}: a saved sweep's plans are chosen from as they are; "
                               "leave it out, or sweep the config (perfmodel sweep --rlinf-config)")
    if sweep_path and gpu:
        fail("--gpu", f"contradicts --sweep {sweep_path}: its plans were predicted on their own accelerator; "
                      "leave it out, or sweep again with --gpu")
    node = node_options(cpu_cores_per_node, gpus_per_node, nic_gbps, node_ram_gb)
    for option, value in (("--envs-per-gpu", envs_per_gpu), ("--micro-batch-sizes", micro_batch_sizes)):
        if sweep_path and value is not None:
            fail(option, f"contradicts --sweep {sweep_path}: a saved sweep is chosen from as it is; sweep again with it")
    if sweep_path and node:
        fail(next(iter(NODE_FIELDS[f][0] for f in node)), f"contradicts --sweep {sweep_path}: its plans were predicted "
                                                           "on their own node; leave it out, or sweep again with it")
    ref, base, pipeline_stages, imported = rlinf_base(rlinf_config, backbone, profile_path, gpu, pipeline_stages,
                                                      modes, say, node)
    if gpus is None:
        if imported is None:
            fail("--gpus", "is required (an integer >= 1) unless --rlinf-config gives it")
        gpus = imported.plan.cluster.gpus
    if not 1 <= gpus <= MAX_GPUS:
        fail("--gpus", f"must be an integer in 1..{MAX_GPUS}, got {gpus}")
    check_common(jobs, price, replications, seed)
    check_outputs_apart({"--sweep": sweep_path, "--profile": profile_path, "--rlinf-config": rlinf_config},
                        {"--out": out, "--details": details})
    check_writable("--out", out)
    check_writable("--details", details)
    if sweep_path:
        doc = sweep_rows(sweep_path, backbone, profile_path, modes, ratios, pipeline_stages, b_max, t_max,
                         staleness, replications, seed, scale_global_batch, given_options)
        from perfmodel.planning.sweep import MODEL_REVISION

        revision = doc.get("model_revision", 1)
        if not isinstance(revision, int) or revision < MODEL_REVISION:
            say(f"note: --sweep {sweep_path} was written by an older model (revision {revision}, now "
                f"{MODEL_REVISION}): its numbers, and the choice made from them, may differ from a sweep made "
                "today (sweep again)")
        if price is not None:
            for r in doc["rows"]:
                if r["status"] == "ok":
                    r["env_steps_per_dollar"] = r["env_steps_per_gpu_hour"] / price
            doc["spec"]["gpu_hour_price"] = price
        profile, why = sweep_profile(doc, sweep_path)
        choice = choose(doc, gpus, objective, target, profile=profile, sample_efficiency=efficiency)
        choice["ratio_unavailable"] = choice.get("ratio_unavailable") or why
    else:
        spec = sweep_spec(ref or profile_ref(backbone, profile_path), modes, None, ratios, pipeline_stages, b_max,
                          t_max, price, replications, seed, staleness, base, gpu, scale_global_batch, node,
                          envs_per_gpu, micro_batch_sizes)
        _, profile = load_profile_of(None, ref) if ref else load_profile_of(backbone, profile_path)
        choice, doc = plan_best(spec, profile, gpus, objective, jobs=jobs, progress=progress, target=target,
                                sample_efficiency=efficiency)
    chosen = chosen_plan(choice)
    summary = choice_summary(choice)
    if efficiency:
        summary["sample_efficiency"] = efficiency
    if imported is not None:  # what each knob the search moved gains over the config's own value
        written = as_written(spec, profile, imported.plan, gpus)
        summary["config_gains"] = config_gains(choice["best"], doc["rows"], imported.plan, written)
        change = algorithm_change(imported.plan, chosen)
        if change:
            summary["algorithm_change"] = change
    summary["algorithm_changes"] = {  # named on each line that reports a gain (plan_lines)
        name: algorithm_changes(Plan.from_dict(r["plan"], "plan"), chosen)
        for name, r in (("over_runner_up", choice.get("runner_up")), ("over_colocated", choice.get("colocated")))
        if r is not None and r.get("plan")}
    repair_note = None
    if emit == "rlinf":  # emit only what RLinf runs: a micro-batch that splits the global batch whole
        from perfmodel.costs import rlinf_batch_repair

        repaired, repair_note = rlinf_batch_repair(chosen)
        if repaired is None:
            key, _, why = (repair_note or "").partition(": ")
            fail(key, f"{why} (the chosen plan, {chosen.mode} {chosen.allocation_ratio or ''} on {chosen.cluster.gpus} "
                      "GPUs, cannot be emitted as it is)")
        chosen = repaired
    try:
        if out:
            write_json_atomic(out, portable_plan(chosen.to_dict(), out))
        if details:
            write_json_atomic(details, summary)
    except OSError as e:
        fail("--out", f"must be a writable path; {e.strerror}: {e.filename}")
    if choice.get("ratio_unavailable"):  # on stderr whatever stdout carries (text, JSON, YAML)
        say(f"note: {choice['ratio_unavailable']}")
    if repair_note:
        say(f"note: emitted: {repair_note}")
    if choice["best"].get("note"):  # a repair the sweep made (envs rounded to divide over the workers)
        say(f"note: chosen plan: {choice['best']['note']}")
    if summary.get("algorithm_change"):
        say(f"note: algorithm change: {summary['algorithm_change']}")
    from perfmodel.costs import batch_split_warning

    split = batch_split_warning(chosen)  # from the plan itself: a sweep file may predate the warning
    for w in [w for w in (choice["best"].get("prediction") or {}).get("warnings") or []
              if not w.startswith("workload.global_batch_size:")] + ([split] if split and emit != "rlinf" else []):
        say(f"warning: chosen plan: {w}")  # (--emit rlinf repairs the split instead, said above)
    return PlanAnswer(choice, summary, chosen)


KNOBS = (("envs_per_gpu", "envs per GPU"), ("micro_batch_size", "micro_batch_size"),
         ("max_staleness", "staleness bound"))


def _knob_value(r: dict[str, Any], knob: str) -> Any:
    """A row's value of a searched knob, read from its plan (the same whether or not it was an axis)."""
    p = r["plan"]
    if knob == "envs_per_gpu":
        return p["workload"]["total_num_envs"] // p["cluster"]["gpus"]
    if knob == "micro_batch_size":  # as asked: a micro-batch lowered for RLinf's split is not a knob moved
        return r.get("micro_batch_asked") or p["workload"]["micro_batch_size"]
    return p.get("max_staleness") if MODE_TABLE[r["mode"]].async_training else None


def as_written(spec: Any, profile: Any, config: Plan, gpus: int) -> dict[str, Any]:
    """The sweep row of the user's config as written on ``gpus`` GPUs: its own mode, split, knobs,
    envs per GPU and global batch (never --scale-global-batch's, never the search's), as RLinf
    runs it (planning.sweep.runnable_in_rlinf: a micro-batch lowered, or refused)."""
    from dataclasses import replace

    from perfmodel.planning.sweep import Combo, evaluate

    m = MODE_TABLE[config.mode]
    combo = Combo(-1, config.mode, gpus, config.allocation_ratio if m.disaggregated else None,
                  config.pipeline_stage_num, config.b_max if m.dynamic_batching else None,
                  config.t_max_s if m.dynamic_batching else DEFAULT_T_MAX_S, None, None,
                  config.max_staleness if m.async_training else None,
                  config.colocated_rollout_on(gpus))
    own = replace(spec, scale_global_batch=False, intervals=False, max_staleness=None, envs_per_gpu=(None,),
                  micro_batch_sizes=(None,), staleness=(None,), gpus=(gpus,))
    return evaluate(own, profile, combo)


def config_gains(best: dict[str, Any], rows: list[dict[str, Any]], config: Plan,
                 written: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the chosen plan gains over the user's config: per knob the search moved away from the
    config's value, the chosen row against the same row with that knob at the config's value; and
    the chosen plan against ``written``, the config as written on these GPUs (``as_written``),
    with the changes to the algorithm between the two."""
    own = {"envs_per_gpu": config.workload.total_num_envs // config.cluster.gpus,
           "micro_batch_size": config.workload.micro_batch_size,
           "max_staleness": config.max_staleness if config.mechanisms.async_training else None}
    ok = [r for r in rows if r["status"] == "ok" and r["gpus"] == best["gpus"]]
    same = ("mode", "allocation_ratio", "pipeline_stage_num", "b_max", "t_max_s")
    out: dict[str, Any] = {"knobs": []}
    thr = best["throughput_env_steps_per_s"]
    for knob, name in KNOBS:
        mine = _knob_value(best, knob)
        if mine is None or own[knob] is None or mine == own[knob]:
            continue
        twin = next((r for r in ok if all(r[k] == best[k] for k in same) and _knob_value(r, knob) == own[knob]
                     and all(_knob_value(r, k) == _knob_value(best, k) for k, _ in KNOBS if k != knob)), None)
        out["knobs"].append({"knob": knob, "name": name, "config": own[knob], "chosen": mine,
                             "gain_pct": None if twin is None else 100 * (thr / twin["throughput_env_steps_per_s"] - 1)})
    chosen = Plan.from_dict(best["plan"], "plan")
    out["changes"] = algorithm_changes(config, chosen)
    if written is None:
        return out
    if written["status"] != "ok":
        out["over_config"] = {"mode": config.mode, "allocation_ratio": config.allocation_ratio,
                              "not_run": written["reason"]}
    elif written["plan"] != best["plan"]:
        out["over_config"] = {"mode": config.mode, "allocation_ratio": config.allocation_ratio,
                              "throughput_env_steps_per_s": written["throughput_env_steps_per_s"],
                              "gain_pct": 100 * (thr / written["throughput_env_steps_per_s"] - 1),
                              "changes": algorithm_changes(Plan.from_dict(written["plan"], "plan"), chosen)}
    return out


def _with_changes(changes: list[str] | None) -> str:
    """A gain line's tail naming the algorithm changes behind the gain."""
    return f"; algorithm changed: {', '.join(changes)}" if changes else ""


def parse_sample_efficiency(items: Collection[str] | dict[str, float]) -> dict[str, float]:
    """``--sample-efficiency MODE=FACTOR`` (repeatable): the env steps a mode needs per env step
    of a synchronous run to reach the same success (stated by the user: the model predicts speed,
    not learning), a finite number > 0."""
    if isinstance(items, dict):
        items = [f"{m}={f}" for m, f in items.items()]
    out: dict[str, float] = {}
    for item in items:
        mode, sep, text = str(item).partition("=")
        mode = mode.strip()
        if not sep or mode not in MODE_TABLE:
            fail("--sample-efficiency", f"must be MODE=FACTOR with MODE one of {', '.join(MODE_TABLE)}; got {item!r}")
        try:
            factor = float(text)
        except ValueError:
            factor = float("nan")
        if not (factor > 0 and math.isfinite(factor)):
            fail("--sample-efficiency", f"{mode}: FACTOR must be a finite number > 0 (env steps per synchronous env "
                                        f"step, e.g. 1.2), got {text!r}")
        out[mode] = factor
    return out


def algorithm_change(config: Plan, chosen: Plan) -> str | None:
    """What the chosen plan changes in the RL algorithm of the user's config (synchronous PPO or
    GRPO -> decoupled with a staleness bound, or another bound; the global batch, the epochs), or
    None."""
    was, now = config.mechanisms.async_training, chosen.mechanisms.async_training
    algo = chosen.workload.algorithm.upper()
    loss = "decoupled_actor_critic" if chosen.workload.algorithm == "ppo" else "decoupled_actor"
    parts = []
    if now and not was:
        parts.append(f"your config trains synchronous {algo}; this plan trains asynchronously ({loss}, "
                     f"staleness_threshold {chosen.max_staleness}: rollouts may use a policy up to "
                     f"{chosen.max_staleness} version(s) old)")
    elif was and not now:
        parts.append(f"your config trains asynchronously (staleness {config.max_staleness}); this plan trains "
                     f"synchronous {algo}")
    elif now and was and chosen.max_staleness != config.max_staleness:
        parts.append(f"staleness_threshold {config.max_staleness} -> {chosen.max_staleness}")
    batch = [c for c in algorithm_changes(config, chosen) if not c.startswith(("synchronous", "asynchronous",
                                                                             "staleness"))]
    if batch:
        parts.append(", ".join(batch) + (" (--scale-global-batch)" if any(c.startswith("global_batch_size")
                                                                          for c in batch) else ""))
    if not parts:
        return None
    return "; ".join(parts) + ", which can change the env steps needed to reach a success rate"


def emit_rlinf(answer: PlanAnswer) -> str:
    """The chosen plan as an RLinf config fragment (YAML to paste), the choice in its header, and
    first of all any change of the RL algorithm and what the moved knobs gain."""
    import textwrap

    from perfmodel.rlinf.emit import emit_yaml
    from perfmodel.schema.profile import load_profile

    lines = []
    if answer.summary.get("algorithm_change"):
        lines += textwrap.wrap("ALGORITHM CHANGE: " + answer.summary["algorithm_change"] + ".", 100)
    gains = [g for g in plan_lines(answer.summary) if g.startswith(("Over your config", "Your config as written"))]
    lines += [w for g in gains for w in textwrap.wrap(g, 100)]
    header = "\n".join(lines + textwrap.wrap(answer.choice["explanation"], 100))
    return emit_yaml(answer.plan, load_profile(answer.plan.profile).backbone, header)


# -- the text answer --------------------------------------------------------------------------

def _split(r: dict[str, Any]) -> str:
    return "shared" if r["allocation_ratio"] is None else f"{r['rollout_gpus']}:{r['actor_gpus']}"


def _knob(value: Any, used: bool, fmt: Callable[[Any], str] = str) -> str:
    return fmt(value) if used else "-"


def _interval(r: dict[str, Any]) -> str:
    if r.get("throughput_low") is None:
        return "-"
    return f"{r['throughput_low']:.1f}..{r['throughput_high']:.1f}"


def _marks(r: dict[str, Any]) -> str:
    marks = []
    if r.get("tie_with_best"):
        marks.append("= #1")
    if r.get("beyond_calibrated_scale", r.get("extrapolation")):
        marks.append("^")
    if r.get("beyond_calibrated_gpu_type"):
        marks.append("~")
    if r.get("backbone_not_calibrated"):
        marks.append("?")
    return " ".join(marks)


def plan_table(summary: dict[str, Any]) -> list[list[str]]:
    """The table's rows (the header first): one a leading candidate, by rank."""
    from perfmodel.schema.modes import MODE_TABLE

    price = any(r.get("env_steps_per_dollar") for r in summary.get("top_candidates") or [])
    time = summary.get("goal") is not None
    workload = any("envs_per_gpu" in r or "micro_batch_size" in r for r in summary.get("top_candidates") or [])
    head = ["#", "mode", "gpus", "rollout:actor", "stages", "b_max", "t_max s", "staleness"] + (
        ["envs/GPU", "micro"] if workload else []) + ["env steps/s", "90% interval", "env steps/GPU-h"] + (["$/M env steps"] if price else []) + (
        ["h to target"] if time else []) + ["bottleneck", "marks"]
    rows = [head]
    for r in summary.get("top_candidates") or []:
        m = MODE_TABLE[r["mode"]]
        row = [str(r["rank"]), r["mode"], str(r["gpus"]), _split(r), str(r["pipeline_stage_num"]),
               _knob(r["b_max"], m.dynamic_batching, lambda v: "worker" if v is None else str(v)),
               _knob(r["t_max_s"], m.dynamic_batching, lambda v: f"{v:g}"),
               _knob(r.get("max_staleness"), m.async_training, lambda v: "-" if v is None else str(v)),
               *([str(r["total_num_envs"] // r["gpus"]), str(r.get("micro_batch_size") or "config")] if workload else []),
               f"{r['throughput_env_steps_per_s']:.1f}", _interval(r), f"{r['env_steps_per_gpu_hour']:.0f}"]
        if price:
            row.append(f"{1e6 / r['env_steps_per_dollar']:.2f}" if r.get("env_steps_per_dollar") else "-")
        if time:
            row.append(f"{summary['goal']['target_env_steps'] * r.get('env_steps_factor', 1.0) / r['throughput_env_steps_per_s'] / 3600:.2f}")
        rows.append(row + [r["bottleneck"], _marks(r)])
    return rows


def _percent_interval(iv: dict[str, Any]) -> str:
    return f"{100 * iv['coverage']:.0f}% interval {100 * (iv['low'] - 1):+.1f}%..{100 * (iv['high'] - 1):+.1f}%"


def plan_lines(summary: dict[str, Any]) -> list[str]:
    """The short lines under the table: why #1 wins, what it needs, what was not feasible."""
    from perfmodel.costs import batch_split_warning
    from perfmodel.planning.sweep import waiting_limited, workload_searched
    from perfmodel.planning.choice import structural_note

    best, runner = summary["best"], summary.get("runner_up")
    pred = best["prediction"]
    res = pred["utilization"]["resources"]
    busiest = max(res, key=res.get)
    by = {"throughput": "the most env steps/s", "cost": "the most env steps per GPU-hour",
          "time": "the fewest GPU-hours to the target in time"}[summary["objective"]]
    lines = [f"#1 wins with {by}; its bottleneck is {best['bottleneck']} (analytic bound "
             f"{best['bound_env_steps_per_s']:.1f} env steps/s), busiest {busiest} "
             f"{100 * res[busiest]:.0f}% ({', '.join(f'{k} {100 * v:.0f}%' for k, v in res.items() if k != busiest)})."]
    goal = summary.get("goal")
    if goal is not None:
        t = goal["best"]
        low = t.get("hours_at_low_end", t["hours"])
        lines.append(f"To reach {goal['target_env_steps']:g} env steps: #1 takes {t['hours']:.2f} h, "
                     f"{t['gpu_hours']:.1f} GPU-hours" + (f", ${t['dollars']:,.2f}" if t["dollars"] is not None else "")
                     + (f"; {low:.2f} h at its interval's low end" if low != t["hours"] else "")
                     + f" (within {goal['within_hours']:g} h{' at that end' if low != t['hours'] else ''}).")
    if waiting_limited(best):
        below = 1 - best["throughput_env_steps_per_s"] / best["bound_env_steps_per_s"]
        lines.append(f"#1 is {100 * below:.0f}% below that bound with no resource saturated: waiting, not capacity, "
                     "limits it; more envs per GPU (if they fit) would fill the gaps.")
    margin, ratio = summary.get("runner_up_margin"), summary.get("runner_up_ratio")
    changes = summary.get("algorithm_changes") or {}
    if runner is None:
        lines.append("No runner-up: no other combination was feasible.")
    elif margin and margin["tie"]:
        tied = margin.get("tied_modes") or [best["mode"], runner["mode"]]
        names = f"{', '.join(tied[:-1])} and {tied[-1]}"
        lines.append(f"= marks a tie: {names} predict the same {margin['measure']}, so their order is not a prediction"
                     + ("; streaming gains nothing here (docs/metrics.md), and streamer would need the RL-VLA3 fork"
                        if set(tied) == {"rollout_async", "streamer"} else "") + ".")
    elif ratio is not None:
        verdict = ("measurement spread only" if ratio["resolved"] is None else
                   "the model orders the two" if ratio["resolved"] else
                   "the interval includes 0, so the model cannot order the two")  # as the emitted header says
        lines.append(f"Over the runner-up ({runner['mode']}): {100 * (ratio['ratio'] - 1):+.1f}% {ratio['measure']} "
                     f"({_percent_interval(ratio)}): {verdict}{_with_changes(changes.get('over_runner_up'))}.")
    elif margin and not margin["resolvable"]:
        lines.append(f"The runner-up ({runner['mode']}) is within the model's residual error "
                     f"({margin['model_error_pct']:.1f}%): the model cannot tell the two apart.")
    gains = summary.get("config_gains") or {}
    moved = [f"{k['name']} {k['config']} -> {k['chosen']}"
             + (f" ({k['gain_pct']:+.1f}% env steps/s, the rest as chosen)" if k["gain_pct"] is not None else "")
             for k in gains.get("knobs") or []]
    if moved:
        lines.append("Over your config's values: " + "; ".join(moved) + _with_changes(gains.get("changes")) + ".")
    if gains.get("over_config"):
        o = gains["over_config"]
        own = o["mode"] + (f" {o['allocation_ratio']}" if o["allocation_ratio"] else "")
        if "not_run" in o:
            lines.append(f"Your config as written ({own}) does not run on these GPUs: {o['not_run']}.")
        else:
            lines.append(f"Over your config as written ({own}, {o['throughput_env_steps_per_s']:.1f} env steps/s on "
                         f"these GPUs): {o['gain_pct']:+.1f}%{_with_changes(o.get('changes'))}.")
    colocated, over = summary.get("colocated"), summary.get("colocated_ratio")
    if colocated is not None and best["mode"] != "colocated":
        lines.append(f"Over colocated on the same {best['gpus']} GPUs: {best['gain_over_colocated_pct']:+.1f}%"
                     + (f" ({_percent_interval(over)})" if over else "")
                     + (": the interval includes 0, so the model cannot order this plan and colocated"
                        if over and over.get("resolved") is False else "")
                     + _with_changes(changes.get("over_colocated")) + ".")
    n = structural_note(best)
    if n:
        lines.append(f"#1's interval: {n}.")
    plan = Plan.from_dict(summary["plan"], "plan")
    needs = []
    if plan.mechanisms.streaming:
        needs.append("the RL-VLA3 fork (stock RLinf 0.3.0 streams training only in its synchronous runner)")
    if plan.mechanisms.async_training:
        needs.append("RLinf's asynchronous runner (AsyncPPOEmbodiedRunner)")
    w = plan.workload
    if batch_split_warning(plan):
        needs.append(f"a batch split RLinf accepts: global_batch_size {w.global_batch_size} is not a multiple of "
                     f"micro_batch_size x actor GPUs ({w.micro_batch_size} x {plan.actor_gpus}); --scale-global-batch "
                     "or other batch sizes")
    if needs:
        lines.append("#1 needs: " + "; ".join(needs) + ".")
    searched = workload_searched(summary.get("searched") or {})
    if searched:
        lines.append(f"Searched {searched}, as perfmodel sweep does (--envs-per-gpu, --micro-batch-sizes, "
                     "--staleness set them).")
    reasons = summary.get("infeasible_reasons") or {}
    if reasons:
        lines.append(f"Not feasible: {sum(reasons.values())} more combination(s) ("
                     + "; ".join(f"{n} {k}" for k, n in reasons.items()) + "); perfmodel sweep --show-infeasible.")
    shown = summary.get("top_candidates") or []
    legend = ["#: rank of " + str(summary["candidates"]) + " feasible"]
    if any(r.get("beyond_calibrated_scale", r.get("extrapolation")) for r in shown):
        legend.append("^ beyond the calibrated scale")
    if any(r.get("beyond_calibrated_gpu_type") for r in shown):
        legend.append("~ GPU type not calibrated")
    if any(r.get("backbone_not_calibrated") for r in shown):
        legend.append("? backbone not calibrated (docs/backbones.md)")
    lines.append("(" + "; ".join(legend) + ")")
    return lines


def format_plan(summary: dict[str, Any]) -> str:
    """The text answer of ``perfmodel plan``: a title, the table, the short lines."""
    goal = summary.get("goal")
    title = (f"Best plans for {'exactly' if summary['objective'] == 'throughput' else 'at most'} "
             f"{summary['gpus_budget']} GPUs by {summary['objective']}"
             + (f" (to reach {goal['target_env_steps']:g} env steps within {goal['within_hours']:g} h)" if goal else "")
             + ":")
    rows = plan_table(summary)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    numeric = {"#", "gpus", "stages", "envs/GPU", "env steps/s", "env steps/GPU-h", "$/M env steps", "h to target"}
    table = ["  ".join(c.rjust(w) if h in numeric else c.ljust(w) for c, w, h in zip(r, widths, rows[0])).rstrip()
             for r in rows]
    return "\n".join([title, *table, "", *plan_lines(summary)])
