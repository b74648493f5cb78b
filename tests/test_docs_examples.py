"""Every example in README.md and docs/*.md is checked, and the docs' links lead somewhere.

A ```console block holds `$ command` lines, each followed by the output it prints (stdout and
stderr as a terminal shows them). A ```bash block holds commands alone.

- Commands listed in MATCH (cheap: a few seconds) or MATCH_SLOW are run in the docs' order
  (README first) in one scratch directory (so `-o plan.json` then `cat plan.json` works; a
  command shown in two docs runs once), and their output must be what the doc shows. Elisions the docs use: a line
  `...` (any number of lines, also a trailing `...` cutting the end), `[N more lines ...]`
  (exactly N lines, also as a `# ` comment), a line ending in `[...]` (the rest of that output
  line is cut), and a long output line may be wrapped over several lines of the document.
  Numbers printed with decimals may differ by one unit of their last printed digit.
- Every other `perfmodel`, `executor` or `analysis` command line is parsed by its own click
  command without running it: the subcommand and every option named must exist, with a value
  where one is needed, and choices, integers and numbers must convert.
- Other commands (scripts, `python -m`, shell completion) must name things that exist.

When a command's output changes on purpose, regenerate the doc's block (`python
tests/test_docs_examples.py` prints what every MATCH example prints now) and keep the elisions.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# The one place that says which examples run and must print what their document shows. Every
# entry is a command exactly as written after `$ ` in a doc (the test fails if one disappears).
MATCH = [
    # README.md
    "perfmodel predict --mode rollout_async --gpus 32",
    "perfmodel predict --mode stream --gpus 8",
    "perfmodel plan --gpus 32 --backbone pi05 -o plan.json",
    "perfmodel sweep --backbone pi05 --gpus 8,16 --ratios 1:1 --gpu-hour-price 2.5 -o sweep.json",
    "perfmodel validate",
    "perfmodel gpus",
    "perfmodel plan --gpus 16 --sweep sweep.json --details choice.json > choice.txt",
    "perfmodel predict --rlinf-config examples/rlinf/libero_10_ppo_openpi_pi05.yaml --gpu-hour-price 2.5",
    "perfmodel plan --rlinf-config examples/rlinf/libero_10_ppo_openpi_pi05.yaml --gpus 16 --emit rlinf"
    " -o plan.json > best.yaml",
    "cat best.yaml",
    # docs/guide.md
    "perfmodel predict --mode streamer --gpus 8 --ratio 2:1",
    "perfmodel plan --backbone pi05 --objective time --env-steps 2e8 --within-hours 72 --gpus 64"
    " --gpu-hour-price 2.5 --modes colocated,streamer --ratios 1:1,3:1",
]
# Run only in the slow suite (each takes longer than a few seconds here).
MATCH_SLOW = [
    "analysis report --sweep sweep.json --choice choice.json -o report.html",
]

PROGRAMS = {"perfmodel": "perfmodel.cli", "executor": "executor.cli", "analysis": "analysis.cli"}
# Shell operators after which a command line is no longer the program's arguments.
SHELL_OPS = {">", ">>", "2>", "2>&1", "|", "&&", ";", "||", "<"}


@dataclass(frozen=True)
class Example:
    doc: Path
    line: int  # 1-based line of the command in the doc
    lang: str  # console or bash
    command: str
    expected: tuple[str, ...] | None  # console output lines; None in a bash block

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def fenced_blocks(text: str):
    """(language, first line number of the content, content lines) of every fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            start = i + 1
            j = start
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            yield m.group(1), start + 1, lines[start:j]
            i = j + 1
        else:
            i += 1


def examples_of(doc: Path) -> list[Example]:
    out: list[Example] = []
    for lang, first, body in fenced_blocks(doc.read_text()):
        if lang == "console":
            i = 0
            while i < len(body):
                if not body[i].startswith("$ "):
                    raise AssertionError(f"{doc.relative_to(ROOT)}:{first + i}: console block line is "
                                         f"neither a `$ ` command nor output of one: {body[i]!r}")
                cmd, line = body[i][2:], first + i
                i += 1
                exp = []
                while i < len(body) and not body[i].startswith("$ "):
                    exp.append(body[i])
                    i += 1
                out.append(Example(doc, line, lang, cmd.strip(), tuple(exp)))
        elif lang in ("bash", "sh"):
            joined, line0 = "", None
            for k, ln in enumerate(body):
                if line0 is None:
                    line0 = first + k
                if ln.rstrip().endswith("\\"):
                    joined += ln.rstrip()[:-1] + " "
                    continue
                joined += ln
                if joined.strip() and not joined.strip().startswith("#"):
                    out.append(Example(doc, line0, lang, " ".join(joined.split()), None))
                joined, line0 = "", None
    return out


