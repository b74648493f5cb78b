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
