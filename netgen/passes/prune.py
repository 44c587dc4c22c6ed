"""Cone pruning: keep only comparators that can influence an output wire.

Walking backwards from the end, a wire is *needed* if it is an output or
feeds a kept comparator later on; a comparator is kept when one of its wires
is needed at that point (then both its wires become needed before it).
"""

from __future__ import annotations

import numpy as np

from ..network import Network
from .schedule import MAX_NUMPY_CHUNKS


def cone_mask(n: int, comps: np.ndarray, outputs, chunks: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask over a flat comparator sequence (execution order): which
    comparators lie in the backward cone of the ``outputs`` wires.
    ``chunks``: optional offsets of runs on pairwise distinct wires (see
    :func:`.schedule.asap_levels`)."""
    comps = np.ascontiguousarray(np.asarray(comps, dtype=np.int64).reshape(-1, 2))
    outs = np.asarray(list(outputs), dtype=np.int64)
    if len(comps) == 0:
        return np.zeros(0, dtype=bool)
    if chunks is None or len(chunks) - 1 > MAX_NUMPY_CHUNKS:
        from ._kernels import cone_loop

        return cone_loop(int(n), comps, outs)
    needed = np.zeros(n, dtype=bool)
    needed[outs] = True
    keep = np.zeros(len(comps), dtype=bool)
    for lo, hi in zip(chunks[-2::-1], chunks[:0:-1]):
        a, b = comps[lo:hi, 0], comps[lo:hi, 1]
        k = needed[a] | needed[b]
        keep[lo:hi] = k
        needed[a[k]] = True
        needed[b[k]] = True
    return keep


def prune(net: Network) -> Network:
    """``net`` without the comparators that cannot affect ``net.outputs``.
    Layers keep their order; layers left empty disappear."""
    keep = cone_mask(net.n, net.comparators, net.outputs, net.layer_offsets)
    if keep.all():
        return net
    return net.with_comparators(keep)
