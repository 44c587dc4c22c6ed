"""The 1-row copies of the checkpointed lane kernels
(:mod:`.checkpoint_kernels`), generated from their source.

Every kernel processes rows in blocks of ``_W = 16`` laid out (wire, row)
and the vector helpers of :mod:`.vector` compute ``<_W x float>`` vectors,
reading ``_W`` when numba compiles them. At small B (soft_rank at
n = 2^20 runs one row) a block is 1/16 full: the checkpointed sweeps then
spend most of their time and 16x the memory on padding rows. Emitting the
module with a smaller ``_W`` is no answer (at 8, LLVM unrolls the 8-row
loops and leaves them scalar: 5x slower per row), so the module gets both:
the 16-row kernels, and copies of the kernels that run one row per block.

The copies are the same source with names replaced
(:func:`netgen.codegen.runtime.renamed`): ``_W`` becomes ``_W_1`` (= 1) and
every function or kernel that reads it, directly or through another,
gets the suffix ``_1`` (``_ck_vals`` -> ``_ck_vals_1``, ``_vmixp`` ->
``_vmixp_1``, ``_CK_KERNELS`` -> ``_CK_KERNELS_1``). Code that does not
depend on the width (``_swap``, the block transposes, ``_jit``) is shared.
:mod:`.checkpoint`'s host functions run a call's last block in the copies
when it holds at most ``_CK_NARROW`` rows (:func:`.checkpoint._ck_split`).
"""

from __future__ import annotations

import ast
import inspect
import textwrap

__all__ = ["SUFFIX", "renames", "write_narrow"]

#: what a 1-row copy's name gets appended
SUFFIX = "_1"


def _reads(source: str) -> set:
    """The names ``source`` mentions (loads, stores, parameters aside)."""
    return {node.id for node in ast.walk(ast.parse(textwrap.dedent(source))) if isinstance(node, ast.Name)}


def _graph() -> dict:
    """name -> the names its source mentions, for the vector helpers and
    the checkpointed kernels and their state."""
    from ..literals import Namespace
    from ..runtime import statements
    from . import checkpoint_kernels as ck
    from . import vector

    graph = {p.__name__: _reads(inspect.getsource(p)) for p in (*vector.PARTS, *ck.PARTS)}
    graph.update((s, _reads(statements(ck, [s], Namespace()))) for s in ck.STATE)
    return graph


def renames(roots=("_CK_KERNELS", "_CK_KERNELS_SERIAL")) -> dict:
    """The renaming that makes the 1-row copies of ``roots``: ``_W`` and
    every name that ``roots`` reach and that reads ``_W`` (directly or
    through another such name), each to itself plus :data:`SUFFIX`."""
    graph = _graph()
    wide = {"_W"}
    grew = True
    while grew:  # the names that read _W, through any chain of calls
        grew = False
        for name, reads in graph.items():
            if name not in wide and reads & wide:
                wide.add(name)
                grew = True
    reached, todo = set(), list(roots)
    while todo:  # what the roots call, through any chain
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo.extend(r for r in graph.get(name, ()) if r in graph or r == "_W")
    return {name: name + SUFFIX for name in sorted(reached & wide)}


def write_narrow(L, names) -> None:
    """The 1-row copies: ``_W_1``, then the vector helpers, the checkpointed
    kernels and their state that :func:`renames` renames, in their files'
    order (after the 16-row originals, which :func:`.emit.write_kernels`
    wrote)."""
    from ..literals import literal
    from ..runtime import assemble, statements
    from . import checkpoint_kernels as ck
    from . import vector

    rename = renames()
    L("# The 1-row copies of the checkpointed kernels (netgen/codegen/numba/narrow.py):")
    L("# the code above with _W and the names that read it suffixed _1, for calls")
    L("# whose last block holds few rows.")
    L(f"{names.define(rename['_W'])} = {literal(1)}  # rows per block in the 1-row copies")
    L.blank(2)
    L(assemble([p for p in vector.PARTS if p.__name__ in rename], names, rename))
    L.blank(2)
    L(assemble([p for p in ck.PARTS if p.__name__ in rename], names, rename))
    L.blank(2)
    L(statements(ck, [s for s in ck.STATE if s in rename], names, rename))
    L.blank(2)
