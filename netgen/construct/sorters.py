"""Sorting networks, descending (wire r ends with rank r; max -> column 0).

Batcher-type sorters are defined for N = 2^L wires; every comparator puts the
max on the lower index, so for n < N the padding wires n..N-1 (values -inf)
only ever receive minima and never move: the comparators touching them are
simply dropped (:func:`._common.unpad`). That includes bitonic sort, which is
written in its single-direction form (the first step of each merge compares
mirrored positions i <-> end-1-i) for exactly this reason.

Each builder returns the layers as a list of ``(m, 2)`` int64 arrays. The
``*_merge_top`` builders give the "merge two sorted K-lists, keep the top K"
templates of the selection networks: layers on 2K positions (list A on
0..K-1, list B on K..2K-1, both sorted descending) and the K positions that
hold ranks 0..K-1 afterwards.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from ..network import Network
from ..schedule import pack_layers
from ._common import ceil_lg, finish, refuse_if_too_large, unpad

SORTER_KINDS = ("bitonic", "oddeven", "pairwise", "transposition")


def _pairs(a: np.ndarray, d: int | np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.int64).ravel()
    return np.stack([a, a + d], axis=1)


def _blocks(N: int, size: int, width: int) -> np.ndarray:
    """o + i for every block start o (step ``size``) and i < ``width``."""
    return (np.arange(0, N, size, dtype=np.int64)[:, None] + np.arange(width, dtype=np.int64)[None, :]).ravel()


# ------------------------------------------------------------------ bitonic
def _bitonic_merge_steps(N: int, p: int) -> Iterator[np.ndarray]:
    """Stage p of bitonic sort on N wires (blocks of 2^p): the mirrored first
    step, then half-cleaners (one layer at a time)."""
    size, half = 1 << p, 1 << (p - 1)
    a = _blocks(N, size, half)
    first_b = (np.arange(0, N, size, dtype=np.int64)[:, None] + (size - 1 - np.arange(half))[None, :]).ravel()
    yield np.stack([a, first_b], axis=1)
    for q in range(p - 1, 0, -1):
        s, h = 1 << q, 1 << (q - 1)
        yield _pairs(_blocks(N, s, h), h)


def bitonic_iter(N: int) -> Iterator[np.ndarray]:
    """The layers of :func:`bitonic_layers`, one at a time."""
    for p in range(1, ceil_lg(N) + 1):
        yield from _bitonic_merge_steps(N, p)


def bitonic_layers(N: int) -> list[np.ndarray]:
    """Bitonic sorter on N = 2^L wires, single-direction form."""
    return list(bitonic_iter(N))


def bitonic_merge_top(K: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Top-K merge: compare A_i with B_{K-1-i} (A keeps the larger: the top K
    as a bitonic sequence), then half-cleaners on A only."""
    i = np.arange(K, dtype=np.int64)
    layers = [np.stack([i, 2 * K - 1 - i], axis=1)]
    for q in range(ceil_lg(K), 0, -1):
        s, h = 1 << q, 1 << (q - 1)
        layers.append(_pairs(_blocks(K, s, h), h))
    return layers, np.arange(K, dtype=np.int64)


