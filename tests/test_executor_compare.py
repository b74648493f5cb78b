"""executor run --compare uses the project's one error definition: prediction / measurement - 1."""

import pytest

from executor.runtime.record import compare


def test_compare_error_is_prediction_over_measurement_minus_one():
    record = {"throughput_env_steps_per_s": 8.0, "iteration_time_s": 10.0,
              "stage_time_s": {"env_step": 4.0, "inference": 0.0}}
    pred = {"throughput_env_steps_per_s": 10.0, "iteration_time_s": 8.0,
            "stage_time_s": {"env_step": 3.0, "inference": 1.0}}
    out = compare(record, pred)
    assert out["error_pct"] == pytest.approx(25.0)  # predicted 25 % more throughput than measured
    assert out["iteration_time_error_pct"] == pytest.approx(-20.0)
    assert out["stages"]["env_step"]["error_pct"] == pytest.approx(-25.0)
    assert out["stages"]["inference"]["error_pct"] is None  # nothing measured: no ratio


def _probe(step, reset, prof_step=0.2, prof_reset=2.0, step_wall=None, reset_wall=None):
    from executor.runtime.probe import HostProbe

    return HostProbe(envs=2, density=2.0, cores=(1, 1), step_cpu_s=step, reset_cpu_s=reset,
                     step_wall_s=step if step_wall is None else step_wall,
                     reset_wall_s=reset if reset_wall is None else reset_wall,
                     profile_step_cpu_s=prof_step, profile_reset_cpu_s=prof_reset, wall_s=9.0, loadavg_1min=0.1)


def test_host_probe_ratio_scales_the_profiles_env_costs_and_nothing_else():
    from perfmodel.schema.profile import load_profile

    from executor.runtime.probe import scaled_profile

    probe = _probe([0.22, 0.26], [2.5, 2.3])  # this host: 20 % slower per step, 20 % per reset
    assert probe.ratio == pytest.approx({"env_step": 1.2, "env_reset": 1.2})
    prof = load_profile("pi05_tiny_cpu")
    scaled = scaled_profile(prof, _probe([0.3], [1.0]))
    assert scaled.costs.env_step_core_s == pytest.approx(prof.costs.env_step_core_s * 1.5)
    assert scaled.costs.env_reset_s == pytest.approx(prof.costs.env_reset_s * 0.5)
    assert scaled.costs.infer_s == prof.costs.infer_s and scaled.costs.optimizer_step_s == prof.costs.optimizer_step_s
    d = _probe([0.3], [1.0]).to_dict()
    assert d["samples"] == {"step_wall_s": [0.3], "reset_wall_s": [1.0], "step_cpu_s": [0.3], "reset_cpu_s": [1.0]}
    assert d["ratio"]["env_step"] == pytest.approx(1.5)


def test_host_probe_ratio_counts_the_core_time_other_processes_take():
    # a hog holding half the probe's core: the same CPU seconds per step, twice the wall seconds;
    # the run's envs will pay the wall seconds, so the profile is scaled by them
    probe = _probe([0.2, 0.2], [2.0], step_wall=[0.4, 0.4], reset_wall=[4.0])
    assert probe.cpu_ratio == pytest.approx({"env_step": 1.0, "env_reset": 1.0})
    assert probe.ratio == pytest.approx({"env_step": 2.0, "env_reset": 2.0})
    assert probe.core_share == pytest.approx({"env_step": 0.5, "env_reset": 0.5})


def test_a_profile_from_another_host_is_flagged_with_the_command_that_measures_it_here(monkeypatch):
    from dataclasses import replace

    from perfmodel.schema.profile import load_profile

    from executor.runtime import probe

    prof = load_profile("pi05_tiny_cpu")
    monkeypatch.setattr(probe, "this_host", lambda: {"cpu_model": "Other CPU 9000", "cpu_cores": 64})
    warn = probe.other_host(prof, "pi05", "tiny")
    assert warn is not None and "Other CPU 9000, 64 cores" in warn
    assert "executor profile --backbone pi05 --scale tiny" in warn
    hw = prof.provenance["hardware"]
    monkeypatch.setattr(probe, "this_host", lambda: {"cpu_model": hw["cpu_model"], "cpu_cores": hw["cpu_cores"]})
    assert probe.other_host(prof, "pi05", "tiny") is None
    bare = replace(prof, provenance={**prof.provenance, "hardware": None})
    assert probe.other_host(bare, "pi05", "tiny") is None  # a profile that does not say: nothing to flag