ALL = [ex for doc in DOCS for ex in examples_of(doc)]


# ------------------------------------------------------------------ comparing output

NUM = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
ELLIPSIS = re.compile(r"^\s*(?:#\s*)?\.\.\.\s*$")
MORE_LINES = re.compile(r"^\s*(?:#\s*)?\[(\d+) more lines?\b.*\]\s*$")


def same_line(expected: str, actual: str) -> bool:
    """Equal text; numbers printed with decimals may differ by one unit of the last digit."""
    e, a = expected.rstrip(), actual.rstrip()
    if e == a:
        return True
    if NUM.split(e) != NUM.split(a):
        return False
    for x, y in zip(NUM.findall(e), NUM.findall(a)):
        if x == y:
            continue
        if "." not in x or "e" in x.lower() or len(x.split(".")[1]) != len(y.partition(".")[2]):
            return False
        unit = 10.0 ** -len(x.split(".")[1])
        if abs(float(x.replace(",", "")) - float(y.replace(",", ""))) > unit * 1.0001:
            return False
    return True


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` (output lines) is what ``expected`` (a doc's lines, with elisions)
    shows."""

    @functools.lru_cache(maxsize=None)
    def m(i: int, j: int, off: int) -> bool:
        # expected[i:] against actual[j:], the first ``off`` characters of actual[j] consumed
        if i == len(expected):
            return j == len(actual) and off == 0
        e = expected[i]
        if ELLIPSIS.match(e):
            j0 = j + 1 if off else j
            return any(m(i + 1, k, 0) for k in range(j0, len(actual) + 1))
        more = MORE_LINES.match(e)
        if more:
            j0 = j + 1 if off else j
            return j0 + int(more.group(1)) <= len(actual) and m(i + 1, j0 + int(more.group(1)), 0)
        if j >= len(actual):
            return False
        a = actual[j][off:].lstrip() if off else actual[j]
        skipped = len(actual[j]) - len(a)  # where ``a`` starts in actual[j]
        e = e.rstrip()
        if e.endswith("[...]"):  # the rest of this output line is cut
            return a.startswith(e[:-5].rstrip()) and m(i + 1, j + 1, 0)
        if same_line(e, a):
            return m(i + 1, j + 1, 0)
        # a long output line wrapped over several doc lines
        if e and a.startswith(e) and a[len(e):len(e) + 1] == " ":
            return m(i + 1, j, skipped + len(e))
        return False

    return m(0, 0, 0)


# ------------------------------------------------------------------ running commands

@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """One scratch directory for every document's examples, with the repository's example
    inputs beside them (a command shown in two docs writes the same files in both)."""
    d = tmp_path_factory.mktemp("docs_examples")
    for name in ("examples", "profiles", "benchmarks"):
        (d / name).symlink_to(ROOT / name)
    return d


def shell(command: str, cwd: Path) -> tuple[int, list[str]]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", VLAPERF_PROFILE_DIR=str(cwd / "user_profiles"),
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("VLAPERF_TRACEBACK", None)
    p = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600)
    return p.returncode, p.stdout.splitlines()


@pytest.fixture(scope="module")
def outputs(scratch):
    """What every MATCH example prints, in the docs' order (README first); a command shown in
    several docs runs once."""
    got: dict[str, list[str]] = {}
    for ex in ALL:
        if ex.lang == "console" and ex.command in MATCH and ex.command not in got:
            got[ex.command] = shell(ex.command, scratch)[1]
    return got


def mismatch(ex: Example, actual: list[str]) -> str:
    return (f"{ex.where}: `{ex.command}` no longer prints what the doc shows; regenerate the block "
            f"(keep its elisions).\n--- doc\n" + "\n".join(ex.expected or ()) +
            "\n--- actual\n" + "\n".join(actual))


FAST_RUN = [ex for ex in ALL if ex.lang == "console" and ex.command in MATCH]
SLOW_RUN = [ex for ex in ALL if ex.lang == "console" and ex.command in MATCH_SLOW]


def test_every_listed_example_is_in_a_doc():
    shown = {ex.command for ex in ALL if ex.lang == "console"}
    assert not [c for c in MATCH + MATCH_SLOW if c not in shown]


@pytest.mark.parametrize("ex", FAST_RUN, ids=lambda ex: ex.where)
def test_example_prints_what_the_doc_shows(ex, outputs):
    if not matches(list(ex.expected), outputs[ex.command]):
        pytest.fail(mismatch(ex, outputs[ex.command]), pytrace=False)


@pytest.mark.slow
@pytest.mark.parametrize("ex", SLOW_RUN, ids=lambda ex: ex.where)
def test_slow_example_prints_what_the_doc_shows(ex, outputs, scratch):
    # ``outputs`` first: the cheap examples before it made its input files
    _, actual = shell(ex.command, scratch)
    if not matches(list(ex.expected), actual):
        pytest.fail(mismatch(ex, actual), pytrace=False)


# ------------------------------------------------------------------ parsing without running

def click_group(program: str) -> click.Group:
    import importlib

    mod = importlib.import_module(PROGRAMS[program])
    groups = [v for v in vars(mod).values() if isinstance(v, click.Group)]
    assert len(groups) == 1, f"{PROGRAMS[program]} should hold one click group"
    return groups[0]


def parse_only(argv: list[str]) -> None:
    """Parse ``argv`` (program first) with the program's click commands, converting choices,
    integers and numbers, without invoking anything. Raises click.UsageError."""
    group = click_group(argv[0])
    ctx = click.Context(group, info_name=argv[0])
    args = argv[1:]
    cmd: click.Command = group
    while isinstance(cmd, click.Group) and args and not args[0].startswith("-"):
        sub = cmd.get_command(ctx, args[0])
        if sub is None:
            raise click.UsageError(f"no such command {args[0]!r}")
        ctx = click.Context(sub, info_name=args[0], parent=ctx)
        cmd, args = sub, args[1:]
    if "--help" in args or "-h" in args or "--version" in args:
        return
    values, rest, _ = cmd.make_parser(ctx).parse_args(list(args))
    for p in cmd.params:
        v = values.get(p.name)
        if v is None or not isinstance(p.type, (click.Choice, click.types.IntParamType,
                                                click.types.FloatParamType)):
            continue
        for item in v if isinstance(v, (list, tuple)) else [v]:
            p.type.convert(item, p, ctx)


def program_args(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    for k, w in enumerate(words):
        if w in SHELL_OPS or w.startswith((">", "2>")):
            return words[:k]
    return words


PARSED = [ex for ex in ALL if ex.command not in MATCH + MATCH_SLOW]


@pytest.mark.parametrize("ex", PARSED, ids=lambda ex: ex.where)
def test_example_command_line_is_valid(ex):
    command = ex.command
    completion = re.match(r"^(?:eval \"\$\()?(_\w+_COMPLETE)=(\w+) (\w+)", command)
    if completion:  # shell completion: the program must print its completion script
        var, value, program = completion.groups()
        assert program in PROGRAMS
        env = dict(os.environ, **{var: value},
                   PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
        p = subprocess.run([program], env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and program in p.stdout, (ex.where, p.stderr[-500:])
        return
    for part in re.split(r"\s*&&\s*", command):
        words = program_args(part)
        if not words:
            continue
        head = words[0]
        if head in PROGRAMS:
            try:
                parse_only(words)
            except click.UsageError as e:
                pytest.fail(f"{ex.where}: `{part}`: {e.format_message()}")
        elif head in ("python", "python3") and words[1:2] == ["-m"]:
            import importlib.util

            if words[2] != "venv":
                assert importlib.util.find_spec(words[2]), f"{ex.where}: no module {words[2]}"
        elif head in ("python", "python3", "bash", "sh"):
            assert (ROOT / words[1]).is_file(), f"{ex.where}: no file {words[1]}"
        elif head in (".", "pip", "cat"):
            continue  # set-up steps (checked below) and reading a file an earlier example wrote
        else:
            pytest.fail(f"{ex.where}: unknown example command {head!r}: run it (MATCH) or teach "
                        f"this test how to check it")


def test_unrun_examples_shown_twice_agree():
    """An example not run here (executor run, ...) may be shown in full in one doc and cut in
    another: the cut one must be the full one with elisions."""
    def elided(ex):
        return any(ELLIPSIS.match(ln) or MORE_LINES.match(ln) or ln.rstrip().endswith("[...]")
                   for ln in ex.expected)

    shown = [ex for ex in PARSED if ex.lang == "console" and ex.expected]
    checked = 0
    for full in (ex for ex in shown if not elided(ex)):
        for cut in (ex for ex in shown if ex.command == full.command and ex is not full):
            assert matches(list(cut.expected), list(full.expected)), f"{cut.where} differs from {full.where}"
            checked += 1
    assert checked >= 1


# ------------------------------------------------------------------ the docs themselves

SETUP_RUN = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
             "perfmodel predict --mode rollout_async --gpus 32")
SETUP_INSTALL = 'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]"'
SETUP_TEST = SETUP_INSTALL + " && python -m pytest"


def test_readme_is_short_with_both_setup_commands_and_is_the_package_readme():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    bash = [ex.command for ex in examples_of(ROOT / "README.md") if ex.lang == "bash"]
    assert SETUP_RUN in bash and SETUP_TEST in bash
    # CI runs exactly the README's test command: its install, then (once apt's Chromium is in) pytest
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert SETUP_INSTALL in ci and ci[-1] == "python -m pytest" and ci.index(SETUP_INSTALL) < len(ci) - 1
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["readme"] == "README.md"


def test_guide_states_the_stored_suite_time():
    """docs/guide.md's sentence on the suite's time is benchmarks/results/suite_time.json's (both
    runs: warm and a fresh clone's first), and the file records what pytest itself reported."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import suite_time

    doc = json.loads((ROOT / "benchmarks" / "results" / "suite_time.json").read_text())
    assert {r["kind"] for r in doc["runs"]} == {"warm", "fresh clone"}
    for r in doc["runs"]:
        assert r["passed"] > 1000 and r.get("failed", 0) == 0 and r["wall_s"] >= r["pytest_s"]
    guide = " ".join((ROOT / "docs" / "guide.md").read_text().split())
    assert suite_time.guide_sentence(doc) in guide
    out = "\n".join(["...", "==== 3 passed, 1 skipped, 2 warnings in 12.50s ===="])
    assert suite_time.parse_summary(out) == {"pytest_s": 12.5, "passed": 3, "skipped": 1, "warnings": 2}


@pytest.mark.parametrize("doc", DOCS[1:], ids=lambda d: d.name)
def test_each_doc_opens_with_what_it_is_for(doc):
    lines = doc.read_text().splitlines()
    assert lines[0].startswith("# ") and not lines[1].strip()
    assert lines[2].startswith("For "), f"{doc.name}: the first paragraph should say who it is for"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(doc: Path) -> set[str]:
    text = doc.read_text()
    inside = False
    out = set()
    for ln in text.splitlines():
        if ln.startswith("```"):
            inside = not inside
        elif not inside and ln.startswith("#"):
            out.add(slug(ln.lstrip("#")))
    return out


