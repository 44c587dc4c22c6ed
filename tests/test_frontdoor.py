"""The front door (netgen/__init__.py): the names users need, each with one
meaning, imported on first use so that ``import netgen`` stays cheap."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import netgen

ROOT = Path(__file__).resolve().parents[1]


def test_import_netgen_is_cheap():
    code = ("import sys, netgen; heavy = [m for m in ('torch', 'numba', 'netgen.compiler', 'netgen.codegen.auto') "
            "if m in sys.modules]; print(heavy)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.parametrize("name", sorted(netgen._LAZY))
def test_every_front_door_name_resolves_to_its_one_home(name):
    module, attr = netgen._LAZY[name]
    assert getattr(netgen, name) is getattr(__import__(module, fromlist=[attr]), attr)
    assert name in netgen.__all__ and name in dir(netgen)


def test_the_lazy_table_is_the_type_checking_block():
    """Readers and type checkers follow the TYPE_CHECKING imports; they
    name exactly what _LAZY resolves."""
    tree = ast.parse((ROOT / "netgen" / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen = {}
    for node in block.body:
        for a in node.names:
            seen[a.asname or a.name] = ("netgen" + ("." + node.module if node.module else ""), a.name)
    assert seen == netgen._LAZY


def test_no_front_door_name_shadows_a_subpackage():
    packages = {p.stem if p.is_file() else p.name for p in (ROOT / "netgen").iterdir()
                if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    assert not (set(netgen._LAZY) & packages)


def test_one_meaning_per_name():
    import warnings

    from netgen import compiler, construct

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = compiler.construct  # the old name of build_network, kept as a deprecated alias
    assert old is compiler.build_network and "build_network" in str(caught[0].message)
    assert caught[0].category is DeprecationWarning
    assert construct.construct("bitonic", 8, 3) == compiler.build_network(8, 3, "bitonic")
    with pytest.raises(AttributeError):
        compiler.no_such_name  # noqa: B018
