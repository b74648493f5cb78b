"""The numbers docs/validation.md shows for the calibration on all 30 published points (issue 40).

Collects, from what the commands wrote, one result file that tests/test_calibrate.py checks
against the bundled profiles and against docs/validation.md:

- the bundled profiles' in-sample errors, per point, and the MAPE at 32 GPUs overall and per
  backbone (their ``provenance.fit``: ``perfmodel calibrate --out-dir profiles``);
- the ``extrapolate`` cross-validation (fit on 8 -> predict 16; fit on 8 and 16 -> predict 32):
  per point its error and 90 % interval, per fold the coverage and the median half-width
  (``perfmodel validate --cross-validate --json``), and the ``group_out`` headline beside it;
- each growth mechanism of the structural ensemble fitted on all 30 points: its held-out error
  and its in-sample misfit at 32 GPUs (``benchmarks/growth_mechanisms.py`` JSON files).

    perfmodel validate --cross-validate --json > cv.json
    python benchmarks/growth_mechanisms.py --out R
    python benchmarks/calibration_30.py --cv cv.json --growth R --out benchmarks/results/calibration_30.json
    python benchmarks/calibration_30.py --render benchmarks/results/calibration_30.json  # the doc's block
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "benchmarks" / "results" / "calibration_30.json"
BACKBONES = ("pi05", "gr00t_n15")
LABEL = {"pi05": "pi0.5", "gr00t_n15": "GR00T N1.5"}


def _mape(errors: list[float]) -> float:
    return round(statistics.fmean(abs(e) for e in errors), 2)


def in_sample(profiles: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per point and at 32 GPUs, from the profiles' own provenance (one joint fit: both list every point)."""
    points = [{k: p[k] for k in ("backbone", "mode", "gpus", "published", "predicted", "error_pct")}
              for p in profiles[BACKBONES[0]]["provenance"]["fit"]["points"]]
    at32 = [p for p in points if p["gpus"] == 32]
    return {"points": points, "mape_pct": _mape([p["error_pct"] for p in points]),
            "mape_32_pct": _mape([p["error_pct"] for p in at32]),
            "mape_32_per_backbone_pct": {b: _mape([p["error_pct"] for p in at32 if p["backbone"] == b]) for b in BACKBONES},
            "max_abs_32_pct": round(max(abs(p["error_pct"]) for p in at32), 2)}


def extrapolate(cv: dict[str, Any]) -> dict[str, Any]:
    folds = []
    for f in cv["extrapolate"]["folds"]:
        rows = [{"backbone": r["backbone"], "mode": r["mode"], "gpus": r["gpus"], "published": r["published"],
                 "predicted": round(r["predicted"], 2), "error_pct": round(r["error_pct"], 2),
                 "low": round(r["interval"]["low"], 2), "high": round(r["interval"]["high"], 2),
                 "half_width_pct": round(r["interval"]["width_pct"] / 2, 2), "inside": r["interval"]["inside"]}
                for r in f["points"]]
        folds.append({"label": f["label"], "fit_gpus": f["fit_gpus"], "predict_gpus": f["predict_gpus"],
                      "points": rows, "mape_pct": _mape([r["error_pct"] for r in rows]),
                      "mape_per_backbone_pct": {b: _mape([r["error_pct"] for r in rows if r["backbone"] == b])
                                                for b in BACKBONES},
                      "inside": sum(r["inside"] for r in rows), "n": len(rows),
                      "median_half_width_pct": round(statistics.median(r["half_width_pct"] for r in rows), 2)})
    g = cv["group_out"]["summary"]
    return {"folds": folds, "max_evals_per_fold": cv["max_evals_per_fold"],
            "group_out": {"mape_pct": round(g["model_mape_pct"], 2), "inside": g["interval"]["inside"],
                          "n": g["interval"]["points"],
                          "median_half_width_pct": round(g["interval"]["median_width_pct"] / 2, 2)},
            "scale_mape_pct": round(cv["summary"]["model_mape_pct"], 2)}


