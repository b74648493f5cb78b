"""The fuzz surfaces of vlaperf, shared by the CI test (tests/test_fuzz.py, a small bounded set)
and the campaign on demand (benchmarks/fuzz.py, thousands of inputs).

A *surface* is one way a user hands input to vlaperf: CLI options (predict, sweep, plan, report,
executor run), plan, profile, reference CSV, RLinf YAML, sweep, choice and run-record files,
raw bytes in any of those, and paths (an output that is an input, a named pipe, a device, a
directory). Each surface draws one input with hypothesis (``data.draw``), writes its files into
a scratch directory, runs the command in-process through its real entry point
(tests/inproc.py) and classifies what a user would see (``classify``):

- handled: ``answered`` (exit 0; ``--json`` is strict JSON) or ``refused`` (exit 2, exactly one
  line ``error: <field>: ...``);
- unhandled: ``traceback``, ``internal`` (exit 1 'internal', or any other exit code),
  ``not one line``, ``hang`` (the watchdog fired), ``non-finite`` (NaN or Infinity printed or
  written, or a JSON output refused as not finite), ``input modified`` (a file the command read
  changed), ``invalid json``.

Inputs are derived from valid files by a few mutations (a field replaced by an odd JSON value,
deleted, or a new one added), plus odd option values and raw bytes.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hypothesis import strategies as st

from conftest import ROOT, SCENARIO_PROFILE
from inproc import Hang, run_main

HANDLED = ("answered", "refused")
UNHANDLED = ("traceback", "internal", "not one line", "hang", "non-finite", "input modified", "invalid json", "wrong")

# Values chosen to hit the edges: zero, negatives, sizes just past the caps, floats that are not
# finite, wrong types, mode / ratio / curve names and near misses.
ODD_INTS = [-1, 0, 1, 2, 3, 4, 5, 7, 8, 16, 48, 10**6, 10**9, 10**15, 10**20, 2**31, 2**63]
ODD_FLOATS = [0.0, -0.5, 1e-9, 1e-300, 0.5, 1e6, 1e30, 1e300, 1e308]
ODD_STRINGS = ["", "1:1", "3:1", "0:1", "1:0", "a:b", "1:1:1", "pi05", "gr00t_n15", "colocated", "streamer",
               "stream", "table", "linear", "ppo", "grpo", "profile.json", "../x.json", "/proc/self/mem", "\x00",
               "throughput", "cost", "time", "bogus"]
# Wrong types handed to the Python API (perfmodel.api): a boolean for a count, a float for an
# integer, text or a list for a number, an empty or unknown mapping, a non-finite number, bytes,
# a NUL in text, and objects that are no JSON value at all.
API_WRONG_TYPES = [True, 1.5, "8", [8], {}, {"cores": 96}, float("nan"), float("inf"), b"8", "\x00", "no", 123,
                   [{}], [True], ["\x00"], object()]
LEAF = st.one_of(
    st.none(), st.booleans(), st.sampled_from(ODD_INTS), st.integers(-3, 20),
    st.floats(allow_nan=True, allow_infinity=True, width=64), st.sampled_from(ODD_FLOATS),
    st.sampled_from(ODD_STRINGS), st.text(max_size=6),
)
VALUE = st.recursive(LEAF, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                     max_leaves=6)
# what a mutation puts in a field: mostly a number at an edge (the checks of ranges and the
# model's arithmetic), else any odd JSON value (the checks of types and shapes)
NUMBER = st.one_of(st.sampled_from(ODD_INTS), st.sampled_from(ODD_FLOATS), st.integers(-3, 64),
                   st.floats(min_value=-1e3, max_value=1e6))
REPLACEMENT = st.one_of(NUMBER, NUMBER, VALUE)
# option values as typed on a command line
OPTION_TEXT = st.one_of(st.sampled_from([str(v) for v in ODD_INTS + ODD_FLOATS] + ODD_STRINGS
                                        + ["nan", "inf", "-inf", "1e400", "8,16", "1,2,3", "null", "1:1,3:1", "all",
                                           "8,,16", "x"]),
                        st.text(max_size=5))


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
def mutated(draw, base: Any, max_mutations: int = 2) -> Any:
    """``base`` with 1..max_mutations fields replaced, deleted or added."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = _paths(doc)[1:]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _get(doc, path[:-1])
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(REPLACEMENT)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=6))] = draw(VALUE)
        else:
            parent.append(draw(VALUE))
    return doc


# -- what a user sees ----------------------------------------------------------------------------

NON_FINITE_TEXT = re.compile(r"(?<![\w.])-?(nan|inf|infinity)(?![\w])", re.I)


def _digest(paths: list[Path]) -> dict[str, str | None]:
    out = {}
    for p in paths:
        try:
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() \
                else ("link" if p.is_symlink() else None)
        except OSError:
            out[str(p)] = None
    return out


@dataclass
class Outcome:
    kind: str
    detail: str = ""


