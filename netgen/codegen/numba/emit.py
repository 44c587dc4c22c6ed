"""``--target numba``: emit a module of ``@njit`` CPU kernels.

The emitted module (the generated-module contract, docs/generated-modules.md)
holds:

* ``NETWORK``, ``RELAXATION``, ``TARGET = "numba"`` and the comparator table
  (rebuilt from ``NETWORK`` at import), with the build-time plan
  (:func:`netgen.codegen.runtime.tables.plan`: for each comparator, the range
  of P rows it can touch, so the back-sweep and its adjoint skip structural
  zeros) and the P engine's build-time choices (the plan of
  :mod:`netgen.codegen.plan`: the sweep direction, the backward mode and
  the lane-group size);
* ``_swap_f32`` / ``_swap_f64``: the swap code of the chosen distribution
  per float type (:func:`netgen.codegen.swap_code.swap_code`, rendered from
  :mod:`netgen.relax.formulas`), reading the steepness as a run-time
  argument; ``_swap`` picks one by the argument's type, inlined;
* the fixed code, copied from real modules by source extraction
  (:func:`netgen.codegen.runtime.assemble` for functions and classes,
  :func:`netgen.codegen.runtime.statements` for module-level state):
  :mod:`~netgen.codegen.numba.vector` (flush-to-zero, block
  transposes, 16-lane vector updates),
  :mod:`~netgen.codegen.numba.engine` (the P engine: P and its
  adjoint), :mod:`~netgen.codegen.numba.kernels` (five
  dtype-generic kernels, each compiled parallel and serial),
  :mod:`~netgen.codegen.numba.host` (pool, threads, numpy-level
  wrappers), :mod:`~netgen.codegen.numba.lanes` (the lane sweeps ``W P``,
  ``P V`` and their backward), :mod:`~netgen.codegen.numba.layer` (autograd, checks,
  ``Layer``) and :mod:`~netgen.codegen.runtime.common` (shared checks and
  ``hard``).

So this emitter writes only what varies: the literals, the engine
constants and the rendered swap functions. :func:`write_kernels` (what
depends on the relaxation alone) and :func:`write_host` (the rest) are
also how :mod:`.shared` builds the operators' kernel module, shared by
every network, and their layer code. Every value reaches the source
through ``repr`` / JSON literals (:mod:`netgen.codegen.literals`); the
module is checked to define each top-level name once.
"""

from __future__ import annotations

from ...network import Network
from ..header import FLOAT_TYPES, swap_code, write_top
from ..lines import Lines
from ..literals import Namespace, literal
from ..plan import Plan
from .narrow import is_kernel, mixed

TARGET = "numba"

# Below this many (row, comparator-or-pair) updates per call a kernel runs
# on the calling thread (the serial copies): a parallel region costs tens of
# microseconds on an idle machine. Measured (kernels only, fwd+bwd, sort
# n = 32, 2 threads, fastest of 101 interleaved calls): B = 16 (73k
# updates) 0.13 ms serial / 0.14 ms parallel, B = 32 (146k) 0.28 / 0.20,
# B = 64 (293k) 0.53 / 0.39. The old threshold, 2^21, kept sort n = 32 at
# B = 64 serial: 1.3 vs 0.7 ms fwd+bwd against the always-parallel kernels
# before issue 18. Above it, up to 2^21, the host times both copies and runs
# the faster on average (numba/host.py, _CHOICE): on a busy machine
# a parallel region waits for a thread without a core.
SERIAL_WORK = 1 << 17


def _swap_lines(r, ft: str) -> list[str]:
    """``_swap_f32`` / ``_swap_f64(d, stp) -> (p, dp/dd, dp/ds)`` in ``ft``
    arithmetic (float32: inline exponentials, no libm calls, so the kernels'
    16-row loops vectorise)."""
    name = "_swap_f32" if ft == "float32" else "_swap_f64"
    return [
        f"def {name}(d, stp):",
        f'    """p, dp/dd and dp/ds in {ft} for d = x - y and steepness stp ({r.distribution}; rendered by '
        'netgen from its formulas)."""',
        swap_code(r, 4, ft, inline_exp=True, steepness="stp"),
        "    return p, dp, dps",
    ]


def emit(net: Network, r, plan: Plan, options=None) -> str:
    """Full source of the generated numba module for ``net`` relaxed by
    ``r`` (a :class:`~netgen.relax.distributions.Relaxation`), with the P
    engine's build-time choices of ``plan`` (direction, mode, lane group);
    ``options`` (:class:`netgen.codegen.numba.NumbaOptions`) holds nothing
    more for this target. Deterministic: same inputs, same bytes."""
    # the runtime modules import torch and numba: only when emitting
    from ..runtime import check_interface, common, tables
    from ..runtime import layer as base
    from . import engine as eng
    from . import host, layer
    from . import kernels as kern
    from . import vector as vec

    direction, mode, group = plan.direction, plan.mode, plan.group
    names = Namespace()
    L = Lines()
    L(repr(_doc(net, r, direction, mode, group)))
    L.blank()
    write_imports(L)
    write_top(L, names, TARGET, net, r, host_checks() + (common.numba_disk_cache,), direction)
    write_kernels(L, names, r)
    L("# The P engine (build-time choices, docs/targets-numba.md): \"save\" keeps the")
    L("# sweep's differences for the backward, \"recompute\" re-runs each lane")
    L("# group's sweep there; lanes (_DIRECTION: ranks or input columns) are")
    L("# processed in groups of _GROUP.")
    L(f"{names.define('_MODE')} = {literal(mode)}")
    L(f"{names.define('_GROUP')} = {literal(int(group))}")
    L.blank(2)
    write_host(L, names)
    source = L.render()
    check_interface(source, names, (common, tables, base, vec, eng, kern, host, *mixed(), layer),
                    "generated numba module")
    return source


