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
UNHANDLED = ("traceback", "internal", "not one line", "hang", "non-finite", "input modified", "invalid json")

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
            shutil.rmtree(work)
        work.mkdir(parents=True)
        module, argv, inputs, outputs = self.draw(data, work)
        before = _digest(inputs)
        try:
            r = run_main(*argv, module=module, limit_s=self.limit_s)
        except Hang as e:
            return Outcome("hang", str(e))
        return classify(r, "--json" in argv, before, _digest(inputs), outputs)


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
