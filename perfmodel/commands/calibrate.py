"""``perfmodel calibrate``: fit the bundled profiles' physical parameters to published results
(perfmodel.calibration.calibrate), with the prediction-interval analysis stored in each profile."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Callable, Sequence

from perfmodel.commands.common import Say, fail, to_stderr

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def calibrate(reference: str | None = None, *, out_dir: str | None = None, max_evals: int | None = None,
              argv: Sequence[str] = (), progress: Callable[[int, float], None] | None = None,
              say: Say | None = None) -> dict[str, Any]:
    """Fit, write the profiles to ``out_dir`` (default: the user's profile directory) and return
    what ``perfmodel calibrate --json`` prints. ``argv``: the command's arguments, recorded in
    each profile's provenance with the budget used."""
    from perfmodel.calibration.calibrate import BUNDLED_FIT_EVALS, fit, fitted_profiles
    from perfmodel.calibration.reference import load_reference
    from perfmodel.cliutil import check_outputs_apart, check_writable
    from perfmodel.schema.profile import BUNDLED_REFERENCE, user_profile_dir

    say = say or to_stderr
    reference = str(BUNDLED_REFERENCE) if reference is None else reference
    max_evals = BUNDLED_FIT_EVALS if max_evals is None else max_evals
    if not 1 <= max_evals <= 100_000:
        fail("--max-evals", f"must be an integer in 1..100000, got {max_evals}")
    points = load_reference(reference)  # refuses a backbone without a bundled profile, naming its line
    if out_dir is not None and not str(out_dir).strip():
        fail("--out-dir", "must be a directory path, got '' (leave the option out for the default)")
    out = Path(out_dir) if out_dir is not None else user_profile_dir()
    if out.exists() and not out.is_dir():
        fail("--out-dir", f"must be a directory, {out} is a file")
    check_outputs_apart({"--reference": reference},
                        {"--out-dir": [str(out / f"{n}.json") for n in {p.backbone for p in points}]})
    for name in sorted({p.backbone for p in points}):
        check_writable("--out-dir", str(out / f"{name}.json"))
    result = fit(points, max_evals=max_evals, progress=progress or (lambda n, rms: None))
    args = list(argv)
    given = any(a.split("=")[0] == "--max-evals" for a in args)
    args += [] if given else ["--max-evals", str(max_evals)]  # the budget used, said or not
    command = "perfmodel calibrate " + " ".join(shlex.quote(a) for a in args)
    try:
        ref_label = str(Path(reference).resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        ref_label = reference
    written = []
    from perfmodel.calibration.uncertainty import analyse, attach

    # The fit's parameter covariance, stored so that predictions carry intervals without refitting.
    say("prediction-interval analysis (one simulation of every point per parameter) ...")
    uncertainty = analyse(result.values, result.points)
    for name, prof in fitted_profiles(result, ref_label, command.strip()).items():
        prof = attach(prof, uncertainty[name])
        path = out / f"{name}.json"
        prof.save(path)
        written.append(str(path))
    import numpy as np

    errs = result.errors_pct
    abs_err = np.abs(errs)
    return {
        "kind": "perfmodel.calibration", "wrote": written, "evaluations": result.evaluations,
        "seconds": result.seconds, "values": {k: float(v) for k, v in result.values.items()},
        "median_abs_error_pct": float(np.median(abs_err)), "max_abs_error_pct": float(abs_err.max()),
        "points": [{"mode": pt.mode, "backbone": pt.backbone, "gpus": pt.gpus,
                    "allocation_ratio": pt.allocation_ratio, "published": pt.throughput_env_steps_per_s,
                    "predicted": float(pred), "error_pct": float(err)}
                   for pt, pred, err in zip(result.points, result.predicted, errs)],
    }


def format_calibration(doc: dict[str, Any]) -> str:
    """The text output of ``perfmodel calibrate``."""
    lines = [f"wrote {path}" for path in doc["wrote"]]
    lines.append(f"{'backbone':<10} {'mode':<14} {'gpus':>4} {'published':>10} {'predicted':>10} {'error':>7}")
    for p in doc["points"]:
        lines.append(f"{p['backbone']:<10} {p['mode']:<14} {p['gpus']:>4} {p['published']:>10.2f} "
                     f"{p['predicted']:>10.2f} {p['error_pct']:>+6.1f}%")
    lines.append(f"median |error| {doc['median_abs_error_pct']:.2f}%  max |error| {doc['max_abs_error_pct']:.2f}%  "
                 f"({doc['evaluations']} evaluations, {doc['seconds']:.0f} s)")
    lines += [f"  {k} = {v:.6g}" for k, v in doc["values"].items()]
    return "\n".join(lines)