def _doc(net: Network, r, direction: str, mode: str, group: int) -> str:
    kind = net.construction.get("kind", "custom")
    return (
        f"netgen generated module (target numba): {kind!s} network, n={net.n}, k={net.k}, "
        f"depth={net.depth}, size={net.size};\n"
        f"relaxation {r.distribution}, steepness={r.steepness!r} (default; Layer(steepness=...)), "
        f"art_lambda={r.art_lambda!r}, art_epsilon={r.art_epsilon!r}; P engine: {direction} sweep, "
        f"mode {mode}, {'input columns' if direction == 'forward' else 'ranks'} in groups of {group}.\n\n"
        "Generated code: do not edit. Rebuild with `netgen build ... --target numba`.\n"
        "Layer().forward(x) -> (values (..., k), P (..., k, n)); Layer().column(x, y) -> P[..., :, y];\n"
        "Layer().hard(x) -> exact (values, indices). CPU tensors; float32/float64 (half computed in float32).\n"
    )


def write_imports(L) -> None:
    """The imports of a numba module (and of the operators' kernel module)."""
    L("import json", "import math", "import os", "import platform", "import threading", "import time", "import weakref",
      "")
    L("import numba", "import numpy as np", "import torch", "from llvmlite import ir",
      "from numba.core import cgutils, types", "from numba.core.extending import intrinsic, overload")
    L.blank()


def host_checks() -> tuple:
    """The shared checks (:mod:`netgen.codegen.runtime.common`) the host side
    of every numba layer copies: a generated module's and the operators'
    layer code (:func:`.shared.layer_source`)."""
    from ..runtime import common

    return (common.refuse_transforms, common.check_input, common.check_labels, common.check_values,
            common._SecondOrder, common.refuse_second_order, common.compiler_disable)


def write_kernels(L, names, r) -> None:
    """What depends on the relaxation ``r`` alone: ``_PARALLEL``, ``_CACHE``,
    ``_W``, ``_T``, the vector helpers, the rendered swap functions, the P
    engine, the kernels and the kernels of :func:`mixed` (the lane kernels;
    each compiled parallel and serial), then the 1-row copies of the
    saved-state and checkpointed lane kernels (:mod:`.narrow`). Reads ``numba_disk_cache``
    (:mod:`netgen.codegen.runtime.common`)."""
    from ..runtime import assemble, statements
    from . import engine as eng
    from . import kernels as kern
    from . import vector as vec
    from .narrow import write_narrow

    L("# NETGEN_NUMBA_PARALLEL=0 compiles serial kernels (same code, prange runs as")
    L("# range; ~3x faster to compile, used by netgen's unit tests). Only the")
    L("# kernels of parallel modules are cached on disk, next to this file.")
    L(f'{names.define("_PARALLEL")} = os.environ.get("NETGEN_NUMBA_PARALLEL", "1") != "0"')
    L(f'{names.define("_CACHE")} = _PARALLEL and numba_disk_cache(globals().get("__file__"))')
    L(f"{names.define('_W')} = {literal(vec._W)}  # batch rows per block in every kernel")
    L(f"{names.define('_T')} = {literal(vec._T)}  # wires per tile when transposing a block")
    L.blank(2)
    L(assemble(vec.PARTS, names))
    L.blank(2)
    for ft in FLOAT_TYPES:
        names.define("_swap_f32" if ft == "float32" else "_swap_f64")
        L(*_swap_lines(r, ft))
        L.blank(2)
    L(f"{names.define('_swap')} = _by_float(_swap_f32, _swap_f64)")
    L.blank(2)
    L(assemble(eng.PARTS, names))
    L.blank(2)
    L(assemble(kern.PARTS, names))
    L.blank(2)
    L(statements(kern, kern.STATE, names))
    L.blank(2)
    for mod in mixed():
        parts = [p for p in mod.PARTS if is_kernel(p)]
        if parts:
            L(assemble(parts, names))
            L.blank(2)
        state = [s for s in mod.STATE if is_kernel(getattr(mod, s))]
        if state:
            L(statements(mod, state, names))
            L.blank(2)
    write_narrow(L, names)


def write_host(L, names) -> None:
    """What the network's module runs around the kernels: ``_SERIAL_WORK``,
    the pool and threads (:mod:`.host`), the host functions and state of
    :func:`mixed` (the lane sweeps', ``_LIVE``), the Layer base and the
    autograd layer (:mod:`.layer`). Reads the kernels of :func:`write_kernels`, the tables
    and ``_MODE``, ``_GROUP``, ``_DIRECTION``, ``RELAXATION``, ``NETWORK``."""
    from ..runtime import assemble, statements
    from ..runtime import layer as base
    from . import host, layer

    L("# Kernels below _SERIAL_WORK updates per call run on one thread.")
    L(f"{names.define('_SERIAL_WORK')} = {literal(int(SERIAL_WORK))}")
    L.blank(2)
    L(statements(host, host.STATE, names))
    L.blank(2)
    L(assemble(host.PARTS, names))
    L.blank(2)
    for mod in mixed():
        parts = [p for p in mod.PARTS if not is_kernel(p)]
        if parts:
            L(assemble(parts, names))
            L.blank(2)
        state = [s for s in mod.STATE if not is_kernel(getattr(mod, s))]
        if state:
            L(statements(mod, state, names))
            L.blank(2)
    L(assemble(base.PARTS, names))
    L.blank(2)
    L(statements(layer, layer.STATE, names))
    L.blank(2)
    L(assemble(layer.PARTS, names))
