"""Prediction intervals: contain the point, widen beyond the calibrated scale, zero for an exact
hand-made profile, unavailable when nothing supports one; the stored covariance's schema."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from perfmodel.calibration.reference import ReferencePoint, published_plan
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.profile import Profile, Uncertainty, load_profile
from perfmodel.prediction import predict
from tests.conftest import run_cli


def _iv(mode, gpus, prof):
    return predict(published_plan(prof, mode, gpus, None if mode == "colocated" else "1:1"), prof)


@pytest.mark.parametrize("mode", ["disaggregated", "streamer"])
def test_bundled_interval_contains_point_and_widens_beyond_calibrated_scale(mode):
    prof = load_profile("pi05")
    assert prof.uncertainty is not None and prof.uncertainty.calibrated_gpus == (8, 16, 32)
    p32, p64, p128 = (_iv(mode, g, prof) for g in (32, 64, 128))
    for p in (p32, p64, p128):
        iv = p["throughput_interval"]
        assert iv["low"] < p["throughput_env_steps_per_s"] < iv["high"] and iv["coverage"] == 0.9
    assert not p32["extrapolation"]["beyond_calibrated_gpus"]
    assert p64["extrapolation"]["beyond_calibrated_gpus"] and p64["extrapolation"]["beyond_calibrated_nodes"]
    w = [p["throughput_interval"]["width_pct"] for p in (p32, p64, p128)]
    assert w[0] < w[1] < w[2]
    assert p64["throughput_interval"]["components_pct"]["extrapolation_pct"] > 0
    assert p32["throughput_interval"]["components_pct"]["extrapolation_pct"] == 0


def test_published_points_mostly_inside_intervals():
    from perfmodel.calibration.reference import load_reference
    from perfmodel.schema.profile import BUNDLED_REFERENCE

    pts = [p for p in load_reference(BUNDLED_REFERENCE) if p.backbone == "pi05"]
    prof = load_profile("pi05")
    inside = 0
    for pt in pts:
        iv = _iv(pt.mode, pt.gpus, prof)["throughput_interval"]
        inside += iv["low"] <= pt.throughput_env_steps_per_s <= iv["high"]
    assert inside >= 0.8 * len(pts)


def test_exact_hand_made_profile_has_zero_width(scenario_dict):
    scenario_dict["provenance"]["uncertainty"] = {"method": "exact (hand-made scenario)", "calibrated_gpus": [2],
                                                  "calibrated_nodes": [1]}
    prof = Profile.from_dict(scenario_dict)
    p = predict(published_plan(prof, "disaggregated", 2, "1:1"), prof)
    iv = p["throughput_interval"]
    assert iv["low"] == iv["high"] == p["throughput_env_steps_per_s"] and iv["width_pct"] == 0
    assert not p["extrapolation"]["beyond_calibrated_gpus"]
    p4 = predict(published_plan(prof, "disaggregated", 4, "1:1"), prof)
    assert p4["extrapolation"]["beyond_calibrated_gpus"] and p4["extrapolation"]["doublings_beyond"] == 1.0


def test_no_interval_is_invented(scenario_profile):
    p = predict(published_plan(scenario_profile, "disaggregated", 2, "1:1"), scenario_profile)
    assert p["throughput_interval"] is None and "uncertainty" in p["throughput_interval_unavailable"]


def test_measured_profile_interval_from_raw_samples():
    prof = load_profile("pi05_tiny_cpu")
    p = predict(published_plan(prof, "disaggregated", 2, "1:1"), prof)
    iv = p["throughput_interval"]
    assert iv["low"] < p["throughput_env_steps_per_s"] < iv["high"] and iv["method"].startswith("measurement spread")
    assert p["extrapolation"]["beyond_calibrated_gpus"]  # measured: no calibrated scale
    d = copy.deepcopy(prof.to_dict())
    d["extra"].pop("env_chunk_step_s_vs_envs_per_worker")
    bare = Profile.from_dict(d)
    q = predict(published_plan(bare, "disaggregated", 2, "1:1"), bare)
    assert q["throughput_interval"] is None and "raw samples" in q["throughput_interval_unavailable"]


def _one_parameter(cov=None, ends=None) -> Profile:
    """The bundled pi0.5 profile with its uncertainty cut to one parameter, the env step time."""
    d = copy.deepcopy(load_profile("pi05").to_dict())
    u = d["provenance"]["uncertainty"]
    u.pop("direction_ends")
    u["parameters"] = ["env_step_core_s"]
    u["log_covariance"] = [[cov if cov is not None else 1e-4]]
    if ends is not None:
        u["direction_ends"] = [{"plus": [ends[0]], "minus": [ends[1]]}]
    return Profile.from_dict(d)


def test_parameter_term_follows_covariance():
    """Without stored profile-likelihood ends, a covariance is propagated through its fitted
    parameters at z standard deviations: for a small spread of the env step time, doubling its
    standard deviation doubles the parameter part of the interval."""
    widths = [_iv("rollout_async", 8, _one_parameter(cov=(f * 0.01) ** 2))["throughput_interval"]
              ["components_pct"]["parameters_pct"] for f in (1.0, 2.0)]
    assert widths[0] > 0 and widths[1] == pytest.approx(2 * widths[0], rel=0.05)


def test_stored_direction_ends_are_where_the_plan_is_evaluated():
    """With profile-likelihood ends stored (``direction_ends``), a prediction evaluates the plan
    there, whatever the covariance says: each end of the interval is the change at that end (over
    z, as one standard deviation) in quadrature with the residual model error."""
    from perfmodel.calibration.uncertainty import Z

    prof = _one_parameter(cov=1.0, ends=(0.04, -0.1))
    p = _iv("rollout_async", 8, prof)
    iv, thr = p["throughput_interval"], p["throughput_env_steps_per_s"]
    values = {n: float(v["value"]) for n, v in prof.provenance["parameters"].items()}
    step = values["env_step_core_s"]
    ends = []
    for x in (0.04, -0.1):
        ends.append(math.log(_iv("rollout_async", 8, _rebuilt(prof, {**values, "env_step_core_s": step * math.exp(x)}))
                             ["throughput_env_steps_per_s"] / thr) / Z)
    assert ends[0] < 0 < ends[1]  # a slower env step, less throughput
    s = prof.uncertainty.residual_sd_log
    assert iv["low"] == pytest.approx(thr * math.exp(-Z * math.sqrt(ends[0] ** 2 + s * s)), rel=1e-9)
    assert iv["high"] == pytest.approx(thr * math.exp(Z * math.sqrt(ends[1] ** 2 + s * s)), rel=1e-9)
    at_fit = _iv("rollout_async", 8, _one_parameter(cov=1.0, ends=(0.0, 0.0)))["throughput_interval"]
    assert at_fit["components_pct"]["parameters_pct"] == 0


def _rebuilt(prof: Profile, values: dict) -> Profile:
    from dataclasses import replace

    from perfmodel.backbones import get_backbone
    from perfmodel.calibration.calibrate import build_profile
    from perfmodel.calibration.measured import measured_of

    return replace(build_profile(get_backbone(prof.backbone), values, prof.costs.env_memory_gb, prof.provenance,
                                 measured_of(prof.costs)), name=prof.name, variability=prof.variability)


def test_schema_rejects_bad_covariance(scenario_dict):
    scenario_dict["provenance"]["uncertainty"] = {"method": "x", "parameters": ["a", "b"],
                                                  "log_covariance": [[1.0, 0.5], [0.2, 1.0]]}
    with pytest.raises(ConfigError, match="symmetric"):
        Profile.from_dict(scenario_dict)
    scenario_dict["provenance"]["uncertainty"]["log_covariance"] = [[1.0]]
    with pytest.raises(ConfigError, match="2 x 2"):
        Profile.from_dict(scenario_dict)


@pytest.mark.parametrize("change,field", [
    ({"parameters": 5, "direction_ends": [{"plus": [0.1], "minus": [-0.1]}]}, r"uncertainty\.parameters: must be a list"),
    ({"direction_ends": [{"plus": [0.1], "minus": [-0.1, 0.0]}]}, r"direction_ends\[0\]\.minus"),
    ({"direction_ends": [{"plus": [1000.0], "minus": [-0.1]}]}, r"direction_ends\[0\]\.plus\[0\]"),
    ({"direction_ends": [{"plus": [0.1], "minus": [-0.1]}] * 2}, r"uncertainty\.direction_ends: must have at most"),
    ({"unidentified": [{"name": "b", "low": 1.0, "high": 2.0}] * 2}, r"uncertainty\.unidentified: must name each"),
    ({"unidentified": [{"name": "a", "low": 1.0, "high": 2.0}]}, r"uncertainty\.unidentified: must not repeat"),
    ({"unidentified": [{"name": "b", "low": 2.0, "high": 1.0}]}, r"unidentified\[0\]\.high"),
])
def test_schema_rejects_bad_ends_and_brackets(scenario_dict, change, field):
    """Each bad uncertainty field is refused in one line naming it, never a traceback."""
    scenario_dict["provenance"]["uncertainty"] = {"method": "x", "parameters": ["a"], "log_covariance": [[1.0]], **change}
    with pytest.raises(ConfigError, match=field):
        Profile.from_dict(scenario_dict)


def test_schema_refuses_parameters_without_a_fitted_value(scenario_dict):
    """A covariance or bracket over a parameter the profile has no fitted value for is refused at
    load, in one line naming it (a prediction rebuilds the profile around those values)."""
    scenario_dict["provenance"]["parameters"] = {"a": {"value": 2.0}}
    scenario_dict["provenance"]["uncertainty"] = {"method": "x", "parameters": ["a"], "log_covariance": [[1.0]],
                                                  "unidentified": [{"name": "b", "low": 1.0, "high": 2.0}]}
    with pytest.raises(ConfigError, match=r"provenance\.uncertainty: names parameters without a fitted value "
                                          r"in provenance\.parameters: b$"):
        Profile.from_dict(scenario_dict)
    scenario_dict["provenance"]["parameters"]["b"] = {"value": 1.5}
    assert Profile.from_dict(scenario_dict).uncertainty.unidentified == (("b", 1.0, 2.0),)
    for bad in (0.0, -1.0, float("nan"), "2", None):  # rebuilt in log space: each fitted value > 0
        scenario_dict["provenance"]["parameters"]["c"] = {"value": bad}
        with pytest.raises(ConfigError, match=r"uncertainty: needs provenance\.parameters\.c\.value, a fitted value > 0"):
            Profile.from_dict(scenario_dict)
    scenario_dict["provenance"]["parameters"]["c"] = {"note": "no value"}
    with pytest.raises(ConfigError, match=r"parameters\.c\.value"):
        Profile.from_dict(scenario_dict)
    del scenario_dict["provenance"]["parameters"]
    with pytest.raises(ConfigError, match=r"uncertainty: needs provenance\.parameters"):
        Profile.from_dict(scenario_dict)


def test_analyse_keeps_prior_range_for_unidentified_parameters():
    """Fitted on single-node points, inter-node bandwidth moves nothing: it is kept out of the
    covariance with its whole bound range (a prediction brackets it there), while the env step
    time, which every point depends on, is pinned."""
    from perfmodel.calibration.calibrate import PARAMS
    from perfmodel.calibration.calibrate import values_of
    from perfmodel.calibration.uncertainty import analyse

    prof = load_profile("pi05")
    values = values_of({"pi05": prof})
    pts = [ReferencePoint("disaggregated", "pi05", 8, "1:1", 162.75), ReferencePoint("colocated", "pi05", 8, None, 289.23),
           ReferencePoint("rollout_async", "pi05", 8, "1:1", 369.56)]
    unc = analyse(values, pts)["pi05"]
    sd = dict(zip(unc.parameters, np.sqrt(np.diag(np.array(unc.log_covariance)))))
    bw = next(p for p in PARAMS if p.name == "inter_node_bw_GBps")
    assert "inter_node_bw_GBps" not in sd
    assert ("inter_node_bw_GBps", pytest.approx(bw.lo), pytest.approx(bw.hi)) in unc.unidentified
    assert Uncertainty.from_dict(unc.to_dict(), "u") == unc
    # One pair of profile-likelihood ends per principal direction, within every bound, off the fit.
    from perfmodel.calibration.uncertainty import _directions
    assert len(unc.direction_ends) == len(_directions(np.array(unc.log_covariance)))
    bounds = {p.name: (p.lo, p.hi) for p in PARAMS}
    for plus, minus in unc.direction_ends:
        assert any(plus) and any(minus)
        for n, a, b in zip(unc.parameters, plus, minus):
            lo, hi = bounds[n]
            for x in (a, b):
                v = values.get(n, values.get(f"pi05.{n}"))
                assert lo * (1 - 1e-9) <= v * math.exp(x) <= hi * (1 + 1e-9)
    env = next(p for p in PARAMS if p.name == "env_step_core_s")
    # Narrower than its prior range (3 points against the 10 pi0.5 parameters of issue 13's
    # mechanisms: the env step time is confounded with the fixed costs, so less than before).
    assert sd["env_step_core_s"] < math.log(env.hi / env.lo) / math.sqrt(12)
    assert unc.calibrated_gpus == (8,) and unc.calibrated_nodes == (1,)


def test_profiles_from_separate_fits_are_refused_not_merged(tmp_path):
    """A shared parameter (one value for both backbones in the joint fit) that differs between
    the profiles given, as in profiles from before it became shared, is a clear error (exit 2,
    one line naming it), never one backbone's value silently used for both."""
    from perfmodel.calibration.calibrate import values_of

    pi05, gr00t = load_profile("pi05"), load_profile("gr00t_n15")
    assert values_of({"pi05": pi05, "gr00t_n15": gr00t})["infer_overhead_s"] == pytest.approx(
        pi05.provenance["parameters"]["infer_overhead_s"]["value"])
    d = copy.deepcopy(gr00t.to_dict())
    d["provenance"]["parameters"]["infer_overhead_s"]["value"] *= 1.5
    path = tmp_path / "gr00t_n15.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ConfigError, match="shared parameter infer_overhead_s .* refit them together"):
        values_of({"pi05": pi05, "gr00t_n15": Profile.from_dict(d)})
    pi05_path = tmp_path / "pi05.json"
    pi05.save(pi05_path)
    r = subprocess.run([sys.executable, "-m", "perfmodel.calibration.uncertainty", str(pi05_path), str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "infer_overhead_s" in r.stderr
    assert json.loads(path.read_text()) == d  # nothing written


def test_cli_prints_interval_and_extrapolation():
    r = run_cli("predict", "--mode", "disaggregated", "--gpus", "64", "--ratio", "1:1")
    assert r.returncode == 0, r.stderr
    assert "90% interval" in r.stdout and "extrapolation: 64 GPUs" in r.stdout
    r = run_cli("predict", "--mode", "disaggregated", "--gpus", "16", "--ratio", "1:1", "--json")
    d = json.loads(r.stdout)
    assert d["throughput_interval"]["coverage"] == 0.9 and d["extrapolation"]["calibrated_gpus"] == [8, 16, 32]
    r = run_cli("predict", "--mode", "disaggregated", "--gpus", "16", "--ratio", "1:1", "--json", "--no-interval")
    assert "throughput_interval" not in json.loads(r.stdout)


@pytest.mark.parametrize("mode,gpus", [("disaggregated", 32), ("rollout_async", 32)])
def test_bound_screen_error_is_small(monkeypatch, mode, gpus):
    """Only the directions that move the analytic bound most are simulated; simulating every
    direction changes the interval's width little (the screen's error, measured)."""
    import perfmodel.calibration.uncertainty as u

    prof = load_profile("pi05")
    screened = _iv(mode, gpus, prof)["throughput_interval"]
    monkeypatch.setattr(u, "MAX_SIMULATED_DIRECTIONS", u.MAX_DIRECTIONS)
    full = _iv(mode, gpus, prof)["throughput_interval"]
    assert "3 simulated" in screened["method"] and "3 simulated" not in full["method"]
    assert screened["width_pct"] == pytest.approx(full["width_pct"], rel=0.1)


def test_perturbed_profiles_are_built_once_per_profile(scenario_dict):
    """The interval's perturbed profiles are memoised per profile object (a sweep predicts every
    plan on one): a repeat gives the same interval from the same objects, another profile with
    another covariance gets its own."""
    from perfmodel.calibration import uncertainty

    prof = load_profile("pi05")
    first = _iv("disaggregated", 16, prof)
    built = uncertainty._PERTURBED[id(prof)][2]
    again = _iv("disaggregated", 16, prof)
    assert uncertainty._PERTURBED[id(prof)][2] is built and again == first
    d = copy.deepcopy(prof.to_dict())
    d["provenance"]["uncertainty"]["direction_ends"] = [{k: [0.0 for _ in v] for k, v in e.items()}
                                                        for e in d["provenance"]["uncertainty"]["direction_ends"]]
    at_fit = Profile.from_dict(d)
    other = _iv("disaggregated", 16, at_fit)
    assert uncertainty._PERTURBED[id(at_fit)][2] is not built
    assert first["throughput_interval"]["components_pct"]["parameters_pct"] > 0
    assert other["throughput_interval"]["components_pct"]["parameters_pct"] == 0


def _doubt(deltas, u, gpus=16, thr=1.0, ends=(), simulate=None):
    """A plan's Doubt with hand-made direction changes (sd units, both sides), unidentified ends
    and the profile's statistical worlds at ``gpus`` (the bundled pi0.5 profile's 16 GPUs: no
    doubling beyond; 64: two)."""
    from perfmodel.calibration.uncertainty import Doubt, Sensitivities, spread_worlds, unidentified_worlds

    prof = load_profile("pi05")
    sens = Sensitivities(list(deltas), "x", simulate, list(ends))
    doublings = {16: 0.0, 32: 0.0, 64: 1.0, 128: 2.0}[gpus]
    worlds = spread_worlds(u, doublings)[0] + unidentified_worlds(sens, thr, u)[0]
    return Doubt(published_plan(prof, "disaggregated", gpus, "1:1"), thr, sens, u, gpus > 32, worlds, [])


def test_ratio_interval_cancels_what_moves_both_plans_alike():
    """The interval of one plan's throughput over another's: the same parameter directions move
    both, so a plan against itself keeps only the two residual model errors (sqrt(2) s), and is
    never resolved; direction changes subtract, not add."""
    from perfmodel.calibration.uncertainty import Z, ratio_between, ratio_interval
    from perfmodel.schema.profile import Uncertainty
    from perfmodel.simulate import simulate

    prof = load_profile("pi05")
    unc = prof.uncertainty
    plan = published_plan(prof, "disaggregated", 16, "1:1")
    run = lambda pl, pr: simulate(pl, pr).throughput_env_steps_per_s  # noqa: E731
    thr = run(plan, prof)
    iv, why = ratio_interval(plan, plan, prof, thr, thr, run)
    assert why is None and iv["ratio"] == 1.0 and not iv["resolved"]
    assert iv["components_pct"]["parameters_pct"] == 0.0
    assert iv["components_pct"]["model_pct"] == pytest.approx(100 * Z * math.sqrt(2) * unc.residual_sd_log, abs=1e-3)
    # Disaggregated against rollout_async at 16 GPUs: far apart (x2.2), so ordered.
    a, b = published_plan(prof, "rollout_async", 16, "1:1"), published_plan(prof, "disaggregated", 16, "1:1")
    iv, _ = ratio_interval(a, b, prof, run(a, prof), run(b, prof), run)
    assert iv["resolved"] and iv["low"] > 1.0 and iv["low"] < iv["ratio"] < iv["high"]
    # The arithmetic: equal changes cancel, opposite ones add; the pair rate applies per doubling,
    # without it the two points' rates as independent.
    u = Uncertainty(method="t", residual_sd_log=0.0, extrapolation_sd_log_per_doubling=0.1,
                    extrapolation_pair_sd_log_per_doubling=0.05)
    same = ratio_between(_doubt([(0.1, -0.1), (-0.2, 0.3)], u, thr=2.0), _doubt([(0.1, -0.1), (-0.2, 0.3)], u))
    assert same["half_width_log"] == 0.0 and same["ratio"] == 2.0 and same["resolved"]
    opposite = ratio_between(_doubt([(0.1, -0.1)], u), _doubt([(-0.1, 0.1)], u))
    assert opposite["half_width_log"] == pytest.approx(Z * 0.2)
    # Each end takes its own side: a saturating plan (+0.0 / -0.3) against a linear one.
    lopsided = ratio_between(_doubt([(0.0, -0.3)], u), _doubt([(0.1, -0.1)], u))
    assert (lopsided["low"], lopsided["high"]) == pytest.approx((math.exp(-Z * 0.2), math.exp(0.0)))
    assert lopsided["ends"]["low"]["name"] == "direction 1 -" and lopsided["ends"]["high"]["kind"] == "fit"
    two = ratio_between(_doubt([], u, gpus=128), _doubt([], u, gpus=128))
    assert two["half_width_log"] == pytest.approx(Z * 0.05 * 2)
    # Plans on different GPU counts: nothing is known to cancel, each plan's own error per doubling.
    across = ratio_between(_doubt([], u, gpus=128), _doubt([], u, gpus=64))["half_width_log"]
    assert across == pytest.approx(Z * 0.1 * math.sqrt(2 ** 2 + 1 ** 2))
    # A measured profile's ratio (no model error) does not claim to order the plans.
    assert ratio_between(_doubt([(0.0, 0.0)], None), _doubt([(0.0, 0.0)], None, thr=2.0))["resolved"] is None
    indep = Uncertainty(method="t", extrapolation_sd_log_per_doubling=0.1)
    assert ratio_between(_doubt([], indep, gpus=64), _doubt([], indep, gpus=64))["half_width_log"] == pytest.approx(
        Z * 0.1 * math.sqrt(2))


def test_pair_error_per_doubling_from_a_cross_validation():
    """The ratio's extrapolation error: RMS over pairs of one fold, backbone and scale of the
    difference of their log errors, per doubling; pairs across backbones or scales do not count."""
    from perfmodel.calibration.uncertainty import pair_per_doubling_from_crossval

    def pt(b, g, e):
        return {"backbone": b, "gpus": g, "error_pct": e}
    doc = {"folds": [{"fit_gpus": [8], "points": [pt("pi05", 16, 10.0), pt("pi05", 16, -10.0), pt("gr00t_n15", 16, 50.0)]},
                     {"fit_gpus": [16], "points": [pt("pi05", 8, 0.0), pt("pi05", 8, 0.0)]}]}
    want = math.sqrt((math.log(1.1) - math.log(0.9)) ** 2 / 2)  # one pair of 10 % apart, one of 0
    assert pair_per_doubling_from_crossval(doc) == pytest.approx(want)
    assert pair_per_doubling_from_crossval({"folds": [{"fit_gpus": [8], "points": [pt("pi05", 8, 3.0)] * 2}]}) is None
    d = load_profile("pi05").provenance["uncertainty"]
    d["extrapolation_pair_sd_log_per_doubling"] = -1.0
    with pytest.raises(ConfigError, match="extrapolation_pair_sd_log_per_doubling"):
        from perfmodel.schema.profile import Uncertainty
        Uncertainty.from_dict(d, "provenance.uncertainty")


def test_a_ratio_simulates_either_plans_directions_for_both():
    """Each plan simulates the directions that move its own bound most and takes the bound's
    change for the rest; a ratio takes the union of both plans' simulated directions for both, so
    that each direction's two changes are of one kind and subtract as they should (a simulated
    change against a bound change would not cancel)."""
    from perfmodel.calibration.uncertainty import MAX_SIMULATED_DIRECTIONS, Z, ratio_between
    from perfmodel.schema.profile import Uncertainty

    assert MAX_SIMULATED_DIRECTIONS == 3
    calls = []

    def simulate_for(screen, name):
        def simulate(j):
            calls.append((name, j))
            return 2 * screen[j], -2 * screen[j]  # the simulation disagrees with the bound by a factor 2
        return simulate

    sa, sb = [0.5, 0.4, 0.3, 0.05, 0.1, 0.0], [0.5, 0.4, 0.05, 0.3, 0.1, 0.0]  # tops: 0, 1, 2 and 0, 1, 3
    u = Uncertainty(method="t", residual_sd_log=0.0)
    a = _doubt([(x, -x) for x in sa], u, simulate=simulate_for(sa, "a"))
    b = _doubt([(x, -x) for x in sb], u, simulate=simulate_for(sb, "b"))
    assert [x for x, _ in a.sens.deltas()] == [1.0, 0.8, 0.6, 0.05, 0.1, 0.0]
    assert a.sens.covered() == "x (both ends; 3 simulated, the rest from the analytic bound)"
    r = ratio_between(a, b)
    # union {0, 1, 2, 3} simulated for both: the changes differ by 0.5 (direction 2) and 0.5 (3);
    # each plan's own top alone would subtract 0.6 - 0.05 and 0.05 - 0.6
    assert r["half_width_log"] == pytest.approx(Z * math.sqrt(0.5 ** 2 + 0.5 ** 2))
    own = math.sqrt(sum((x[0] - y[0]) ** 2 for x, y in zip(a.sens.deltas(), b.sens.deltas())))
    assert own == pytest.approx(math.sqrt(2 * 0.55 ** 2))
    assert sorted(calls) == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("b", 1), ("b", 2), ("b", 3)]
    assert "4 simulated" in r["method"]
    assert {w["how"] for w in r["worlds"] if w["kind"] == "parameters"} == {"ratio"}
    # Each direction is simulated once per plan, however many ratios use it.
    ratio_between(a, b)
    assert len(calls) == 8


def test_unidentified_ends_add_to_the_interval_ends():
    """Each parameter no point moved is a bracket group of two worlds (its bounds): the low end
    moves by its most negative log change, the high end by its most positive, summed over
    parameters; nothing moved, no world."""
    from perfmodel.calibration.uncertainty import Sensitivities, unidentified_worlds
    from perfmodel.calibration.worlds import World, envelope

    base = [World("model error -", "model", "model error", "spread", math.log(0.9), None, "statistical"),
            World("model error +", "model", "model error", "spread", math.log(1.1), None, "statistical")]
    worlds, text = unidentified_worlds(Sensitivities([], "d", ends=[("a", -0.1, 0.2), ("b", 0.05, -0.3), ("c", 0.0, 0.0)]),
                                       100.0, None)
    assert [w.name for w in worlds] == ["a at its low bound", "a at its high bound", "b at its low bound",
                                        "b at its high bound"]
    out = envelope(100.0, base + worlds, coverage=0.9, method=text, fitted=True)
    assert out["low"] == pytest.approx(90.0 * math.exp(-0.4)) and out["high"] == pytest.approx(110.0 * math.exp(0.25))
    assert out["width_pct"] == pytest.approx(out["high"] - out["low"])
    assert out["components_pct"]["unidentified_pct"] == pytest.approx(65.0)
    assert out["method"].endswith("bracketed over their bounds: a, b")
    assert out["ends"]["low"]["name"] == "b at its high bound" and out["ends"]["high"]["name"] == "a at its high bound"
    assert unidentified_worlds(Sensitivities([], "d", ends=[("c", 0.0, 0.0)]), 100.0, None) == ([], "")


def test_offload_bandwidth_no_point_moved_is_bracketed_at_its_bounds():
    """The bundled profiles' offload bandwidth moves no published point (RL-VLA3 runs without
    offload), so it is kept out of the covariance. A colocated plan that offloads moves with it:
    its interval's ends are the interval without it carried to the throughputs simulated with the
    bandwidth at its two bounds; a plan without offload gets no such term."""
    prof = load_profile("pi05")
    unc = prof.uncertainty
    assert "offload_GBps" not in unc.parameters
    (name, lo, hi), = unc.unidentified
    assert name == "offload_GBps" and (lo, hi) == pytest.approx((1.0, 64.0))
    plan = published_plan(prof, "colocated", 8, None)
    resident = predict(plan, prof)["throughput_interval"]
    assert "unidentified_pct" not in resident["components_pct"]

    offload = plan.with_(enable_offload=True)
    p = predict(offload, prof)
    iv, thr = p["throughput_interval"], p["throughput_env_steps_per_s"]
    values = {n: float(v["value"]) for n, v in prof.provenance["parameters"].items()}

    def at(bw):
        return predict(offload, _rebuilt(prof, {**values, "offload_GBps": bw}))["throughput_env_steps_per_s"]

    slow, fast = at(lo), at(hi)
    assert slow < thr < fast
    d = copy.deepcopy(prof.to_dict())
    d["provenance"]["uncertainty"].pop("unidentified")
    without = predict(offload, Profile.from_dict(d))["throughput_interval"]  # the same, not bracketed
    assert iv["low"] == pytest.approx(without["low"] * slow / thr, rel=1e-9)
    assert iv["high"] == pytest.approx(without["high"] * fast / thr, rel=1e-9)
    assert iv["components_pct"]["unidentified_pct"] == pytest.approx(100 * math.log(fast / slow), abs=1e-3)


def test_a_ratio_brackets_what_an_unidentified_parameter_does_to_both_plans():
    """At one bound an unidentified parameter moves both plans: the ratio moves by the
    difference (what moves them alike cancels), and the order is resolved only if the ratio's
    bracket excludes 1 at both bounds."""
    from perfmodel.calibration.uncertainty import ratio_between
    from perfmodel.schema.profile import Uncertainty

    u = Uncertainty(method="t", residual_sd_log=0.0)
    alike = ratio_between(_doubt([], u, thr=1.2, ends=[("bw", -0.3, 0.2)]), _doubt([], u, ends=[("bw", -0.3, 0.2)]))
    assert (alike["low"], alike["high"]) == pytest.approx((1.2, 1.2)) and alike["resolved"]
    apart = ratio_between(_doubt([], u, thr=1.2, ends=[("bw", -0.3, 0.0)]), _doubt([], u, ends=[("bw", 0.0, 0.0)]))
    assert apart["low"] == pytest.approx(1.2 * math.exp(-0.3)) and apart["high"] == pytest.approx(1.2)
    assert apart["resolved"] is False and apart["components_pct"]["unidentified_pct"] == pytest.approx(30.0)
    assert apart["unidentified_parameters"] == ["bw"]


def test_profile_likelihood_end_along_a_direction():
    """A direction's end is where the calibrated points' misfit has grown by z^2 residual
    variances: t = 1 (z standard deviations) when the misfit is as quadratic as the covariance
    says, sooner where it grows faster, later where slower, and never past the bounds."""
    from perfmodel.calibration.uncertainty import Z, _profile_step, _within

    def quadratic(k):
        return lambda t: Z * Z * (k * t) ** 2

    assert _profile_step(quadratic(1.0), 3.0) == 1.0
    assert _profile_step(quadratic(2.0), 3.0) == 0.5
    assert _profile_step(quadratic(0.5), 3.0) == 2.0
    assert _profile_step(quadratic(0.5), 1.5) == 1.5
    assert _profile_step(quadratic(1.0), 0.0) == 0.0
    # the bound: log 16 is 0.69 above log 8, so a step of 1.39 reaches it halfway
    assert _within(np.log([8.0]), np.array([2 * math.log(2)]), [(0.0, math.log(16.0))]) == pytest.approx(0.5)
    assert _within(np.log([8.0]), np.array([-1.0]), [(0.0, math.log(16.0))]) == 1.0
    # beyond the Gaussian length where the bounds allow (MAX_PROFILE_STEP)
    assert _within(np.log([8.0]), np.array([0.1]), [(0.0, math.log(16.0))], 3.0) == 3.0
    assert _within(np.log([8.0]), np.array([0.5]), [(0.0, math.log(16.0))], 3.0) == pytest.approx(2 * math.log(2))
    # a crossing inside a t_max below 1, and a misfit that dips before it grows
    assert _profile_step(quadratic(2.0), 0.75) == pytest.approx(0.5, abs=0.75 / 64)
    assert _profile_step(lambda t: Z * Z * (4 * t * t - t), 3.0) == pytest.approx(0.64, abs=1 / 64)


def test_text_output_names_a_bracketed_parameter_that_dominates_the_width():
    """Where the bracket of a parameter the points do not pin is most of the width, the text
    output names it (what the user would measure to narrow the interval)."""
    from perfmodel.commands.predict import interval_rows as _interval_rows

    iv = {"low": 80.0, "high": 130.0, "coverage": 0.9, "width_pct": 50.0, "method": "m",
          "components_pct": {"parameters_pct": 1.0, "model_pct": 2.8, "extrapolation_pct": 0.0, "unidentified_pct": 48.0},
          "unidentified_parameters": ["inter_node_bw_GBps"]}
    notes = [v for k, v in _interval_rows({"throughput_interval": iv}) if k == "note"]
    assert len(notes) == 1 and "do not pin inter_node_bw_GBps" in notes[0]
    iv["components_pct"]["unidentified_pct"] = 5.0
    assert not [v for k, v in _interval_rows({"throughput_interval": iv}) if k == "note"]


def test_a_parameter_on_its_bound_does_not_stop_the_direction():
    """A fitted value on its bound keeps still along a direction that would push it out, and the
    rest of the direction moves as far as the bounds allow (not zero)."""
    from perfmodel.calibration.uncertainty import _inward, _within

    bounds = [(0.0, math.log(16.0)), (-5.0, 5.0)]
    x0 = np.array([math.log(16.0), 0.0])  # the first on its upper bound
    step = np.array([1e-3, 1.0])
    inward = _inward(x0, step, bounds)
    assert list(inward) == [0.0, 1.0] and _within(x0, inward, bounds, 3.0) == 3.0
    assert _within(x0, step, bounds, 3.0) == 0.0  # what one outward component did before
    assert list(_inward(x0, -step, bounds)) == [-1e-3, -1.0]  # inward along it: free