def classify(r: Any, json_out: bool, before: dict[str, str | None], after: dict[str, str | None],
             outputs: list[Path] = ()) -> Outcome:
    """What a user saw, as one of HANDLED or UNHANDLED (the module docstring)."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    changed = [p for p in before if before[p] != after.get(p)]
    if changed:
        return Outcome("input modified", changed[0])
    if "Traceback" in r.stderr or "Traceback" in r.stdout:
        return Outcome("traceback", r.stderr[-300:])
    if r.returncode == 2:
        errors = [ln for ln in lines if ln.startswith("error: ")]
        if len(errors) != 1:
            return Outcome("not one line", r.stderr[-300:])
        if errors[0].startswith("error: output."):
            return Outcome("non-finite", errors[0])
        return Outcome("refused", errors[0])
    if r.returncode != 0:
        return Outcome("internal", (lines or [""])[-1][:300] + f" (exit {r.returncode})")
    if NON_FINITE_TEXT.search(r.stdout):
        return Outcome("non-finite", NON_FINITE_TEXT.search(r.stdout).group(0))
    for out in outputs:
        if out.is_file() and out.suffix in (".json", ".csv", ".md"):
            text = out.read_text(errors="replace")
            if NON_FINITE_TEXT.search(text) if out.suffix != ".md" else re.search(r"\bNaN\b|\binf\b", text):
                return Outcome("non-finite", f"{out.name}: {NON_FINITE_TEXT.search(text) or 'NaN'}")
    if json_out:
        try:
            json.loads(r.stdout, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
        except ValueError as e:
            return Outcome("invalid json", str(e)[:200])
    return Outcome("answered")


class Surface:
    """One fuzz surface: ``draw(data, work)`` writes the input files into ``work`` and returns
    (module, argv, input files, output files)."""

    def __init__(self, name: str, draw: Callable, limit_s: int = 120) -> None:
        self.name, self.draw, self.limit_s = name, draw, limit_s

    def run(self, data: Any, work: Path) -> Outcome:
        if work.exists():
            _clear(work)
        work.mkdir(parents=True)
        module, argv, inputs, outputs, *rest = self.draw(data, work)
        check: Callable[[Any], str | None] | None = rest[0] if rest else None
        before = _digest(inputs)
        try:
            r = module(self.limit_s) if callable(module) else run_main(*argv, module=module, limit_s=self.limit_s)
        except Hang as e:
            return Outcome("hang", str(e))
        o = classify(r, "--json" in argv, before, _digest(inputs), outputs)
        if o.kind == "answered" and any(ln.startswith("error:") for ln in r.stdout.splitlines()) or "\r" in r.stdout:
            return Outcome("wrong", "a line on stdout forged (an 'error:' line or a carriage return)")
        reason = check(r) if check is not None and o.kind in HANDLED else None
        return Outcome("wrong", reason) if reason else o


def _clear(work: Path) -> None:
    """Remove a scratch directory whatever it holds (read-only files, FIFOs, device nodes)."""
    for p in sorted(work.rglob("*"), key=lambda q: -len(q.parts)):
        try:
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
                p.rmdir()
            else:
                p.unlink()
        except OSError:
            pass
    shutil.rmtree(work, ignore_errors=True)


# -- base inputs (valid), made once per process -------------------------------------------------------

class Bases:
    """Valid files every surface mutates: a plan, a profile, a sweep, a choice, a run record,
    an RLinf config directory and a trace (made once, in ``root``)."""

    def __init__(self, root: Path) -> None:
        from perfmodel.calibration.reference import published_plan
        from perfmodel.schema.profile import Profile

        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.profile = copy.deepcopy(SCENARIO_PROFILE)
        self.profile_path = root / "scenario.json"
        self.profile_path.write_text(json.dumps(self.profile))
        self.plan = published_plan(Profile.from_dict(self.profile), "streamer", 8, "1:1").to_dict()
        self.plan["profile"] = str(self.profile_path)
        sweep = root / "sweep.json"
        details = root / "choice.json"
        r = run_main("sweep", "--profile", str(self.profile_path), "--modes", "colocated,streamer", "--ratios", "1:1",
                     "--gpus", "8", "--jobs", "1", "--no-progress", "--no-interval", "-o", str(sweep))
        assert r.returncode == 0, r.stderr
        self.sweep = json.loads(sweep.read_text())
        r = run_main("plan", "--gpus", "8", "--sweep", str(sweep), "--details", str(details))
        assert r.returncode == 0, r.stderr
        self.choice = json.loads(details.read_text())
        self.record = json.loads((ROOT / "tests" / "data" / "executor_tiny_disaggregated" / "record.json").read_text())
        self.trace = json.loads((ROOT / "tests" / "data" / "executor_tiny_disaggregated" / "trace.json").read_text())
        self.rlinf_dir = root / "rlinf"
        from test_rlinf import write_config

        self.rlinf_main = write_config(self.rlinf_dir).read_text()
        import yaml

        self.rlinf = yaml.safe_load(self.rlinf_main.replace("${", "$_{"))  # interpolations kept as text


def _write(path: Path, content: Any) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_bytes(content.encode("utf-8", "surrogatepass"))
    else:
        path.write_text(json.dumps(content))  # NaN / Infinity become their JSON-ish literals
    return path


# -- the surfaces ------------------------------------------------------------------------------------

MODES = ["colocated", "disaggregated", "train_async", "rollout_async", "streamer"]


def _options(data: Any, table: dict[str, Any], max_options: int = 4) -> list[str]:
    """A few options of ``table`` (option -> strategy of its text, or None for a flag)."""
    names = data.draw(st.lists(st.sampled_from(sorted(table)), max_size=max_options, unique=True))
    out: list[str] = []
    for name in names:
        strat = table[name]
        out += [name] if strat is None else [name, data.draw(strat)]
    return out


def _one_of_or_odd(values: list[str]) -> Any:
    """Mostly an allowed value (so that the checks after the first are reached), else an odd one."""
    return st.one_of(st.sampled_from(values), st.sampled_from(values), st.sampled_from(values), OPTION_TEXT)


PREDICT_OPTIONS = {
    "--ratio": _one_of_or_odd(["1:1", "3:1", "1:3", "2:1"]), "--pipeline-stages": _one_of_or_odd(["1", "2", "4"]),
    "--b-max": _one_of_or_odd(["1", "4", "8"]), "--t-max": _one_of_or_odd(["0", "0.02", "1"]),
    "--staleness": _one_of_or_odd(["0", "1", "3"]), "--replications": _one_of_or_odd(["1", "2", "3"]),
    "--seed": _one_of_or_odd(["0", "7"]), "--gpu": _one_of_or_odd(["a100", "h100", "h200", "b200"]),
    "--gpu-hour-price": _one_of_or_odd(["2.5", "1000"]), "--backbone": _one_of_or_odd(["pi05", "gr00t_n15"]),
    "--no-interval": None, "--scale-global-batch": None,
}


def predict_options(data: Any, work: Path, bases: Bases):
    args = ["predict", "--mode", data.draw(_one_of_or_odd(MODES)), "--gpus",
            data.draw(_one_of_or_odd(["8", "16", "32"])), "--profile", str(bases.profile_path)]
    args += _options(data, PREDICT_OPTIONS)
    if "--replications" in args and "--no-interval" not in args:
        args.append("--no-interval")  # replications x interval simulations: seconds each
    return "perfmodel.cli", args + ["--json"], [bases.profile_path], []


SWEEP_OPTIONS = {
    "--ratios": _one_of_or_odd(["1:1", "1:1,3:1", "all"]), "--pipeline-stages": _one_of_or_odd(["1", "1,2"]),
    "--b-max": _one_of_or_odd(["null", "4", "null,4"]), "--t-max": _one_of_or_odd(["0.02", "0,0.05"]),
    "--staleness": _one_of_or_odd(["0", "2"]), "--gpu-hour-price": _one_of_or_odd(["2.5"]),
    "--seed": _one_of_or_odd(["0", "3"]), "--gpu": _one_of_or_odd(["a100", "h200"]), "--scale-global-batch": None,
    "--replications": st.sampled_from(["1", "2", "0", "-1", "1001"]),
}


def sweep_options(data: Any, work: Path, bases: Bases):
    out = work / "out.json"
    csv = work / "out.csv"
    args = ["sweep", "--profile", str(bases.profile_path), "--modes",
            data.draw(_one_of_or_odd(["colocated", "streamer", "colocated,disaggregated", "rollout_async"])),
            "--gpus", data.draw(_one_of_or_odd(["8", "8,16", "16"])), "--jobs", "1", "--no-progress", "--no-interval",
            "-o", str(out), "--csv", str(csv)]
    args += _options(data, SWEEP_OPTIONS)
    return "perfmodel.cli", args, [bases.profile_path], [out, csv]


PLAN_OPTIONS = {**SWEEP_OPTIONS, "--objective": _one_of_or_odd(["throughput", "cost", "time"]),
                "--env-steps": _one_of_or_odd(["5e7", "1e18"]), "--within-hours": _one_of_or_odd(["10", "1e6"]),
                "--emit": _one_of_or_odd(["rlinf"])}


def plan_options(data: Any, work: Path, bases: Bases):
    out, details = work / "plan.json", work / "details.json"
    args = ["plan", "--profile", str(bases.profile_path), "--modes",
            data.draw(_one_of_or_odd(["colocated", "streamer", "colocated,disaggregated"])),
            "--gpus", data.draw(_one_of_or_odd(["8", "16"])), "--jobs", "1", "--no-progress", "-o", str(out),
            "--details", str(details)]
    args += _options(data, PLAN_OPTIONS)
    if "--emit" not in args:
        args.append("--json")
    return "perfmodel.cli", args, [bases.profile_path], [out, details]


def plan_file(data: Any, work: Path, bases: Bases):
    path = _write(work / "plan.json", data.draw(mutated(bases.plan)))
    trace = work / "trace.json"
    return ("perfmodel.cli", ["predict", "--plan", str(path), "--no-interval", "--trace", str(trace), "--json"],
            [path, bases.profile_path], [trace])


def profile_file(data: Any, work: Path, bases: Bases):
    path = _write(work / "profile.json", data.draw(mutated(bases.profile)))
    mode = data.draw(st.sampled_from(["colocated", "disaggregated", "streamer"]))
    reps = data.draw(st.sampled_from(["1", "2"]))
    return ("perfmodel.cli", ["predict", "--mode", mode, "--gpus", "8", "--profile", str(path), "--replications", reps,
                              "--json"], [path], [])


CSV_COLUMNS = [
    st.sampled_from(["streamer", "colocated", "disaggregated", "rollout_async"] * 3 + ["stream", ""]),
    st.sampled_from(["pi05", "gr00t_n15"] * 4 + ["llama", ""]),
    st.sampled_from(["8", "16", "32"] * 3 + ["0", "-1", "x", "1e3", "9" * 400, "1000000"]),
    st.sampled_from(["1:1", "", "3:1"] * 3 + ["7:1", "a:b", "0:1"]),
    st.sampled_from(["300", "120.5", "1000"] * 3 + ["nan", "inf", "-1", "1e400", "1e308", "1e-300", ""]),
]


@st.composite
def csv_row(draw) -> str:
    cells = [draw(c) for c in CSV_COLUMNS]
    if draw(st.integers(0, 9)) == 0:  # now and then a short, long or odd row
        cells = draw(st.sampled_from([cells[:2], cells + ["extra"], [draw(st.text(max_size=6))]]))
    return ",".join(cells)


def reference_csv(data: Any, work: Path, bases: Bases):
    rows = data.draw(st.lists(csv_row(), min_size=0, max_size=3))
    header = data.draw(st.sampled_from(["mode,backbone,gpus,allocation_ratio,throughput_env_steps_per_s"] * 8
                                       + ["mode,gpus", ""]))
    path = _write(work / "ref.csv", header + "\n" + "".join(r + "\n" for r in rows))
    return "perfmodel.cli", ["validate", "--reference", str(path), "--json"], [path], []


def _yaml_text(data: Any, bases: Bases) -> str:
    import yaml

    kind = data.draw(st.sampled_from(["mutated"] * 6 + ["anchors", "text"]))
    if kind == "text":  # a raw edit of the file as written
        text = bases.rlinf_main
        i = data.draw(st.integers(0, len(text)))
        return text[:i] + data.draw(st.sampled_from(["\t", ": ", "&a ", "*a", "- ", "{", "'", "\n  x: 1\n", "---\n"])) \
            + text[i:]
    doc = data.draw(mutated(bases.rlinf))
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).replace("$_{", "${")
    if kind == "anchors":  # aliases, nested: a small bomb or a recursive one
        depth = data.draw(st.integers(1, 12))
        width = data.draw(st.integers(1, 10))
        lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
        lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
        if data.draw(st.booleans()):
            lines.append("r: &r [*r]")
        text += "extra:\n" + "".join(f"  {ln}\n" for ln in lines)
    return text


def rlinf_yaml(data: Any, work: Path, bases: Bases):
    d = work / "rlinf"
    shutil.copytree(bases.rlinf_dir, d)
    path = d / "mine.yaml"
    path.write_bytes(_yaml_text(data, bases).encode("utf-8", "surrogatepass"))
    args = ["predict", "--rlinf-config", str(path), "--no-interval", "--json"]
    if data.draw(st.booleans()):
        args += ["--mode", data.draw(st.sampled_from(MODES))]
    inputs = [p for p in d.rglob("*.yaml")]
    return "perfmodel.cli", args, inputs, []


def sweep_file(data: Any, work: Path, bases: Bases):
    path = _write(work / "sweep.json", data.draw(mutated(bases.sweep, max_mutations=2)))
    out = work / "plan.json"
    return ("perfmodel.cli", ["plan", "--gpus", "8", "--sweep", str(path), "-o", str(out), "--json"],
            [path, bases.profile_path], [out])


def _report(work: Path, *inputs: str) -> tuple[list[str], list[Path]]:
    html = work / "r" / "report.html"
    return ["report", *inputs, "-o", str(html), "--json"], [html.with_suffix(".md")]


def choice_file(data: Any, work: Path, bases: Bases):
    path = _write(work / "choice.json", data.draw(mutated(bases.choice, max_mutations=2)))
    args, outs = _report(work, "--choice", str(path))
    return "analysis.cli", args, [path], outs


def record_file(data: Any, work: Path, bases: Bases):
    path = _write(work / "record.json", data.draw(mutated(bases.record, max_mutations=2)))
    args, outs = _report(work, "--run", str(path))
    return "analysis.cli", args, [path], outs


REPORT_OPTIONS = {"--iteration": _one_of_or_odd(["1", "2", "3"]), "--gpus": _one_of_or_odd(["2", "8"]),
                  "--target-env-steps": _one_of_or_odd(["1e8", "1e18"]), "--gpu-hour-price": _one_of_or_odd(["2.5"]),
                  "--title": st.text(max_size=8)}


def report_options(data: Any, work: Path, bases: Bases):
    rec = _write(work / "record.json", bases.record)
    trace = _write(work / "trace.json", bases.trace)
    args, outs = _report(work, "--run", str(rec), "--trace-run", str(trace))
    return "analysis.cli", args[:-1] + _options(data, REPORT_OPTIONS, 3) + ["--json"], [rec, trace], outs


EXECUTOR_OPTIONS = {"--iterations": _one_of_or_odd(["1", "3"]), "--warmup-iterations": _one_of_or_odd(["0", "1"]),
                    "--scale": _one_of_or_odd(["tiny", "small", "full"]), "--device": _one_of_or_odd(["cpu", "cuda"]),
                    "--image-size": _one_of_or_odd(["64", "128"]),
                    "--suite": _one_of_or_odd(["libero_spatial", "libero_10"]), "--soft-reset": None,
                    "--settle-steps": _one_of_or_odd(["0", "15"]), "--no-render": None}


def executor_run(data: Any, work: Path, bases: Bases):
    """``executor run``'s checks: a mutated plan and odd options. The output directory is always
    under a regular file, so an input that passes every check is refused there, before any run."""
    base = json.loads((ROOT / "examples" / "plans" / "tiny_disaggregated.json").read_text())
    path = _write(work / "plan.json", data.draw(st.one_of(st.just(base), mutated(base, max_mutations=2))))
    (work / "file").write_text("")
    args = ["run", str(path), "--out", str(work / "file" / "run"), "--no-progress"] + _options(data, EXECUTOR_OPTIONS, 3)
    return "executor.cli", args, [path], []


def raw_bytes(data: Any, work: Path, bases: Bases):
    raw = data.draw(st.one_of(st.binary(max_size=64), st.text(max_size=64)))
    which = data.draw(st.sampled_from(["plan", "profile", "reference", "sweep", "rlinf", "choice", "record"]))
    path = _write(work / ("input.yaml" if which == "rlinf" else "input.json"), raw)
    args = {"plan": ("perfmodel.cli", ["predict", "--plan", str(path)]),
            "profile": ("perfmodel.cli", ["predict", "--mode", "streamer", "--gpus", "8", "--profile", str(path)]),
            "reference": ("perfmodel.cli", ["validate", "--reference", str(path)]),
            "sweep": ("perfmodel.cli", ["plan", "--gpus", "8", "--sweep", str(path)]),
            "rlinf": ("perfmodel.cli", ["predict", "--rlinf-config", str(path)]),
            "choice": ("analysis.cli", _report(work, "--choice", str(path))[0][:-1]),
            "record": ("analysis.cli", _report(work, "--run", str(path))[0][:-1])}[which]
    return args[0], args[1] + ["--json"], [path], []


def paths(data: Any, work: Path, bases: Bases):
    """An output that is an input (the same name, a symlink, a hard link, a path through ``..``),
    and inputs that are no regular file (a named pipe, a device, a directory)."""
    plan = _write(work / "plan.json", bases.plan)
    sweep = _write(work / "sweep.json", bases.sweep)
    pred = work / "pred.json"
    pred.write_text(json.dumps({**bases.choice["best"]["prediction"], "kind": "perfmodel.prediction"})
                    if isinstance(bases.choice["best"].get("prediction"), dict) else "{}")
    (work / "sub").mkdir()
    kind = data.draw(st.sampled_from(["same", "symlink", "hardlink", "dotdot", "fifo", "device", "directory"]))
    command = data.draw(st.sampled_from(["predict", "plan", "plan-details", "sweep-csv", "report", "report-md"]))
    target = {"predict": plan, "plan": sweep, "plan-details": sweep, "sweep-csv": bases.profile_path,
              "report": sweep, "report-md": pred}[command]
    if kind == "symlink":
        out = work / "link"
        out.symlink_to(target)
    elif kind == "hardlink":
        out = work / "hard"
        os.link(target, out)
    elif kind == "dotdot":
        out = work / "sub" / ".." / target.name if target.parent == work else target
    else:
        out = target
    bad_input = None
    if kind in ("fifo", "device", "directory"):
        out = work / "out.json"
        if kind == "fifo":
            bad_input = work / "fifo.json"
            os.mkfifo(bad_input)
        else:
            bad_input = Path("/dev/zero") if kind == "device" else work / "sub"
        plan = sweep = pred = bad_input
    o = str(out)
    argv = {"predict": ("perfmodel.cli", ["predict", "--plan", str(plan), "--no-interval", "--trace", o]),
            "plan": ("perfmodel.cli", ["plan", "--gpus", "8", "--sweep", str(sweep), "-o", o]),
            "plan-details": ("perfmodel.cli", ["plan", "--gpus", "8", "--sweep", str(sweep), "--details", o]),
            "sweep-csv": ("perfmodel.cli", ["sweep", "--profile", str(bases.profile_path if bad_input is None
                                                                        else bad_input), "--modes", "colocated",
                                            "--gpus", "8", "--no-interval", "--no-progress", "--jobs", "1", "--csv", o]),
            "report": ("analysis.cli", ["report", "--sweep", str(sweep), "-o", o]),
            "report-md": ("analysis.cli", ["report", "--prediction", str(pred), "-o", str(work / "r.html"),
                                           "--md", o])}[command]
    inputs = [p for p in (work / "plan.json", work / "sweep.json", work / "pred.json", bases.profile_path)]
    return argv[0], argv[1], inputs, []


# -- issue 44: RLinf run folders, executor records, output paths, the Python API, the process ------

def _frame(body: bytes) -> bytes:
    import struct

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    header = struct.pack("<Q", len(body))
    return header + struct.pack("<I", masked_crc32c(header)) + body + struct.pack("<I", masked_crc32c(body))


def _event(step: int, tag: str, value: float, tensor: bool = False) -> bytes:
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2

    v = summary_pb2.Summary.Value(tag=tag)
    if tensor:
        v.tensor.CopyFrom(tensor_pb2.TensorProto(dtype=1, float_val=[value]))
    else:
        v.simple_value = value
    return event_pb2.Event(wall_time=1.0 + step, step=step, summary=summary_pb2.Summary(value=[v])).SerializeToString()


def write_events(path: Path, rows: list[dict[str, float]], first_step: int = 0, tensor: Any = frozenset()) -> Path:
    """An event file as tensorboard's writer frames it (TFRecord: length, CRC32C, data, CRC32C):
    a file_version record, then one record per timer of each row, at steps from ``first_step``."""
    from tensorboard.compat.proto import event_pb2

    data = _frame(event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString())
    for i, row in enumerate(rows):
        data += b"".join(_frame(_event(first_step + i, k, v, k in tensor)) for k, v in row.items())
    path.write_bytes(data)
    return path


# iteration times: mostly plausible, now and then nonsense (below 10 ms, above a day, not finite)
STEP_TIMES = st.one_of(st.floats(0.5, 60.0), st.floats(0.5, 60.0),
                       st.sampled_from([1e-45, 1e-9, 1e-3, 0.0099, 0.01, 86_400.0, 86_401.0, 3.4e38, -1.0, 0.0,
                                        float("nan"), float("inf")]))
RUN_DAMAGE = ["none", "none", "flip", "truncate", "two runs", "resumed", "other file", "directory", "fifo",
              "tensor too", "stage too long", "many files", "output in run", "name"]
MAX_ITERATION_S = (0.01, 86_400.0)


def _run_config(bases: Bases) -> str:
    from perfmodel.calibration.reference import published_plan
    from perfmodel.rlinf.emit import emit_yaml
    from perfmodel.schema.profile import load_profile

    if not hasattr(bases, "_run_yaml"):
        bases._run_yaml = emit_yaml(published_plan(load_profile("pi05"), "colocated", 8, None), "pi05")
    return bases._run_yaml


def _run_rows(data: Any) -> list[dict[str, float]]:
    n = data.draw(st.integers(1, 30))
    odd = data.draw(st.integers(-3 * n, n - 1))  # one row in four runs has a drawn time, odd or not
    stages = data.draw(st.booleans())  # a run logs its stage timers at every step, or never
    rows = []
    for i in range(n):
        step = data.draw(STEP_TIMES) if i == odd else data.draw(st.floats(0.5, 60.0))
        row = {"time/step": step}
        if stages and math.isfinite(step):
            row["time/actor_training"] = abs(step) * data.draw(st.sampled_from([0.1, 0.5, 0.99]))
        rows.append(row)
    return rows


def rlinf_run_folder(data: Any, work: Path, bases: Bases, executor: bool = False):
    """A run folder in RLinf's layout (config.yaml + event files), damaged one way or none:
    a flipped byte, a truncated file, two runs, a resumed run, a file not an event file, a
    directory or a FIFO posing as an event file, a timer both tensor and scalar, a stage longer
    than its iteration, 1,001 event files, an output named like the run's own files, a name
    with control characters. "wrong": nonsense accepted, or steps lost or counted wrong."""
    run = work / "run"
    tb = run / "tensorboard"
    tb.mkdir(parents=True)
    (tb / "config.yaml").write_text(_run_config(bases))
    rows = _run_rows(data)
    ev = write_events(tb / "events.out.tfevents.1000.host.1.0", rows)
    damage = data.draw(st.sampled_from(RUN_DAMAGE))
    out_dir, name = work / "out", None
    expect_refused = damage in ("flip", "two runs", "directory", "fifo", "tensor too", "many files", "output in run")
    steps = len(rows)
    if damage == "flip":
        raw = bytearray(ev.read_bytes())
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= 1 << data.draw(st.integers(0, 7))
        ev.write_bytes(bytes(raw))
    elif damage == "truncate":
        raw = ev.read_bytes()
        ev.write_bytes(raw[:data.draw(st.integers(1, len(raw)))])
        steps = None  # some steps lost at the end: said, and counted from what is whole
    elif damage == "two runs":
        write_events(tb / "events.out.tfevents.2000.host.2.0", _run_rows(data))
    elif damage == "resumed":
        more = _run_rows(data)
        write_events(tb / "events.out.tfevents.2000.host.2.0", more, first_step=data.draw(st.integers(1, len(rows))))
        steps = None
    elif damage == "other file":
        write_events(tb / "old.events.out.tfevents.5", [{"time/step": 1000.0}] * 30)
        (tb / "notes.txt").write_text("x")
    elif damage == "directory":
        (tb / "events.out.tfevents.3000.d").mkdir()
    elif damage == "fifo":
        os.mkfifo(tb / "events.out.tfevents.3000.p")
    elif damage == "tensor too":
        write_events(tb / "events.out.tfevents.2000.host.2.0", [{"time/step": 3.0}], first_step=len(rows) + 5,
                     tensor={"time/step"})
    elif damage == "stage too long":
        rows[-1] = {"time/step": 3.0, "time/actor_training": data.draw(st.sampled_from([3.1, 4.0, 1e4]))}
        write_events(ev, rows)
        expect_refused = len(rows) >= 2
    elif damage == "many files":
        for i in range(1001):
            (tb / f"events.out.tfevents.{5000 + i}.h").write_bytes(b"")
    elif damage == "output in run":
        (run / "record.json").write_text('{"options": {}}\n')
        out_dir, name = data.draw(st.sampled_from([(run, "record"), (tb, "events.out.tfevents.1000.host.1")]))
        if name.startswith("events"):  # an event file named *.json is an input too
            os.replace(ev, tb / "events.out.tfevents.1000.host.1.json")
    elif damage == "name":
        name = data.draw(st.sampled_from(["a\nerror: forged", "a\rb", "x\x1b[2J", "", ".hidden", "a/b", "ok_name"]))
        expect_refused = name != "ok_name"
    if executor:
        flags = data.draw(st.sampled_from([[], ["--soft-reset"], ["--no-render"], ["--soft-reset", "--settle-steps"]]))
        record = {"options": {"env_not_as_rlinf": flags}, "iterations": 3}
        (run / "record.json").write_text(json.dumps(data.draw(st.one_of(st.just(record),
                                                                        mutated(record, max_mutations=2)))))
    times = [r["time/step"] for r in rows]
    nonsense = any(not (math.isfinite(t) and MAX_ITERATION_S[0] <= t <= MAX_ITERATION_S[1]) for t in times)
    argv = ["calibrate", "--from-run" if executor else "--from-rlinf-run", str(run), "--out-dir", str(out_dir),
            "--max-evals", "1", "--json", "--no-progress"] + (["--name", name] if name is not None else [])
    inputs = [p for p in run.rglob("*") if p.is_file()]

    def check(r: Any) -> str | None:
        if r.returncode != 0:
            return None
        if expect_refused or (nonsense and damage not in ("truncate", "resumed")):
            return f"accepted a run folder with {damage!r} (iteration times {times[:4]}...)"
        got = json.loads(r.stdout)["runs"][0]["steps_logged"]
        if steps is not None and got != steps:
            return f"{got} of {steps} steps read ({damage})"
        return None

    return "perfmodel.cli", argv, inputs, [out_dir], check


def executor_record(data: Any, work: Path, bases: Bases):
    """An ``executor run`` directory (record.json beside tensorboard/) whose record is mutated:
    options of wrong types, a NaN, flags under which its envs did not step as RLinf's."""
    return rlinf_run_folder(data, work, bases, executor=True)


