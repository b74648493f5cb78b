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

    return HostProbe(envs=2, density=2.0, core=1, step_cpu_s=step, reset_cpu_s=reset,
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
