"""``--target cuda``: emit a module of Numba CUDA kernels.

Same semantics and module contract as the numba CPU target
(:mod:`netgen.codegen.numba.emit`), laid out for a GPU. The generated
module is assembled from:

* :mod:`netgen.codegen.cuda.kernels`: the kernel sources (one thread block
  per batch row; all lanes of the row's P sweep in that block -- the k
  ranks of the back-sweep, or for sorters the n input columns of the
  forward sweep, the numba target's rule; the
  block's wire arrays -- m n floats for the rows with P, n for values only,
  2 n for the column -- in dynamic shared memory up to the device's opt-in
  limit, 227 KB on Hopper, else in a global scratch row; bad rows flagged on
  the GPU);
* real, tested modules copied by source extraction
  (:func:`netgen.codegen.runtime.assemble`, :func:`~netgen.codegen.runtime.statements`):
  :mod:`netgen.codegen.cuda.driver` (shared-memory limits, opt-in, block
  sizes, the driver check), :mod:`~netgen.codegen.cuda.packing` (Numba's
  kernel ABI packed from torch tensors), :mod:`~netgen.codegen.cuda.launch`
  (host tables, cached ``cuda.core`` kernel handles, launch records,
  torch's current stream), :mod:`~netgen.codegen.cuda.batch` (batch chunks),
  :mod:`~netgen.codegen.cuda.ops` (the ``torch.library`` custom ops
  and their autograd), :mod:`~netgen.codegen.cuda.layer` (the
  once-per-process self-check of the launch packing against Numba's
  dispatcher, ``Layer``) and :mod:`~netgen.codegen.runtime.common` (checks,
  the steepness rule, the second-order and torch.func refusals, ``hard``);
* this file: the header (network, relaxation, the plan, the numpy-2.5
  shim), the constants of a build (block sizes, shared-memory limit,
  whether D is kept, the op namespace) written as literals, and :func:`emit`;
  :func:`compile_check` (in :mod:`.compile_check`, re-exported here)
  compiles every kernel to PTX for a given compute capability and
  assembles it to a cubin in separate processes (no GPU needed).

What the rows path keeps for its backward: the comparators' differences d
and swap probabilities p (B x size each) and, in the plan's mode ``save``
(:mod:`netgen.codegen.plan`; this target's budget in
:mod:`netgen.codegen.cuda`), the P sweep's row differences D (B x nnz);
otherwise (sorting) nothing more: the backward recomputes the P sweep into
a scratch D, the batch processed in chunks that fit a working budget. The backward reads p; dp/dd and dp/ds are
recomputed from d (one division, no arctangent).

The module imports without a GPU; using the Layer there raises a
RuntimeError saying a CUDA device is needed. No eager signatures
(``@cuda.jit`` with a signature needs a driver) and no device helper
functions (the distribution is pasted into each kernel). Every value from
the network or the user reaches the module as a literal (``repr``/JSON),
the docstring included; the module is written with the ``Lines`` builder
and a ``Namespace`` of literals, no template is filled.
"""

from __future__ import annotations

import ast
import hashlib

from ...network import Network
from ..header import FLOAT_TYPES, network_literal, relaxation_literal, swap_code, write_top
from ..lines import Lines
from ..literals import Namespace, literal, top_level_definitions
from ..plan import Plan
# re-exported: netgen.codegen.cuda.emit.compile_check is the documented name
from .compile_check import compile_check, default_jobs  # noqa: F401
from .kernels import KERNEL_ARGS, kernels_source

TARGET = "cuda"


