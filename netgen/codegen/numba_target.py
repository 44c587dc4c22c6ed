"""``--target numba``: emit a module of ``@njit`` CPU kernels.

The emitted module (docs/design.md section 8 contract) holds:

* ``NETWORK``, ``RELAXATION``, ``TARGET = "numba"`` and the comparator table
  (rebuilt from ``NETWORK`` at import);
* the build-time plan (:func:`netgen.codegen._numba_common.plan`): for each
  comparator, the range of P rows it can touch, so the back-sweep and its
  adjoint skip structural zeros;
* the P engine's build-time choices (:func:`engine`): the backward mode
  (``save`` the back-sweep's differences in the forward, or ``recompute``
  them per rank group in the backward) and the rank-group size;
* five kernels per float type (sources in :mod:`._numba_kernels`, the swap
  code of the chosen distribution from :mod:`._swap_code` pasted inline,
  reading the steepness as a run-time argument), twice: parallel, and
  serial (suffix ``_s``, compiled on first use) for calls below
  ``SERIAL_WORK``: those never enter numba's OpenMP pool, whose spinning
  workers slowed torch's own threads after every call (n = 32 sorting,
  B = 64, fwd+bwd: 66 ms with parallel kernels on one thread, 1.8 ms with
  OMP_WAIT_POLICY=passive, which a module cannot set once torch is loaded);
* the host wrappers and ``Layer`` (:mod:`._numba_runtime`): ``forward``,
  ``column``, ``hard``, ``Layer(steepness=None, threads=None)``.

All values from the network, the construction and the relaxation reach the
source through ``repr`` / JSON literals, and the templates are filled in one
pass (:func:`._numba_common.fill`): no substituted text is searched again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..network import Network
from ._numba_common import (
    FLOAT_TYPES,
    fill,
    lit,
    network_literal,
    plan,
    plan_source,
    relaxation_literal,
    relaxation_of,
    swap_code,
)
from ._numba_kernels import HELPERS, KERNELS
from ._numba_runtime import RUNTIME

TARGET = "numba"

MODES = ("save", "recompute")
# Mode ``save`` keeps the back-sweep's differences D (one float per
# (comparator, rank) pair of the plan: nnz per batch row) from the forward
# for the backward; ``recompute`` keeps O(size) per row and re-runs each rank
# group's back-sweep in the backward. ``save`` is chosen when D is at most
# SAVE_MAX_NNZ_PER_KN times the output (k n per row; top-5 of 10450: 2.6) or
# small in absolute terms (SAVE_MAX_NNZ per row): then writing and reading D
# costs less than the second back-sweep. Sorters have nnz = 4.3 k n (n = 32)
# to 28 k n (n = 4096).
SAVE_MAX_NNZ_PER_KN = 4.0
SAVE_MAX_NNZ = 16384
# Rank groups: the back-sweep scratch of one (row block, rank group) pair is
# R = n x g x 16 floats. g is the largest count whose R stays under
# GROUP_BYTES (float32; L2-sized: the recompute mode streams each group's
# differences through it), at least MIN_GROUP (fewer ranks per pass leave
# the per-comparator overhead and the re-reads of p dominant) and at most k.
# Measured (oddeven sorters, B = 64, 2 threads, CPU seconds per fwd+bwd):
# n = 256 best at g = 16..32; n = 1024: g = 1: 4.5, 2: 2.9, 4: 2.1, 8: 2.0,
# 16: 2.5 (its differences no longer stay in cache). Mode save keeps all k ranks in one
# group while R fits SAVE_GROUP_BYTES (top-5 of 10450: 3.3 MB).
GROUP_BYTES = 512 << 10
MIN_GROUP = 4
SAVE_GROUP_BYTES = 4 << 20
# Below this many (row, comparator-or-pair) updates per call (~1-2 ms of
# work) a kernel runs on the calling thread only: a parallel region costs
# tens of microseconds on an idle machine and up to a scheduler time slice
# on a busy one, where one of its threads waits for a core (measured with
# benchmarks/threads_busy.py on this 2-core machine at load ~11: n = 16,
# B = 32 took 108 ms per call parallel, 0.14 ms on one thread).
SERIAL_WORK = 1 << 21


def engine(net: Network, mode: str | None = None, group: int | None = None) -> tuple[str, int]:
    """The P engine's build-time choices for ``net``: ``(mode, group)``
    (see the constants above; ``mode``/``group`` force them, e.g. in tests)."""
    clo, chi, doff = plan(net.n, net.comparators, net.layer_offsets, net.outputs)
    nnz, k, n = int(doff[-1]), net.k, net.n
    if mode is None:
        mode = "save" if (nnz <= SAVE_MAX_NNZ_PER_KN * k * n or nnz <= SAVE_MAX_NNZ) else "recompute"
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if group is None:
        per_rank = n * 16 * 4
        if mode == "save":
            group = max(SAVE_GROUP_BYTES // per_rank, 1)
        else:
            group = max(GROUP_BYTES // per_rank, MIN_GROUP)
    if isinstance(group, bool) or not isinstance(group, (int, np.integer)):
        raise ValueError(f"group must be an integer, got {group!r}")
    group = int(min(max(int(group), 1), max(k, 1)))
    return mode, group


def emit(net: Network, r: Any = None, *, mode: str | None = None, group: int | None = None) -> str:
    """Full source of the generated numba module for ``net`` relaxed by
    ``r`` (a :class:`~netgen.relax.distributions.Relaxation`; None = the
    default for ``net``). ``mode`` ('save' / 'recompute') and ``group``
    (ranks per group) override the build-time choices of :func:`engine`.
    Deterministic: same inputs, same bytes."""
    if not isinstance(net, Network):
        raise ValueError(f"expected a Network, got {type(net).__name__}")
    r = relaxation_of(net, r)
    from .runtime import common  # the checks every generated layer shares (imports torch)

    mode, group = engine(net, mode, group)
    kernels = []
    for ft, serial in ((ft, serial) for serial in (False, True) for ft in FLOAT_TYPES):
        kernels.append(fill(KERNELS, {
            "SFX": ("_f32" if ft == "float32" else "_f64") + ("_s" if serial else ""),
            "PAR": "False" if serial else "_PARALLEL",
            "NPT": f"np.{ft}",
            "ONE": lit(1.0, ft),
            "ZERO": lit(0.0, ft),
            "SWAP16": swap_code(r, 16, ft, inline_exp=True, steepness="stp"),
        }))
    return fill(_TEMPLATE, {
        "DOC": repr(_doc(net, r, mode, group)),
        "NETWORK": network_literal(net),
        "RELAXATION": relaxation_literal(r),
        "PLAN": plan_source((common.steepness_value, common.refuse_transforms, common.check_input,
                             common.check_values, common._SecondOrder, common.refuse_second_order)).rstrip(),
        "ENGINE": f"_MODE = {mode!r}\n_GROUP = {group!r}\n_SERIAL_WORK = {int(SERIAL_WORK)!r}",
        "HELPERS": HELPERS.rstrip(),
        "KERNELS": "\n\n".join(kernels),
        "RUNTIME": RUNTIME.rstrip(),
    }) + "\n"


def _doc(net: Network, r, mode: str, group: int) -> str:
    kind = net.construction.get("kind", "custom")
    return (
        f"netgen generated module (target numba): {kind!s} network, n={net.n}, k={net.k}, "
        f"depth={net.depth}, size={net.size};\n"
        f"relaxation {r.distribution}, steepness={r.steepness!r} (default; Layer(steepness=...)), "
        f"art_lambda={r.art_lambda!r}, art_epsilon={r.art_epsilon!r}; P engine: mode {mode}, "
        f"rank groups of {group}.\n\n"
        "Generated code: do not edit. Rebuild with `netgen build ... --target numba`.\n"
        "Layer().forward(x) -> (values (..., k), P (..., k, n)); Layer().column(x, y) -> P[..., :, y];\n"
        "Layer().hard(x) -> exact (values, indices). CPU tensors; float32/float64 (half computed in float32).\n"
    )


_TEMPLATE = '''@@DOC@@

import math
import os
import platform
import threading

import numba
import numpy as np
import torch

TARGET = "numba"

@@NETWORK@@

@@RELAXATION@@


@@PLAN@@
_CA = np.ascontiguousarray(_COMPS[:, 0])
_CB = np.ascontiguousarray(_COMPS[:, 1])
# NETGEN_NUMBA_PARALLEL=0 compiles serial kernels (same code, prange runs as
# range; ~3x faster to compile, used by netgen's unit tests). Only the
# parallel kernels are cached on disk, next to this file.
_PARALLEL = os.environ.get("NETGEN_NUMBA_PARALLEL", "1") != "0"
_CACHE = _PARALLEL and os.path.isfile(globals().get("__file__") or "")
_W = 16  # batch rows per block in every kernel (one or two SIMD vectors)
_T = 64  # wires per tile when transposing between (row, wire) and (wire, row)
# The P engine (build-time choices, docs/targets.md): "save" keeps the
# back-sweep's differences for the backward, "recompute" re-runs each rank
# group's back-sweep there; ranks are processed in groups of _GROUP.
# Kernels below _SERIAL_WORK updates per call run on one thread.
@@ENGINE@@


@@HELPERS@@


@@KERNELS@@


@@RUNTIME@@
'''
