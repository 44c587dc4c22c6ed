"""Every construction for n = 1..40 (every k for the selection kinds) sorts
or selects correctly: all 0-1 inputs for n <= 16, all inputs with <= k ones
where that is small (complete for top-k networks), random 0-1 and real inputs
otherwise (see zero_one_check.py)."""

import numpy as np
import pytest
from zero_one_check import assert_correct

from netgen.construct import KINDS, REGISTRY, build


@pytest.mark.parametrize("n", range(1, 41))
@pytest.mark.parametrize("kind", KINDS)
def test_every_k_correct(kind, n):
    rng = np.random.default_rng(1000 * n + KINDS.index(kind))
    for k in range(1, n + 1):
        net = build(kind, n, k)
        assert net.n == n and net.k == k
        assert net.construction == {"kind": kind, "n": n, "k": k}
        assert len(set(net.outputs)) == k and all(0 <= w < n for w in net.outputs)
        if net.size:
            assert 0 <= net.comparators.min() and net.comparators.max() < n
        assert_correct(net, rng)


@pytest.mark.parametrize("n", range(1, 41))
@pytest.mark.parametrize("kind", [kind for kind in KINDS if not REGISTRY[kind].needs_k])
def test_sorter_without_k_is_the_full_sorter(kind, n):
    net = build(kind, n)
    assert net == build(kind, n, n)
    assert net.outputs == tuple(range(n))  # wire r holds rank r


def test_checker_catches_a_missing_comparator():
    """The checker used above can fail: odd-even merge sort on 8 wires has
    19 comparators, the optimum, so dropping any one of them breaks it; the
    same for a top-3 network checked beyond the exhaustive range."""
    rng = np.random.default_rng(0)
    net = build("oddeven", 8)
    assert net.size == 19
    for i in range(net.size):
        with pytest.raises(AssertionError):
            assert_correct(net.with_comparators(np.arange(net.size) != i), rng)
    net = build("splitter", 30, 3)
    with pytest.raises(AssertionError):
        assert_correct(net.with_comparators(np.arange(net.size) != net.size - 1), rng)
