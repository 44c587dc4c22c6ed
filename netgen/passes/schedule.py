"""ASAP scheduling: put every comparator in the earliest layer its wires allow.

Depth is what the relaxation error and the kernels' synchronisation count grow
with, so every depth netgen quotes is measured after this pass. The order
within a layer is the order of first appearance in the input network, so the
result is deterministic, and the pass is idempotent.
"""

from __future__ import annotations

from typing import Any, Sequence

import numba
import numpy as np

from ..network import Network


@numba.njit(cache=True)
def _asap_levels(n, comps):  # pragma: no cover - compiled
    ready = np.zeros(n, np.int64)
    out = np.empty(comps.shape[0], np.int64)
    for i in range(comps.shape[0]):
        a = comps[i, 0]
        b = comps[i, 1]
        level = ready[a] if ready[a] > ready[b] else ready[b]
        out[i] = level
        ready[a] = level + 1
        ready[b] = level + 1
    return out


def asap_levels(n: int, comps: np.ndarray) -> np.ndarray:
    """ASAP layer index of each comparator of a flat sequence ``(m, 2)`` in
    execution order: one more than the latest layer already used on either of
    its wires (0-based)."""
    comps = np.ascontiguousarray(np.asarray(comps, dtype=np.int64).reshape(-1, 2))
    if len(comps) == 0:
        return np.zeros(0, dtype=np.int64)
    return _asap_levels(int(n), comps)


def layered(
    n: int,
    comps: np.ndarray,
    outputs: Sequence[int] | None = None,
    construction: dict[str, Any] | None = None,
) -> Network:
    """A network from a flat comparator sequence, packed ASAP (stable: ties
    keep their sequence order)."""
    comps = np.asarray(comps, dtype=np.int64).reshape(-1, 2)
    level = asap_levels(n, comps)
    order = np.argsort(level, kind="stable")
    counts = np.bincount(level, minlength=int(level.max()) + 1) if len(level) else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return Network.from_arrays(n, comps[order], offsets, outputs, construction)


def asap(net: Network) -> Network:
    """``net`` re-layered as soon as possible. Never increases depth; the
    comparator sequence is a valid reordering of the original one (the
    relative order of comparators sharing a wire is kept)."""
    return layered(net.n, net.comparators, net.outputs, net.construction)
