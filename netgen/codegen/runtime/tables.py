"""The network's tables in a generated ``numba`` or ``cuda`` module, built
at import from its ``NETWORK`` literal: the comparators as a (size, 2)
array and the layer offsets, the outputs, the build-time plan's lane
ranges for the module's P sweep direction ``_DIRECTION`` (:func:`plan`,
also what the emitters use at build time) and the exact network's index
tensors.

The same names in every module of every target: the wires as numpy
arrays ``_COMPS`` (size x 2), ``_WA`` / ``_WB`` (max / min wire of each
comparator), ``_OUTPUTS``, and as torch tensors ``_A`` / ``_B`` / ``_OUTS``
(what the torch target decodes under the same names).

Real code, copied into generated modules by source extraction
(:data:`PARTS` with :func:`netgen.codegen.runtime.assemble`, :data:`STATE`
with :func:`netgen.codegen.runtime.statements`); it reads :data:`READS`
from the emitter (stand-ins here, so that it imports on its own).
"""

from __future__ import annotations

import numpy as np
import torch

# ---- what the emitter writes (stand-ins here, not copied) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("NETWORK", "_DIRECTION")
NETWORK: dict = {"n": 2, "layers": [[[0, 1]]], "outputs": [0]}
_DIRECTION = "back"  # the P sweep's direction (the emitter's build-time choice)


# ---------------------------------------------------------------- copied
def plan(n, comparators, layer_offsets, outputs, direction="back"):
    """Build-time structure of the sweep that computes P.

    ``direction="back"``: the k x n back-sweep ``R <- R M_l`` over the
    output ranks. Row r of R (the weights of rank r) is structurally
    non-zero only on the wires from which output r is reachable through the
    remaining layers. Sweeping from the last layer to the first, each wire
    carries the range ``[lo, hi)`` of ranks it can reach; a comparator
    merges the ranges of its two wires.

    ``direction="forward"``: the forward sweep ``A <- M_l A`` over the
    input columns (A starts as the identity; P = A[outputs] at the end).
    Column c of A is structurally non-zero only on the wires that input c
    can reach so far: sweeping from the first layer to the last, each wire
    carries the range of inputs that can reach it (wire w starts with
    ``[w, w + 1)``); a comparator merges the ranges of its two wires. For
    sorters this range is the comparator's input cone, much smaller than
    its output cone in the early layers (odd-even merge sorter, n = 1024:
    8.4 million (comparator, column) pairs against 19.7 million ranks).

    Returns ``(clo, chi, doff)``: comparator i touches only lanes (ranks,
    or input columns) ``clo[i] <= r < chi[i]`` (empty when ``clo >= chi``;
    such a comparator cannot influence P), and ``doff`` (size+1,) are CSR
    offsets of the saved differences ``R[r, a] - R[r, b]`` of those lanes.

    Correct for any network (a superset of the support is always safe); for
    a (5, 10450) splitter network only the first cascade touches all five
    rows, so the back-sweep and its adjoint do a fraction of k * size work.
    The same ranges make the adjoint's sweep (the opposite order) exact
    when it skips lanes: a lane inactive at a comparator stays inactive on
    its wires on the adjoint's side of it.
    """
    if direction not in ("back", "forward"):
        raise ValueError(f"direction must be 'back' or 'forward', got {direction!r}")
    comps = np.asarray(comparators, dtype=np.int64).reshape(-1, 2)
    offs = np.asarray(layer_offsets, dtype=np.int64)
    back = direction == "back"
    if back:
        k = len(outputs)
        lo = np.full(n, k, dtype=np.int64)
        hi = np.zeros(n, dtype=np.int64)
        for r, w in enumerate(outputs):
            lo[w] = r
            hi[w] = r + 1
    else:
        lo = np.arange(n, dtype=np.int64)
        hi = lo + 1
    clo = np.empty(len(comps), dtype=np.int64)
    chi = np.empty(len(comps), dtype=np.int64)
    for l in (range(len(offs) - 2, -1, -1) if back else range(len(offs) - 1)):
        s, e = offs[l], offs[l + 1]
        a, b = comps[s:e, 0], comps[s:e, 1]
        ul = np.minimum(lo[a], lo[b])
        uh = np.maximum(hi[a], hi[b])
        clo[s:e] = ul
        chi[s:e] = np.maximum(uh, ul)
        lo[a] = ul
        lo[b] = ul
        hi[a] = uh
        hi[b] = uh
    doff = np.zeros(len(comps) + 1, dtype=np.int64)
    np.cumsum(chi - clo, out=doff[1:])
    return clo, chi, doff


def _network_tables():
    layers = NETWORK["layers"]
    sizes = [len(layer) for layer in layers]
    comps = np.array([c for layer in layers for c in layer], dtype=np.int64).reshape(-1, 2)
    offs = np.zeros(len(layers) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offs[1:])
    return comps, offs


_N = NETWORK["n"]
_OUTPUTS = np.array(NETWORK["outputs"], dtype=np.int64)
_K = len(_OUTPUTS)
_COMPS, _OFFSETS = _network_tables()
_SIZE = len(_COMPS)
_CLO, _CHI, _DOFF = plan(_N, _COMPS, _OFFSETS, NETWORK["outputs"], _DIRECTION)
_NNZ = int(_DOFF[-1])
# max and min wire of each comparator; as torch tensors (the exact network,
# Layer.hard) sharing the arrays' memory
_WA = np.ascontiguousarray(_COMPS[:, 0])
_WB = np.ascontiguousarray(_COMPS[:, 1])
_A = torch.from_numpy(_WA)
_B = torch.from_numpy(_WB)
_OUTS = torch.from_numpy(_OUTPUTS)

#: what a generated module copies
PARTS = (plan, _network_tables)
STATE = ("_N", "_OUTPUTS", "_K", "_COMPS", "_OFFSETS", "_SIZE", "_CLO", "_CHI", "_DOFF", "_NNZ", "_WA", "_WB", "_A",
         "_B", "_OUTS")
