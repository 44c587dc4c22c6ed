"""The runtime modules copied into generated modules, tested as what they
are: ordinary code (netgen.codegen.runtime)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import builtins
import importlib
import inspect
import symtable
import textwrap
import types

from netgen.codegen.literals import GeneratedSourceError, Namespace
from netgen.codegen.runtime import assemble, check_interface, common, statements
from netgen.codegen.runtime.layer import LayerBase
from netgen.codegen.torch import layer as torch_layer

def _runtime_files() -> tuple[str, ...]:
    """Every runtime file a generated module copies from: the modules under
    netgen/codegen with a top-level ``PARTS`` (found, not listed, so a new
    runtime file is checked too)."""
    import ast
    from pathlib import Path

    import netgen.codegen

    root = Path(netgen.codegen.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PARTS" for t in node.targets)
               for node in tree.body):
            found.append(".".join(("netgen", "codegen", *path.relative_to(root).with_suffix("").parts)))
    return tuple(found)


RUNTIME = _runtime_files()


def test_the_runtime_files_are_found():
    assert {"netgen.codegen.runtime.common", "netgen.codegen.numba.checkpoint", "netgen.codegen.cuda.lane_ops",
            "netgen.codegen.torch.layer"} <= set(RUNTIME) and len(RUNTIME) >= 20, RUNTIME


def test_steepness_value_accepts_numbers_and_tensors():
    rule = LayerBase.steepness_value  # the one rule (the Layer base)
    assert rule(3) == 3.0 and isinstance(rule(np.float32(2.5)), float)
    p = torch.nn.Parameter(torch.tensor([4.0]))
    s = rule(p)
    assert s.shape == () and s.requires_grad
    for bad in (0, -1.0, float("nan"), float("inf"), True, "3", None, torch.tensor([1.0, 2.0]),
                torch.tensor(-1.0), torch.tensor(True)):
        with pytest.raises(ValueError, match="steepness"):
            rule(bad)


def _copied_reads(module) -> tuple[set, set]:
    """(globals the copied code of ``module`` reads, names it binds)."""
    src = "\n\n".join(textwrap.dedent(inspect.getsource(p)) for p in getattr(module, "PARTS", ()))
    if getattr(module, "STATE", ()):
        src += "\n\n" + statements(module, module.STATE, Namespace())
    table = symtable.symtable(src, module.__name__, "exec")
    reads = {s.get_name() for s in table.get_symbols() if s.is_referenced()}
    binds = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    binds |= {t.get_name() for t in table.get_children() if t.get_type() in ("function", "class")}

    def walk(t):
        for c in t.get_children():
            reads.update(s.get_name() for s in c.get_symbols() if s.is_global() and s.is_referenced())
            walk(c)

    walk(table)
    return reads, binds


@pytest.mark.parametrize("name", RUNTIME)
def test_each_runtime_file_declares_what_it_reads(name):
    """``READS`` is exactly what the file's copied code reads and neither
    defines nor imports (a module, or a name of another runtime file): the
    interface a generated module must provide; each is bound in the file
    (a stand-in or the real value), so the file imports on its own."""
    pytest.importorskip("numba")
    module = importlib.import_module(name)
    reads, binds = _copied_reads(module)
    tree = __import__("ast").parse(inspect.getsource(module))
    imported = {(a.asname or a.name).split(".")[0] for node in tree.body
                if isinstance(node, (__import__("ast").Import, __import__("ast").ImportFrom)) for a in node.names}
    free = reads - binds - imported - set(dir(builtins))
    assert free == set(getattr(module, "READS", ())), f"{name}: reads {sorted(free)}"
    assert all(hasattr(module, r) for r in getattr(module, "READS", ()))


def test_check_interface_finds_missing_and_extra_names():
    runtime = types.SimpleNamespace(READS=("_X",))

    def f():
        return _X  # noqa: F821 - the emitter's constant

    def module(*emitted):
        names = Namespace()
        src = assemble([f], names)
        for line in emitted:
            names.define(line.split(" =")[0])
        return "\n".join([*emitted, src, "TARGET = 't'"]) + "\n", names

    check_interface(*module("_X = 1"), [runtime])
    with pytest.raises(GeneratedSourceError, match="runtime reads _X, which the emitter did not write"):
        check_interface(*module(), [runtime])
    with pytest.raises(GeneratedSourceError, match="the emitter wrote _Y, which nothing reads"):
        check_interface(*module("_X = 1", "_Y = 2"), [runtime])
    check_interface(*module("_Y = 2", "_X = _Y + 1"), [runtime])  # _Y: read by the emitter's own code


def test_check_values_names_both_numbers():
    xt = torch.tensor([[1e38], [-1e38]], dtype=torch.float32)
    with pytest.raises(ValueError, match=r"steepness 10\.0 times the input range .*e\+38 overflows torch.float32"):
        common.check_values(xt, 10.0)
    common.check_values(xt.double(), 10.0)
    common.check_values(xt, torch.tensor(1.0))
    for bad, word in ((float("nan"), "NaN"), (float("inf"), "inf"), (-float("inf"), "inf")):
        x = torch.zeros(3, 2)
        x[1, 1] = bad
        with pytest.raises(ValueError, match=f"input contains {word} values"):
            common.check_values(x, 1.0)


def test_hard_network_never_writes_to_its_input():
    a, b = torch.tensor([0, 2, 0]), torch.tensor([1, 3, 2])
    offsets = (0, 2, 3)
    outs = torch.tensor([0])
    for x in (torch.tensor([1.0, 3.0, 2.0, 5.0]), torch.tensor([[1.0, 3.0, 2.0, 5.0]]),
              torch.tensor([[1.0], [3.0], [2.0], [5.0]]).t(), torch.tensor([1.0, 3.0, 2.0, 5.0]).expand(2, 4)):
        before = x.clone()
        v, i = common.hard_network(x, 4, a, b, offsets, outs)
        assert torch.equal(x, before) and v.reshape(-1)[0] == 5.0 and i.reshape(-1)[0] == 3


def test_second_order_refusal_only_when_recording():
    g = torch.ones(3)
    with torch.no_grad():  # a plain backward runs without recording
        same = common.refuse_second_order((g, None))
    assert same[0] is g and same[1] is None
    with torch.enable_grad():  # create_graph=True
        out, none = common.refuse_second_order((g, None))
    assert none is None and out.requires_grad and torch.equal(out, g)
    with pytest.raises(RuntimeError, match="second-order gradients .* netgen.relax.reference"):
        out.sum().backward()


def test_transforms_refused():
    def f(t):
        common.refuse_transforms()
        return t

    f(torch.ones(2))
    with pytest.raises(ValueError, match="torch.func transforms"):
        torch.func.vmap(f)(torch.ones(2, 2))


def test_assemble_claims_each_name_once():
    names = Namespace()
    src = assemble(common.PARTS, names)
    compile(src, "<parts>", "exec")
    assert "def hard_network" in src and "hard_network" in names
    with pytest.raises(GeneratedSourceError, match="twice"):
        assemble([common.hard_network], names)
    assert torch_layer.PARTS[-1].__name__ == "Layer"
