"""Calibration: the fitted parameters are physical, bounded, and recorded with their fit error."""

from __future__ import annotations

import json
import math

import pytest

from conftest import ROOT, run_cli
from perfmodel.backbones import BACKBONES, get_backbone
from perfmodel.calibration.calibrate import PARAMS, build_profile, fit, fitted_profiles, param_bounds
from perfmodel.schema.profile import Profile, load_profile
from perfmodel.calibration.reference import load_reference

REFERENCE = ROOT / "profiles" / "reference" / "rl_vla3_libero.csv"


def test_full_scale_parameter_counts_match_published():
    for b in BACKBONES.values():
        assert abs(b.params / b.published_params - 1) <= 0.15, (b.name, b.params)


@pytest.mark.parametrize("name", ["pi05", "gr00t_n15"])
def test_bundled_profile_records_its_fit(name):
    prof = load_profile(name)
    prov = prof.provenance
    assert prov["kind"] == "fitted" and prov["method"].startswith("perfmodel calibrate")
    points = prov["fit"]["points"]
    assert len(points) == 30 and {p["gpus"] for p in points} == {8, 16, 32}
    for p in points:
        assert p["error_pct"] == pytest.approx(100 * (p["predicted"] / p["published"] - 1), abs=1e-2)
    for pname, rec in prov["parameters"].items():
        lo, hi = rec["bounds"]
        assert lo <= rec["value"] <= hi, pname
        # No fitted parameter sits on a bound without a note saying why (issue 13).
        if min(abs(math.log(rec["value"] / lo)), abs(math.log(hi / rec["value"]))) < 1e-2:
            assert rec.get("note") and (rec.get("on_bound") or rec.get("identified") is False), pname
    assert "cross_validation" in prov and prov["cross_validation"]["overall"]["model_mape_pct"] >= 0
    assert prof.assumptions["env_count"]


@pytest.mark.parametrize("name", ["pi05", "gr00t_n15"])
def test_bundled_profile_is_rebuilt_from_its_parameters(name):
    """The costs in the file are exactly what the physical parameters and shapes give."""
    prof = load_profile(name)
    values = {}
    for pname, rec in prof.provenance["parameters"].items():
        shared = next(p for p in PARAMS if p.name == pname).shared
        values[pname if shared else f"{name}.{pname}"] = rec["value"]
    rebuilt = build_profile(get_backbone(name), values, prof.costs.env_memory_gb, prof.provenance)
    assert rebuilt.costs == prof.costs
    assert rebuilt.node == prof.node


@pytest.mark.parametrize("name", ["pi05", "gr00t_n15"])
@pytest.mark.parametrize("mfu,stage", [("train_mfu", "train_micro_batch_s"), ("infer_mfu", "infer_s")])
def test_mfu_upper_bound_is_where_the_slope_meets_measured_compute(name, mfu, stage):
    """A fit may not drive a slope below the measured GPU compute the profile keeps as part of it
    (a CI run of noisy CPU timers once did, and the profile was refused): at the bound the slope
    equals the compute; past it build_profile holds the MFU at the bound, so the profile still
    loads with the same slope, and a fit reports the held value (capped)."""
    from perfmodel.calibration.calibrate import capped, on_physical_bound

    lo, hi = param_bounds(f"{name}.{mfu}")
    p = next(q for q in PARAMS if q.name == mfu)
    assert lo == p.lo and hi < p.hi
    prof = load_profile(name)
    values = {pn if next(q for q in PARAMS if q.name == pn).shared else f"{name}.{pn}": rec["value"]
              for pn, rec in prof.provenance["parameters"].items()}
    if f"{name}.{mfu}" not in values:
        pytest.skip(f"{name}'s calibration sets {stage} by another parameter")
    for value in (hi, hi * 1.05):
        built = build_profile(get_backbone(name), {**values, f"{name}.{mfu}": value}, prof.costs.env_memory_gb,
                              prof.provenance)
        assert getattr(built.costs, stage).slope == pytest.approx(built.costs.gpu_compute_per_sample_s[stage],
                                                                  rel=1e-9)
        Profile.from_dict(json.loads(json.dumps(built.to_dict())))
    assert capped({f"{name}.{mfu}": hi * 1.05})[f"{name}.{mfu}"] == hi
    # The bundled fit never passes the bound (on it, the profile says why: test_bundled_profile_records_its_fit;
    # GR00T's train_mfu sits on it in the fit on all 30 points).
    assert on_physical_bound(f"{name}.{mfu}", hi) and values[f"{name}.{mfu}"] <= hi * (1 + 1e-9)


