"""The bound's gap read from the simulated timeline (perfmodel.bound_gap): the activities add up
to the iteration, their excess over the bound's terms to the gap, and on RLinf's own config the
gap is the lock-step wait on inference that the costs imply."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfmodel.bound import bound
from perfmodel.bound_gap import bound_gap, format_gap, merged, uncovered_length
from perfmodel.costs import StageCosts
from perfmodel.prediction import predict
from perfmodel.rlinf.importer import load_rlinf
from perfmodel.schema.profile import load_profile
from perfmodel.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = next((p / "shared" / "reference" / "rlinf-configs" for p in (ROOT.parent, ROOT.parent.parent)
                  if (p / "shared" / "reference" / "rlinf-configs").is_dir()),
                 ROOT.parent / "shared" / "reference" / "rlinf-configs")
CONFIG = REFERENCE / "libero_10_grpo_openpi.yaml"


def test_union_and_uncovered_length():
    ivs = merged([(3.0, 5.0), (0.0, 2.0), (1.0, 2.5), (4.0, 9.0)], 0.5, 8.0)
    assert ivs == [(0.5, 2.5), (3.0, 8.0)]
    assert uncovered_length(ivs, [(1.0, 1.5), (2.0, 4.0), (7.0, 12.0)]) == pytest.approx(0.5 + 0.5 + 3.0)
    assert uncovered_length(ivs, []) == pytest.approx(7.0)


@pytest.mark.skipif(not CONFIG.is_file(), reason="RLinf's reference configs are not beside the checkout")
def test_rlinf_config_stage_times_add_up_to_the_iteration():
    plan = load_rlinf(CONFIG).plan
    profile = load_profile(plan.profile)
    costs = StageCosts(plan, profile)
    b = bound(costs)
    r = simulate(plan, profile)
    g = bound_gap(r.recorder, r.window, r.measured_iterations, costs, b)
    it = r.iteration_time_s
    # every instant of the window is one activity: they add up to the iteration
    assert sum(g["timeline_s"].values()) == pytest.approx(it, rel=1e-12)
    # the bound's terms add up to its iteration, the excesses to the gap
    assert sum(g["bound_s"].values()) == pytest.approx(b.iteration_s, rel=1e-12)
    assert sum(g["rest_s"].values()) == pytest.approx(it - b.iteration_s, rel=1e-9)
    assert g["share_of_bound"] == pytest.approx(r.throughput_env_steps_per_s / b.throughput_env_steps_per_s)
    # one pipeline stage of 8 envs, lock-step: each chunk step waits for the inference call's host
    # path (no span) and its GPU time, in series with the env step
    w = plan.workload
    calls = w.rollout_epoch * w.chunk_steps_per_epoch
    assert plan.pipeline_stage_num == 1 and plan.envs_per_stage == 8
    assert g["timeline_s"]["idle"] == pytest.approx(calls * costs.infer_latency_s, rel=1e-9)
    assert g["timeline_s"]["inference"] == pytest.approx(calls * costs.infer_gpu_s(8), rel=1e-9)
    # the rest is listed largest first (which of the two is larger depends on the profile's fit)
    rest = [x["activity"] for x in g["rest"]]
    assert sorted(rest) == ["idle", "inference"]
    assert [g["rest_s"][a] for a in rest] == sorted((g["rest_s"][a] for a in rest), reverse=True)
    assert "lock-step: 1 pipeline stage of 8 envs" in format_gap(g)


def test_asynchronous_mode_at_its_bound_names_no_mechanism():
    # the paper's rollout_async (pi0.5, 8 GPUs) is env-bound and reaches its bound: within the
    # trainer's window the rollout may run ahead, and no excess is left to name
    p = predict(*_published("rollout_async"), interval=False)
    g = p["bound_gap"]
    assert g["share_of_bound"] == pytest.approx(1.0, abs=1e-3)
    assert g["rest"] == []
    assert format_gap(g) == "100% of the bound"


def _published(mode: str):
    from perfmodel.calibration.reference import published_plan

    profile = load_profile("pi05")
    return published_plan(profile, mode, 8, None if mode == "colocated" else "1:1"), profile


@pytest.mark.skipif(not CONFIG.is_file(), reason="RLinf's reference configs are not beside the checkout")
def test_stored_rlinf_bound_gaps_are_current():
    """benchmarks/results/rlinf_bound_gap.json (what docs/metrics.md cites): every imported config
    runs one lock-step pipeline stage, and its entry for one config is what predict gives now."""
    import json

    stored = json.loads((ROOT / "benchmarks" / "results" / "rlinf_bound_gap.json").read_text())["configs"]
    assert len(stored) >= 35  # every RLinf config that imports (35 before NFT was read)
    assert all(c["bound_gap"]["cause"].startswith("lock-step: 1 pipeline stage") for c in stored.values())
    plan = load_rlinf(CONFIG).plan
    fresh = predict(plan, load_profile(plan.profile), interval=False)
    entry = stored[CONFIG.name]
    assert entry["throughput_env_steps_per_s"] == pytest.approx(fresh["throughput_env_steps_per_s"], rel=1e-9)
    shares = lambda g: {r["activity"]: r["share_of_iteration"] for r in g["rest"]}  # noqa: E731
    assert shares(entry["bound_gap"]) == pytest.approx(shares(fresh["bound_gap"]), rel=1e-9)
