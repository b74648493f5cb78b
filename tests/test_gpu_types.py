"""GPU types and prices: the accelerator table, costs carried from the profile's GPU by FLOP/s,
HBM and link ratios, node capacities, and the time objective (fewest GPU-hours to N env steps
within T hours, answered in hours, GPU-hours and dollars)."""

from __future__ import annotations

import pytest

from perfmodel.calibration.reference import published_plan
from perfmodel.costs import StageCosts
from perfmodel.gpu import cluster_on, profile_gpu, profile_on
from perfmodel.planning.choice import choose, hours_to
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.hardware import ACCELERATORS, accelerator, scale_factors
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import load_profile


def test_table_has_the_four_gpus_with_datasheet_ratios() -> None:
    assert {"a100", "h100", "h200", "b200"} <= set(ACCELERATORS)
    for a in ACCELERATORS.values():
        assert a.source and a.bf16_dense_tflops > 0 and a.memory_gb > 0 and a.node_cpu_cores > 0
    # Same Hopper compute on H100 and H200, more HBM bandwidth and memory on H200.
    f = scale_factors("h100", "h200")
    assert f.compute_time == 1.0 and f.memory_time < 1.0
    assert accelerator("h200").memory_gb > accelerator("h100").memory_gb
    with pytest.raises(ConfigError, match="cluster.gpu: must be one of"):
        accelerator("v100")


def test_costs_scale_by_the_bound_they_are_limited_by() -> None:
    prof = load_profile("pi05")
    assert profile_gpu(prof) == "h100"
    assert profile_on(prof, "h100") is prof
    h, a, b = prof.costs, profile_on(prof, "a100").costs, profile_on(prof, "b200").costs
    # The batch-proportional part is compute-bound (FLOP/s ratio), the fixed part memory-bound
    # (HBM ratio); a call's host-path latency (the bundled profiles' whole fixed per-call time)
    # and env physics (CPU) are kept.
    assert a.infer_s.slope / h.infer_s.slope == pytest.approx(989 / 312)
    assert h.infer_latency_s == h.infer_s.intercept > 0
    assert a.infer_s.intercept == pytest.approx(h.infer_s.intercept) and a.infer_latency_s == h.infer_latency_s
    assert a.train_micro_batch_s.intercept / h.train_micro_batch_s.intercept == pytest.approx(3350 / 2039)
    assert b.train_micro_batch_s(64) < h.train_micro_batch_s(64) < a.train_micro_batch_s(64)
    assert a.env_step_core_s == h.env_step_core_s
    # Through the plan: StageCosts reads the plan's cluster.gpu.
    plan = published_plan(prof, "streamer", 16, "1:1")
    on_a100 = plan.with_(cluster=cluster_on(plan.cluster, "a100"))
    assert StageCosts(on_a100, prof).infer_s(32) > StageCosts(plan, prof).infer_s(32)


def test_node_moves_with_the_gpu() -> None:
    prof = load_profile("pi05")
    c = published_plan(prof, "colocated", 8, None).cluster
    a = cluster_on(c, "a100")
    assert a.gpu == "a100" and a.intra_node_bw_GBps < c.intra_node_bw_GBps and a.inter_node_bw_GBps < c.inter_node_bw_GBps
    assert a.node_ram_gb == c.node_ram_gb / 2  # DGX A100 1 TB vs DGX H100 2 TB
    d = Plan.from_dict({**published_plan(prof, "colocated", 8, None).to_dict(), "cluster": a.__dict__}).to_dict()
    assert d["cluster"]["gpu"] == "a100"
    with pytest.raises(ConfigError, match="plan.cluster.gpu"):
        Plan.from_dict({**published_plan(prof, "colocated", 8, None).to_dict(),
                        "cluster": {**a.__dict__, "gpu": "tpu"}})


def _row(i: int, mode: str, gpus: int, thr: float) -> dict:
    return {"index": i, "mode": mode, "gpus": gpus, "allocation_ratio": None if mode == "colocated" else "1:1",
            "rollout_gpus": gpus, "actor_gpus": gpus, "pipeline_stage_num": 1, "b_max": None, "t_max_s": 0.05,
            "status": "ok", "throughput_env_steps_per_s": thr, "env_steps_per_gpu_hour": thr * 3600 / gpus,
            "env_steps_per_dollar": thr * 3600 / gpus / 2.0,
            "bound_env_steps_per_s": thr, "bottleneck": "env", "gain_over_colocated_pct": None,
            "prediction": {"utilization": {"resources": {"gpu": 0.5}}, "stage_time_s": {"env_step": 1.0}}}


def test_time_objective_takes_the_cheapest_plan_that_finishes_in_time() -> None:
    rows = [_row(0, "colocated", 8, 400.0), _row(1, "streamer", 16, 1000.0), _row(2, "streamer", 32, 1500.0)]
    doc = {"rows": rows, "spec": {"gpu_hour_price": 2.0}}
    # 1e8 steps: 8 GPUs take 69 h, 16 GPUs 27.8 h (444 GPU-h), 32 GPUs 18.5 h (593 GPU-h).
    c = choose(doc, 32, "time", (1e8, 30.0))
    assert c["best"]["gpus"] == 16
    g = c["goal"]["best"]
    assert g["hours"] == pytest.approx(1e8 / 1000 / 3600) and g["gpu_hours"] == pytest.approx(16 * g["hours"])
    assert g["dollars"] == pytest.approx(2.0 * g["gpu_hours"])
    assert "GPU-hours" in c["explanation"] and "$" in c["explanation"]
    # A tighter deadline forces the bigger, dearer plan; an impossible one is refused, naming the fastest.
    assert choose(doc, 32, "time", (1e8, 20.0))["best"]["gpus"] == 32
    with pytest.raises(ConfigError, match="--within-hours: no plan .* the fastest there, streamer on 32 GPUs"):
        choose(doc, 32, "time", (1e8, 10.0))
    with pytest.raises(ConfigError, match="--env-steps"):
        choose(doc, 32, "time")
    assert hours_to(rows[0], 3600 * 400.0) == pytest.approx(1.0)


def test_another_gpu_type_is_an_extrapolation_said_so() -> None:
    """Costs carried to a GPU type no calibration measured are flagged, at a calibrated GPU
    count too, in predict's text and JSON; on the calibrated type nothing is flagged."""
    import json

    from tests.conftest import run_cli

    def ext(gpu: str) -> tuple[dict, str]:
        r = run_cli("predict", "--mode", "colocated", "--gpus", "8", "--gpu", gpu, "--quiet")
        j = run_cli("predict", "--mode", "colocated", "--gpus", "8", "--gpu", gpu, "--quiet", "--json")
        assert r.returncode == 0 and j.returncode == 0
        return json.loads(j.stdout)["extrapolation"], r.stdout

    a100, text = ext("a100")
    assert a100["beyond_calibrated_gpu_type"] and (a100["gpu_type"], a100["calibrated_gpu_type"]) == ("a100", "h100")
    assert not a100["beyond_calibrated_gpus"] and "carried to a100 by datasheet ratios" in text
    h100, text = ext("h100")
    assert not h100["beyond_calibrated_gpu_type"] and "datasheet ratios" not in text
    # stated without an interval too (the flag is not part of the interval's computation)
    j = run_cli("predict", "--mode", "colocated", "--gpus", "8", "--gpu", "a100", "--quiet", "--json", "--no-interval")
    assert json.loads(j.stdout)["extrapolation"]["beyond_calibrated_gpu_type"]
