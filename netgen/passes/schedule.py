"""ASAP scheduling: put every comparator in the earliest layer its wires allow.

Depth is what the relaxation error and the kernels' synchronisation count grow
with, so every depth netgen quotes is measured after this pass. The order
within a layer is the order of first appearance in the input network, so the
result is deterministic, and the pass is idempotent.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..network import Network


# Networks given as at most this many wire-disjoint chunks (layers) are
# scheduled with one numpy step per chunk; longer ones with a compiled loop
# (numba's first call costs about a second, numpy's per-chunk step ~10 us).
MAX_NUMPY_CHUNKS = 4096


def asap_levels(n: int, comps: np.ndarray, chunks: np.ndarray | None = None) -> np.ndarray:
    """ASAP layer index of each comparator of a flat sequence ``(m, 2)`` in
    execution order: one more than the latest layer already used on either of
    its wires (0-based). ``chunks`` (optional) are offsets splitting the
    sequence into runs of comparators on pairwise distinct wires (a
    network's ``layer_offsets``, say): with few of them each run is one numpy
    step."""
    comps = np.ascontiguousarray(np.asarray(comps, dtype=np.int64).reshape(-1, 2))
    if len(comps) == 0:
        return np.zeros(0, dtype=np.int64)
    if chunks is None or len(chunks) - 1 > MAX_NUMPY_CHUNKS:
        from ._kernels import asap_levels_loop

        return asap_levels_loop(int(n), comps)
    ready = np.zeros(n, dtype=np.int64)
    out = np.empty(len(comps), dtype=np.int64)
    for lo, hi in zip(chunks[:-1], chunks[1:]):
        a, b = comps[lo:hi, 0], comps[lo:hi, 1]
        level = np.maximum(ready[a], ready[b])
        out[lo:hi] = level
        ready[a] = level + 1
        ready[b] = level + 1
    return out


def layered(
    n: int,
    comps: np.ndarray,
    outputs: Sequence[int] | None = None,
    construction: dict[str, Any] | None = None,
    chunks: np.ndarray | None = None,
) -> Network:
    """A network from a flat comparator sequence, packed ASAP (stable: ties
    keep their sequence order). ``chunks`` as in :func:`asap_levels`."""
    comps = np.asarray(comps, dtype=np.int64).reshape(-1, 2)
    level = asap_levels(n, comps, chunks)
    order = np.argsort(level, kind="stable")
    counts = np.bincount(level, minlength=int(level.max()) + 1) if len(level) else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return Network.from_arrays(n, comps[order], offsets, outputs, construction)


def asap(net: Network) -> Network:
    """``net`` re-layered as soon as possible. Never increases depth; the
    comparator sequence is a valid reordering of the original one (the
    relative order of comparators sharing a wire is kept)."""
    return layered(net.n, net.comparators, net.outputs, net.construction, net.layer_offsets)
