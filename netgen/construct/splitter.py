"""Splitter selection networks (DiffTopK paper, Supplementary B).

A *splitter* on wires l_0..l_{m-1} compares l_i with l_{i+s} (max to l_i),
s = 2^(ceil(lg m) - 1), for i = 0..m-1-s. A *cascade* applies a splitter and
then cascades both halves l_0..l_{s-1} and l_s..l_{m-1} (in parallel) down to
singletons. Afterwards the value on l_i is known to be beaten by at least
2^popcount(i) - 1 others of the group, so its *minimum rank* grows by that
much.

Construction: every wire starts at minimum rank 0; repeat {for r = k-1 down
to 0: gather the live wires with minimum rank r (in wire order); if there
are two or more, cascade them and add 2^popcount(i) - 1 to l_i's minimum
rank; drop wires whose minimum rank reaches k} until no rank has two wires.
Then ranks 0..k-1 are held by exactly one wire each: the outputs. The
comparator sequence is cone-pruned (cascade parts that only sort discarded
wires go) and packed ASAP.

Within one pass, cascading rank r only moves wires to ranks >= r, which were
already processed in that pass, so a pass's groups are fixed at its start:
one stable sort per pass gives them all.

:func:`splitter_trace` exposes the bookkeeping (per cascade: wires, minimum
ranks after it, wires discarded, its comparators and their layers in the
built network) for renderers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..network import Network
from ..schedule import pack
from ._common import ceil_lg, chunk_offsets, refuse_if_too_large


@dataclass(frozen=True)
class Cascade:
    """One splitter cascade of the construction."""

    pass_index: int  # which repetition of the r = k-1..0 sweep
    rank: int  # the minimum rank shared by its wires before it
    wires: np.ndarray  # l_0..l_{m-1}
    min_ranks: np.ndarray  # minimum rank of each l_i after the cascade
    dropped: np.ndarray  # wires discarded after it (minimum rank >= k)
    start: int  # its comparators are trace.comparators[start:stop]
    stop: int


@dataclass(frozen=True)
class SplitterTrace:
    """The construction's bookkeeping, as flat arrays (cascade c's wires are
    ``wires[wire_offsets[c]:wire_offsets[c+1]]``, its comparators
    ``comparators[comp_offsets[c]:comp_offsets[c+1]]``); :attr:`cascades`
    gives them as :class:`Cascade` objects."""

    n: int
    k: int
    cascade_pass: np.ndarray  # (C,) pass of each cascade
    cascade_rank: np.ndarray  # (C,) minimum rank of its wires before it
    wire_offsets: np.ndarray  # (C+1,)
    wires: np.ndarray  # wires of all cascades, l_0..l_{m-1} each
    min_ranks: np.ndarray  # minimum rank of each of those wires after its cascade
    comp_offsets: np.ndarray  # (C+1,)
    comparators: np.ndarray  # (size, 2) all cascades' comparators, in order
    kept: np.ndarray  # (size,) bool: survives cone pruning
    layer: np.ndarray  # (size,) layer in the built network, -1 if pruned
    outputs: np.ndarray  # wires holding ranks 0..k-1
    network: Network = field(repr=False)

    def cascade(self, c: int) -> Cascade:
        w0, w1 = self.wire_offsets[c], self.wire_offsets[c + 1]
        ranks = self.min_ranks[w0:w1]
        return Cascade(
            int(self.cascade_pass[c]),
            int(self.cascade_rank[c]),
            self.wires[w0:w1],
            ranks,
            self.wires[w0:w1][ranks >= self.k],
            int(self.comp_offsets[c]),
            int(self.comp_offsets[c + 1]),
        )

    @property
    def cascades(self) -> list[Cascade]:
        return [self.cascade(c) for c in range(len(self.cascade_pass))]


def _popcount(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(x.astype(np.uint64)).astype(np.int64)


def splitter_size_estimate(n: int, k: int) -> int:
    """Rough upper bound (fitted to measurements, n <= 4096): the first
    cascade has <= n/2 ceil(lg n) comparators, the wires of small popcount
    about as many again, and large k adds ~k^2 (lg(n/k) + 1)."""
    return n * ceil_lg(n) + n * ceil_lg(k + 1) + k * k * (ceil_lg(n) - ceil_lg(k) + 1)


def _one_pass(wires: np.ndarray, ranks: np.ndarray):
    """All cascades of one pass at once. ``wires`` are the live wires sorted
    by (minimum rank, wire). Returns the cascades (groups of >= 2 wires, rank
    descending: start index into ``wires`` and size), their comparators as
    indices into ``wires`` (cascade by cascade, level by level), the number
    of comparators per cascade and the sizes of the (cascade, level) runs,
    each on pairwise distinct wires."""
    bounds = np.flatnonzero(np.diff(ranks)) + 1
    starts = np.concatenate([[0], bounds])
    sizes = np.diff(np.concatenate([starts, [len(wires)]]))
    big = np.flatnonzero(sizes >= 2)[::-1]  # r = k-1 down to 0
    starts, sizes = starts[big], sizes[big]
    if len(big) == 0:
        return starts, sizes, np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    gid = np.repeat(np.arange(len(big)), sizes)  # cascade of each member
    j = np.arange(len(gid)) - np.repeat(np.cumsum(sizes) - sizes, sizes)  # position in it
    idx = np.repeat(starts, sizes) + j  # index into wires
    m = np.repeat(sizes, sizes)
    parts, keys = [], []
    s = 1 << (ceil_lg(int(sizes.max())) - 1)
    level = 0
    while s >= 1:
        sel = (j % (2 * s) < s) & (j + s < m)
        parts.append(np.stack([idx[sel], idx[sel] + s], axis=1))
        keys.append(gid[sel] * 64 + level)
        s //= 2
        level += 1
    pairs, key = np.concatenate(parts), np.concatenate(keys)
    order = np.argsort(key, kind="stable")
    _, runs = np.unique(key, return_counts=True)  # sorted keys = the order of the runs
    return starts, sizes, pairs[order], np.bincount(key // 64, minlength=len(big)), runs


def splitter_trace(n: int, k: int) -> SplitterTrace:
    """Build the (k, n) splitter network and keep its bookkeeping."""
    refuse_if_too_large("splitter selection", n, k, splitter_size_estimate(n, k))
    min_rank = np.zeros(n, dtype=np.int64)
    live = np.ones(n, dtype=bool)
    c_pass, c_rank, c_wires, c_ranks, c_nwires, c_ncomps, comps, runs = [], [], [], [], [], [], [], []
    pass_index = 0
    while True:
        wires = np.flatnonzero(live)
        wires = wires[np.argsort(min_rank[wires], kind="stable")]  # groups, each in wire order
        ranks = min_rank[wires]
        starts, sizes, pairs, ncomps, run_sizes = _one_pass(wires, ranks)
        if len(starts) == 0:
            break
        pos = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)  # l_i: i
        group_wires = wires[np.repeat(starts, sizes) + pos]
        min_rank[group_wires] += (1 << _popcount(pos)) - 1
        live[group_wires[min_rank[group_wires] >= k]] = False
        comps.append(wires[pairs])
        c_pass.append(np.full(len(starts), pass_index))
        c_rank.append(ranks[starts])
        c_wires.append(group_wires)
        c_ranks.append(min_rank[group_wires])
        c_nwires.append(sizes)
        c_ncomps.append(ncomps)
        runs.append(run_sizes)
        pass_index += 1
    outputs = np.flatnonzero(live)
    outputs = outputs[np.argsort(min_rank[outputs], kind="stable")]
    if not np.array_equal(min_rank[outputs], np.arange(k)):  # the paper's invariant
        raise AssertionError(f"splitter construction ended with minimum ranks {min_rank[outputs].tolist()}")

    def cat(parts, dtype=np.int64, width=None):
        if parts:
            return np.concatenate(parts).astype(dtype)
        return np.zeros((0, 2) if width else 0, dtype)

    comps = cat(comps, width=2)
    packed = pack(n, comps, chunk_offsets(cat(runs)), outputs)  # cone-prune, then ASAP
    layer = np.full(len(comps), -1, dtype=np.int64)
    layer[packed.kept] = packed.level
    net = Network.from_arrays(
        n, packed.comparators, packed.layer_offsets, outputs.tolist(), {"kind": "splitter", "n": n, "k": k}
    )
    return SplitterTrace(
        n,
        k,
        cat(c_pass),
        cat(c_rank),
        np.concatenate([[0], np.cumsum(cat(c_nwires))]),
        cat(c_wires),
        cat(c_ranks),
        np.concatenate([[0], np.cumsum(cat(c_ncomps))]),
        comps,
        packed.kept,
        layer,
        outputs,
        net,
    )


def splitter(n: int, k: int) -> Network:
    """The (k, n) splitter selection network (k = n gives a sorter)."""
    return splitter_trace(n, k).network