# ----------------------------------------------------------- odd-even merge
def _oddeven_steps(N: int, p: int) -> Iterator[np.ndarray]:
    """Batcher's odd-even merge of sorted blocks of p into blocks of 2p,
    one layer at a time."""
    k = p
    while k >= 1:
        j = np.arange(k % p, N - k, 2 * k, dtype=np.int64)
        x = (j[:, None] + np.arange(k, dtype=np.int64)[None, :]).ravel()
        x = x[(x + k < N) & (x // (2 * p) == (x + k) // (2 * p))]
        if len(x):
            yield _pairs(x, k)
        k //= 2


def _oddeven_stage(N: int, p: int) -> list[np.ndarray]:
    """Batcher's odd-even merge of sorted blocks of p into blocks of 2p."""
    return list(_oddeven_steps(N, p))


def oddeven_iter(N: int) -> Iterator[np.ndarray]:
    """The layers of :func:`oddeven_layers`, one at a time."""
    p = 1
    while p < N:
        yield from _oddeven_steps(N, p)
        p *= 2


def oddeven_layers(N: int) -> list[np.ndarray]:
    """Batcher's odd-even merge sort on N = 2^L wires."""
    return list(oddeven_iter(N))


def oddeven_merge_top(K: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Odd-even merge of two sorted K-lists (top K kept after pruning)."""
    return _oddeven_stage(2 * K, K), np.arange(K, dtype=np.int64)


# ----------------------------------------------------------------- pairwise
def _strided(N: int, stride: int, first: int, d: int) -> np.ndarray:
    """Pairs (x, x + d*stride) for x = o + stride*(2t + first), o < stride:
    the same relative comparator in every stride-``stride`` subsequence."""
    x = (np.arange(0, N, 2 * stride, dtype=np.int64)[:, None] + np.arange(stride, dtype=np.int64)[None, :]).ravel()
    x = x + first * stride
    x = x[x + d * stride < N]
    return _pairs(x, d * stride)


def _pairwise_steps(N: int, stride: int) -> Iterator[np.ndarray]:
    m = N // stride
    d = m // 2 - 1
    while d >= 1:
        yield _strided(N, stride, 1, d)
        d //= 2


def _pairwise_merge(N: int, stride: int) -> list[np.ndarray]:
    """Final phase of Parberry's pairwise network for the subsequences of
    stride ``stride`` (size m = N/stride): for d = m/2-1, ..., 3, 1 compare
    odd position i with position i + d."""
    return list(_pairwise_steps(N, stride))


def pairwise_iter(N: int) -> Iterator[np.ndarray]:
    """The layers of :func:`pairwise_layers`, one at a time."""
    a = 1
    while a < N:
        yield _strided(N, a, 0, 1)
        a *= 2
    a = N // 4
    while a >= 1:
        yield from _pairwise_steps(N, a)
        a //= 2


def pairwise_layers(N: int) -> list[np.ndarray]:
    """Parberry's pairwise sorting network on N = 2^L wires: pair (2i, 2i+1),
    recursively sort the even and odd subsequences, merge. Unrolled: the
    pairing layers at strides 1, 2, ..., N/2, then the merge phases from the
    smallest subsequences (stride N/4) up to the whole (stride 1)."""
    return list(pairwise_iter(N))


def pairwise_merge_top(K: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Pairwise top-K merge: compare A_i with B_i (A keeps the larger; both
    stay sorted and A_i >= B_i), which is exactly the state of a pairwise
    network after pairing and sorting both halves. Then the pairwise final
    merge on the interleaving A_0, B_0, A_1, B_1, ... (top K kept after
    pruning)."""
    i = np.arange(K, dtype=np.int64)
    pos = np.empty(2 * K, dtype=np.int64)  # sequence position -> template wire
    pos[0::2], pos[1::2] = i, K + i
    layers = [np.stack([i, K + i], axis=1)]
    for c in _pairwise_merge(2 * K, 1):
        layers.append(pos[c])
    return layers, pos[:K]


# -------------------------------------------------------------- transposition
def transposition_layers(n: int) -> list[np.ndarray]:
    """Odd-even transposition sort: n rounds of neighbour comparisons."""
    return [_pairs(np.arange(t % 2, n - 1, 2, dtype=np.int64), 1) for t in range(n) if n - 1 > t % 2]


SORTER_LAYERS = {"bitonic": bitonic_layers, "oddeven": oddeven_layers, "pairwise": pairwise_layers}
#: the same layers one at a time (the large sorters' path keeps one layer in int64 at a time)
SORTER_ITERS = {"bitonic": bitonic_iter, "oddeven": oddeven_iter, "pairwise": pairwise_iter}
MERGE_TOP = {"bitonic": bitonic_merge_top, "oddeven": oddeven_merge_top, "pairwise": pairwise_merge_top}


def sorter_size_estimate(kind: str, n: int) -> int:
    """Comparators of the sorter (upper bound for Batcher types on the padded
    N = 2^ceil(lg n) wires)."""
    if kind == "transposition":
        return n * (n - 1) // 2
    L = ceil_lg(n)
    return (1 << L) // 2 * (L * (L + 1) // 2)


def sorter(kind: str, n: int) -> Network:
    """The full sorter of ``kind`` on n wires (outputs 0..n-1: wire r holds
    rank r), packed ASAP."""
    if kind not in SORTER_KINDS:
        raise ValueError(f"unknown sorter kind {kind!r}; choose one of {', '.join(SORTER_KINDS)}")
    refuse_if_too_large(f"{kind} sorter", n, n, sorter_size_estimate(kind, n))
    construction = {"kind": kind, "n": n, "k": n}
    if kind == "transposition":
        return finish(n, transposition_layers(n), range(n), construction, prune=False)
    N = 1 << ceil_lg(n)
    if sorter_size_estimate(kind, n) < LARGE:
        chunks, outs, moves = unpad(n, N, SORTER_LAYERS[kind](N), np.arange(n))
        assert moves == 0, "Batcher-type sorters never move padding"
        return finish(n, chunks, outs, construction, prune=False)
    # large: the same network (tests/construct/test_large_sorters.py), each layer
    # cut to the real wires and copied once into int32 (~10 bytes a
    # comparator at the peak against ~100 on the way above: 100.7 million
    # comparators at n = 2^20). A sorter keeps every comparator (every wire
    # is an output: nothing to prune).
    packed = pack_layers(n, lambda: (_real(c, n) for c in SORTER_ITERS[kind](N)))
    return Network.from_arrays(n, packed.comparators, packed.layer_offsets, None, construction, copy=False)


#: sorters estimated at this many comparators or more are built by
#: pack_layers (int32) instead of unpad + finish (int64 chunks)
LARGE = 1 << 22


def _real(c: np.ndarray, n: int) -> np.ndarray:
    """Layer ``c`` of a Batcher sorter on N = 2^L >= n wires without its
    comparators on padding wires (>= n), as int32. Each comparator puts the
    max on its lower wire, so padding (-inf) never moves (unpad's "moves"
    is 0) and such comparators are simply dropped."""
    c32 = c.astype(np.int32)
    if int(c32[:, 1].max()) < n:  # no padding wire in this layer
        return c32
    assert (c32[:, 0] < c32[:, 1]).all(), "Batcher-type sorters put the max on the lower wire"
    return c32[c32[:, 1] < n]  # max wire c[:, 0] < c[:, 1]: a comparator touching padding has c[:, 1] >= n


__all__ = ["sorter", "SORTER_KINDS", "SORTER_LAYERS", "MERGE_TOP"]
