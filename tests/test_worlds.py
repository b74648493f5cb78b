"""One interval mechanism (issue 40 item 3): every interval is worlds.envelope over the worlds its
generators give; the wrappers that each source of doubt once added are gone; the world that sets
each end is named; a later source (measured workload widths) enters as worlds."""

from __future__ import annotations

import ast
import json
import math
from dataclasses import replace

import pytest

from perfmodel.calibration.reference import published_plan
from perfmodel.calibration.worlds import World, envelope, paired
from perfmodel.schema.profile import Profile
from perfmodel.prediction import predict
from tests.test_layers import PACKAGES, ROOT, import_graph

Z = 1.6448536269514722

# The wrappers the interval went through before, one per source of doubt, and the helpers that
# joined their ends: none may be defined or imported anywhere (the import graph shows it).
OLD = {"with_members", "with_member_ratios", "with_unidentified", "with_gpu_type_bracket", "gpu_type_other_end",
       "with_backbone_corners", "backbone_corners", "interval_from_deltas", "ratio_from_deltas", "ratio_of",
       "with_ratio_bracket", "with_ends", "joined", "_sided_var", "_bracket"}


def test_the_old_interval_wrappers_are_gone():
    g = import_graph()
    assert "perfmodel.calibration.interval_ends" not in g
    assert not [m for m, deps in g.items() if "perfmodel.calibration.interval_ends" in deps]
    for mod in ("perfmodel.calibration.uncertainty", "perfmodel.calibration.structural",
                "perfmodel.calibration.uncalibrated", "perfmodel.calibration.crossval"):
        assert "perfmodel.calibration.worlds" in g[mod] or "perfmodel.calibration.uncertainty" in g[mod], mod
    found = []
    for pkg in (*PACKAGES, "tests", "benchmarks"):
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in OLD:
                    found.append(f"{path.relative_to(ROOT)}: def {node.name}")
                elif isinstance(node, ast.ImportFrom) and {a.name for a in node.names} & OLD:
                    found.append(f"{path.relative_to(ROOT)}: imports {sorted({a.name for a in node.names} & OLD)}")
    assert not found, found


def _w(name, change, rule="spread", group=None, kind="model"):
    return World(name, kind, group or name, rule, change)


def test_one_rule_for_every_kind_of_world():
    """Spread groups add in quadrature, bracket groups linearly, a reach world is reached, a
    recorded one moves nothing; a group moves each end by its extreme world that way only."""
    worlds = [_w("a -", -0.3, group="a"), _w("a +", 0.4, group="a"),  # spread
              _w("b -", -0.4, group="b"), _w("b +", -0.1, group="b"),  # spread, both down (a peak)
              _w("p low", -0.2, "bracket", "p", "unidentified"), _w("p high", 0.1, "bracket", "p", "unidentified"),
              _w("m", 0.05, "bracket", "members", "structural"),
              _w("r", 0.9, "reach", "corners", "backbone"), _w("r2", -0.1, "reach", "corners", "backbone"),
              _w("q", -5.0, "recorded", "members2", "structural")]
    iv = envelope(10.0, worlds, coverage=0.9, method="m", fitted=True)
    lo = -math.sqrt(0.3 ** 2 + 0.4 ** 2) - 0.2
    hi = math.sqrt(0.4 ** 2) + 0.1 + 0.05
    assert iv["low"] == pytest.approx(10.0 * math.exp(lo)) and iv["high"] == pytest.approx(10.0 * math.exp(0.9))
    assert iv["ends"]["low"]["name"] == "b -" and iv["ends"]["high"]["name"] == "r"
    assert iv["half_width_log"] == pytest.approx(0.5 * (0.9 - lo))
    assert hi < 0.9
    assert iv["components_pct"] == pytest.approx({"model_pct": 100 * 0.5, "unidentified_pct": 30.0,
                                                  "structural_pct": 5.0, "backbone_pct": 100.0,
                                                  "parameters_pct": 0.0, "extrapolation_pct": 0.0})
    assert [w["name"] for w in iv["worlds"]] == [w.name for w in worlds]  # every world recorded, the recorded one too
    with pytest.raises(ValueError, match="rule must be one of"):
        envelope(1.0, [_w("x", 0.1, "sideways")], coverage=0.9, method="m", fitted=True)


def test_a_ratio_pairs_the_worlds_of_both_plans():
    """A simulated world moves the ratio by the difference of the two plans' changes; a
    statistical one combines as it says (independent: in quadrature; a pair error at one GPU
    count: the measured one); a world one plan lacks moves that plan by nothing."""
    a = [World("d +", "parameters", "d", "spread", 0.2), World("d -", "parameters", "d", "spread", -0.1),
         World("s -", "model", "s", "spread", -0.03, ratio="independent"),
         World("x -", "extrapolation", "x", "spread", -0.1, ratio="pair", pair_change=-0.05),
         World("only a", "gpu_type", "g", "bracket", 0.3)]
    b = [World("d +", "parameters", "d", "spread", 0.15), World("d -", "parameters", "d", "spread", -0.1),
         World("s -", "model", "s", "spread", -0.04, ratio="independent"),
         World("x -", "extrapolation", "x", "spread", -0.2, ratio="pair", pair_change=-0.07)]
    got = {w.name: w.log_change for w in paired(a, b, same_scale=True)}
    assert got == pytest.approx({"d +": 0.05, "d -": 0.0, "s -": -0.05, "x -": -0.07, "only a": 0.3})
    across = {w.name: w.log_change for w in paired(a, b, same_scale=False)}
    assert across["x -"] == pytest.approx(-math.sqrt(0.1 ** 2 + 0.2 ** 2))