OUTPUT_KINDS = ["null device", "zero device", "fifo", "read-only", "symlink", "dangling symlink", "hard link to input",
                "directory", "empty", "nul", "new", "existing"]


def output_paths(data: Any, work: Path, bases: Bases):
    """An output (``-o``, ``--trace``, ``--csv``, ``--details``) that is no regular file of ours: a
    copy of the null or the zero device's node, a FIFO, a read-only file, a symlink (to a file, or
    dangling), a hard link to an input, a directory, '' or a NUL. "wrong": a node replaced, a
    read-only file or a link's target other than the output changed."""
    import stat

    plan = _write(work / "plan.json", bases.plan)
    sweep = _write(work / "sweep.json", bases.sweep)
    kind = data.draw(st.sampled_from(OUTPUT_KINDS))
    out = work / "out.json"
    keep = work / "keep.json"  # another's file: must stay as it is
    if kind in ("null device", "zero device"):
        os.mknod(out, 0o666 | stat.S_IFCHR, os.stat("/dev/null" if kind == "null device" else "/dev/zero").st_rdev)
    elif kind == "fifo":
        os.mkfifo(out)
    elif kind == "read-only":
        out.write_text("theirs\n")
        out.chmod(0o444)
    elif kind == "symlink":
        keep.write_text("{}")
        out.symlink_to(keep)
    elif kind == "dangling symlink":
        out.symlink_to(work / "nowhere" / "x.json")
    elif kind == "hard link to input":
        os.link(sweep, out)
    elif kind == "directory":
        out.mkdir()
    elif kind == "existing":
        out.write_text("old\n")
    via = data.draw(st.sampled_from(["direct", "dotdot", "linked dir"]))  # the same file by another spelling
    if via == "linked dir":
        (work / "dirlink").symlink_to(work)
    o = {"empty": "", "nul": str(out) + "\x00x"}.get(kind, str({"direct": out, "dotdot": work / "sub" / ".." / out.name,
                                                                 "linked dir": work / "dirlink" / out.name}[via]))
    (work / "sub").mkdir()
    command = data.draw(st.sampled_from(["predict", "sweep", "sweep-csv", "plan", "plan-details"]))
    argv = {"predict": ["predict", "--plan", str(plan), "--no-interval", "--trace", o],
            "sweep": ["sweep", "--profile", str(bases.profile_path), "--modes", "colocated", "--gpus", "8",
                      "--no-interval", "--no-progress", "--jobs", "1", "-o", o],
            "sweep-csv": ["sweep", "--profile", str(bases.profile_path), "--modes", "colocated", "--gpus", "8",
                          "--no-interval", "--no-progress", "--jobs", "1", "--csv", o],
            "plan": ["plan", "--gpus", "8", "--sweep", str(sweep), "-o", o],
            "plan-details": ["plan", "--gpus", "8", "--sweep", str(sweep), "--details", o]}[command]
    before_mode = os.lstat(out).st_mode if os.path.lexists(out) else None
    keep_before = keep.read_bytes() if keep.exists() else None

    def check(r: Any) -> str | None:
        mode = os.lstat(out).st_mode if os.path.lexists(out) else None
        if before_mode is not None and stat.S_IFMT(mode or 0) != stat.S_IFMT(before_mode):
            return f"{kind}: the output's node changed kind ({stat.filemode(before_mode)} -> {stat.filemode(mode or 0)})"
        if kind == "read-only" and out.read_text() != "theirs\n":
            return "read-only output written over"
        if kind in ("zero device", "fifo", "directory", "read-only", "empty", "nul") and r.returncode == 0:
            return f"{kind}: accepted as an output"
        if kind == "symlink" and r.returncode == 0 and keep.read_bytes() == keep_before:
            return "symlink: the link's target not written"
        return None

    return "perfmodel.cli", argv, [plan, sweep, bases.profile_path], [], check


