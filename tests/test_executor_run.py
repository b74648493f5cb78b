"""executor run: every mode end to end on a tiny plan with real LIBERO scenes on CPU (slow),
counts, weight versions and the trace; bad plans refused before anything starts (fast)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from inproc import run_main
from quick_envs import QUICK_ENV_FLAGS, QUICK_ENVS

from perfmodel.schema.modes import MODES
from perfmodel.schema.plan import Plan

ROOT = Path(__file__).resolve().parent.parent

# 2 envs x 10 steps (2 chunks of 5), 64 px, soft reset: a few seconds of env work per iteration.
TINY = {
    "mode": "disaggregated", "allocation_ratio": "1:1", "pipeline_stage_num": 1, "b_max": None,
    "t_max_s": 0.05, "max_staleness": 1, "profile": "pi05_tiny_cpu",
    "workload": {"total_num_envs": 2, "max_episode_steps": 10, "num_action_chunks": 5, "rollout_epoch": 1,
                 "update_epoch": 1, "micro_batch_size": 2, "global_batch_size": 4, "group_size": 1,
                 "algorithm": "ppo"},
    "cluster": {"gpus": 2, "gpus_per_node": 2, "cpu_cores_per_node": 2, "node_ram_gb": 24,
                "intra_node_bw_GBps": 2.4, "inter_node_bw_GBps": 2.4},
}


def tiny_plan(mode: str, **changes) -> dict:
    d = copy.deepcopy(TINY)
    d["mode"] = mode
    if mode == "colocated":
        d["allocation_ratio"] = None
    d.update(changes)
    return d


def write_plan(tmp_path: Path, d: dict, name: str = "plan.json") -> str:
    p = tmp_path / name
    p.write_text(json.dumps(d))
    return str(p)


def cli(args):
    return run_main(*args, module="executor.cli", limit_s=3600)  # a Ray run under load takes minutes


def output_lines(text: str) -> list[str]:
    """What a run printed, less the busy-machine warning (``preflight.load_warning``, printed
    before a run when the load average is high: CI's load decides whether it comes)."""
    return [x for x in text.splitlines() if x.strip() and not x.startswith("warning: machine already loaded")]


# ---------------------------------------------------------------------------------------------
# Bad plans: refused with one line before anything starts


@pytest.mark.parametrize("change,field", [
    (lambda d: d["cluster"].update(gpus=(os.cpu_count() or 1) + 2, gpus_per_node=(os.cpu_count() or 1) + 2),
     "plan.cluster.gpus"),
    (lambda d: d.update(allocation_ratio="2:1"), "plan.allocation_ratio"),
    (lambda d: d["workload"].update(num_action_chunks=20, max_episode_steps=20), "plan.workload.num_action_chunks"),
    (lambda d: d["workload"].update(total_num_envs=64), "plan.workload.total_num_envs"),  # RAM
    (lambda d: d.update(mode="pipelined"), "plan.mode"),
])
def test_bad_plan_is_refused_with_one_line(tmp_path, change, field):
    d = copy.deepcopy(TINY)
    change(d)
    r = cli(["run", write_plan(tmp_path, d), "--out", str(tmp_path / "run"), "--no-progress"])
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), r.output
    assert not (tmp_path / "run").exists()


