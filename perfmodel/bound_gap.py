"""Where a simulated plan loses its analytic bound (perfmodel.bound), read from its timeline.

The measured window of a simulation is cut into what the timeline does at each instant, one
activity per instant, taken in priority order (``activities``):
- the bound's own terms first (its bottleneck, and in the synchronous modes the phases it adds
  in series: phase switches, weight syncs, training), so the bound's time is found where it is;
- then the other stages (env resets, env steps, inference calls on the GPU, training);
- what is left is ``idle``: no span of any stage, i.e. an inference call's host path
  (``infer_latency_s``), the driver's orchestration per chunk step, or a batch waiting to form.
The activities' times add up to the iteration (a test pins it on an RLinf config). The bound
gives each activity its term (``bound_s``); the rest of the iteration, iteration - bound, is the
sum of the activities' excess over their terms, each the time a mechanism takes beyond the
bound. With deterministic costs one env worker is simulated (its replicas are identical), so
its timeline is the plan's; with variability the spans of the simulated workers are merged
(an instant counts as busy when any worker is).
"""

from __future__ import annotations

from typing import Any, Iterable

from perfmodel.bound import Bound
from perfmodel.costs import StageCosts
from perfmodel.schema.timeline import Recorder

# An activity of the timeline: the recorded stages it is made of.
ACTIVITY_STAGES = {"env_reset": ("env_reset",), "env_step": ("env_step",), "inference": ("inference",),
                   "train": ("train", "optimizer_step"), "phase_switch": ("phase_switch",),
                   "weight_sync": ("weight_sync",)}
SHOWN = 0.005  # a mechanism is named when it takes at least this share of the iteration
OTHERS = ("env_reset", "env_step", "inference", "train", "phase_switch", "weight_sync")


def merged(spans: Iterable[tuple[float, float]], t0: float, t1: float) -> list[tuple[float, float]]:
    """The union of ``spans`` clipped to [t0, t1], as sorted disjoint intervals."""
    out: list[tuple[float, float]] = []
    for a, b in sorted((max(a, t0), min(b, t1)) for a, b in spans):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def uncovered_length(ivs: list[tuple[float, float]], covered: list[tuple[float, float]]) -> float:
    """Length of the disjoint sorted ``ivs`` outside the disjoint sorted ``covered``."""
    total, j = 0.0, 0
    for a, b in ivs:
        while j < len(covered) and covered[j][1] <= a:
            j += 1
        k, t = j, a
        while k < len(covered) and covered[k][0] < b:
            if covered[k][0] > t:
                total += covered[k][0] - t
            t = max(t, covered[k][1])
            k += 1
        if b > t:
            total += b - t
    return total


def bound_terms(costs: StageCosts, b: Bound) -> dict[str, float]:
    """The bound's iteration split by activity (they add up to ``b.iteration_s``)."""
    plan, w = costs.plan, costs.plan.workload
    reset = w.rollout_epoch * costs.env_reset_s(plan.envs_per_worker)
    env = {"env_reset": reset, "env_step": b.env_s - reset}
    terms = dict.fromkeys(OTHERS, 0.0)
    if plan.mechanisms.async_training:
        if b.bottleneck == "env":
            terms.update(env)
        if b.bottleneck in ("inference", "inference+actor"):
            terms["inference"] = b.inference_s
        if b.bottleneck in ("actor", "inference+actor"):
            terms["train"] = b.actor_s
    else:
        terms.update(env if b.env_s >= b.inference_s else {"inference": b.inference_s})
        terms.update(train=b.actor_s, weight_sync=b.sync_s, phase_switch=b.switch_s)
    return terms


def activities(terms: dict[str, float]) -> tuple[str, ...]:
    """Priority order: the bound's terms first (the serial phases, then the rollout's), then the
    others; ``idle`` is what no activity covers."""
    serial = [a for a in ("phase_switch", "weight_sync", "train") if terms[a] > 0]
    rollout = [a for a in ("env_reset", "env_step", "inference") if terms[a] > 0]
    first = serial + rollout
    return tuple(first + [a for a in OTHERS if a not in first])


