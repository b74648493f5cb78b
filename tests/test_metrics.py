"""Run metrics from a timeline (perfmodel.schema.metrics): one hand-made timeline, exact figures."""

from __future__ import annotations

import pytest

from perfmodel.schema.metrics import error_pct, measured_window, plan_fields, run_counts, staleness, window_metrics
from perfmodel.schema.plan import Plan
from perfmodel.schema.timeline import Recorder


def plan(mode: str) -> Plan:
    # 2 envs x 10 steps x 1 epoch: 20 env steps per iteration; one env worker per rollout GPU
    return Plan.from_dict({
        "mode": mode, "allocation_ratio": None if mode == "colocated" else "1:1",
        "workload": {"total_num_envs": 2, "max_episode_steps": 10, "num_action_chunks": 5, "rollout_epoch": 1,
                     "micro_batch_size": 2, "global_batch_size": 4},
        "cluster": {"gpus": 2, "gpus_per_node": 2, "cpu_cores_per_node": 4, "actor_cpu_cores_per_gpu": 1},
    })


def timeline() -> Recorder:
    rec = Recorder()
    rec.span("env_step", "env_worker_0", "group_0", 0.0, 3.0, units=2)  # 2 cores, 2 s in the window
    rec.span("inference", "rollout_gpu_0", "inference", 0.5, 2.0)  # 1 s in the window
    rec.span("train", "actor", "train", 2.0, 4.0)
    rec.span("optimizer_step", "actor", "train", 4.0, 5.0)
    rec.span("phase_switch", "all_gpus", "phase_switch", 5.0, 6.0)  # after the window: not counted
    return rec


ITERATION_DONE = [1.0, 3.0, 5.0]  # warm-up iteration ends at 1 s: window [1, 5], 2 iterations


def test_window_metrics_of_a_disaggregated_timeline():
    p = plan("disaggregated")
    assert (p.rollout_gpus, p.actor_gpus, p.env_cores_per_worker) == (1, 1, 3.0)
    m = window_metrics(p, timeline(), ITERATION_DONE, warmup=1)
    assert m is not None
    assert (m.window, m.measured_iterations, m.iteration_time_s) == ((1.0, 5.0), 2, 2.0)
    assert m.throughput_env_steps_per_s == 20 / 2.0
    # per unit per iteration: env stages per worker's 3 cores, the others per GPU
    assert m.stage_time_s == pytest.approx({"env_reset": 0.0, "env_step": 4.0 / 3 / 2, "inference": 0.5,
                                            "train": 1.0, "optimizer_step": 0.5, "weight_sync": 0.0,
                                            "phase_switch": 0.0})
    assert m.utilization["stages"]["inference"] == pytest.approx(1.0 / 4)
    assert m.utilization["resources"] == pytest.approx({"rollout_gpu": 0.25, "actor_gpu": 3.0 / 4,
                                                        "env_cpu": 4.0 / (4 * 3)})


def test_colocated_reports_the_shared_gpus_and_busy_overrides_the_timeline():
    p = plan("colocated")
    assert (p.rollout_gpus, p.actor_gpus) == (2, 2)
    m = window_metrics(p, timeline(), ITERATION_DONE, warmup=1, env_workers=1, busy={"env_step": 0.0})
    assert m is not None
    stages = m.utilization["stages"]
    # one env worker and one rollout GPU recorded (env_workers=1); 2 actor GPUs
    assert stages["inference"] == pytest.approx(1.0 / 4) and stages["train"] == pytest.approx(2.0 / 8)
    assert set(m.utilization["resources"]) == {"gpu", "env_cpu"}
    assert m.utilization["resources"]["gpu"] == pytest.approx(1.0 / 4 + 2.0 / 8 + 1.0 / 8)
    assert m.utilization["resources"]["env_cpu"] == 0.0 and m.stage_time_s["env_step"] == 0.0


