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