def emit(net: Network, r, plan: Plan, options) -> str:
    """Full source of the generated CUDA module for ``net`` relaxed by
    ``r``, with the P engine's plan (its direction; mode ``save`` keeps D
    from the forward, written as ``SAVE_D``) and ``options``
    (:class:`netgen.codegen.cuda.CudaOptions`: block sizes, the
    shared-memory limit); deterministic."""
    direction = plan.direction
    if plan.nnz >= 2**32 or net.size >= 2**32:
        raise ValueError(f"network too large for the cuda target: {plan.nnz} (comparator, lane) pairs "
                         "(32-bit offsets)")
    lanes = net.n if direction == "forward" else net.k
    if options.lane_groups is False and lanes * net.n >= 2**32:
        # the rows kernels index a row's P state (lanes x n floats) with 32-bit counters; the lane
        # groups split it (each block's state is G x n)
        raise ValueError(f"lane_groups=False needs {lanes} x {net.n} < 2^32 (the rows kernels' 32-bit state index); "
                         "leave lane_groups at None or True")
    from ..plan import sweep_ranges
    from ..runtime import common
    from .layout import WARP, d_stride

    clo, chi, _ = sweep_ranges(net, direction)
    # where the rows kernels keep D (layout.d_slots): a literal of the kernels and the module
    stride = {"windows": WARP, "csr": 1}.get(options.d_layout) or d_stride(clo, chi, net.layer_offsets)
    kernel_args, kernels, table = kernels_source(
        net.n, net.k, options.shared_limit, {ft: swap_code(r, 0, ft, steepness="s") for ft in FLOAT_TYPES},
        direction == "forward", options.lane_groups, dstride=stride,
        tame_swaps={ft: swap_code(r, 0, ft, steepness="s", tame=True) for ft in FLOAT_TYPES})
    names = Namespace()
    L = Lines()
    L(repr(_doc(net, r)))
    L.blank()
    L("import hashlib", "import json", "import logging", "import math", "import os", "import re", "import sys",
      "import tempfile", "import time", "", "import numpy as np", "import torch", "")
    write_top(L, names, TARGET, net, r, (common.refuse_transforms, common.check_input, common.check_labels,
                                           common._SecondOrder, common.refuse_second_order), direction)
    L.blank(2)
    L(_deferred_source(names))
    L.blank(2)
    L("#: argument kinds of each kernel: f1/f2 float arrays, w1 wire vector",
      "#: (WIRE_DTYPE), u1 uint32, i1 int64, b1 int32 vectors, bool a flag")
    names.define("KERNEL_ARGS")
    L(kernel_args)
    L.blank(2)
    for name, _ in top_level_definitions(ast.parse(kernels)):
        names.define(name)
    L(kernels)
    L.blank(2)
    L('#: (dtype, kernel, variant) -> kernel; variant "shared" (wire arrays in',
      "#: dynamic shared memory) exists where n floats (2 n for the column) fit",
      '#: SHARED_LIMIT, "global" always')
    names.define("KERNELS")
    names.define("LAUNCH_BOUNDS")
    L(table)
    L.blank(2)
    constants = {"THREADS": int(options.threads), "BIG_THREADS": int(options.big_threads),
                 "SHARED_LIMIT": int(options.shared_limit), "SAVE_D": plan.mode == "save", "D_STRIDE": stride}
    constants["OPS_NAMESPACE"] = _ops_namespace(net, r, kernels, direction, constants)
    L(_lanes_source(r, names))
    L.blank(2)
    L(runtime_source(constants, names))
    source = L.render()
    from ..runtime import check_interface, tables
    from ..runtime import lanes as torch_lanes
    from . import deferred

    check_interface(source, names, (common, tables, deferred, torch_lanes, *(m for m, _, _ in _runtime_parts())),
                    "generated cuda module")
    return source


def _lanes_source(r, names: Namespace) -> str:
    """The lane sweeps ``W P`` and ``P V`` (the Layer's ``_back``/``_fwd``):
    for now the torch target's sweeps (:mod:`netgen.codegen.runtime.lanes`,
    torch ops on the device, O(size) floats per lane and row) with its
    rendered ``_swap``; no kernel of their own yet."""
    from ..runtime import assemble
    from ..runtime import lanes as torch_lanes
    from ..swap_code import torch_swap_lines

    L = Lines()
    L("# the lane sweeps W P and P V: torch ops on the device (netgen.codegen.runtime.lanes)")
    names.define("_DEPTH")
    L("_DEPTH = len(_OFFSETS) - 1")
    L.blank(2)
    names.define("_swap")
    L(*torch_swap_lines(r))
    L.blank(2)
    L(assemble(torch_lanes.PARTS, names))
    return L.render().rstrip("\n")


def _deferred_source(names: Namespace) -> str:
    """numba-cuda imported on first need (:mod:`netgen.codegen.cuda.deferred`):
    its stand-in ``cuda`` decorates the kernels, so it comes before them."""
    from ..runtime import assemble, statements
    from . import deferred

    return assemble(deferred.PARTS, names) + "\n\n\n" + statements(deferred, deferred.STATE, names)


