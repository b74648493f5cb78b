"""docs/metrics.md's 8-256 GPU table (issue 40 item 5) is the stored result, and the stored result
is what the model predicts now: a model change that moves it fails here until the result is
regenerated (`python benchmarks/structural_scale.py --out benchmarks/results/beyond_the_data.json`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import structural_scale as scale  # noqa: E402

STORED = json.loads(scale.RESULT.read_text())


def test_the_doc_shows_the_stored_result():
    assert scale.render(STORED) in (ROOT / "docs" / "metrics.md").read_text()


def test_the_stored_result_spans_8_to_256_gpus_for_both_backbones():
    rows = STORED["rows"]
    assert {(r["backbone"], r["gpus"], r["scale_global_batch"]) for r in rows} == {
        (b, g, s) for b in scale.BACKBONES for g in scale.GPUS for s in (False, True)}
    for r in rows:  # every row says what binds, how wide its interval is and which world sets its low end
        assert r["bottleneck"] and r["low"] < r["throughput"] < r["high"] and r["ends"].get("low")


@pytest.mark.parametrize("backbone, gpus, scaled", [("pi05", 32, False), ("gr00t_n15", 256, True)])
def test_the_stored_rows_are_what_the_model_predicts_now(backbone, gpus, scaled):
    row = next(r for r in STORED["rows"]
               if (r["backbone"], r["gpus"], r["scale_global_batch"]) == (backbone, gpus, scaled))
    now = scale.row_of(backbone, gpus, scaled)
    for k in ("throughput", "low", "high", "bottleneck", "ends", "global_batch_size"):
        assert now[k] == (pytest.approx(row[k], rel=1e-9) if isinstance(row[k], float) else row[k]), k