def links(doc: Path):
    inside = False
    for n, ln in enumerate(doc.read_text().splitlines(), 1):
        if ln.startswith("```"):
            inside = not inside
            continue
        if inside:
            continue
        for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", ln)):
            yield n, m.group(1)


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_relative_links_and_anchors_exist(doc):
    text = doc.read_text()
    assert text.count("\n```") % 2 == 0 or text.startswith("```"), f"{doc.name}: unclosed code block"
    bad = []
    for n, target in links(doc):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(f"{doc.name}:{n}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in headings(dest):
            bad.append(f"{doc.name}:{n}: {target}: no heading with that anchor in {dest.name}")
    assert not bad, "\n".join(bad)


def test_json_examples_parse_and_the_plan_example_is_a_plan():
    from perfmodel.schema.plan import Plan

    plans = 0
    for doc in DOCS:
        for lang, first, body in fenced_blocks(doc.read_text()):
            if lang != "json":
                continue
            obj = json.loads("\n".join(body))
            if "mode" in obj and "workload" in obj:
                Plan.from_dict(obj)
                plans += 1
    assert plans >= 1


def test_executor_profile_example_is_the_bundled_profiles_summary():
    """README's `executor profile` line is what that command printed for the bundled tiny pi0.5
    profile: its numbers must be the profile's."""
    from perfmodel.schema.profile import load_profile

    ex = next(ex for ex in ALL if ex.command.startswith("executor profile --backbone pi05 --scale tiny"))
    line = "\n".join(ex.expected)
    c = (p := load_profile(str(ROOT / "profiles" / "pi05_tiny_cpu.json"))).costs
    shown = {k: float(v) for k, v in re.findall(r"(env step|reset|infer\(1\)|train\(1\)|optimizer|sync) "
                                                r"([\d.]+)", line)}
    assert shown == {"env step": round(c.env_step_core_s * 1e3, 1), "reset": round(c.env_reset_s, 2),
                     "infer(1)": round(c.infer_s(1) * 1e3, 1),
                     "train(1)": round(c.train_micro_batch_s(1) * 1e3, 1),
                     "optimizer": round(c.optimizer_step_s * 1e3, 1),
                     "sync": round(p.node["intra_node_bw_GBps"], 2)}


def test_executor_run_examples_are_rendered_from_a_stored_record():
    """Issue 41 item 10: every `executor run ... --compare` example shows what the executor prints
    (executor.cli.compare_output, the code the command runs) for the real run whose record is
    stored beside the plan the example runs (examples/records/<name>/record.json): the current sign
    convention (prediction / measurement - 1), the host probe and the diagnosis lines."""
    from executor.cli import compare_output

    shown = [ex for ex in ALL if ex.lang == "console" and ex.command.startswith("executor run ")
             and "--compare" in ex.command]
    assert {ex.doc.name for ex in shown} >= {"README.md", "executor.md"}
    for ex in shown:
        words = program_args(ex.command)
        plan = Path(words[2])
        assert plan.parts[:2] == ("examples", "records") and plan.name == "plan.json", ex.where
        stored = ROOT / plan.parent
        record = json.loads((stored / "record.json").read_text())
        assert record["source"] == "executor" and record["status"] == "ok"
        assert record["error_pct"] == pytest.approx(100 * (record["predicted_throughput_env_steps_per_s"]
                                                           / record["throughput_env_steps_per_s"] - 1))
        out = words[words.index("--out") + 1]
        actual = compare_output(record, out, (stored / "tensorboard").is_dir())
        assert any(ln.startswith("host probe:") for ln in actual)
        assert any(ln.startswith("diagnosis:") for ln in actual)
        if not matches(list(ex.expected), actual):
            pytest.fail(mismatch(ex, actual), pytrace=False)


def test_own_runs_cites_no_file_outside_the_repository():
    """Issue 41 item 10: a user reading docs/own-runs.md has the repository, not this project's
    shared folder; what RLinf writes is cited from RLinf's own source."""
    text = (ROOT / "docs" / "own-runs.md").read_text()
    assert "../shared" not in text and "/work/" not in text


def test_matcher_elisions():
    out = ["a 1.25", "b", "c", "a very long line that wraps", "d"]
    assert matches(["a 1.26", "...", "a very long", "line that wraps", "d"], out)
    assert matches(["a 1.25", "[2 more lines]", "a very [...]", "d"], out)
    assert not matches(["a 1.27", "..."], out)  # two units of the last digit
    assert not matches(["a 1.25", "[1 more line]", "a very [...]", "d"], out)
    assert not matches(["a 1.25", "b", "c", "a very long line", "d"], out)
    assert not matches(["a 1.25", "b"], out)


if __name__ == "__main__":  # print what every MATCH example prints now, to regenerate the docs
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name in ("examples", "profiles", "benchmarks"):
            (Path(tmp) / name).symlink_to(ROOT / name)
        for ex in ALL:
            if ex.lang == "console" and ex.command in MATCH + MATCH_SLOW:
                print(f"== {ex.where}\n$ {ex.command}")
                print("\n".join(shell(ex.command, Path(tmp))[1]))
