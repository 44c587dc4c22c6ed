"""Cone pruning: keep only comparators that can influence an output wire.

Walking backwards from the end, a wire is *needed* if it is an output or
feeds a kept comparator later on; a comparator is kept when one of its wires
is needed at that point (then both its wires become needed before it).
"""

from __future__ import annotations

import numba
import numpy as np

from ..network import Network


@numba.njit(cache=True)
def _cone(n, comps, outputs):  # pragma: no cover - compiled
    needed = np.zeros(n, np.bool_)
    for w in outputs:
        needed[w] = True
    keep = np.zeros(comps.shape[0], np.bool_)
    for i in range(comps.shape[0] - 1, -1, -1):
        a = comps[i, 0]
        b = comps[i, 1]
        if needed[a] or needed[b]:
            keep[i] = True
            needed[a] = True
            needed[b] = True
    return keep


def cone_mask(n: int, comps: np.ndarray, outputs) -> np.ndarray:
    """Boolean mask over a flat comparator sequence (execution order): which
    comparators lie in the backward cone of the ``outputs`` wires."""
    comps = np.ascontiguousarray(np.asarray(comps, dtype=np.int64).reshape(-1, 2))
    outs = np.asarray(list(outputs), dtype=np.int64)
    if len(comps) == 0:
        return np.zeros(0, dtype=bool)
    return _cone(int(n), comps, outs)


def prune(net: Network) -> Network:
    """``net`` without the comparators that cannot affect ``net.outputs``.
    Layers keep their order; layers left empty disappear."""
    keep = cone_mask(net.n, net.comparators, net.outputs)
    if keep.all():
        return net
    return net.with_comparators(keep)
