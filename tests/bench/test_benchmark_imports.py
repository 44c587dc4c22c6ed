"""benchmarks/ holds benchmarks, and a benchmark measures what users can
call: no script in benchmarks/ imports a private module (``netgen.x._y``,
or a helper named ``_name``), imports a private name (``from m import
_name``) or reads one off a netgen module (``schedule._asap_loop``).
Research that needs netgen's insides lives in research/, data generation
and code metrics in tools/ (docs/benchmarks.md).

Every file is parsed with ``ast``; nothing is imported or run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def violations(path: Path) -> list[str]:
    """``line: what`` for every private import or private netgen attribute."""
    tree = ast.parse(path.read_text(), str(path))
    netgen_names = set()  # local names bound to netgen modules
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _private(a.name):
                    out.append(f"{node.lineno}: import {a.name}")
                if a.name.split(".")[0] == "netgen":
                    netgen_names.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _private(node.module):
                out.append(f"{node.lineno}: from {node.module} import ...")
            for a in node.names:
                if _private(a.name):
                    out.append(f"{node.lineno}: from {node.module} import {a.name}")
                elif node.module.split(".")[0] == "netgen":
                    netgen_names.add(a.asname or a.name)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in netgen_names
                and _private(node.attr)):
            out.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return out


SCRIPTS = sorted(BENCH.glob("*.py"))


def test_there_are_benchmarks():
    assert len(SCRIPTS) >= 10 and not any(p.name.startswith("_") for p in SCRIPTS), [p.name for p in SCRIPTS]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_private_imports(path):
    assert violations(path) == [], f"benchmarks/{path.name} uses netgen's insides (move it to research/?)"


def test_the_check_can_fail(tmp_path):
    f = tmp_path / "b.py"
    f.write_text("import _rss\nfrom netgen.codegen._swap_code import swap_code\nfrom netgen import schedule\n"
                 "from x import _loader\nschedule._asap_loop\nimport netgen.schedule as s\ns._COMPILED\n"
                 "schedule.asap_levels\n")
    assert violations(f) == ["1: import _rss", "2: from netgen.codegen._swap_code import ...",
                             "4: from x import _loader", "5: schedule._asap_loop", "7: s._COMPILED"]
