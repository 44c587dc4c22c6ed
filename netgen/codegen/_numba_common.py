"""Pieces shared by the Numba CPU and Numba CUDA emitters.

* :func:`swap_code` (in :mod:`._swap_code`, re-exported here) turns a
  relaxation into the straight-line scalar code pasted into every kernel.
* :func:`plan` is the build-time analysis of a network that the kernels use to
  skip structural zeros of the k x n back-sweep; its source is copied into
  every generated module (:func:`plan_source`), so generated code needs numpy
  only, and netgen's tests exercise the very same function.
* :func:`network_literal` / :func:`relaxation_literal`: the deterministic
  top of a generated module (the generated-module contract).
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import numpy as np

from ..network import Network
from ._swap_code import FLOAT_TYPES, lit, swap_code  # noqa: F401  (re-exported for the emitters)


def relaxation_of(net: Network, r: Any):
    """Normalise ``r`` (a Relaxation, a dict, or None for the default)."""
    from ..relax.distributions import Relaxation, default_relaxation

    if r is None:
        return default_relaxation(net)
    if isinstance(r, dict):
        return Relaxation.from_dict(r)
    if isinstance(r, Relaxation):
        return r
    raise ValueError(f"relaxation must be a Relaxation, a dict or None, got {type(r).__name__}")


# ----------------------------------------------------------------- the plan
def plan(n, comparators, layer_offsets, outputs):
    """Build-time structure of the k x n back-sweep ``R <- R M_l``.

    Row r of R (the weights of rank r) is structurally non-zero only on the
    wires from which output r is reachable through the remaining layers.
    Sweeping from the last layer to the first, each wire carries the range
    ``[lo, hi)`` of ranks it can reach; a comparator merges the ranges of
    its two wires. Returns ``(clo, chi, doff)``: comparator i touches only
    rows ``clo[i] <= r < chi[i]`` of R (empty when ``clo >= chi``; such a
    comparator cannot influence P), and ``doff`` (size+1,) are CSR offsets
    of the saved differences ``R[r, a] - R[r, b]`` of those rows.

    Correct for any network (a superset of the support is always safe); for
    a (5, 10450) splitter network only the first cascade touches all five
    rows, so the back-sweep and its adjoint do a fraction of k * size work.
    The same ranges make the adjoint's forward sweep exact when it skips
    rows: a rank inactive at a comparator stays inactive on its wires in
    every later layer.
    """
    import numpy as np

    comps = np.asarray(comparators, dtype=np.int64).reshape(-1, 2)
    offs = np.asarray(layer_offsets, dtype=np.int64)
    k = len(outputs)
    lo = np.full(n, k, dtype=np.int64)
    hi = np.zeros(n, dtype=np.int64)
    for r, w in enumerate(outputs):
        lo[w] = r
        hi[w] = r + 1
    clo = np.empty(len(comps), dtype=np.int64)
    chi = np.empty(len(comps), dtype=np.int64)
    for l in range(len(offs) - 2, -1, -1):
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


# Module-level tables every generated numba/cuda module derives from its
# NETWORK literal (the same text in both targets).
TABLES_SOURCE = '''
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
_CLO, _CHI, _DOFF = plan(_N, _COMPS, _OFFSETS, NETWORK["outputs"])
_NNZ = int(_DOFF[-1])
# the exact network (Layer.hard) indexes with torch tensors
_HARD_A = torch.from_numpy(np.ascontiguousarray(_COMPS[:, 0]))
_HARD_B = torch.from_numpy(np.ascontiguousarray(_COMPS[:, 1]))
_HARD_OUTS = torch.from_numpy(_OUTPUTS)'''


def plan_source(shared=()) -> str:
    """Source of :func:`plan`, of the table set-up, of the exact network
    (:func:`netgen.codegen.runtime.common.hard_network`, the one ``hard``
    every target runs) and of the functions ``shared`` (more pieces of
    :mod:`netgen.codegen.runtime.common`), for generated modules."""
    from .runtime.common import hard_network

    parts = [inspect.getsource(plan) + "\n" + TABLES_SOURCE]
    parts += [inspect.getsource(f).rstrip() for f in (*shared, hard_network)]
    return "\n\n\n".join(parts) + "\n"


def network_literal(net: Network) -> str:
    """``NETWORK = {...}`` in the interchange format, one layer per line,
    deterministic."""
    from .. import io

    d = io.to_dict(net)
    parts = ["NETWORK = {"]
    for key, val in d.items():
        if key == "layers":
            parts.append('    "layers": [')
            for layer in val:
                parts.append("        " + json.dumps(layer, separators=(",", ":")) + ",")
            parts.append("    ],")
        else:
            parts.append(f"    {json.dumps(key)}: {_py_literal(val)},")
    parts.append("}")
    return "\n".join(parts)


def _py_literal(v: Any) -> str:
    # the one literal writer (netgen.codegen.literals): exact, never pastes text
    from .literals import literal

    return literal(json.loads(json.dumps(v, sort_keys=True)))


def relaxation_literal(r) -> str:
    d = r.to_dict()
    return "RELAXATION = {" + ", ".join(f"{json.dumps(k)}: {v!r}" for k, v in d.items()) + "}"