def _plan(mode: str, envs: int, gpus: int = 2, **cluster):
    from perfmodel.schema.plan import Plan

    return Plan.from_dict({
        "mode": mode, "allocation_ratio": None if mode == "colocated" else "1:1", "pipeline_stage_num": 1,
        "b_max": None, "t_max_s": 0.05, "max_staleness": 1, "profile": "pi05_tiny_cpu",
        "workload": {"total_num_envs": envs, "max_episode_steps": 10, "num_action_chunks": 5, "rollout_epoch": 1,
                     "update_epoch": 1, "micro_batch_size": 2, "global_batch_size": 2 * envs, "group_size": 1,
                     "algorithm": "ppo"},
        "cluster": {"gpus": gpus, "gpus_per_node": 2, "cpu_cores_per_node": 2, **cluster}})


def test_the_probe_steps_the_runs_env_layout_on_this_node(monkeypatch):
    """The probe's envs are the run's env processes on this node, each on the core the run's env
    worker pins it to: colocated on 2 device slots and 2 cores puts half the envs on each core;
    rollout_async 1:1 gives its one env worker the node's cores; a node beyond the first is not
    probed; at most PROBE_MAX_ENVS a core, and what 80 % of the free memory holds, evenly."""
    from executor.runtime import actors, probe

    monkeypatch.setattr(actors.os, "sched_getaffinity", lambda pid: {4, 7}, raising=False)
    monkeypatch.setattr(probe, "available_ram_gb", lambda: 100.0)
    assert probe.probe_layout(_plan("colocated", 8), 2.0) == [4, 4, 4, 4, 7, 7, 7, 7]
    assert probe.probe_layout(_plan("colocated", 2), 2.0) == [4, 7]
    assert probe.probe_layout(_plan("colocated", 16), 2.0) == [4] * probe.PROBE_MAX_ENVS + [7] * probe.PROBE_MAX_ENVS
    ra = probe.probe_layout(_plan("rollout_async", 4), 2.0)
    assert len(ra) == 4 and set(ra) <= {4, 7}
    # 4 GPUs on 2-GPU nodes: node 1's env worker is on another host, not probed
    assert len(probe.probe_layout(_plan("colocated", 8, gpus=4), 2.0)) == 4
    # 80 % of 10 GB holds four 2 GB envs: two a core, the cores evenly filled
    monkeypatch.setattr(probe, "available_ram_gb", lambda: float("inf"))  # /proc/meminfo unreadable: no cap
    assert len(probe.probe_layout(_plan("colocated", 8), 2.0)) == 8
    monkeypatch.setattr(probe, "available_ram_gb", lambda: 10.0)
    assert probe.probe_layout(_plan("colocated", 8), 2.0) == [4, 4, 7, 7]


def test_the_probe_charges_wall_seconds_times_the_cores_it_used():
    """Two envs on two cores that each step in 0.2 s wall: 0.2 core seconds an env step."""
    from executor.runtime.probe import HostProbe

    p = HostProbe(envs=2, density=1.0, cores=(0, 1), step_cpu_s=[0.2, 0.2], reset_cpu_s=[2.0, 2.0],
                  step_wall_s=[0.2], reset_wall_s=[2.0], profile_step_cpu_s=0.2, profile_reset_cpu_s=2.0,
                  wall_s=1.0, loadavg_1min=0.0)
    assert p.cores_used == 2 and p.where == "cores 0,1"
    assert p.ratio == pytest.approx({"env_step": 1.0, "env_reset": 1.0})


def test_a_capped_probe_is_compared_with_the_profile_at_its_own_density():
    """A probe holding fewer envs a core than the plan (memory, PROBE_MAX_ENVS) reads the
    profile's measured curve where it stepped, not at the plan's density."""
    from perfmodel.schema.profile import load_profile

    from executor.runtime.probe import profile_env_costs_at_density

    prof = load_profile("pi05_tiny_cpu")
    plan = _plan("colocated", 8)  # 4 envs a core
    curves = prof.costs.env_density
    d, step, reset = profile_env_costs_at_density(plan, prof)
    assert d == 4.0 and step == pytest.approx(curves["step_lockstep"].at(4.0)[0])
    d, step, reset = profile_env_costs_at_density(plan, prof, 2.0)
    assert d == 2.0 and step == pytest.approx(curves["step_lockstep"].at(2.0)[0])
    assert reset == pytest.approx(curves["reset"].at(2.0)[0])


def test_core_seconds_per_unit_are_each_envs_wall_over_its_cores_sharers():
    """Three envs: two share core 0 (each took 2 s of wall: 1 s of core time each), one alone on
    core 1 took 1.5 s: core seconds 1, 1 and 1.5; the group's wall (2 s) x 2 cores / 3 envs, 1.33,
    would put the slower core's pace on every env."""
    from executor.runtime.probe import core_seconds_per_unit

    assert core_seconds_per_unit([2.0, 2.0, 1.5], [0, 0, 1], 2) == pytest.approx((1 + 1 + 1.5) / 3)
    assert core_seconds_per_unit([3.0, 3.0], [None, None], 1) == pytest.approx(1.5)  # unpinned: n / cores