def idle_mechanism(costs: StageCosts) -> str:
    """What a moment with no span is, in this plan."""
    parts = []
    if costs.plan.mechanisms.dynamic_batching:
        parts.append("batches forming (t_max)")
    if costs.infer_latency_s > 0:
        parts.append("inference calls' host path")
    if costs.driver_chunk_s() > 0:
        parts.append("the driver between chunk steps")
    return "waiting on " + (" and ".join(parts) if parts else "nothing recorded")


MECHANISM = {"env_reset": "env resets", "env_step": "env steps (the GPU waits for them)",
             "inference": "waiting on inference on the GPU", "train": "training",
             "phase_switch": "phase switches (offload/reload)", "weight_sync": "weight syncs"}


def cause(costs: StageCosts) -> str:
    """The pipeline structure behind waiting on inference."""
    plan = costs.plan
    if plan.mechanisms.dynamic_batching:
        return f"dynamic batching over {plan.envs_per_worker} envs per env worker"
    p = plan.pipeline_stage_num
    if p == 1:
        return (f"lock-step: 1 pipeline stage of {plan.envs_per_stage} envs per env worker, so its env steps and "
                "its inference calls alternate (pipeline_stage_num)")
    return f"lock-step: {p} pipeline stages of {plan.envs_per_stage} envs overlap env steps with inference calls"


def bound_gap(rec: Recorder, window: tuple[float, float], iterations: int, costs: StageCosts,
              b: Bound) -> dict[str, Any]:
    """The measured window's iteration split by activity (``timeline_s``, seconds per iteration,
    adding up to the iteration), the bound's split (``bound_s``) and the rest (``rest_s``: each
    activity's excess over its bound term), the share of the bound kept and the mechanism that
    takes the most of the rest."""
    t0, t1 = window
    terms = bound_terms(costs, b)
    order = activities(terms)
    covered: list[tuple[float, float]] = []
    timeline: dict[str, float] = {}
    for act in order:
        ivs = merged(((s, e) for st in ACTIVITY_STAGES[act] for s, e, _ in rec.busy.get(st, ())), t0, t1)
        timeline[act] = uncovered_length(ivs, covered) / iterations
        covered = merged(covered + ivs, t0, t1)
    timeline["idle"] = (t1 - t0 - sum(e - s for s, e in covered)) / iterations
    terms["idle"] = 0.0
    iteration = (t1 - t0) / iterations
    rest = {a: timeline[a] - terms[a] for a in timeline}
    names = {**MECHANISM, "idle": idle_mechanism(costs)}
    if terms["env_step"] > 0:  # env-bound: env steps beyond the bound's are not the GPU's wait
        names["env_step"] = "env steps beyond the bound's"
    positive = sorted(((v, a) for a, v in rest.items() if v > 1e-9 * iteration), reverse=True)
    # The window spans the trainer's iterations; in the asynchronous modes the rollout may run
    # ahead inside it (staleness), so an activity can fall below its term: the positive excesses
    # are then scaled to the gap they share (iteration - bound).
    gap, excess = max(0.0, iteration - b.iteration_s), sum(v for v, _ in positive)
    if excess > gap:
        positive = [(v * gap / excess, a) for v, a in positive]
    positive = [(v, a) for v, a in positive if v >= SHOWN * iteration]
    return {
        "share_of_bound": b.iteration_s / iteration,
        "timeline_s": timeline,
        "bound_s": terms,
        "rest_s": rest,
        "rest": [{"activity": a, "mechanism": names[a], "share_of_iteration": v / iteration} for v, a in positive],
        "cause": cause(costs),
    }


def format_gap(g: dict[str, Any]) -> str:
    """One line: the share of the bound kept, and the mechanisms taking the rest."""
    head = f"{100 * g['share_of_bound']:.0f}% of the bound"
    if not g["rest"]:
        return head
    parts = ", ".join(f"{r['mechanism']} {100 * r['share_of_iteration']:.0f}%" for r in g["rest"][:3])
    waits = any(r["activity"] in ("idle", "inference", "env_step") for r in g["rest"][:2])
    return f"{head}; the rest of the iteration: {parts}" + (f" ({g['cause']})" if waits else "")
