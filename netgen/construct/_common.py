"""Shared pieces of the constructions: argument checks, size estimates,
padding to a power of two, and turning a comparator sequence into a Network.

Constructions are written as a list of *chunks*: ``(m, 2)`` int64 arrays of
comparators on pairwise distinct wires, in execution order (a chunk is a
layer or part of one). Max goes to column 0 (docs/design.md section 2).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..network import Network, check_max_size, check_n
from ..schedule import offsets_of, pack

# Refuse constructions whose comparator arrays (int64 while building) would
# not fit comfortably in memory: ~2^25 comparators is ~0.5 GB per copy. A
# larger budget asked for explicitly (max_size=, --max-size,
# netgen.network.size_limit) raises it: comparator_limit().
MAX_COMPARATORS = 1 << 25


def comparator_limit() -> int:
    """The most comparators a construction may create: MAX_COMPARATORS,
    or the size budget in force where one was raised past it (the
    operators' ``max_size=``: Batcher sorters at n = 2^20 build in int32,
    ~10 bytes a comparator, :func:`netgen.schedule.pack_layers`)."""
    return max(MAX_COMPARATORS, check_max_size(None))


def ceil_lg(n: int) -> int:
    """ceil(log2(n)) for n >= 1."""
    return (int(n) - 1).bit_length()


def check_nk(n: Any, k: Any) -> tuple[int, int | None]:
    """Validate (n, k) with messages that name the problem; k None = sorter."""
    n = check_n(n)
    if k is None:
        return n, None
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be an integer, got {k!r}")
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k > n:
        raise ValueError(f"k must be <= n, got k = {k} > n = {n}")
    return n, k


def refuse_if_too_large(what: str, n: int, k: int, estimate: int) -> None:
    limit = comparator_limit()
    if estimate > limit:
        raise ValueError(
            f"n = {n}, k = {k} ({what}) would need ~{estimate:.3g} comparators, too large "
            f"(limit {limit:.3g})"
        )


def unpad(
    n: int, N: int, layers: Sequence[np.ndarray], logical_outputs: Sequence[int] | np.ndarray
) -> tuple[list[np.ndarray], np.ndarray, int]:
    """Run a network built on N >= n *logical* wires, whose wires n..N-1 carry
    padding (-inf, smaller than every real value), on the n real wires only.

    Every comparator touching padding has a known outcome and is dropped: the
    padding value goes to its min wire. When the max wire holds padding and
    the min wire a real value, the value moves: we follow it by relabelling
    (logical wire a is now backed by that physical wire) instead of emitting a
    comparator on a padded wire. For networks whose comparators always put
    the max on the lower index this never happens ("padding never moves").

    Returns the physical chunks, the physical output wires and the number of
    relabellings (0 when padding never moved)."""
    phys = np.arange(N, dtype=np.int64)
    phys[n:] = -1
    chunks = []
    moves = 0
    for c in layers:
        if len(c) == 0:
            continue
        a, b = c[:, 0], c[:, 1]
        pa, pb = phys[a], phys[b]
        real = (pa >= 0) & (pb >= 0)
        if real.all():
            chunks.append(np.stack([pa, pb], axis=1))
            continue
        if real.any():
            chunks.append(np.stack([pa[real], pb[real]], axis=1))
        mv = (pa < 0) & (pb >= 0)
        if mv.any():
            moves += int(mv.sum())
            phys[a[mv]] = pb[mv]
            phys[b[mv]] = -1
    outs = phys[np.asarray(logical_outputs, dtype=np.int64)]
    if (outs < 0).any():  # would mean the logical network is not a selector
        raise AssertionError("an output position holds padding")
    return chunks, outs, moves


chunk_offsets = offsets_of


def finish(
    n: int,
    chunks: Sequence[np.ndarray],
    outputs: Sequence[int] | np.ndarray,
    construction: dict[str, Any],
    *,
    prune: bool,
) -> Network:
    """Concatenate chunks, optionally cone-prune to ``outputs``, pack ASAP."""
    comps = np.concatenate(chunks) if len(chunks) else np.zeros((0, 2), np.int64)
    offsets = chunk_offsets([len(c) for c in chunks])
    outs = [int(w) for w in outputs]
    packed = pack(n, comps, offsets, outs if prune else None)
    return Network.from_arrays(n, packed.comparators, packed.layer_offsets, outs, construction)


def select_top(net: Network, k: int, construction: dict[str, Any]) -> Network:
    """``net`` (a sorter) cut to its top ``k`` outputs: cone-pruned to them,
    packed ASAP, with the given construction record."""
    outs = list(net.outputs[:k])
    packed = pack(net.n, net.comparators, net.layer_offsets, outs)
    return Network.from_arrays(net.n, packed.comparators, packed.layer_offsets, outs, construction)