def test_missing_plan_and_bad_options_are_one_line(tmp_path):
    r = cli(["run"])
    assert r.exit_code == 2 and r.output.startswith("error: plan:"), r.output
    p = write_plan(tmp_path, TINY)
    r = cli(["run", p, "--iterations", "2", "--warmup-iterations", "2"])
    assert r.exit_code == 2 and r.output.startswith("error: warmup-iterations:"), r.output
    r = cli(["run", "--plan", p, "--compare", "--profile", str(tmp_path / "nope.json")])
    assert r.exit_code == 2 and r.output.startswith("error: profile:"), r.output
    r = cli(["run", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and r.output.startswith("error: plan"), r.output


def test_bundled_example_plans_are_valid_and_fit_this_machine():
    from executor.runtime.preflight import check_plan_fits, resolve_backbone

    plans = sorted((ROOT / "examples" / "plans").glob("*.json"))
    assert {Plan.load(p).mode for p in plans} >= set(MODES)
    for p in plans:
        plan = Plan.load(p)
        check_plan_fits(plan, resolve_backbone(plan), "tiny", 1.9, local=(plan.cluster.gpus <= (os.cpu_count() or 1)))


# ---------------------------------------------------------------------------------------------
# Every mode for real (one Ray session for the module)


def run_mode(plan_dict: dict, iterations: int = 2, warmup: int = 1, **opts):
    from executor.runtime.session import execute
    from executor.runtime.modes import RunOptions

    plan = Plan.from_dict(plan_dict)
    return plan, *execute(plan, iterations=iterations, warmup=warmup, progress=False,
                          opts=RunOptions(image_size=64, **{**QUICK_ENVS, **opts}))


def check_record(plan: Plan, record: dict, rec, iterations: int = 2, synced: bool = True) -> None:
    w = plan.workload
    c = record["counts"]
    assert record["status"] == "ok" and record["error"] is None
    assert c["env_steps"] == w.total_num_envs * w.max_episode_steps * w.rollout_epoch * iterations
    assert record["env_steps_match"] is True
    assert c["iterations"] == iterations
    assert c["samples"] == w.samples_per_iteration * iterations
    assert c["optimizer_steps"] == w.optimizer_steps_per_iteration * iterations
    assert c["weight_versions"] == iterations
    assert c["inference_calls"] >= 1
    # the env options the run was given are in its record (tests step the scenes quick_envs' way)
    assert {k: record["options"][k] for k in ("hard_reset", "settle_steps", "render")} == QUICK_ENVS
    # generators picked up newer weights, whose contents changed (the update trained); with
    # staleness 1 and 2 iterations an asynchronous rollout may legitimately never wait for them
    syncs = record["weight_syncs"]
    assert all(s["version"] >= 1 and s["checksum"] != record["initial_weight_checksum"] for s in syncs)
    if synced:
        assert syncs and max(record["generator_versions"]) >= 1
    assert record["last_train_metrics"]["charts/grad_norm"] > 0
    assert record["env_cpu"]["env_step"]["cpu_s"] > 0 and 0 < record["env_cpu"]["env_step"]["cpu_share"] <= 1.5
    assert record["throughput_env_steps_per_s"] > 0 and record["iteration_time_s"] > 0
    # the driver timed its own orchestration on every chunk step of every env group
    groups = len(plan.placement.group_sizes) * plan.rollout_gpus
    assert record["driver_s_per_chunk_step"]["chunk_steps"] == (
        groups * w.chunk_steps_per_epoch * w.rollout_epoch * iterations)
    from perfmodel.schema.timeline import STAGES

    assert set(record["stage_time_s"]) == set(STAGES)
    assert set(record["utilization"]["stages"]) == set(STAGES)
    res = set(record["utilization"]["resources"])
    shared = not plan.mechanisms.disaggregated  # one GPU resource: colocated, train_async on shared GPUs
    assert res == ({"gpu", "env_cpu"} if shared else {"rollout_gpu", "actor_gpu", "env_cpu"})
    # the trace has the simulator's event format and resource names
    trace = rec.chrome_trace({"plan": plan.to_dict()})
    names = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert {"env_reset", "env_step", "inference", "train", "optimizer_step"} <= names
    assert ("weight_sync" in names) == bool(syncs)
    procs = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert "actor" in procs and "env_worker_0" in procs and "rollout_gpu_0" in procs
    assert all(e["dur"] >= 0 for e in trace["traceEvents"] if e["ph"] == "X")


@pytest.mark.slow
def test_colocated(ray_session):
    """Both phases take the one slot in turn (a second slot would only start a second generator
    and trainer rank: the shared-GPU run below has two)."""
    plan, record, rec = run_mode(tiny_plan("colocated", cluster={**TINY["cluster"], "gpus": 1}))
    check_record(plan, record, rec)
    assert plan.rollout_gpus == 1 and record["staleness"]["max"] == 0
    assert set(record["generator_versions"]) == {1}


@pytest.mark.slow
def test_disaggregated_two_pipeline_stages(ray_session):
    plan, record, rec = run_mode(tiny_plan("disaggregated", pipeline_stage_num=2))
    check_record(plan, record, rec)
    lanes = {(e["pid"], e["args"]["name"]) for e in rec.chrome_trace()["traceEvents"] if e["name"] == "thread_name"}
    assert {n for _, n in lanes} >= {"group_0", "group_1"}
    assert record["staleness"]["max"] == 0


@pytest.mark.slow
def test_train_async_on_shared_gpus_survives_a_killed_env_process(ray_session):
    """train_async with actor and rollout on the same slots (allocation_ratio null): each slot
    hosts its inference actor and a trainer rank (on CPU, the same fractional slot), no swaps;
    the run is recorded like any other and stays within the staleness bound (0 here). One env
    process is killed in iteration 1: its episode is re-run and the counts stay right. (One run
    for both: the env worker's restart does not depend on where the trainer is.)"""
    from executor.runtime.modes import layout

    plan, record, rec = run_mode(tiny_plan("train_async", allocation_ratio=None, max_staleness=0),
                                 inject_env_fault=(1, 0))
    lay = layout(plan)
    assert lay.rollout_slots == lay.actor_slots == [0, 1] and not lay.phase_swaps and not lay.trains_after_rollout
    check_record(plan, record, rec, synced=False)  # the counts stay right: the episode was re-run
    assert record["staleness"]["max"] <= plan.max_staleness
    names = {e["name"] for e in rec.chrome_trace()["traceEvents"] if e["ph"] == "X"}
    assert "phase_switch" not in names
    assert record["env_restarts"] == 1 and record["faults"][0]["kind"] == "env_process_died"
    # iteration 1 is the measured one (warm-up 1): the restart is flagged, not silently averaged in
    assert record["env_restarts_in_measured_window"] == 1
    assert any("inside the measured window" in w for w in record["warnings"])
    assert record["rerun_episodes"] == plan.envs_per_stage


@pytest.mark.slow
def test_dagger_expert_beside_the_student_and_batches_from_the_replay_buffer(ray_session):
    """RLinf's DAgger (issue 42): the rollout runs the expert beside the student, and each
    iteration's training takes update_epoch global batches drawn from the replay buffer, one
    optimizer step each (rules.training_runs), not the iteration's samples update_epoch times."""
    work = {**TINY["workload"], "algorithm": "dagger", "update_epoch": 3}
    plan, record, rec = run_mode(tiny_plan("disaggregated", workload=work))
    check_record(plan, record, rec)
    assert plan.workload.optimizer_steps_per_iteration == 3
    assert record["counts"]["micro_batches"] == 3 * 2 * 2  # 3 batches of 4 over 1 rank in micro-batches of 2


@pytest.mark.slow
def test_rollout_async_dynamic_batching(ray_session):
    plan, record, rec = run_mode(tiny_plan("rollout_async", b_max=2, t_max_s=0.02))
    check_record(plan, record, rec, synced=False)
    assert record["staleness"]["max"] <= plan.max_staleness
    batches = [e["args"]["batch"] for e in rec.chrome_trace()["traceEvents"] if e["name"] == "inference"]
    assert batches and max(batches) <= 2
    assert sum(batches) == plan.workload.total_num_envs * plan.workload.chunk_steps_per_epoch * 2


def test_env_busy_never_exceeds_a_workers_cores():
    from executor.runtime.record import env_busy_capped
    from perfmodel.schema.timeline import Recorder

    plan = Plan.from_dict(tiny_plan("colocated"))  # 2 workers, 1 core each
    rec = Recorder(keep_spans=True)
    # two single-env groups time-sliced on worker 0's one core, 0-2 s and 1-3 s; worker 1 idle
    rec.span("env_step", "env_worker_0", "group_0", 0.0, 2.0, cores=1.0)
    rec.span("env_reset", "env_worker_0", "group_1", 1.0, 3.0, cores=1.0)
    busy = env_busy_capped(plan, rec, 0.0, 10.0)
    assert busy["env_step"] + busy["env_reset"] == pytest.approx(3.0)  # the core was busy 0-3 s
    assert busy["env_step"] == pytest.approx(1.5) and busy["env_reset"] == pytest.approx(1.5)
    assert env_busy_capped(plan, rec, 1.5, 2.5)["env_reset"] == pytest.approx(0.75)


@pytest.mark.slow
def test_streamer_cli_compare_json_and_run_dir(ray_session, tmp_path, monkeypatch):
    from perfmodel import prediction

    predicted = []  # the profile of every prediction the command makes
    real = prediction.predict
    monkeypatch.setattr(prediction, "predict",
                        lambda plan, prof, **kw: predicted.append(prof) or real(plan, prof, **kw))
    out = tmp_path / "runs" / "s"
    p = write_plan(tmp_path, tiny_plan("streamer"))
    r = cli(["run", "--plan", p, "--out", str(out), "--iterations", "2", "--image-size", "64", *QUICK_ENV_FLAGS,
             "--compare", "--json", "--no-progress"])
    assert r.exit_code == 0, r.output
    record = json.loads(r.output.strip().splitlines()[-1])
    plan = Plan.load(p)
    assert record["counts"]["env_steps"] == plan.workload.env_steps_per_iteration * 2
    assert record["predicted_throughput_env_steps_per_s"] > 0 and "error_pct" in record
    # the diagnosis at the CPU share the envs got, and the driver cost predicted vs measured
    diag = record["diagnosis_at_measured_cpu_share"]
    assert 0 < diag["cpu_share"]["env_step"] <= 1 and diag["predicted_throughput_env_steps_per_s"] > 0
    assert record["diagnosis_at_measured_env_costs"]["env_cost_ratio"]["env_step"] > 0
    assert record["driver_chunk_step"]["measured_s"] == record["driver_s_per_chunk_step"]["mean_s"]
    # the prediction it is judged by was made before the run, from the host probe's env costs;
    # the one from the profile as it is stays beside it
    probe = record["host_probe"]
    assert probe["samples"]["step_cpu_s"] and probe["samples"]["reset_cpu_s"]
    assert probe["samples"]["step_wall_s"] and probe["samples"]["reset_wall_s"]
    # scaled by the wall seconds an env step took (what else held the core included) ...
    assert probe["ratio"]["env_step"] == pytest.approx(probe["step_wall_s_mean"] / probe["profile_step_cpu_s"])
    # ... and the CPU seconds alone kept beside
    assert probe["cpu_ratio"]["env_step"] == pytest.approx(probe["step_cpu_s_mean"] / probe["profile_step_cpu_s"])
    assert record["predicted_throughput_env_steps_per_s"] == record["prediction_before_run"]["throughput_env_steps_per_s"]
    # ... and is that prediction: the probed profile (the first predicted) is simulated once
    assert sum(prof is predicted[0] for prof in predicted) == 1
    unscaled = record["prediction_unscaled"]
    assert unscaled["error_pct"] == pytest.approx(
        100 * (unscaled["throughput_env_steps_per_s"] / record["throughput_env_steps_per_s"] - 1))
    assert record["counts"]["micro_batches"] == plan.workload.samples_per_iteration * 2 // 2
    assert {x.name for x in out.iterdir()} - {"ray.log"} == {"plan.json", "profile.json", "record.json", "trace.json",
                                                             "tensorboard"}
    # the per-iteration timers as RLinf logs them, read back as a run (perfmodel calibrate --from-run)
    import shutil

    from perfmodel.rlinf.logs import read_run
    from perfmodel.schema.errors import ConfigError

    # ... which a calibration refuses beside this record (quick envs: not RLinf's env costs) ...
    with pytest.raises(ConfigError, match="recorded with --settle-steps 0 --no-render"):
        read_run(out, option="--from-run")
    shutil.copytree(out / "tensorboard", tmp_path / "timers")  # ... and reads without it
    run = read_run(tmp_path / "timers", option="--from-run")
    assert run.plan.mode == "streamer" and run.steps == (0, 1)
    done = record["iteration_done_s"]
    assert run.step_s == pytest.approx((done[1] - done[0],))
    trace = json.loads((out / "trace.json").read_text())
    assert trace["otherData"]["plan"] == plan.to_dict()
    assert json.loads((out / "record.json").read_text())["counts"] == record["counts"]


@pytest.mark.slow
def test_interrupt_writes_a_partial_record(ray_session, tmp_path):
    import threading

    from executor.runtime.session import RunFailed, execute
    from executor.runtime.modes import RunOptions

    plan = Plan.from_dict(tiny_plan("disaggregated"))
    stop = threading.Event()
    stop.set()  # as if Ctrl-C came right after the actors started
    with pytest.raises(RunFailed) as e:
        execute(plan, iterations=2, warmup=1, progress=False, stop=stop,
                opts=RunOptions(image_size=64, **QUICK_ENVS))
    record = e.value.record
    assert record["status"] == "interrupted" and "interrupted" in record["error"]
    assert record["env_steps_match"] is False and record["throughput_env_steps_per_s"] is None
    from executor.runtime.rundir import reserve

    reserve(tmp_path / "r", plan.mode).write(plan, record, e.value.rec, None)
    assert json.loads((tmp_path / "r" / "record.json").read_text())["status"] == "interrupted"


@pytest.mark.slow
def test_dead_ray_actor_ends_the_run_with_one_error_and_a_partial_record(ray_session, tmp_path):
    out = tmp_path / "dead"
    p = write_plan(tmp_path, tiny_plan("disaggregated"))
    r = cli(["run", p, "--out", str(out), "--iterations", "2", "--image-size", "64", *QUICK_ENV_FLAGS,
             "--inject-actor-fault", "1", "--no-progress"])
    assert r.exit_code == 1, r.output
    lines = [x for x in r.output.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "a Ray actor died" in lines[0] and "partial record" in lines[0], r.output
    assert "generator_0 on node" in lines[0], r.output  # which actor, which node
    assert "Traceback" not in r.output
    record = json.loads((out / "record.json").read_text())
    # the generator is killed as rollout iteration 1 starts, while the actor may still train
    # iteration 0: the watch ends the run at once instead of when the generator is next called
    assert record["status"] == "failed" and record["counts"]["iterations"] in (0, 1)
    assert record["counts"]["env_steps"] == 2 * 10  # the first iteration's, counted right
    assert (out / "trace.json").exists()
