"""Exact minimum ranks of the values on each wire, from the network alone.

The DiffTopK paper (Figure 5) annotates splitter networks with the *minimum
rank* of each wire: the smallest rank (0 = largest) that the value on that
wire can have at that point, over all inputs. We compute it from the
comparators, not from the construction's bookkeeping, so it works for any
network and checks that bookkeeping instead of repeating it.

Method (0-1 principle). Threshold an input at its m-th largest value: the
top m values become 1, the rest 0. Comparators commute with monotone maps,
so the value on wire w at time t has rank < m exactly when the thresholded
run has a 1 on w at time t. Hence

    min_rank(w, t) = (fewest ones of any 0-1 input that puts a 1 on w at t) - 1

and wire w holds rank r on every input exactly when every input with r ones
leaves a 0 on w and every input with r + 1 ones leaves a 1 there.

We run all 0-1 inputs with at most k ones at once (one boolean column per
input; a comparator ORs onto its max wire and ANDs onto its min wire). A
minimum rank >= k means the wire can never carry a top-k value: it can be
discarded (reported as k). This is exact, unlike counting the wires that a
pairwise ">=" relation knows to be larger (that misses e.g. min(A, B) >=
min(C, D) from A >= C and B >= D, and under-counts splitter cascades).

Cost: sum_{m <= k} C(n, m) inputs times the network size (bit operations),
limited to ``MAX_INPUTS`` inputs: e.g. (k=5, n<=42), any k for n <= 20.
Diagrams of larger networks are summaries anyway.
"""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np

from ..network import Network

MAX_INPUTS = 1 << 20


def count_inputs(n: int, k: int) -> int:
    """Number of 0-1 inputs with at most k ones: sum_{m=0..k} C(n, m)."""
    return sum(comb(n, m) for m in range(min(k, n) + 1))


class MinRanks:
    """Minimum ranks and determined ranks of a network at every layer
    boundary. ``ranks[t, w]`` is the minimum rank of wire w after ``t``
    layers (``t = 0``: the inputs), capped at k; ``determined[t]`` maps a rank
    to the wire that holds it on every input after t layers."""

    def __init__(self, ranks: np.ndarray, determined: list[dict[int, int]], k: int):
        self.ranks = ranks
        self.determined = determined
        self.k = k

    def discarded_at(self) -> dict[int, int]:
        """``{wire: t}``: the layer boundary t from which on the wire never
        again carries a possible top-k value (minimum rank >= k up to the
        end; a later comparator may put a larger value back on a wire)."""
        out = {}
        hit = self.ranks >= self.k
        # suffix-and: stays[t, w] is True when hit[t:, w] is all True
        stays = np.flip(np.logical_and.accumulate(np.flip(hit, 0), axis=0), 0)
        for w in np.flatnonzero(stays[-1]).tolist():
            out[w] = int(np.argmax(stays[:, w]))
        return out

    def determined_at(self) -> dict[int, tuple[int, int]]:
        """``{rank: (wire, t)}``: when each rank is first fixed on a wire
        (and stays on that wire to the end)."""
        out: dict[int, tuple[int, int]] = {}
        final = self.determined[-1]
        for r, w in final.items():
            t = len(self.determined) - 1
            while t > 0 and self.determined[t - 1].get(r) == w:
                t -= 1
            out[r] = (w, t)
        return out


def min_ranks(net: Network) -> MinRanks:
    """Exact minimum ranks of ``net`` (see the module docstring)."""
    n, k = net.n, net.k
    total = count_inputs(n, k)
    if total > MAX_INPUTS:
        raise ValueError(
            f"minimum ranks need all {total:,} 0-1 inputs with at most k={k} ones "
            f"(n={n}); the limit is {MAX_INPUTS:,}"
        )
    # bits[w, i]: input i has a one on wire w; inputs ordered by their number of ones
    bits = np.zeros((n, total), dtype=bool)
    ones = np.zeros(total, dtype=np.int64)
    starts = []
    i = 0
    for m in range(min(k, n) + 1):
        starts.append(i)
        cnt = comb(n, m)
        if m:
            idx = np.fromiter(
                (w for c in combinations(range(n), m) for w in c), dtype=np.int64, count=cnt * m
            ).reshape(cnt, m)
            rows = np.repeat(np.arange(i, i + cnt), m)
            bits[idx.reshape(-1), rows] = True
        ones[i : i + cnt] = m
        i += cnt
    starts.append(total)

    ranks = np.zeros((net.depth + 1, n), dtype=np.int64)
    determined: list[dict[int, int]] = []
    ranks[0], det = _measure(bits, ones, starts, k)
    determined.append(det)
    for l in range(net.depth):
        c = net.layer(l)
        a, b = c[:, 0], c[:, 1]
        va, vb = bits[a], bits[b]
        bits[a] = va | vb
        bits[b] = va & vb
        ranks[l + 1], det = _measure(bits, ones, starts, k)
        determined.append(det)
    return MinRanks(ranks, determined, k)


def _measure(bits: np.ndarray, ones: np.ndarray, starts: list[int], k: int):
    any_one = bits.any(axis=1)
    first = np.argmax(bits, axis=1)
    ranks = np.where(any_one, ones[first] - 1, k)
    ranks = np.minimum(ranks, k)
    det: dict[int, int] = {}
    mmax = len(starts) - 2  # largest number of ones enumerated
    for r in range(min(k, mmax)):
        cand = np.flatnonzero(ranks == r)
        lo, mid, hi = starts[r], starts[r + 1], starts[r + 2]
        for w in cand.tolist():
            if not bits[w, lo:mid].any() and bits[w, mid:hi].all():
                det[r] = w
                break
    return ranks, det