# -- the Python API: every function with valid arguments and, one or two at a time, a wrong type

# what each annotation of perfmodel.api accepts; every other value is a wrong type (a ConfigError
# naming the argument), shared with tests/test_api.py
API_ACCEPTS: dict[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    "bool": lambda v: isinstance(v, bool),
    "text": lambda v: isinstance(v, str) and "\x00" not in v,
    "say": callable,
    "runs": lambda v: False,
}
API_ACCEPTS["list"] = lambda v: (API_ACCEPTS["text"](v) or API_ACCEPTS["int"](v)
                                 or (isinstance(v, list) and all(API_ACCEPTS["list"](x) for x in v)))
API_ACCEPTS["node"] = lambda v: v == {}
API_ACCEPTS["mapping"] = lambda v: isinstance(v, dict) and all(isinstance(k, str) and API_ACCEPTS["number"](x)
                                                               for k, x in v.items())


def api_category(annotation: str) -> str:
    """The kind of value an argument of perfmodel.api takes, from its annotation."""
    a = annotation.replace(" ", "")
    for key, cat in (("Say", "say"), ("dict[str,Any]", "node"), ("dict[str,float]", "mapping"),
                     ("Sequence[str|os.PathLike]", "runs"), ("ListArg", "list"), ("PathArg", "text"),
                     ("bool", "bool"), ("float", "number"), ("int", "int"), ("str", "text")):
        if key in a:
            return cat
    raise AssertionError(f"no category for {annotation}")


