"""Property-based fuzz test (hypothesis) of every surface a user hands input to (issue 33):
CLI options (predict, sweep, plan, report, executor run), plan, profile, reference CSV, RLinf
YAML, sweep, choice and run-record files, raw bytes, and paths (an output that is an input, a
named pipe, a device or a directory as input). The surfaces are tests/fuzzing.py's, shared with
the larger campaign on demand (benchmarks/fuzz.py).

Every input must end handled: a valid answer (exit 0, strict JSON) or exactly one line
``error: ...`` with exit 2: never a traceback, an internal error, a hang (a watchdog per
command), a NaN or Infinity in the output, or an input file changed. The example count per
surface is fixed and the inputs derandomized, so CI runs the same bounded set every time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fuzzing import HANDLED, SURFACES, Bases, campaign

# Examples per surface in CI: the whole file in about 10 s on 2 idle cores (the report
# surfaces draw figures for an input that passes, about a second each).
EXAMPLES = {"options: report": 3, "choice file": 4, "record file": 4, "options: executor run": 8, "paths": 14,
            # issue 44's surfaces: the API's calls are cheap (most refused before any work); a run
            # folder that passes is calibrated (about 0.5 s), and a process is a Python start-up
            "Python API": 200, "output paths": 30, "RLinf run folder": 4, "executor record": 4, "process": 4}
DEFAULT_EXAMPLES = 12


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> Bases:
    return Bases(tmp_path_factory.mktemp("fuzz_bases"))


@pytest.mark.parametrize("name", sorted(SURFACES))
def test_fuzz_surface(name, bases, tmp_path):
    if name == "options: executor run":
        pytest.importorskip("torch")
    if name in ("RLinf run folder", "executor record"):
        pytest.importorskip("tensorboard")
    if name == "output paths" and os.geteuid() != 0:
        pytest.skip("copies of device nodes need root")
    seen: list = []
    campaign(name, bases, Path(tmp_path) / "work", EXAMPLES.get(name, DEFAULT_EXAMPLES), seen.append, limit_s=240)
    unhandled = [o for o in seen if o.kind not in HANDLED]
    assert seen and not unhandled, [(o.kind, o.detail) for o in unhandled]


def test_the_stored_campaign_is_what_the_docs_state():
    """docs/reliability.md's counts per surface are the stored campaign's
    (benchmarks/results/fuzz_campaign.json, written by ``benchmarks/fuzz.py --store``): every
    surface, at least 4,000 inputs, none unhandled, no hang, nothing wrong."""
    import importlib.util
    import json

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("fuzz_benchmark", ROOT / "benchmarks" / "fuzz.py")
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    stored = json.loads(fuzz.STORED.read_text())
    counts = stored["counts"]
    assert set(counts) == set(SURFACES)
    total = sum(sum(c.values()) for c in counts.values())
    assert total >= 4000 and not stored["unhandled"]
    assert all(c[k] == 0 for c in counts.values() for k in c if k not in HANDLED)
    doc = (ROOT / "docs" / "reliability.md").read_text()
    assert fuzz.table(counts, markdown=True) in doc
    assert f"`{stored['command']}`" in doc and f"{total:,} inputs" in doc and f"{stored['wall_s']} s" in doc
    readme = (ROOT / "README.md").read_text()  # the README's two mentions are the stored count too
    assert f"({total:,} fuzzed inputs, none unhandled" in readme and f"{total:,} generated hostile inputs" in readme
