"""``perfmodel validate``: predictions against published results (perfmodel.calibration.validate),
or the calibration cross-validated (perfmodel.calibration.crossval)."""

from __future__ import annotations

from typing import Any, Callable

from perfmodel.commands.common import Say, fail, to_stderr

CrossProgress = Callable[[str, int, float], None]


def validate(reference: str | None = None, *, cross: bool = False, max_evals: int | None = None,
             design: str = "both", design_given: bool = False, record: bool = False,
             progress: CrossProgress | None = None,
             say: Say | None = None, report: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The validation (``perfmodel validate --json``), or with ``cross`` the cross-validation
    (``--cross-validate --json``); ``record`` stores the latter in the bundled profiles, after
    ``report`` (when given) has shown it."""
    from perfmodel.calibration.reference import load_reference
    from perfmodel.calibration.validate import validate as run_validate
    from perfmodel.schema.profile import BUNDLED_REFERENCE, load_profile

    say = say or to_stderr
    points = load_reference(str(BUNDLED_REFERENCE) if reference is None else reference)
    profiles = {}
    for b in sorted({p.backbone for p in points}):  # load_reference refused unknown backbones
        if not cross:
            profiles[b] = load_profile(b)
    if max_evals is not None and not cross:
        fail("--max-evals", "only with --cross-validate (simulations per fold of its refits)")
    if max_evals is not None and not 1 <= max_evals <= 100_000:  # calibrate's bound: past it, hours per fold
        fail("--max-evals", f"must be an integer in 1..100000, got {max_evals}")
    if record and not cross:
        fail("--record", "only with --cross-validate (it stores the cross-validation in the profiles)")
    from perfmodel.calibration.crossval import DESIGNS, check_design

    check_design(design, cross, given=design_given)
    if record:
        from perfmodel.cliutil import check_outputs_apart
        from perfmodel.schema.profile import BUNDLED_DIR

        check_outputs_apart({"--reference": str(BUNDLED_REFERENCE) if reference is None else reference},
                            {"--record": [str(BUNDLED_DIR / f"{b}.json") for b in {p.backbone for p in points}]})
    if not cross:
        return run_validate(points, profiles)
    from perfmodel.calibration.crossval import DEFAULT_FOLD_EVALS, cross_validate

    doc = cross_validate(points, max_evals=max_evals or DEFAULT_FOLD_EVALS, progress=progress or (lambda *a: None),
                         designs=DESIGNS if design == "both" else (design,))
    if report is not None:
        report(doc)
    if record:
        from perfmodel.calibration.crossval import provenance_record
        from perfmodel.schema.profile import BUNDLED_DIR

        for b in sorted({p.backbone for p in points}):
            path = BUNDLED_DIR / f"{b}.json"
            prof = load_profile(str(path))
            prof.provenance["cross_validation"] = provenance_record(doc, b)
            prof.save(path)
            say(f"recorded the cross-validation in {path}")
    return doc


def format_validation(res: dict[str, Any]) -> str:
    """The text output of ``perfmodel validate`` (without --cross-validate)."""
    lines = [f"{'backbone':<10} {'mode':<14} {'gpus':>4} {'ratio':>5} {'published':>10} {'predicted':>10} {'error':>7}"]
    for r in res["points"]:
        lines.append(f"{r['backbone']:<10} {r['mode']:<14} {r['gpus']:>4} {r['allocation_ratio'] or '-':>5} "
                     f"{r['published']:>10.2f} {r['predicted']:>10.2f} {r['error_pct']:>+6.1f}%")
    a = res["best_mode_agreement"]
    lines.append(f"fit error (in-sample: the profiles at the points they were fitted to; --cross-validate for "
                 f"held-out): MAPE {res['mape_pct']:.2f}%  median |error| {res['median_abs_error_pct']:.2f}%  "
                 f"max |error| {res['max_abs_error_pct']:.2f}%")
    spearman = "n/a (fewer than 2 distinct points)" if res["spearman"] is None else f"{res['spearman']:.3f}"
    ties = a.get("predicted_ties", 0)
    lines.append(f"best mode agrees in {a['matches']}/{a['groups']} (backbone, gpus) groups"
                 + (f", {ties} more a predicted tie that includes it (not counted as agreeing)" if ties else "")
                 + f"; Spearman {spearman}")
    for g in a["per_group"]:
        mark = {"agree": "ok", "tie": "TIE"}.get(g.get("outcome", "agree" if g["match"] else "mismatch"), "MISMATCH")
        lines.append(f"  {g['backbone']} {g['gpus']} GPUs: published best {' = '.join(g['published_best'])}, "
                     f"predicted best {' = '.join(g['predicted_best'])} [{mark}]")
    return "\n".join(lines)