def _hand_made(scenario_dict) -> Profile:
    scenario_dict["provenance"]["uncertainty"] = {
        "method": "hand-made scenario", "calibrated_gpus": [2], "calibrated_nodes": [1],
        "residual_sd_log": 0.01, "extrapolation_sd_log_per_doubling": 0.02, "extrapolation_source": "typed in for a test"}
    return Profile.from_dict(scenario_dict)


def test_a_tiny_scenario_names_the_world_at_each_end(scenario_dict, tmp_path, monkeypatch):
    """A hand-made profile calibrated at 2 GPUs, predicted at 4 (one doubling): the extrapolation
    error (2 % per doubling) outweighs the model error (1 %) and sets both ends. With a measured
    width along envs per GPU (5 % at one doubling) and twice the envs per GPU, the workload world
    sets them, the interval is the three in quadrature, and predict's text names it."""
    import perfmodel.extrapolation as extrapolation
    from perfmodel.commands.predict import interval_rows

    widths = tmp_path / "workload_widths.json"
    monkeypatch.setattr(extrapolation, "WORKLOAD_WIDTHS", widths)
    prof = _hand_made(scenario_dict)
    plan = published_plan(prof, "disaggregated", 4, "1:1")
    p = predict(plan, prof)
    iv, thr = p["throughput_interval"], p["throughput_env_steps_per_s"]
    assert (iv["ends"]["low"]["name"], iv["ends"]["high"]["name"]) == ("extrapolation -", "extrapolation +")
    assert iv["low"] == pytest.approx(thr * math.exp(-Z * math.sqrt(0.01 ** 2 + 0.02 ** 2)), rel=1e-9)

    widths.write_text(json.dumps({"kind": "workload_widths",
                                  "axes": {"envs_per_gpu": {"sd_log_by_distance": [[1.0, 0.05], [2.0, 0.08]]}}}))
    wide = plan.with_(workload=replace(plan.workload, total_num_envs=2 * plan.workload.total_num_envs))
    q = predict(wide, prof)
    ext, iv, thr = q["extrapolation"], q["throughput_interval"], q["throughput_env_steps_per_s"]
    assert "envs_per_gpu" in ext["beyond_calibrated_workload"]
    assert ext["workload_widths"]["envs_per_gpu"] == {"distance": 1.0, "sd_log": pytest.approx(0.05),
                                                      "beyond_measured_distance": False}
    assert ext["workload_interval"].startswith("widened by the measured error of predicting another workload along "
                                               "envs_per_gpu (5.0 % sd at 1.00 doublings)")
    assert (iv["ends"]["low"]["name"], iv["ends"]["high"]["name"]) == ("workload envs_per_gpu -", "workload envs_per_gpu +")
    want = Z * math.sqrt(0.01 ** 2 + 0.02 ** 2 + 0.05 ** 2)
    assert (iv["low"], iv["high"]) == (pytest.approx(thr * math.exp(-want), rel=1e-9),
                                       pytest.approx(thr * math.exp(want), rel=1e-9))
    assert iv["components_pct"]["workload_pct"] == pytest.approx(100 * Z * 0.05, abs=1e-3)
    rows = interval_rows(q)
    assert ("ends set by", "low: workload envs_per_gpu - (workload, -7.9 %); "
                             "high: workload envs_per_gpu + (workload, +8.6 %)") in rows
    assert not [v for _, v in rows if "not widened" in v]


def test_workload_widths_grow_with_distance_and_are_checked(tmp_path):
    """Linear between the measured distances and from none at distance 0, in proportion beyond the
    farthest; a bad file is refused naming the field."""
    from perfmodel.extrapolation import axis_width, load_workload_widths
    from perfmodel.schema.errors import ConfigError

    pts = ((1.0, 0.05), (2.0, 0.08))
    assert axis_width(pts, 0.5) == (pytest.approx(0.025), False)
    assert axis_width(pts, 1.5) == (pytest.approx(0.065), False)
    assert axis_width(pts, 4.0) == (pytest.approx(0.16), True)
    assert load_workload_widths(tmp_path / "absent.json") == {}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"axes": {"envs_per_gpu": {"sd_log_by_distance": [[2.0, 0.1], [1.0, 0.2]]}}}))
    with pytest.raises(ConfigError, match="axes.envs_per_gpu.sd_log_by_distance"):
        load_workload_widths(bad)
    bad.write_text(json.dumps({"axes": {"colour": {"sd_log_by_distance": [[1.0, 0.1]]}}}))
    with pytest.raises(ConfigError, match="axes.colour"):
        load_workload_widths(bad)