def test_fit_improves_and_stays_in_bounds():
    points = [p for p in load_reference(REFERENCE) if p.backbone == "gr00t_n15" and p.gpus == 8][:3]
    res = fit(points, max_evals=12)
    assert res.evaluations <= 12
    for name, value in res.values.items():
        p = next(q for q in PARAMS if q.name == name.split(".")[-1])
        assert p.lo * (1 - 1e-9) <= value <= p.hi * (1 + 1e-9)
    profiles = fitted_profiles(res, "test", "perfmodel calibrate (test)")
    d = profiles["gr00t_n15"].to_dict()
    again = Profile.from_dict(json.loads(json.dumps(d)))
    assert again.provenance["fit"]["points"][0]["published"] == points[0].throughput_env_steps_per_s


def test_calibrate_cli_writes_valid_profiles(tmp_path):
    ref = tmp_path / "ref.csv"
    lines = REFERENCE.read_text().splitlines()
    ref.write_text("\n".join([lines[0]] + [l for l in lines[1:] if ",pi05,8," in l][:2]) + "\n")
    r = run_cli("calibrate", "--reference", str(ref), "--out-dir", str(tmp_path), "--max-evals", "3")
    assert r.returncode == 0, r.stderr
    assert "error" in r.stdout and "%" in r.stdout
    prof = Profile.from_dict(json.loads((tmp_path / "pi05.json").read_text()))
    assert len(prof.provenance["fit"]["points"]) == 2


