"""Trace structure (issue 11): counter tracks, iteration markers, args on spans, simulated
replicas named as such, and one process/thread layout for a simulated and a measured run of
one plan, so the two open side by side in Perfetto.

The measured side is a trace written by the real executor (``executor run`` of
examples/plans/tiny_disaggregated.json on this machine's CPU, real LIBERO scenes), kept in
tests/data/executor_tiny_disaggregated/ (regenerate: see that folder's README); the slow test
below runs the executor again and checks the same.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from quick_envs import QUICK_ENVS

from perfmodel.calibration.reference import published_plan
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import load_profile
from perfmodel.schema.timeline import COUNTERS, Recorder, trace_layout
from perfmodel.prediction import predict

DATA = Path(__file__).parent / "data" / "executor_tiny_disaggregated"
TINY_PLAN = Path(__file__).parent.parent / "examples" / "plans" / "tiny_disaggregated.json"


def sim_trace(plan, profile, tmp_path, name="t.json", iterations=3) -> dict:
    path = tmp_path / name
    predict(plan, profile, trace_path=path, iterations=iterations)
    return json.loads(path.read_text())


def events(trace, ph):
    return [e for e in trace["traceEvents"] if e["ph"] == ph]


def proc_names(trace) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}


@pytest.mark.parametrize("mode", ["colocated", "disaggregated", "rollout_async", "streamer"])
def test_counters_markers_and_args(scenario_profile, tmp_path, mode):
    plan = published_plan(scenario_profile, mode, 4, None if mode == "colocated" else "1:1")
    trace = sim_trace(plan, scenario_profile, tmp_path)
    names = proc_names(trace)
    counters = events(trace, "C")
    kinds = Counter(e["name"].split("/")[0] for e in counters)
    assert set(kinds) == set(COUNTERS), kinds
    # every counter sits in the process of the resource it names, with its unit as arg key
    for e in counters:
        what, resource = e["name"].split("/")
        assert names[e["pid"]].split(" (")[0] == resource
        assert list(e["args"]) == [COUNTERS[what]]
    # the actor's published version counts 1, 2, 3: one per iteration
    assert [e["args"]["version"] for e in counters if e["name"] == "weight_version/actor"] == [1, 2, 3]
    # queue depth never negative and drains to 0; samples waiting never negative
    for e in counters:
        assert e["args"][COUNTERS[e["name"].split("/")[0]]] >= 0
    q = [e["args"]["envs"] for e in counters if e["name"] == "queue_depth/rollout_gpu_0"]
    assert q[-1] == 0 and (max(q) > 0 or not plan.mechanisms.dynamic_batching)  # one lock-step group never waits
    # iteration markers: global instants at the actor's iteration ends, in order
    marks = events(trace, "i")
    assert [m["name"] for m in marks] == ["iteration 1 done", "iteration 2 done", "iteration 3 done"]
    assert all(m["s"] == "g" for m in marks)
    opt_ends = sorted(e["ts"] + e["dur"] for e in events(trace, "X") if e["name"] == "optimizer_step")
    assert marks[-1]["ts"] >= opt_ends[-1]
    # no span without args; the args say envs, batch and version
    spans = events(trace, "X")
    assert spans and all(e["args"] for e in spans)
    for e in spans:
        need = {"env_step": {"envs", "version"}, "env_reset": {"envs", "version"}, "inference": {"batch"},
                "train": {"batch", "version"}, "optimizer_step": {"batch", "version"},
                "weight_sync": {"version"}, "phase_switch": {"direction"}}[e["name"]]
        assert need <= set(e["args"]), e
    # staleness within the plan's bound; synchronous modes never stale
    st = [e["args"]["iterations"] for e in counters if e["name"].startswith("staleness/")]
    assert max(st) <= (plan.max_staleness if plan.mechanisms.async_training else 0)


def test_simulated_replicas_are_named(tmp_path):
    prof = load_profile("pi05")
    plan = published_plan(prof, "streamer", 16, "1:1")  # 8 env workers, fewer simulated
    trace = sim_trace(plan, prof, tmp_path)
    reps = trace["otherData"]["simulated_replicas"]
    workers = [r for r in reps if r.startswith("env_worker_")]
    assert workers and sum(reps[w] for w in workers) == plan.rollout_gpus == 8
    names = set(proc_names(trace).values())
    for r, n in reps.items():
        assert f"{r} (x{n} replicas)" in names
    assert "actor" in names


def test_layout_does_not_depend_on_timing():
    """Two recorders with the same resources and lanes but different event order get the same
    process and thread ids."""
    a, b = Recorder(keep_spans=True), Recorder(keep_spans=True)
    a.span("train", "actor", "train", 0.0, 1.0)
    a.span("env_step", "env_worker_1", "group_0", 1.0, 2.0)
    a.span("env_step", "env_worker_0", "group_1", 2.0, 3.0)
    a.span("env_step", "env_worker_0", "group_0", 3.0, 4.0)
    for s in reversed(a.spans):
        b.span(s[0], s[1], s[2], s[3] + 10, s[4] + 10)
    ids = [{(e["name"], e["args"].get("name")): (e["pid"], e.get("tid")) for e in r.chrome_trace()["traceEvents"]
            if e["ph"] == "M"} for r in (a, b)]
    assert ids[0] == ids[1]
    assert [p["process"] for p in trace_layout(a.chrome_trace())["processes"]] == \
        ["env_worker_0", "env_worker_1", "actor"]


def test_counter_samples_are_compacted():
    r = Recorder(keep_spans=True)
    r.count("queue_depth/rollout_gpu_0", 1.0, 4)
    r.count("queue_depth/rollout_gpu_0", 1.0, -4)  # fills and drains at one instant
    r.count("queue_depth/rollout_gpu_0", 2.0, 2)
    r.counter("queue_depth/rollout_gpu_0", 3.0, 2)  # no change
    c = [(e["ts"], e["args"]["envs"]) for e in r.chrome_trace()["traceEvents"] if e["ph"] == "C"]
    assert c == [(1e6, 0.0), (2e6, 2.0)]


def test_a_recorder_keeping_no_busy_sums_refuses_to_keep_spans():
    """``keep_busy=False`` keeps nothing (a throughput only): asked for spans as well it is
    refused by name, not a trace silently without spans; each flag alone does what it says."""
    with pytest.raises(ValueError, match="keep_spans=True with keep_busy=False"):
        Recorder(keep_spans=True, keep_busy=False)
    traced = Recorder(keep_spans=True)
    traced.span("train", "actor", "train", 0.0, 2.0)
    traced.spans_of("env_step", "env_worker_0", "group")((0.0, 1.0, 3.0))
    assert len(traced.spans) == 2 and traced.busy_time("env_step", 0.0, 1.0) == 3.0
    nothing = Recorder(keep_busy=False)
    nothing.span("train", "actor", "train", 0.0, 2.0)
    nothing.spans_of("env_step", "env_worker_0", "group")((0.0, 1.0, 3.0))
    assert nothing.spans == [] and nothing.busy_time("train", 0.0, 2.0) == 0.0


def measured_trace_fixture() -> tuple[dict, dict]:
    return (json.loads((DATA / "trace.json").read_text()), json.loads((DATA / "record.json").read_text()))


def test_measured_and_simulated_traces_have_one_layout(tmp_path):
    trace, record = measured_trace_fixture()
    assert trace["otherData"]["source"] == "executor" and record["status"] == "ok"
    plan = Plan.from_dict(trace["otherData"]["plan"])
    assert plan.to_dict() == Plan.from_dict(json.loads(TINY_PLAN.read_text())).to_dict()
    sim = sim_trace(plan, load_profile(plan.profile), tmp_path, iterations=record["counts"]["iterations"])
    assert trace_layout(sim) == trace_layout(trace)
    # ... and the measured trace has what the simulated one has: counters, markers, args
    for t in (sim, trace):
        assert {e["name"].split("/")[0] for e in events(t, "C")} == set(COUNTERS)
        assert [m["name"] for m in events(t, "i")] == [f"iteration {k} done" for k in
                                                        range(1, record["counts"]["iterations"] + 1)]
        assert all(e["args"] for e in events(t, "X"))


@pytest.mark.slow
def test_real_run_has_the_simulated_layout(ray_session, tmp_path):
    """Runs the tiny plan for real (2 envs, CPU, real LIBERO scenes) and compares layouts."""
    from executor.runtime.session import execute
    from executor.runtime.modes import RunOptions

    plan = Plan.from_dict(json.loads(TINY_PLAN.read_text()))
    record, rec = execute(plan, iterations=2, warmup=1, progress=False,
                          opts=RunOptions(image_size=64, **QUICK_ENVS))
    measured = rec.chrome_trace({"source": "executor", "plan": plan.to_dict()})
    simulated = sim_trace(plan, load_profile(plan.profile), tmp_path, iterations=2)
    assert trace_layout(measured) == trace_layout(simulated)
    assert [m["name"] for m in events(measured, "i")] == ["iteration 1 done", "iteration 2 done"]