def _api_result(fn: Callable[[], Any], limit_s: int) -> Any:
    """Call ``fn`` as a user of the API would, as a command's Result: returned (0, its JSON),
    ConfigError (2, one ``error:`` line), anything else (1, the traceback)."""
    import signal
    import traceback

    from inproc import Result

    from perfmodel.schema.errors import ConfigError

    def alarm(signum, frame):  # noqa: ARG001
        raise Hang(f"API call did not end within {limit_s} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(limit_s)
    try:
        got = fn()
        text = got if isinstance(got, str) else json.dumps(got, allow_nan=False)
        return Result(0, text, "")
    except ConfigError as e:
        return Result(2, "", f"error: {e.field}: {' '.join(e.message.split())}\n")
    except Hang:
        raise
    except Exception:  # noqa: BLE001 - what a user of the API would see
        return Result(1, "", traceback.format_exc())
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def python_api(data: Any, work: Path, bases: Bases):
    """An API function with valid base arguments and one or two replaced by a value of the fuzz
    corpus (API_WRONG_TYPES and odd values); the formatters with whole and partial documents.
    "wrong": a value of the wrong type answered, or a type error not naming its argument."""
    import inspect

    from perfmodel import api

    quiet = {"say": lambda line: None}
    sweep = _write(work / "sweep.json", bases.sweep)
    base = {"predict": {"mode": "colocated", "gpus": 8, "interval": False, "profile": str(bases.profile_path)},
            "plan": {"gpus": 8, "sweep": str(sweep)},
            "sweep": {"gpus": 8, "modes": "colocated", "jobs": 1, "interval": False,
                      "profile": str(bases.profile_path)},
            "calibrate": {}, "validate": {}}
    fname = data.draw(st.sampled_from(["predict", "predict", "plan", "plan", "sweep", "calibrate", "validate",
                                       "format_prediction", "format_plan"]))
    if fname.startswith("format_"):
        doc = bases.choice if fname == "format_plan" else bases.choice["best"]["prediction"]
        arg = data.draw(st.one_of(st.sampled_from(API_WRONG_TYPES), mutated(doc, max_mutations=2), st.just(doc)))
        return (lambda limit_s: _api_result(lambda: getattr(api, fname)(arg), limit_s)), [], [sweep], [], None
    fn = getattr(api, fname)
    signature = inspect.signature(fn).parameters
    params = {n: api_category(str(p.annotation)) for n, p in signature.items() if n != "say"}
    kwargs = {**base[fname], **quiet}
    wrong: list[str] = []
    for _ in range(data.draw(st.integers(0, 2))):
        arg = data.draw(st.sampled_from(sorted(params)))
        value = data.draw(st.one_of(st.sampled_from(API_WRONG_TYPES), LEAF))
        kwargs[arg] = value
    wrong = [a for a in params if a in kwargs and not API_ACCEPTS[params[a]](kwargs[a])
             and not (kwargs[a] is None and signature[a].default is None)]
    if fname in ("calibrate", "validate") and not wrong:  # a valid fit or validation takes minutes: type errors only
        arg = data.draw(st.sampled_from(sorted(params)))
        kwargs[arg] = object()
        wrong.append(arg)
    if any(k in kwargs for k in ("out", "csv", "details", "trace", "out_dir")):
        for k in ("out", "csv", "details", "trace", "out_dir"):  # outputs only into the scratch directory
            if isinstance(kwargs.get(k), str) and API_ACCEPTS["text"](kwargs[k]):
                kwargs[k] = str(work / f"o_{k}_{len(kwargs[k])}")

    def check(r: Any) -> str | None:
        if not wrong:
            return None
        if r.returncode == 0:
            return f"{fname}({', '.join(f'{a}={kwargs[a]!r}' for a in wrong)}): a wrong type answered"
        field = r.stderr.split(":", 2)[1].strip() if r.stderr.startswith("error:") else ""
        if not any(field == a or field.startswith(f"{a}.") for a in wrong) and field not in params:
            return f"{fname}: a wrong type of {wrong} refused as {field!r} ({ {a: kwargs[a] for a in wrong} })"
        return None

    return (lambda limit_s: _api_result(lambda: fn(**kwargs), limit_s)), [], [sweep], [], check


# -- the process around the tool: how it is started, stopped and where its output goes

PROCESS_CASES = ["closed pipe", "full stdout", "closed stdout", "home unset", "interrupt", "pi05 in cwd", "no locale"]
PROCESS_COMMANDS = [["gpus"], ["gpus", "--json"], ["predict", "--mode", "colocated", "--gpus", "8", "--no-interval"],
                    ["sweep", "--modes", "colocated", "--gpus", "8", "--no-interval", "--no-progress", "--jobs", "1",
                     "--json"]]


def _process_result(argv: list[str], case: str, delay_s: float, work: Path, limit_s: int) -> Any:
    import signal
    import subprocess
    import sys

    from inproc import Result

    exe = str(Path(sys.executable).parent / "perfmodel")
    env = dict(os.environ)
    stdout: Any = subprocess.PIPE
    preexec = None
    r_fd = w_fd = None
    if case == "closed pipe":
        r_fd, w_fd = os.pipe()
        os.close(r_fd)
        stdout = w_fd
    elif case == "full stdout":
        stdout = open("/dev/full", "w")  # noqa: SIM115
    elif case == "closed stdout":
        stdout = subprocess.DEVNULL
        preexec = lambda: os.close(1)  # noqa: E731
    elif case == "home unset":
        for k in ("HOME", "XDG_DATA_HOME", "VLAPERF_PROFILE_DIR"):
            env.pop(k, None)
    elif case == "pi05 in cwd":
        (work / "pi05").mkdir(exist_ok=True)
        (work / "pi05.json").write_text("not a profile")
    elif case == "no locale":
        env.update(LANG="xx_YY.bogus", LC_ALL="C")
    p = subprocess.Popen([exe, *argv], stdout=stdout, stderr=subprocess.PIPE, env=env, cwd=work, text=True,
                         preexec_fn=preexec)
    try:
        if case == "interrupt":
            import time

            time.sleep(delay_s)
            p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=limit_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise Hang(f"perfmodel {' '.join(argv)} ({case}) did not end within {limit_s} s") from None
    finally:
        if w_fd is not None:
            os.close(w_fd)
        if hasattr(stdout, "close"):
            stdout.close()
    return Result(p.returncode, out or "", err or "")


def process(data: Any, work: Path, bases: Bases):
    """A console script run as a shell would: into a closed pipe, onto /dev/full, with stdout
    closed, HOME unset, Ctrl-C at a drawn moment of its start, ``pi05`` files in its working
    directory, an unknown locale. "wrong": a result lost with exit 0, an exit code other than
    Unix's (141 on EPIPE, 130 on Ctrl-C), a traceback."""
    case = data.draw(st.sampled_from(PROCESS_CASES))
    argv = data.draw(st.sampled_from(PROCESS_COMMANDS))
    delay = data.draw(st.floats(0.0, 0.6))

    def run(limit_s: int) -> Any:
        r = _process_result(argv, case, delay, work, limit_s)
        # the codes Unix gives, as the classification's "answered" (0) and "refused" (2): 141 on
        # EPIPE and 130 on Ctrl-C (or death by SIGINT, -2, before Python's handler) are right
        if case == "closed pipe" and r.returncode == 141 and not r.stderr:
            r.returncode = 0
        if case == "interrupt" and r.returncode in (130, -2) and "Traceback" not in r.stderr:
            r.returncode, r.stdout = 0, ""
        return r

    def check(r: Any) -> str | None:
        if case in ("full stdout", "closed stdout") and r.returncode == 0:
            return f"{case}: exit 0 with the result lost"
        return None

    return run, [a for a in argv if a != "--json"], [], [], check


SURFACES: dict[str, Callable] = {
    "options: predict": predict_options,
    "options: sweep": sweep_options,
    "options: plan": plan_options,
    "options: report": report_options,
    "options: executor run": executor_run,
    "plan JSON": plan_file,
    "profile JSON": profile_file,
    "reference CSV": reference_csv,
    "RLinf YAML": rlinf_yaml,
    "sweep file": sweep_file,
    "choice file": choice_file,
    "record file": record_file,
    "raw bytes": raw_bytes,
    "paths": paths,
    "RLinf run folder": rlinf_run_folder,
    "executor record": executor_record,
    "output paths": output_paths,
    "Python API": python_api,
    "process": process,
}


def surface(name: str, bases: Bases, limit_s: int = 120) -> Surface:
    fn = SURFACES[name]
    return Surface(name, lambda data, work: fn(data, work, bases), limit_s)


def campaign(name: str, bases: Bases, work: Path, examples: int, record: Callable[[Outcome], None],
             seed: int | None = None, limit_s: int = 120) -> None:
    """Run ``examples`` generated inputs of surface ``name``, handing each outcome to ``record``.
    ``seed`` None: derandomized (the same inputs every run, as CI wants); else a fresh campaign."""
    import hypothesis
    from hypothesis import HealthCheck, Phase, given, settings

    surf = surface(name, bases, limit_s)

    @settings(max_examples=examples, deadline=None, derandomize=seed is None, database=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def one(data):
        record(surf.run(data, work))

    if seed is not None:
        one = hypothesis.seed(seed)(one)
    one()