def test_no_window_before_the_first_measured_iteration():
    assert measured_window([1.0], warmup=1) is None
    assert measured_window([1.0], warmup=0) == (0.0, 1.0)
    assert window_metrics(plan("disaggregated"), timeline(), [1.0], warmup=1) is None


def test_staleness_counts_only_the_measured_iterations():
    # iteration 0 (warm-up) is ignored; lags 1 - 0, 1 - 1, 2 - 1
    assert staleness({0: [0, 0], 1: [0, 1], 2: [1]}, warmup=1) == {"mean": 2 / 3, "max": 1.0}
    assert staleness({0: [0]}, warmup=1) == {"mean": 0.0, "max": 0.0}


def test_run_counts_names_every_count():
    c = run_counts(iterations=3, warmup=1, env_steps=60, samples=12, optimizer_steps=3, micro_batches=6,
                   weight_versions=3, inference_calls=6)
    assert list(c) == ["iterations", "warmup_iterations", "env_steps", "samples", "optimizer_steps",
                       "micro_batches", "weight_versions", "inference_calls"]
    assert c["warmup_iterations"] == 1 and c["env_steps"] == 60


def test_plan_fields_state_the_split():
    assert plan_fields(plan("disaggregated")) == {"gpus": 2, "allocation_ratio": "1:1", "rollout_gpus": 1,
                                                  "actor_gpus": 1, "pipeline_stage_num": 1, "total_num_envs": 2,
                                                  "global_batch_size": 4, "micro_batch_size": 2}
    assert plan_fields(plan("colocated"))["rollout_gpus"] == plan_fields(plan("colocated"))["actor_gpus"] == 2


def test_error_is_prediction_over_measurement_minus_one():
    assert error_pct(12.0, 10.0) == pytest.approx(20.0)  # the model predicted more: positive
    assert error_pct(5.0, 10.0) == pytest.approx(-50.0)
    assert error_pct(None, 10.0) is None and error_pct(1.0, None) is None and error_pct(1.0, 0.0) is None


def test_actor_headroom_is_where_the_actor_binds():
    """``headroom``: an asynchronous prediction whose rollout binds names the factor by which the
    actor may slow down before it binds. Checked on the bundled pi0.5 at 32 GPUs (env-bound, the
    actor 84 % busy): the actor's costs scaled to just under that factor leave the throughput as
    it is; 10 % beyond it, the throughput falls. Synchronous and actor-bound plans have none."""
    from dataclasses import replace

    from perfmodel.calibration.reference import published_plan
    from perfmodel.prediction import predict
    from perfmodel.schema.profile import load_profile
    from perfmodel.simulate import simulate

    prof = load_profile("pi05", "backbone")

    def actor_slower(f: float):
        c = prof.costs
        t = c.train_micro_batch_s
        return replace(prof, costs=replace(c, optimizer_fixed_s=c.optimizer_fixed_s * f, optimizer_step_s=c.optimizer_step_s * f,
                                           train_micro_batch_s=replace(t, intercept=t.intercept * f, slope=t.slope * f)))

    p32 = published_plan(prof, "rollout_async", 32, "1:1", max_staleness=1)
    out = predict(p32, prof, interval=False)
    assert out["bottleneck"] == "env"
    h = out["headroom"]
    assert h["stage"] == "actor" and h["factor"] == pytest.approx(1 / out["utilization"]["resources"]["actor_gpu"])
    base = out["throughput_env_steps_per_s"]
    assert simulate(p32, actor_slower(0.97 * h["factor"])).throughput_env_steps_per_s == pytest.approx(base, rel=1e-3)
    assert simulate(p32, actor_slower(1.1 * h["factor"])).throughput_env_steps_per_s < 0.97 * base
    # none where every stage adds to the iteration, nor where the actor already binds
    assert "headroom" not in predict(published_plan(prof, "disaggregated", 32, "1:1"), prof, interval=False)
    p128 = published_plan(prof, "rollout_async", 128, "1:1", max_staleness=1)
    assert predict(p128, prof, interval=False)["bottleneck"] == "actor"
    assert "headroom" not in predict(p128, prof, interval=False)