def mechanisms(growth_dir: Path, reference: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each alternative fitted on every point: held-out error (group_out, extrapolate) and in-sample misfit at 32."""
    out = []
    for f in sorted(growth_dir.glob("*.json")):
        r = json.loads(f.read_text())
        errs = r["fit_errors_pct"]
        at32 = {f"{p['backbone']}/{p['mode']}": round(e, 1) for p, e in zip(reference, errs) if p["gpus"] == 32}
        out.append({"mechanism": r["mechanism"], "group_out_mape_pct": round(r["group_out"]["model_mape_pct"], 2),
                    "extrapolate_32_mape_pct": round(r["extrapolate"]["folds"][-1]["model_mape_pct"], 2),
                    "fit_mape_32_pct": _mape(list(at32.values())),
                    "fit_max_abs_pi05_32_pct": max(abs(v) for k, v in at32.items() if k.startswith("pi05/")),
                    "fit_errors_32_pct": at32})
    return out


def streamer_tie(factors: tuple[float, ...] = (1.0, 1.3)) -> list[dict[str, Any]]:
    """pi0.5 rollout_async and streamer at 32 GPUs 1:1 on the bundled profile with its actor's
    training costs (the per-sample slope through train_mfu, the fixed times per micro-batch and
    per optimizer step) scaled by each factor: does streaming separate the two once the actor binds?"""
    from perfmodel.calibration.calibrate import predict_plan, profiles_from_values, reference_plan, values_of
    from perfmodel.calibration.reference import ReferencePoint
    from perfmodel.schema.profile import load_profile

    v = values_of({b: load_profile(b) for b in BACKBONES})
    out = []
    for f in factors:
        w = {**v, "pi05.train_mfu": v["pi05.train_mfu"] / f, "optimizer_fixed_s": v["optimizer_fixed_s"] * f,
             "train_micro_fixed_s": v["train_micro_fixed_s"] * f}
        prof = profiles_from_values(w, ["pi05"])["pi05"]
        thr = {m: round(predict_plan(reference_plan(prof, ReferencePoint(m, "pi05", 32, "1:1", 1.0)), prof), 2)
               for m in ("rollout_async", "streamer")}
        out.append({"actor_factor": f, **thr})
    return out


def render(doc: dict[str, Any]) -> str:
    """The block docs/validation.md shows (tests/test_calibrate.py checks that it is there, as is)."""
    s = doc["in_sample"]
    lines = [f"In-sample (the bundled profiles at the points they were fitted to): MAPE {s['mape_pct']:.2f} % over "
             f"the 30 points; at 32 GPUs {s['mape_32_pct']:.2f} % (pi0.5 {s['mape_32_per_backbone_pct']['pi05']:.2f} %, "
             f"GR00T N1.5 {s['mape_32_per_backbone_pct']['gr00t_n15']:.2f} %), max |error| {s['max_abs_32_pct']:.2f} %.",
             "", "| backbone | mode | GPUs | published | predicted | error |", "|---|---|---|---|---|---|"]
    for p in s["points"]:
        lines.append(f"| {LABEL[p['backbone']]} | {p['mode']} | {p['gpus']} | {p['published']:.2f} | "
                     f"{p['predicted']:.2f} | {p['error_pct']:+.1f} % |")
    e = doc["extrapolate"]
    lines += ["", f"Extrapolation (`perfmodel validate --cross-validate --design extrapolate`, "
                  f"{e['max_evals_per_fold']} evaluations per fold):", "",
              "| fold | MAPE | pi0.5 | GR00T N1.5 | inside the 90 % interval | median half-width |",
              "|---|---|---|---|---|---|"]
    for f in e["folds"]:
        lines.append(f"| {f['label']} -> {', '.join(map(str, f['predict_gpus']))} | {f['mape_pct']:.2f} % | "
                     f"{f['mape_per_backbone_pct']['pi05']:.2f} % | {f['mape_per_backbone_pct']['gr00t_n15']:.2f} % | "
                     f"{f['inside']} of {f['n']} | {f['median_half_width_pct']:.1f} % |")
    g = e["group_out"]
    lines += ["", f"`group_out` (hold out one backbone x GPU count of the 30): MAPE {g['mape_pct']:.2f} %, "
                  f"{g['inside']} of {g['n']} inside, median half-width {g['median_half_width_pct']:.1f} %; "
                  f"`scale` (fit one GPU count, predict the other two): MAPE {e['scale_mape_pct']:.2f} %.", "",
              "| held out at 32 GPUs (fit on 8 and 16) | published | predicted | error | 90 % interval | inside |",
              "|---|---|---|---|---|---|"]
    for r in e["folds"][-1]["points"]:
        lines.append(f"| {LABEL[r['backbone']]} {r['mode']} | {r['published']:.2f} | {r['predicted']:.2f} | "
                     f"{r['error_pct']:+.1f} % | {r['low']:.0f}-{r['high']:.0f} | {'yes' if r['inside'] else 'no'} |")
    lines += ["", "Growth mechanisms fitted on all 30 points (`benchmarks/growth_mechanisms.py`):", "",
              "| mechanism | group_out MAPE | fit on 8/16 -> 32 MAPE | in-sample MAPE at 32 | worst pi0.5 point at 32 |",
              "|---|---|---|---|---|"]
    for m in doc["mechanisms"]:
        lines.append(f"| {m['mechanism']} | {m['group_out_mape_pct']:.2f} % | {m['extrapolate_32_mape_pct']:.2f} % | "
                     f"{m['fit_mape_32_pct']:.2f} % | {m['fit_max_abs_pi05_32_pct']:.1f} % |")
    lines += ["", "The members of the ensemble fitted on 8 and 16 GPUs only (`benchmarks/members_beyond.py`), "
              "predicting the 32-GPU points (error range over the five modes):", "",
              "| member fitted on 8/16 | pi0.5 at 32 | GR00T N1.5 at 32 |", "|---|---|---|"]
    for name, m in doc["members_8_16_at_32"].items():
        if not isinstance(m, dict) or "fit" not in m:
            continue
        for end in ("fit", "upper"):
            if end in m:
                rng = {b: [v for k, v in m[end].items() if k.startswith(b + "/")] for b in BACKBONES}
                lines.append(f"| {name}{'' if name == 'none' else ', ' + end} | "
                             + " | ".join(f"{min(rng[b]):+.1f} to {max(rng[b]):+.1f} %" for b in BACKBONES) + " |")
    t = doc["streamer_tie_pi05_32"]
    lines += ["", "pi0.5 at 32 GPUs 1:1, rollout_async and streamer (env steps/s) with the actor's training costs scaled: "
              + "; ".join(f"x{r['actor_factor']:g}: {r['rollout_async']:.1f} and {r['streamer']:.1f}" for r in t)
              + " (published 1041.36 and 1120.91)."]
    return "\n".join(lines)


def render_readme(doc: dict[str, Any]) -> str:
    """The table README.md "How far to trust it" shows (tests/test_calibrate.py checks it is there)."""
    s, e = doc["in_sample"], doc["extrapolate"]
    g, last = e["group_out"], e["folds"][-1]
    return "\n".join([
        "| 30 published points | pi0.5 | GR00T N1.5 | all |", "|---|---:|---:|---:|",
        f"| in-sample MAPE at 32 GPUs (the bundled fit) | {s['mape_32_per_backbone_pct']['pi05']:.2f} % | "
        f"{s['mape_32_per_backbone_pct']['gr00t_n15']:.2f} % | {s['mape_32_pct']:.2f} % |",
        f"| fit on 8 and 16, predict 32 (`--design extrapolate`) | {last['mape_per_backbone_pct']['pi05']:.2f} % | "
        f"{last['mape_per_backbone_pct']['gr00t_n15']:.2f} % | {last['mape_pct']:.2f} % |",
        f"| ... inside its 90 % interval | {sum(p['inside'] for p in last['points'] if p['backbone'] == 'pi05')}/5 | "
        f"{sum(p['inside'] for p in last['points'] if p['backbone'] == 'gr00t_n15')}/5 | {last['inside']}/{last['n']} |",
        f"| hold out one (backbone, GPU count) group (`group_out`) | | | {g['mape_pct']:.2f} % |"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cv", help="perfmodel validate --cross-validate --json output")
    ap.add_argument("--growth", help="benchmarks/growth_mechanisms.py --out directory")
    ap.add_argument("--out", default=str(RESULT))
    ap.add_argument("--render", metavar="RESULT", help="print the doc's block from a result file")
    args = ap.parse_args()
    if args.render:
        doc = json.loads(Path(args.render).read_text())
        print(render(doc) + "\n\nREADME:\n" + render_readme(doc))
        return
    from perfmodel.schema.jsonio import write_json_atomic

    profiles = {b: json.loads((ROOT / "profiles" / f"{b}.json").read_text()) for b in BACKBONES}
    doc = {"in_sample": in_sample(profiles), "extrapolate": extrapolate(json.loads(Path(args.cv).read_text()))}
    doc["mechanisms"] = mechanisms(Path(args.growth), doc["in_sample"]["points"])
    doc["streamer_tie_pi05_32"] = streamer_tie()
    # benchmarks/members_beyond.py: the 8/16-GPU ensemble's members predicting the 32-GPU points
    doc["members_8_16_at_32"] = json.loads((ROOT / "benchmarks" / "results" / "members_beyond_32.json").read_text())
    write_json_atomic(args.out, doc)
    print(render(doc))


if __name__ == "__main__":
    main()
