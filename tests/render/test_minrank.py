"""Exact minimum ranks (netgen.render.minrank) against brute force over all
permutations, and the splitter-cascade formula of the DiffTopK paper."""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest

from netgen.network import Network
from netgen.render.minrank import MAX_INPUTS, count_inputs, min_ranks

from render_nets import random_layered, splitter_cascade, transposition_sorter


def brute_ranks(net: Network) -> tuple[np.ndarray, np.ndarray]:
    """Over all permutations of n distinct values: the smallest and largest
    rank (0 = largest) of the value on each wire after each layer."""
    n = net.n
    lo = np.full((net.depth + 1, n), n)
    hi = np.full((net.depth + 1, n), -1)
    for perm in permutations(range(n)):
        v = np.array(perm)
        for t in range(net.depth + 1):
            if t:
                c = net.layer(t - 1)
                a, b = c[:, 0], c[:, 1]
                va, vb = v[a].copy(), v[b].copy()
                v[a], v[b] = np.maximum(va, vb), np.minimum(va, vb)
            rank = n - 1 - v  # values are 0..n-1, so rank = n-1-value
            lo[t] = np.minimum(lo[t], rank)
            hi[t] = np.maximum(hi[t], rank)
    return lo, hi


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_min_ranks_equal_brute_force(seed, k):
    net = random_layered(6, 7, seed=seed, k=k)
    mr = min_ranks(net)
    lo, hi = brute_ranks(net)
    assert np.array_equal(mr.ranks, np.minimum(lo, k))
    for t in range(net.depth + 1):
        fixed = {r: w for w in range(net.n) for r in range(k) if lo[t, w] == hi[t, w] == r}
        assert mr.determined[t] == fixed


def test_sorter_outputs_end_with_their_rank():
    net = transposition_sorter(7)
    mr = min_ranks(net)
    assert mr.ranks[-1].tolist() == list(range(7))
    assert mr.determined[-1] == {r: r for r in range(7)}
    assert mr.ranks[0].tolist() == [0] * 7


@pytest.mark.parametrize("m", [8, 16, 13])
def test_splitter_cascade_gives_popcount_ranks(m):
    # DiffTopK Supplementary B: after a cascade wire l_i has minimum rank 2^popcount(i) - 1
    comps: list[tuple[int, int]] = []
    splitter_cascade(list(range(m)), comps)
    net = Network.from_comparators(m, comps, list(range(m)))
    got = min_ranks(net).ranks[-1]
    want = [min(2 ** bin(i).count("1") - 1, m) for i in range(m)]
    assert got.tolist() == want


def test_discarded_and_fixed_times():
    # 4 wires, k = 1: a knockout tournament (0,1),(2,3) then (0,2)
    net = Network.from_layers(4, [[(0, 1), (2, 3)], [(0, 2)]], [0])
    mr = min_ranks(net)
    assert mr.discarded_at() == {1: 1, 3: 1, 2: 2}
    assert mr.determined_at() == {0: (0, 2)}


def test_rediscovered_wire_is_not_discarded():
    # wire 1 loses at layer 1 (min rank 1 >= k) but receives a max again at layer 2
    net = Network.from_layers(3, [[(0, 1)], [(1, 2)]], [1])
    mr = min_ranks(net)
    assert mr.ranks[1, 1] == 1 and mr.ranks[2, 1] == 0
    assert 1 not in mr.discarded_at()


def test_too_many_inputs_is_a_value_error():
    n = 200
    assert count_inputs(n, 5) > MAX_INPUTS
    net = Network.from_layers(n, [[(0, 1)]], list(range(5)))
    with pytest.raises(ValueError, match="0-1 inputs"):
        min_ranks(net)