def test_cross_validation_shape_and_baselines():
    """Both fold designs on a reduced budget (the shape and the baselines are what is checked
    here, not the model's accuracy): scale transfer (fit on one GPU count, predict the other)
    and leave-one-(backbone, GPU count)-group-out, whose baselines read only the fold's
    training points (equal information), while the scale design's growth baseline reads the
    held-out scale of the other backbone (the leak it is labelled with)."""
    from perfmodel.calibration.crossval import baselines, cross_validate, format_report, provenance_record

    pts = [p for p in load_reference(REFERENCE) if p.mode in ("colocated", "train_async") and p.gpus in (8, 16)]
    doc = cross_validate(pts, max_evals=14, designs=("group_out", "scale"))
    assert doc["kind"] == "cross_validation" and doc["headline"] == "group_out"
    assert [f["fit_gpus"] for f in doc["folds"]] == [[8], [16]]
    assert [f["predict_gpus"] for f in doc["folds"]] == [[16], [8]]
    by = {(p.mode, p.backbone, p.gpus): p.throughput_env_steps_per_s for p in pts}
    for fold in doc["folds"]:
        assert len(fold["points"]) == 4
        assert "inter_node_bw_GBps" in fold["fit"]["not_identified"] or fold["fit_gpus"] == [16]
        for r in fold["points"]:
            assert r["error_pct"] == pytest.approx(100 * (r["predicted"] / r["published"] - 1))
            s = fold["fit_gpus"][0]
            lin = r["baselines"]["linear"]["predicted"]
            assert lin == pytest.approx(by[(r["mode"], r["backbone"], s)] * r["gpus"] / s)
            other = "pi05" if r["backbone"] == "gr00t_n15" else "gr00t_n15"
            growth = by[(r["mode"], other, r["gpus"])] / by[(r["mode"], other, s)]
            assert r["baselines"]["growth"]["predicted"] == pytest.approx(by[(r["mode"], r["backbone"], s)] * growth)
    s = doc["summary"]
    assert set(s["per_backbone"]) == {"pi05", "gr00t_n15"} and set(s["per_mode"]) == {"colocated", "train_async"}
    assert set(s["baseline_mape_pct"]) == {"linear", "growth"}
    g = doc["group_out"]
    assert [f["label"] for f in g["folds"]] == [f"hold out {b} at {n} GPUs" for b in ("gr00t_n15", "pi05")
                                                for n in (8, 16)]
    for fold in g["folds"]:
        held = {(r["backbone"], r["gpus"]) for r in fold["points"]}
        assert len(held) == 1 and len(fold["points"]) == 2 and fold["fit"]["points"] == 6
        (b, n), = held
        other_scale = 16 if n == 8 else 8
        other = "pi05" if b == "gr00t_n15" else "gr00t_n15"
        for r in fold["points"]:
            base = by[(r["mode"], b, other_scale)]
            assert r["baselines"]["linear"]["predicted"] == pytest.approx(base * n / other_scale)
            grow = by[(r["mode"], other, n)] / by[(r["mode"], other, other_scale)]
            assert r["baselines"]["growth"]["predicted"] == pytest.approx(base * grow)
    assert set(g["summary"]["per_backbone"]) == {"pi05", "gr00t_n15"} and g["summary"]["points"] == 8
    # Every held-out point has the interval its fold's fit would print. Scale folds extrapolate one
    # doubling with the *other* fold's per-doubling error; group_out folds predict at a
    # calibrated GPU count, without an extrapolation term.
    from perfmodel.calibration.uncertainty import Z, per_doubling_from_crossval

    for design, folds in (("scale", doc["folds"]), ("group_out", g["folds"])):
        for i, fold in enumerate(folds):
            others = per_doubling_from_crossval({"folds": folds[:i] + folds[i + 1:]})
            assert (others is None) == (design == "group_out")
            for r in fold["points"]:
                iv = r["interval"]
                assert iv["low"] < r["predicted"] < iv["high"]
                assert iv["inside"] == (iv["low"] <= r["published"] <= iv["high"])
                want = 100 * Z * others[0] if design == "scale" else 0.0
                assert iv["doublings_beyond"] == (1 if design == "scale" else 0)
                assert iv["components_pct"]["extrapolation_pct"] == pytest.approx(want, abs=1e-3)
            cov = fold["summary"]["interval"]
            assert cov["points"] == len(fold["points"])
            assert cov["inside"] == sum(r["interval"]["inside"] for r in fold["points"])
            # Every pair of held-out points of one backbone and scale gets a ratio interval.
            groups: dict = {}
            for r in fold["points"]:
                groups.setdefault((r["backbone"], r["gpus"]), []).append(r)
            assert len(fold["pairs"]) == sum(len(v) * (len(v) - 1) // 2 for v in groups.values())
            pred = {(r["backbone"], r["gpus"], r["mode"]): r for r in fold["points"]}
            for p in fold["pairs"]:
                ra, rb = pred[(p["backbone"], p["gpus"], p["a"])], pred[(p["backbone"], p["gpus"], p["b"])]
                assert p["predicted_ratio"] == pytest.approx(ra["predicted"] / rb["predicted"])
                assert p["published_ratio"] == pytest.approx(ra["published"] / rb["published"])
                assert p["inside"] == (p["low"] <= p["published_ratio"] <= p["high"])
                assert p["resolved"] == (p["low"] > 1 or p["high"] < 1)
                assert p["order_right"] == (((p["low"] > 1) == (p["published_ratio"] > 1)) if p["resolved"] else None)
            ps = fold["summary"]["pairs"]
            assert ps["pairs"] == len(fold["pairs"]) and ps["resolved"] == sum(p["resolved"] for p in fold["pairs"])
    text = format_report(doc)
    assert "group_out (headline)" in text and "growth with the leak" in text
    assert f"{g['summary']['interval']['inside']} of 8 held-out points inside" in text
    # What a profile keeps: its backbone's MAPE per design, the headline named.
    rec = provenance_record(doc, "pi05")
    assert rec["headline"] == "group_out" and rec["overall"]["points"] == 4
    assert rec["group_out"]["overall"]["model_mape_pct"] == pytest.approx(
        g["summary"]["per_backbone"]["pi05"]["model_mape_pct"], abs=1e-3)
    assert [f["label"] for f in rec["group_out"]["folds"]] == ["hold out pi05 at 8 GPUs", "hold out pi05 at 16 GPUs"]
    # Without a second backbone the growth baseline does not exist; with equal information a
    # held-out point's growth comes from the training points only, never from the held-out group.
    solo = [p for p in pts if p.backbone == "pi05"]
    assert baselines([p for p in solo if p.gpus == 8], solo[-1], solo)["growth"] is None
    held = [p for p in pts if p.backbone == "pi05" and p.gpus == 16]
    train = [p for p in pts if p not in held]
    assert baselines(train, held[0], train)["growth"] is not None
    assert baselines(train, held[0], [p for p in train if p.backbone == "pi05"])["growth"] is None


def test_extrapolate_design_fits_below_and_predicts_above_without_leaks():
    """The extrapolate design: fit on every GPU count below the target, predict the target (8 ->
    16; 8 and 16 -> 32), linear baseline only (the other backbone's growth to the held-out scale
    is held out too). Its intervals size the extrapolation from the folds before it: the first fold
    has none (no extrapolation term, not the stored prior measured on the scale it predicts), the
    second the first fold's error per doubling. Reduced budget: shape and honesty, not accuracy."""
    from perfmodel.calibration.crossval import cross_validate, format_report, provenance_record
    from perfmodel.calibration.uncertainty import Z, per_doubling_from_crossval

    pts = [p for p in load_reference(REFERENCE) if p.mode == "train_async" and p.backbone == "pi05"]
    doc = cross_validate(pts, max_evals=6, designs=("extrapolate",))
    e = doc["extrapolate"]
    assert [(f["fit_gpus"], f["predict_gpus"]) for f in e["folds"]] == [([8], [16]), ([8, 16], [32])]
    assert [f["label"] for f in e["folds"]] == ["fit on 8 GPUs", "fit on 8, 16 GPUs"]
    by = {(p.backbone, p.gpus): p.throughput_env_steps_per_s for p in pts}
    for i, fold in enumerate(e["folds"]):
        assert fold["fit"]["points"] == len(fold["fit_gpus"]) and len(fold["points"]) == 1
        rate = per_doubling_from_crossval({"folds": e["folds"][:i]}) if i else None
        for r in fold["points"]:
            near = max(fold["fit_gpus"])
            assert set(r["baselines"]) == {"linear"}
            assert r["baselines"]["linear"]["predicted"] == pytest.approx(by[(r["backbone"], near)] * r["gpus"] / near)
            iv = r["interval"]
            assert iv["doublings_beyond"] == 1 and iv["inside"] == (iv["low"] <= r["published"] <= iv["high"])
            want = 0.0 if rate is None else 100 * Z * rate[0]
            assert iv["components_pct"]["extrapolation_pct"] == pytest.approx(want, abs=1e-3)
        assert fold["summary"]["interval"]["points"] == 1
    text = format_report(doc)
    assert "== extrapolate" in text and "fit on 8, 16 GPUs -> 32 GPUs" in text and "beats the linear baseline" in text
    rec = provenance_record(doc, "pi05")["extrapolate"]
    assert [f["label"] for f in rec["folds"]] == ["fit on 8 GPUs", "fit on 8, 16 GPUs"]
    assert rec["folds"][1]["interval"]["points"] == 1


def test_unidentifiable_parameter_is_held_and_reported():
    """On single-node points nothing crosses nodes: inter-node bandwidth keeps its prior."""
    pts = [p for p in load_reference(REFERENCE) if p.gpus == 8 and p.backbone == "pi05"][:2]
    res = fit(pts, max_evals=16)
    prior = next(p for p in PARAMS if p.name == "inter_node_bw_GBps").init
    assert "inter_node_bw_GBps" in res.not_identified and res.values["inter_node_bw_GBps"] == pytest.approx(prior)
    prof = fitted_profiles(res, "test", "perfmodel calibrate (test)")["pi05"]
    rec = prof.provenance["parameters"]["inter_node_bw_GBps"]
    assert rec["identified"] is False and "prior" in rec["note"]
    for name in res.on_bound:
        assert prof.provenance["parameters"][name.split(".")[-1]]["note"]


def test_calibrate_default_budget_is_the_bundled_profiles():
    """`perfmodel calibrate --out-dir profiles` (docs/guide.md) refits the bundled profiles with their own
    budget, so a user who follows it gets their parameters back."""
    from perfmodel.calibration.calibrate import BUNDLED_FIT_EVALS

    for name in ("pi05", "gr00t_n15"):
        prov = load_profile(name).provenance
        assert prov["fit"]["evaluations"] == BUNDLED_FIT_EVALS
    assert f"default: {BUNDLED_FIT_EVALS}," in run_cli("calibrate", "--help").stdout



def test_calibration_30_result_is_the_profiles_and_the_docs():
    """docs/validation.md's numbers for the calibration on all 30 published points come from
    benchmarks/results/calibration_30.json: its in-sample errors are the bundled profiles' own
    fit, its extrapolate folds are the cross-validation recorded in them (validate
    --cross-validate --record), and the doc shows the block it renders, as is."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("calibration_30", ROOT / "benchmarks" / "calibration_30.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    doc = json.loads(mod.RESULT.read_text())
    pts = load_reference(REFERENCE)
    assert len(pts) == 30 and {p.gpus for p in pts} == {8, 16, 32}
    profiles = {b: json.loads((ROOT / "profiles" / f"{b}.json").read_text()) for b in mod.BACKBONES}
    assert doc["in_sample"] == mod.in_sample(profiles)
    assert len(doc["in_sample"]["points"]) == 30
    for b in mod.BACKBONES:
        rec = profiles[b]["provenance"]["cross_validation"]["extrapolate"]
        assert [f["label"] for f in rec["folds"]] == [f["label"] for f in doc["extrapolate"]["folds"]]
        for f, r in zip(doc["extrapolate"]["folds"], rec["folds"]):
            assert r["model_mape_pct"] == pytest.approx(f["mape_per_backbone_pct"][b], abs=0.01)
            assert f["inside"] == sum(p["inside"] for p in f["points"])
            assert f["inside"] == r["interval"]["inside"]
    assert mod.render(doc) in (ROOT / "docs" / "validation.md").read_text()
    assert mod.render_readme(doc) in (ROOT / "README.md").read_text()
    assert doc["streamer_tie_pi05_32"] == mod.streamer_tie()  # four simulations of the bundled profile


def test_members_fitted_on_one_and_two_nodes_cover_no_pi05_point_at_four():
    """docs/validation.md: carried as worlds of the 8/16 -> 32 fold's intervals (the interval's log
    offsets around each member's point, as uncertainty.prediction_interval carries the bundled
    members), no member fitted on 8 and 16 GPUs reaches a pi0.5 point at 32: the lowest member's
    error at each point exceeds what the fold's interval reaches below its own point."""
    doc = json.loads((ROOT / "benchmarks" / "results" / "calibration_30.json").read_text())
    fold = next(f for f in doc["extrapolate"]["folds"] if f["fit_gpus"] == [8, 16])
    members = doc["members_8_16_at_32"]
    pi05 = [p for p in fold["points"] if p["backbone"] == "pi05"]
    assert len(pi05) == 5 and not any(p["inside"] for p in pi05)
    for p in pi05:
        key = f"pi05/{p['mode']}"
        errors = [m[end][key] for m in members.values() if isinstance(m, dict) and "fit" in m
                  for end in ("fit", "upper") if end in m]
        assert len(errors) >= 8, key  # four mechanisms at their fit and upper end, and none
        lowest = (1 + min(errors) / 100) * p["published"]
        assert lowest * p["low"] / p["predicted"] > p["published"], key
