"""Splitter networks with a shallower tail: one splitter cascade, then
per-class selection and a merge (issue 12).

After a splitter cascade over all n wires l_0..l_{n-1}, l_j is known to be
at least l_i whenever the bits of j are a subset of the bits of i. So the
top k values always form a *down-closed* family of wire indices (every
bit-subset of a member is a member), and only wires with 2^popcount(i) - 1
< k can be in it.

The standard construction (:mod:`.splitter`) then cascades the groups of
equal minimum rank again and again; at (5, 10450) that costs 11 layers after
the first cascade's 14. Here each *popcount class* c (the wires with c bits
set, an antichain: nothing is known between them) is handled on its own:

* at most ``t_c`` of its wires can be in the top k, where ``t_c`` is the
  largest number of c-sets in a down-closed family of at most k sets
  (Kruskal-Katona: the first x c-sets in colex order have the smallest
  down-closure, so that is where the maximum is attained);
* the class's top ``t_c`` are selected and sorted by the shallowest
  construction for (t_c, |class|) (this module recursively, the standard
  splitter, or a Wah-Chen network), run in parallel for all classes;
* the sorted class lists are merged pairwise with Batcher's odd-even merge
  (any lengths), keeping the top k, in the order that packs shallowest.

At (5, 10450): the maximum l_0, the top 4 of the 14 one-bit wires, and the
maximum of the 90 two-bit wires (only one of them can be in the top 5), then
one merge; the never-swapping cleanup drops the merge comparators that the
known order makes useless. Every network still goes through the passes and
the reachable-state proof like any other.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations

import numpy as np

from ..network import Network
from ._common import ceil_lg, finish
from .selection import selection
from .sorters import sorter
from .splitter import splitter


def cascade_pairs(m: int) -> list[np.ndarray]:
    """The splitter cascade on positions 0..m-1, one array of (max, min)
    position pairs per level (levels of one cascade are sequential)."""
    levels = []
    s = 1 << (ceil_lg(m) - 1) if m > 1 else 0
    j = np.arange(m)
    while s >= 1:
        sel = (j % (2 * s) < s) & (j + s < m)
        levels.append(np.stack([j[sel], j[sel] + s], axis=1))
        s //= 2
    return levels


def class_bound(c: int, k: int, bits: int) -> int:
    """The most c-bit indices (of ``bits`` bits) a down-closed family of at
    most k indices can hold."""
    if c == 0:
        return 1 if k >= 1 else 0
    sets = sorted(combinations(range(bits), c), key=lambda s: s[::-1])  # colex
    best = 0
    closure: set[tuple[int, ...]] = set()
    for x, s in enumerate(sets, start=1):
        for r in range(c + 1):
            closure.update(combinations(s, r))
        if len(closure) > k:
            break
        best = x
    return best


def odd_even_merge(a: list[int], b: list[int], comps: list[tuple[int, int]]) -> list[int]:
    """Batcher's odd-even merge of two lists of wires, each sorted (largest
    first), for any lengths. Appends its comparators (max wire first) to
    ``comps`` in a valid execution order and returns the wires in rank order."""
    if not a:
        return list(b)
    if not b:
        return list(a)
    if len(a) == 1 and len(b) == 1:
        comps.append((a[0], b[0]))
        return [a[0], b[0]]
    v = odd_even_merge(a[0::2], b[0::2], comps)
    w = odd_even_merge(a[1::2], b[1::2], comps)
    out = [v[0]]
    for i in range(max(len(w), len(v) - 1)):
        if i < len(w) and i + 1 < len(v):
            comps.append((w[i], v[i + 1]))
            out += [w[i], v[i + 1]]
        elif i < len(w):
            out.append(w[i])
        else:
            out.append(v[i + 1])
    return out


def shallowest_splitter(n: int, k: int) -> Network:
    """The paper's splitter network or the splitter-tail one, whichever is
    shallower (then smaller; ties keep the paper's), with the construction
    record ``{"kind": "splitter", "n": n, "k": k}``."""
    std = splitter(n, k)
    if k < 2 or k >= n or n < 8:
        return std
    tail = splitter_tail(n, k)
    if (tail.depth, tail.size) < (std.depth, std.size):
        return tail.with_(construction=dict(std.construction))
    return std


@lru_cache(maxsize=None)
def best_selection(m: int, t: int) -> Network:
    """The shallowest (t, m) selection network netgen can build here (its
    outputs sorted), after cone pruning and ASAP packing; ties: fewer
    comparators, then the first candidate (standard splitter, this module,
    Wah-Chen kinds). t >= m gives a sorter."""
    t = min(t, m)
    if m == 1:
        return Network.from_layers(1, [], [0])
    candidates = [splitter(m, t)]
    for kind in ("bitonic", "oddeven", "pairwise") if m <= 4096 else ():
        candidates.append(sorter(kind, m) if t == m else selection(kind, m, t))  # = construct(kind, m, t)
    if 1 < t < m and m >= 8:
        candidates.append(splitter_tail(m, t))
    return min(candidates, key=lambda net: (net.depth, net.size))


def splitter_tail(n: int, k: int) -> Network:
    """The (k, n) splitter-tail network: the first splitter cascade, then
    per-popcount-class selection and an odd-even merge of the class lists.
    Needs 2 <= k <= n (k = 1 is the splitter's tournament already)."""
    if not 2 <= k <= n:
        raise ValueError(f"the splitter-tail network needs 2 <= k <= n, got k = {k}, n = {n}")
    bits = ceil_lg(n)
    chunks = cascade_pairs(n)
    idx = np.arange(n)
    pop = np.bitwise_count(idx.astype(np.uint64)).astype(np.int64)
    lists: list[list[int]] = []
    for c in range(1, bits + 1):
        if (1 << c) - 1 >= k:
            break
        wires = idx[pop == c]
        t = min(class_bound(c, k, bits), len(wires))
        if t == 0:
            continue
        sub = best_selection(len(wires), t)
        for layer in sub.layers:
            if len(layer):
                chunks.append(wires[np.asarray(layer, dtype=np.int64)])
        lists.append([int(wires[o]) for o in sub.outputs[:t]])
    return _merge_lists(n, k, chunks, lists)


def _merge_lists(n: int, k: int, chunks: list[np.ndarray], lists: list[list[int]]) -> Network:
    """Merge the sorted class lists of classes 1, 2, ... into ranks 1..k-1
    (rank 0 is l_0): try the left-to-right order and the order that merges
    the later classes first, keep the shallowest."""
    best = None
    for order in _merge_orders(len(lists)):
        comps: list[tuple[int, int]] = []
        acc: list[int] = []
        for group in order:
            part = lists[group[0]]
            for g in group[1:]:
                part = odd_even_merge(part, lists[g], comps)[: k - 1]
            acc = odd_even_merge(acc, part, comps)[: k - 1]
        acc = [0] + acc  # l_0 is the maximum of all wires
        extra = [np.asarray(comps, dtype=np.int64).reshape(-1, 2)] if comps else []
        net = finish(n, chunks + _sequential(extra), acc[:k], {"kind": "splitter-tail", "n": n, "k": k}, prune=True)
        if best is None or (net.depth, net.size) < (best.depth, best.size):
            best = net
    return best


def _merge_orders(count: int) -> list[list[list[int]]]:
    """Ways to merge ``count`` class lists: left to right, or right to left
    (the deep classes' short lists first)."""
    if count <= 1:
        return [[list(range(count))]] if count else [[]]
    left = [[i] for i in range(count)]
    right = [list(range(count - 1, -1, -1))]
    return [left, right] if left != right else [left]


def _sequential(chunks: list[np.ndarray]) -> list[np.ndarray]:
    """Comparators in execution order, one per chunk (finish() packs them)."""
    return [c[i : i + 1] for c in chunks for i in range(len(c))]
