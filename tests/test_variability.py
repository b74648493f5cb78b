"""Variability: order statistics of the lock-step barrier, and when streaming beats dynamic
batching (exact tiny timelines)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy

from perfmodel.calibration.reference import published_plan
from perfmodel.costs import StageCosts
from perfmodel.schema.profile import Profile
from perfmodel.schema.timeline import Recorder
from perfmodel.sim.durations import Durations
from perfmodel.sim.workers import SampleBuffer, TrainLog, Trainer, WeightStore
from perfmodel.simulate import simulate
from perfmodel.variability import (empirical_expected_max_factor, expected_max_factor,
                                   lockstep_barrier_factor)


@pytest.mark.parametrize("m,cv", [(2, 0.1), (16, 0.05), (48, 0.3)])
def test_expected_max_matches_monte_carlo(m, cv):
    rng = np.random.default_rng(1)
    s2 = math.log1p(cv * cv)
    draws = rng.lognormal(-s2 / 2, math.sqrt(s2), size=(100_000, m)).max(axis=1)
    assert expected_max_factor(m, cv) == pytest.approx(draws.mean(), rel=2e-3)


def test_expected_max_limits_and_growth():
    assert expected_max_factor(1, 0.3) == 1.0 and expected_max_factor(10, 0.0) == 1.0
    f = [expected_max_factor(m, 0.1) for m in (2, 4, 16, 64)]
    assert all(a < b for a, b in zip(f, f[1:]))
    # two draws of a normal-ish spread: E[max] = mean + sd / sqrt(pi) to first order
    assert expected_max_factor(2, 0.01) == pytest.approx(1 + 0.01 / math.sqrt(math.pi), rel=1e-4)


def test_empirical_order_statistic_is_exact():
    # max of 2 draws from {1, 2, 3}: P(max=1)=1/9, P(2)=3/9, P(3)=5/9 -> 22/9; mean 2
    assert empirical_expected_max_factor([3, 1, 2], 2) == pytest.approx(22 / 9 / 2)
    assert empirical_expected_max_factor([1, 2, 3], 1) == 1.0


def test_lockstep_barrier_grows_with_envs_per_group(scenario_dict):
    """A lock-step group pays E[max over its cores]; the same envs stepping free pay the mean."""
    scenario_dict["variability"] = {"env_step_cv": 0.3}
    scenario_dict["node"]["gpus_per_node"] = 2  # the 2-GPU plan has the node to itself (a plan on part of a node gets that part of its cores)
    prof = Profile.from_dict(scenario_dict)
    plan = published_plan(prof, "disaggregated", 2, "1:1")
    c = StageCosts(plan, prof)
    cores = c.cores_per_worker  # 16 - 2 cores: 14
    free = [c.env_chunk_s(n, lockstep=False) for n in (2, 4, 8)]
    lock = [c.env_chunk_s(n, lockstep=True) for n in (2, 4, 8)]
    ratios = [b / a for a, b in zip(free, lock)]
    assert all(r > 1 for r in ratios) and ratios[0] < ratios[1] < ratios[2]
    k = plan.workload.num_action_chunks
    assert ratios[2] == pytest.approx(expected_max_factor(8, 0.3 / math.sqrt(k)), rel=1e-9)
    assert lockstep_barrier_factor(8, cores, k, 0.0) == 1.0
    # without variability the lock-step chunk is the free one (plus the profile's fitted slowdown, 0 here)
    det = StageCosts(plan, Profile.from_dict({**scenario_dict, "variability": {}}))
    assert det.env_chunk_s(8, True) == det.env_chunk_s(8, False)


def _actor_fed(prof: Profile, stream: bool, arrivals: list[tuple[float, int]], collapse: bool,
               **plan_changes) -> tuple[simpy.Environment, Trainer, WeightStore, TrainLog]:
    """An actor (1 rank) whose samples arrive at the given times (the feeding process started)."""
    plan = published_plan(prof, "streamer" if stream else "rollout_async", 2, "1:1", max_staleness=0,
                          **plan_changes)
    costs = StageCosts(plan, prof)
    env = simpy.Environment()
    buffer, weights, log = SampleBuffer(env), WeightStore(env), TrainLog()
    actor = Trainer(env, [simpy.Resource(env, 1)], costs, Durations(costs, None), Recorder(), buffer, weights,
                    log, rollout_done=None, stream=stream, switch_s=0.0, collapse=collapse)

    def feed():
        now = 0.0
        for t, n in arrivals:
            yield env.timeout(t - now)
            now = t
            yield buffer.put(n)

    env.process(feed())
    return env, actor, weights, log


def _actor_end(prof: Profile, stream: bool, arrivals: list[tuple[float, int]], collapse: bool = True) -> float:
    """One training iteration of the actor (1 rank) with samples arriving at the given times."""
    env, actor, _, log = _actor_fed(prof, stream, arrivals, collapse)
    done = env.process(actor.run(1))
    env.run(until=done)
    return log.iteration_done[0]


@pytest.mark.parametrize("collapse", [True, False])
def test_streamer_gains_only_when_a_global_batch_arrives_in_pieces(scenario_profile, collapse):
    """128 samples per iteration, global batch 32 = 4 micro-batches of 8 on 1 rank (0.26 s each),
    optimizer step 0.3 s, 2 passes: 2.68 s of actor work per global batch.

    Spread arrivals (16 samples every second, t = 1..8): dynamic batching trains batch j once it
    is whole (t = 2, 4, 6, 8): ends 2 + 2.68 = 4.68, 7.36, 10.04, 12.72. Streaming starts batch 0's
    first pass at t = 1 (micro-batches 0-1), the rest at t = 2: first pass ends 2.82, second 4.16;
    batches 1-3 then find their samples there and follow back to back: 4.16 + 3 x 2.68 = 12.2.
    Aligned arrivals (32 samples at t = 2, 4, 6, 8) and everything at once (t = 0) give both modes
    the same timeline: a whole batch is there whenever any of it is."""
    plan = published_plan(scenario_profile, "streamer", 2, "1:1")
    assert plan.workload.samples_per_iteration == 128
    c = StageCosts(plan, scenario_profile)
    assert c.micro_batching(32) == (4, 8) and c.micro_batch_s(8) == pytest.approx(0.26)
    assert c.optimizer_step_s() == pytest.approx(0.3)
    def end(stream, arrivals):
        return _actor_end(scenario_profile, stream, arrivals, collapse)

    spread = [(float(t), 16) for t in range(1, 9)]
    assert end(False, spread) == pytest.approx(12.72)
    assert end(True, spread) == pytest.approx(12.2)
    aligned = [(float(t), 32) for t in (2, 4, 6, 8)]
    assert end(False, aligned) == pytest.approx(12.72)
    assert end(True, aligned) == pytest.approx(12.72)
    at_once = [(0.0, 128)]
    assert end(True, at_once) == pytest.approx(end(False, at_once)) == pytest.approx(4 * 2.68)


def test_streamer_gains_when_deliveries_are_spread(scenario_dict):
    """Asynchronous rollout's groups start spread over a chunk step (perfmodel/sim/workers.py
    EnvWorker._group: the independent envs they stand for are not in phase), so with cores to spare
    their episodes end apart and streaming starts a global batch before all of it has arrived:
    never slower than rollout_async, here faster (15.98 s against 16.50 s an iteration). Before
    issue 32 the groups stayed in phase and the two were equal."""
    scenario_dict["node"]["gpus_per_node"] = 2  # the 2-GPU plan has the node to itself (a plan on part of a node gets that part of its cores)
    scenario_profile = Profile.from_dict(scenario_dict)
    a = simulate(published_plan(scenario_profile, "rollout_async", 2, "1:1", max_staleness=0), scenario_profile)
    s = simulate(published_plan(scenario_profile, "streamer", 2, "1:1", max_staleness=0), scenario_profile)
    assert s.iteration_time_s < a.iteration_time_s


def _version_times(prof: Profile, stream: bool, arrivals: list[tuple[float, int]], granularity: str,
                   collapse: bool) -> list[float]:
    """When each weight version of one training iteration becomes available to a rollout (the
    time its ``wait_for`` fires), samples arriving at the given times."""
    env, actor, weights, _ = _actor_fed(prof, stream, arrivals, collapse, version_granularity=granularity)
    versions = actor.versions
    seen: dict[int, float] = {}

    def waiter(v):
        yield weights.wait_for(v)
        seen[v] = env.now
        assert weights.version >= v  # the version a rollout reads once woken

    for v in range(1, versions + 1):
        env.process(waiter(v))
    env.run(until=env.process(actor.run(1)))
    env.run(until=env.now + 1e-9)  # wake-ups at the iteration's end
    return [seen[v] for v in range(1, versions + 1)]


@pytest.mark.parametrize("collapse", [True, False])
def test_version_per_optimizer_step_lets_the_streamer_publish_earlier(scenario_profile, collapse):
    """plan.version_granularity: the scenario above (4 global batches of 32, 2 passes each, 0.26 s
    per micro-batch of 8, 0.3 s per optimizer step), 16 samples a second from t = 1.

    Per iteration (today's default) there is one version, at the iteration's end: 12.72 with
    dynamic batching, 12.2 streaming. Per optimizer step there are 8. Dynamic batching starts batch
    j when it is whole (t = 2, then back to back): versions at 2 + 1.34 = 3.34, 4.68, then every
    1.34 s to 12.72. Streaming trains batch 0's first pass on the samples as they come (t = 1 and 2:
    micro-batches end 1.26, 1.52, 2.26, 2.52, + 0.3 = 2.82), the second pass ends 4.16 and batches
    1-3 follow back to back: 2.82, 4.16, 5.50, ..., 12.2. A rollout whose staleness bound waits for
    version 2 starts at 4.16 instead of 4.68: where a version is an optimizer step, the streamer's
    earlier steps reach the rollout; where it is an iteration, only the end does."""
    spread = [(float(t), 16) for t in range(1, 9)]

    def times(stream, granularity):
        return _version_times(scenario_profile, stream, spread, granularity, collapse)

    assert times(False, "iteration") == pytest.approx([12.72])
    assert times(True, "iteration") == pytest.approx([12.2])
    assert times(False, "optimizer_step") == pytest.approx([3.34 + 1.34 * i for i in range(8)])
    assert times(True, "optimizer_step") == pytest.approx([2.82] + [4.16 + 1.34 * i for i in range(7)])
    # aligned deliveries (whole global batches): the two modes publish alike under either reading
    aligned = [(float(t), 32) for t in (2, 4, 6, 8)]
    assert (_version_times(scenario_profile, True, aligned, "optimizer_step", collapse)
            == pytest.approx(_version_times(scenario_profile, False, aligned, "optimizer_step", collapse)))


def test_synchronous_modes_are_the_same_under_either_version_granularity(scenario_profile):
    """Staleness 0 waits for the whole previous iteration's training either way."""
    for mode in ("colocated", "disaggregated"):
        a = published_plan(scenario_profile, mode, 2, None if mode == "colocated" else "1:1")
        b = a.with_(version_granularity="optimizer_step")
        assert (simulate(a, scenario_profile).throughput_env_steps_per_s
                == simulate(b, scenario_profile).throughput_env_steps_per_s)


def test_version_granularity_is_a_checked_plan_field():
    from perfmodel.schema.errors import ConfigError
    from perfmodel.schema.plan import Plan

    d = {"mode": "rollout_async", "cluster": {"gpus": 2}, "workload": {"total_num_envs": 4}}
    assert Plan.from_dict(d).version_granularity == "iteration"
    assert "version_granularity" not in Plan.from_dict(d).to_dict()  # plans written before read the same
    p = Plan.from_dict({**d, "version_granularity": "optimizer_step"})
    assert Plan.from_dict(p.to_dict()) == p
    with pytest.raises(ConfigError, match="plan.version_granularity.*iteration, optimizer_step"):
        Plan.from_dict({**d, "version_granularity": "epoch"})
