"""Dependency directions (docs/model.md, Layout): the schema imports nothing else of the project;
perfmodel imports neither executor nor analysis, nor torch, Ray or LIBERO."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(package: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        out[str(path.relative_to(ROOT))] = names
    return out


def test_schema_imports_nothing_else_of_the_project():
    for path, names in imported_modules(ROOT / "perfmodel" / "schema").items():
        bad = {n for n in names if n.split(".")[0] in ("perfmodel", "executor", "analysis")
               and not n.startswith("perfmodel.schema")}
        assert not bad, f"{path} imports {sorted(bad)}"


# Issue 14: the sweep's optional Ray backend imports ray inside the function that runs only with
# --address (tests/test_speed.py checks that a sweep without it never loads ray).
OPTIONAL_LAZY = {"perfmodel/planning/sweep.py": {"ray"}}


def test_perfmodel_imports_no_executor_analysis_or_heavy_runtime():
    for path, names in imported_modules(ROOT / "perfmodel").items():
        bad = {n for n in names if n.split(".")[0] in ("executor", "analysis", "torch", "ray", "libero", "mujoco")}
        bad -= OPTIONAL_LAZY.get(path, set())
        assert not bad, f"{path} imports {sorted(bad)}"


def test_predict_path_loads_no_heavy_modules():
    code = ("import sys; from perfmodel.cli import main\n"
            "heavy = [m for m in ('torch', 'ray', 'libero', 'mujoco', 'executor', 'analysis') if m in sys.modules]\n"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == ""


# -- issue 27: one direction of imports ------------------------------------------------------
# The import graph of every module of perfmodel/, executor/ and analysis/, by parsing (nothing is
# imported, so torch or LIBERO need not be installed). Every import counts, a lazy one inside a
# function as much as one at the top: a circle through a lazy import is still a circle.

PACKAGES = ("perfmodel", "executor", "analysis")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the project's modules it imports (``from a.b import c`` is a.b.c where c is a
    module, else a.b; relative imports resolved)."""
    files = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {known(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    full = f"{base}.{a.name}"
                    deps.add(full if full in files else known(base))
        graph[mod] = {d for d in deps if d is not None and d != mod}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_import_cycles_are_found():
    """The detector itself: a planted circle is reported, a chain is not."""
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_import_graph_sees_the_known_edges():
    g = import_graph()
    assert "perfmodel.simulate" in g["perfmodel.prediction"]
    assert "perfmodel.calibration.uncertainty" in g["perfmodel.prediction"]  # a lazy import counts
    assert "executor.profiling.config" in g["executor.profiling.envs"]


def test_no_import_cycle_between_files():
    cycles = import_cycles(import_graph())
    assert not cycles, "import circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_simulator_imports_nothing_from_calibration_or_planning():
    g = import_graph()
    sim = ["perfmodel.simulate", *(m for m in g if m == "perfmodel.sim" or m.startswith("perfmodel.sim."))]
    assert len(sim) >= 4
    for mod in sim:
        bad = {d for d in g[mod] if d.startswith(("perfmodel.calibration", "perfmodel.planning", "perfmodel.commands"))}
        assert not bad, f"{mod} imports {sorted(bad)}"
