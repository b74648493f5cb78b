"""executor run through its command line on a tiny plan with real LIBERO scenes on CPU (slow):
--compare with --json and the run folder, an interrupt's partial record, a dead Ray actor's one
error. Split from tests/test_executor_run.py (its plans and helpers) so that the parallel suite
spreads the two files over its workers; each file has one Ray session (``ray_session``)."""

from __future__ import annotations

import json

import pytest

from perfmodel.schema.plan import Plan
from test_executor_run import cli, tiny_plan, write_plan

@pytest.mark.slow
def test_streamer_cli_compare_json_and_run_dir(ray_session, tmp_path, monkeypatch):
    from perfmodel import prediction

    predicted = []  # the profile of every prediction the command makes
    real = prediction.predict
    monkeypatch.setattr(prediction, "predict",
                        lambda plan, prof, **kw: predicted.append(prof) or real(plan, prof, **kw))
    out = tmp_path / "runs" / "s"
    p = write_plan(tmp_path, tiny_plan("streamer"))
    r = cli(["run", "--plan", p, "--out", str(out), "--iterations", "2", "--image-size", "64", "--soft-reset",
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
    assert probe["ratio"]["env_step"] == pytest.approx(probe["step_cpu_s_mean"] / probe["profile_step_cpu_s"])
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
    from perfmodel.rlinf.logs import read_run

    run = read_run(out, option="--from-run")
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
                opts=RunOptions(image_size=64, hard_reset=False))
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
    r = cli(["run", p, "--out", str(out), "--iterations", "2", "--image-size", "64", "--soft-reset",
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
