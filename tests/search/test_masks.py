"""0-1 bit-mask helpers of the search tools (netgen.search.masks): the
correctness test agrees with netgen's verifier and with brute force, and the
greedy shrink keeps a network correct."""

import itertools

import numpy as np
import pytest

from netgen.construct import build
from netgen.network import Network
from netgen.search import masks
from netgen.verify import verify


def _brute(net, unsorted=False):
    for bits in itertools.product([0, 1], repeat=net.n):
        out = net.apply(np.array(bits))
        c = sum(bits)
        if unsorted:
            if sum(out[w] for w in net.outputs) != min(c, net.k):
                return False
        elif any(out[w] != (c > r) for r, w in enumerate(net.outputs)):
            return False
    return True


@pytest.mark.parametrize("kind,n,k", [("oddeven", 7, 3), ("bitonic", 8, 2), ("splitter", 9, 4)])
def test_correct_agrees_with_brute_force_and_verifier(kind, n, k):
    net = build(kind, n, k)
    assert masks.correct(net, k) and _brute(net) and verify(net).status == "proved"
    rng = np.random.default_rng(0)
    for _ in range(10):  # drop one comparator: all three judges agree
        keep = np.ones(net.size, bool)
        keep[rng.integers(net.size)] = False
        broken = net.with_comparators(keep)
        assert masks.correct(broken, k) == _brute(broken) == (verify(broken).status == "proved")
        assert masks.correct(broken, k, unsorted=True) == _brute(broken, unsorted=True)


def test_unsorted_is_weaker_than_sorted():
    # the top 2 of 4 as a set in two layers: max(max(a,b), min(c,d)) and max(min(a,b), max(c,d))
    net = Network.from_layers(4, [[(0, 1), (2, 3)], [(0, 3), (2, 1)]], outputs=(0, 2))
    assert masks.correct(net, 2, unsorted=True) and _brute(net, unsorted=True)
    assert not masks.correct(net, 2) and not _brute(net)


def test_shrink_keeps_correctness_and_never_grows():
    for n, k in [(8, 3), (10, 2)]:
        net = build("bitonic", n, k)
        small = masks.shrink(net)
        assert small.size <= net.size and small.depth <= net.depth
        assert _brute(small) and verify(small).status == "proved"
    # a redundant comparator repeated is dropped
    net = Network.from_layers(3, [[(0, 1)], [(0, 2)], [(0, 1)], [(0, 2)]], outputs=(0,))
    assert masks.shrink(net).size == 2


def test_masks_bad_n():
    with pytest.raises(ValueError, match="1..63"):
        masks.masks_upto(64, 2)
