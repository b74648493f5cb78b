"""Property-based fuzz test (hypothesis) of the inputs a user hands to perfmodel: plan, profile,
reference CSV and sweep files, through the real entry point in-process (tests/inproc.py).

Every input must end in a valid answer (exit 0, JSON on stdout) or exactly one line
``error: ...`` with exit 2: never a traceback, never exit 1 (an unexpected exception), never a
hang (a watchdog per command). Examples are derived from valid files by a few mutations (a
field replaced by an odd JSON value, deleted, or a new one added), plus raw bytes; the example
count is fixed and derandomized so CI runs the same bounded set every time.
"""

from __future__ import annotations

import atexit
import copy
import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import SCENARIO_PROFILE
from inproc import run_main

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])

# Values chosen to hit the edges: zero, negatives, sizes just past the caps, floats that are not
# finite, wrong types, mode / ratio / curve names and near misses.
ODD_INTS = [-1, 0, 1, 2, 3, 4, 5, 7, 8, 16, 48, 10**6, 10**9, 10**15, 10**20, 2**63]
ODD_STRINGS = ["", "1:1", "3:1", "0:1", "1:0", "a:b", "1:1:1", "pi05", "gr00t_n15", "colocated", "streamer",
               "stream", "table", "linear", "ppo", "grpo", "profile.json", "../x.json", "/proc/self/mem", "\x00"]
LEAF = st.one_of(
    st.none(), st.booleans(), st.sampled_from(ODD_INTS), st.integers(-3, 20),
    st.floats(allow_nan=True, allow_infinity=True, width=64), st.sampled_from([0.0, -0.5, 1e-9, 1e300]),
    st.sampled_from(ODD_STRINGS), st.text(max_size=6),
)
VALUE = st.recursive(LEAF, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                     max_leaves=6)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, prefix + (i,))
    return out


def _get(obj: Any, path: tuple) -> Any:
    for k in path:
        obj = obj[k]
    return obj


@st.composite
def mutated(draw, base: Any, max_mutations: int = 3) -> Any:
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = _paths(doc)[1:]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _get(doc, path[:-1])
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(VALUE)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=6))] = draw(VALUE)
        else:
            parent.append(draw(VALUE))
    return doc


# One scratch directory per test process, removed at exit (examples overwrite their file).
_DIR = Path(tempfile.mkdtemp(prefix="vlaperf_fuzz_"))
atexit.register(shutil.rmtree, _DIR, True)


def _write(name: str, content: Any) -> Path:
    path = _DIR / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:
        path.write_text(json.dumps(content))  # NaN / Infinity become their JSON-ish literals
    return path


def _check(*args: str) -> dict | None:
    r = run_main(*args, limit_s=240)
    assert "Traceback" not in r.stderr, r.stderr
    if r.returncode == 0:
        return json.loads(r.stdout)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (args, r.returncode, r.stderr[-1500:])
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr[-1500:]
    return None


def _base_plan() -> dict[str, Any]:
    from perfmodel.calibration.reference import published_plan
    from perfmodel.schema.profile import Profile

    return published_plan(Profile.from_dict(SCENARIO_PROFILE), "streamer", 8, "1:1").to_dict()


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prof") / "scenario.json"
    path.write_text(json.dumps(SCENARIO_PROFILE))
    return path


@SETTINGS
@given(doc=mutated(_base_plan()))
def test_fuzz_plan_files(doc, scenario_file):
    if isinstance(doc, dict) and doc.get("profile") == "scenario":
        doc["profile"] = str(scenario_file)
    out = _check("predict", "--plan", str(_write("plan.json", doc)), "--json")
    if out is not None:
        assert out["throughput_env_steps_per_s"] > 0 and math.isfinite(out["throughput_env_steps_per_s"])


@SETTINGS
@given(doc=mutated(SCENARIO_PROFILE),
       mode=st.sampled_from(["colocated", "disaggregated", "streamer"]),
       replications=st.sampled_from(["1", "2"]))
def test_fuzz_profile_files(doc, mode, replications):
    out = _check("predict", "--mode", mode, "--gpus", "8", "--profile", str(_write("profile.json", doc)),
                 "--replications", replications, "--json")
    if out is not None:
        assert out["throughput_env_steps_per_s"] > 0 and math.isfinite(out["throughput_env_steps_per_s"])


CSV_COLUMNS = [
    st.sampled_from(["streamer", "colocated", "disaggregated", "stream", ""]),
    st.sampled_from(["pi05", "gr00t_n15", "llama", ""]),
    st.sampled_from(["8", "16", "0", "-1", "x", "1e3", "9" * 400]),
    st.sampled_from(["1:1", "", "3:1", "7:1", "a:b"]),
    st.sampled_from(["300", "120.5", "nan", "inf", "-1", "1e400", ""]),
]


@st.composite
def csv_row(draw) -> str:
    cells = [draw(c) for c in CSV_COLUMNS]
    if draw(st.integers(0, 4)) == 0:  # now and then a short, long or odd row
        cells = draw(st.sampled_from([cells[:2], cells + ["extra"], [draw(st.text(max_size=6))]]))
    return ",".join(cells)


@SETTINGS
@given(rows=st.lists(csv_row(), min_size=0, max_size=3),
       header=st.sampled_from(["mode,backbone,gpus,allocation_ratio,throughput_env_steps_per_s"] * 3
                              + ["mode,gpus", ""]))
def test_fuzz_reference_csv(rows, header):
    text = header + "\n" + "".join(r + "\n" for r in rows)
    out = _check("validate", "--reference", str(_write("ref.csv", text)), "--json")
    if out is not None:
        assert 1 <= len(out["points"]) <= len(rows)


@pytest.fixture(scope="module")
def base_sweep(tmp_path_factory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("sweep")
    prof = d / "p.json"
    prof.write_text(json.dumps(SCENARIO_PROFILE))
    r = run_main("sweep", "--profile", str(prof), "--modes", "colocated,streamer", "--ratios", "1:1",
                 "--gpus", "8", "--jobs", "1", "--no-progress", "-o", str(d / "s.json"))
    assert r.returncode == 0, r.stderr
    return json.loads((d / "s.json").read_text())


@SETTINGS
@given(data=st.data())
def test_fuzz_sweep_files(base_sweep, data):
    doc = data.draw(mutated(base_sweep, max_mutations=2))
    _check("plan", "--gpus", "8", "--sweep", str(_write("sweep.json", doc)), "--json")


@SETTINGS
@given(raw=st.one_of(st.binary(max_size=64), st.text(max_size=64)),
       which=st.sampled_from(["plan", "profile", "reference", "sweep"]))
def test_fuzz_raw_bytes(raw, which):
    path = str(_write("input", raw))
    args = {"plan": ["predict", "--plan", path], "profile": ["predict", "--mode", "streamer", "--gpus", "8",
                                                                "--profile", path],
            "reference": ["validate", "--reference", path], "sweep": ["plan", "--gpus", "8", "--sweep", path]}[which]
    _check(*args, "--json")