# ---------------------------------------------------------------- runtime assembly
#: comments above the build's constants in a generated module
_CONSTANT_DOCS = {
    "THREADS": "threads per block (launches whose shared memory leaves many blocks per SM)",
    "BIG_THREADS": "the most threads per block of a launch whose shared memory leaves few blocks per SM "
                   "(see _block), capped by the kernel's limit",
    "SHARED_LIMIT": "dynamic shared memory a block may ask for (bytes; also capped by the device)",
    "SAVE_D": "the forward keeps D (B x _DLEN) for the backward (the plan's mode save), else the backward "
              "recomputes the P sweep",
    "D_STRIDE": "where the rows kernels keep D: lane l of comparator i at dix[i] + l D_STRIDE (32: a warp's "
                "comparators keep a lane as 32 consecutive floats; 1: the plan's CSR)",
    "OPS_NAMESPACE": "the torch.library namespace of this module's ops",
}


def _runtime_parts():
    """The runtime modules a cuda module copies, as (module, state names,
    functions): the launcher, the ahead-of-time kernel loader, the ops, the
    Layer base, the layer."""
    from ..runtime import layer as base
    from . import batch, cubin, driver, group_ops, lane_ops, launch, layer, layout, ops, packing

    return ((layout, layout.STATE, layout.PARTS), (driver, driver.STATE, driver.PARTS),
            (packing, packing.STATE, packing.PARTS), (launch, launch.STATE, launch.PARTS),
            (batch, batch.STATE, batch.PARTS), (cubin, cubin.STATE, cubin.PARTS),
            (group_ops, group_ops.STATE, group_ops.PARTS), (ops, (), ops.PARTS),
            (lane_ops, lane_ops.STATE, lane_ops.PARTS), (base, (), base.PARTS), (layer, layer.STATE, layer.PARTS))


def _runtime_code(names: Namespace) -> str:
    """The copied runtime: every part's functions, then the module-level
    state (which may call them), then the ops' registration."""
    from ..runtime import assemble, statements

    parts = _runtime_parts()
    L = Lines()
    for _, _, functions in parts:
        L(assemble(functions, names))
        L.blank(2)
    for module, state, _ in parts:
        if state:
            L(statements(module, state, names))
            L.blank(2)
    L("_register()")
    return L.render()


def runtime_source(constants: dict, names: Namespace | None = None) -> str:
    """The constants of a build (as literals) and the copied runtime, for a
    module whose first part (kernels, tables) defines the rest; every
    top-level name is claimed in ``names`` (the module's Namespace, which
    already holds that first part's names)."""
    names = Namespace() if names is None else names
    L = Lines()
    for name, value in constants.items():
        L(f"#: {_CONSTANT_DOCS[name]}")
        L(f"{names.define(name)} = {literal(value)}")
    L.blank(2)
    L(_runtime_code(names))
    return L.render()


def _ops_namespace(net: Network, r, kernels: str, direction: str, constants: dict) -> str:
    """``netgen_cuda_<hash>``: the torch.library namespace of the module's
    ops, one per (network, relaxation, kernel code, P sweep direction,
    build constants): two modules that differ in any of them register
    different ops (ops are global to the process: a shared namespace would
    run the first module's launcher for both)."""
    h = hashlib.sha256()
    for part in (network_literal(net), relaxation_literal(r), repr(KERNEL_ARGS), _runtime_code(Namespace()),
                 kernels, direction, repr(sorted(constants.items()))):
        h.update(part.encode())
    return f"netgen_cuda_{h.hexdigest()[:12]}"


def _doc(net: Network, r) -> str:
    """The module docstring's text (the caller renders it with ``repr``)."""
    kind = net.construction.get("kind", "custom")
    return (
        f"netgen generated module (target cuda): {kind} network, n={net.n}, k={net.k}, "
        f"depth={net.depth}, size={net.size};\n"
        f"relaxation {r.distribution}, steepness={r.steepness!r} (default; Layer(steepness=...) and "
        f"layer.steepness override it at run time), art_lambda={r.art_lambda!r}, "
        f"art_epsilon={r.art_epsilon!r}.\n\n"
        "Generated code: do not edit. Rebuild with `netgen build ... --target cuda`.\n"
        "Numba CUDA kernels, one block per batch row, launched on torch's current stream through\n"
        "torch.library custom ops (torch.compile and CUDA graphs see single ops). Importing needs\n"
        "no GPU; using Layer does. Rows of x with NaN/inf, or whose steepness * (max - min) overflows\n"
        "(or y out of range) give NaN in that row.\n"
        "Layer().forward(x) -> (values (..., k), P (..., k, n)); Layer().values(x) -> values only;\n"
        "Layer().column(x, y) -> P[..., :, y]; Layer().hard(x) -> exact (values, indices).\n"
        "Once differentiable: second-order gradients and torch.func transforms are refused."
    )
