"""The 1-row copies of the lane kernels (the saved-state ones of
:mod:`.lanes` with the values kernel and adjoints they call, and the
checkpointed ones of :mod:`.checkpoint_kernels`), generated from their
source; and which runtime parts are kernels (:func:`is_kernel`,
:func:`mixed`), which :mod:`.emit` splits by.

Every kernel processes rows in blocks of ``_W = 16`` laid out (wire, row)
and the vector helpers of :mod:`.vector` compute ``<_W x float>`` vectors,
reading ``_W`` when numba compiles them. At small B (soft_rank at
n = 2^20 runs one row; a Spearman loss ranks one row) a block is 1/16
full: the sweeps then spend most of their time and 16x the memory on
padding rows. Emitting the module with a smaller ``_W`` is no answer (at
8, LLVM unrolls the 8-row loops and leaves them scalar: 5x slower per
row), so the module gets both: the 16-row kernels, and copies of the
kernels that run one row per block.

The copies are the same source with names replaced
(:func:`netgen.codegen.runtime.renamed`): ``_W`` becomes ``_W_1`` (= 1) and
every function or kernel that reads it, directly or through another,
gets the suffix ``_1`` (``_ck_vals`` -> ``_ck_vals_1``, ``_vmixp`` ->
``_vmixp_1``, ``_CK_KERNELS`` -> ``_CK_KERNELS_1``, ``_LANE_KERNELS`` ->
``_LANE_KERNELS_1``). Code that does not depend on the width (``_swap``,
the block transposes, ``_jit``) is shared. Like every kernel they compile
on first use. :mod:`.checkpoint`'s host functions run a call's last block
in the copies when it holds at most ``_CK_NARROW`` rows
(:func:`.checkpoint._ck_split`); :func:`.lanes.lanes_numpy` runs a whole
call in them when it has at most ``_LANES_NARROW`` rows.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

__all__ = ["SUFFIX", "is_kernel", "mixed", "renames", "write_narrow"]

#: what a 1-row copy's name gets appended
SUFFIX = "_1"


def is_kernel(obj) -> bool:
    """Whether a runtime part or state value is (made of) numba kernels: a
    dispatcher, a ``*_py`` function compiled by ``_jit``, or a tuple of
    dispatchers. They depend on the relaxation only (the network reaches
    them as arrays), so the operators' kernel module holds them once
    (:mod:`.shared`)."""
    from numba.core.dispatcher import Dispatcher

    if isinstance(obj, tuple):
        return bool(obj) and all(isinstance(o, Dispatcher) for o in obj)
    return isinstance(obj, Dispatcher) or getattr(obj, "__name__", "").endswith("_py")


def mixed() -> tuple:
    """The runtime files of the lane sweeps (kernels, host code or both),
    split by :func:`is_kernel` between :func:`.emit.write_kernels` and
    :func:`.emit.write_host` (each file's kernels, then its host functions and
    state, in order)."""
    from . import checkpoint, checkpoint_kernels, lanes

    return (checkpoint_kernels, checkpoint, lanes)


def _reads(source: str) -> set:
    """The names ``source`` mentions (loads, stores, parameters aside)."""
    return {node.id for node in ast.walk(ast.parse(textwrap.dedent(source))) if isinstance(node, ast.Name)}


def _modules() -> tuple:
    """The runtime files whose kernels may be copied, in the order a module
    defines them: the vector helpers, the P engine, the kernels, the
    checkpointed kernels, the lane kernels."""
    from . import checkpoint_kernels, engine, kernels, lanes, vector

    return (vector, engine, kernels, checkpoint_kernels, lanes)


def _kernel_parts(mod) -> tuple:
    """``mod``'s copied functions and state that :func:`.emit.write_kernels`
    writes: all of them, but the host functions of the files that mix both
    (:func:`mixed`; ``lanes_numpy`` reads ``_W`` too, and is no kernel)."""
    host = mod in mixed()
    parts = [p for p in mod.PARTS if not host or is_kernel(p)]
    return parts, [s for s in getattr(mod, "STATE", ()) if not host or is_kernel(getattr(mod, s))]


def _graph() -> dict:
    """name -> the names its source mentions, for the kernels of
    :func:`_modules` and their state."""
    from ..literals import Namespace
    from ..runtime import statements

    graph = {}
    for mod in _modules():
        parts, state = _kernel_parts(mod)
        graph.update((p.__name__, _reads(inspect.getsource(p))) for p in parts)
        graph.update((s, _reads(statements(mod, [s], Namespace()))) for s in state)
    return graph


def renames(roots=("_CK_KERNELS", "_CK_KERNELS_SERIAL", "_LANE_KERNELS", "_LANE_KERNELS_SERIAL")) -> dict:
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
    """The 1-row copies: ``_W_1``, then the vector helpers, the P engine's
    helpers, the kernels, the checkpointed and the lane kernels and their
    state that :func:`renames` renames, in their files' order (after the
    16-row originals, which :func:`.emit.write_kernels` wrote)."""
    from ..literals import literal
    from ..runtime import assemble, statements

    rename = renames()
    L("# The 1-row copies of the saved-state and checkpointed lane kernels")
    L("# (netgen/codegen/numba/narrow.py): the code above with _W and the names that")
    L("# read it suffixed _1, for calls of few rows.")
    L(f"{names.define(rename['_W'])} = {literal(1)}  # rows per block in the 1-row copies")
    L.blank(2)
    for mod in _modules():
        parts, state = _kernel_parts(mod)
        parts = [p for p in parts if p.__name__ in rename]
        state = [s for s in state if s in rename]
        if parts:
            L(assemble(parts, names, rename))
            L.blank(2)
        if state:
            L(statements(mod, state, names, rename))
            L.blank(2)
