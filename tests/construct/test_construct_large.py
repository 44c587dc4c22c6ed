"""Large instances against np.sort on random inputs (including n where the
published bitonic networks are not sorters: 42-46, 54, 300, 3000, 10450)."""

import math

import numpy as np
import pytest

from netgen.construct import KINDS, REGISTRY, build, kinds_for


def scalable(n, k=None):
    """The constructions of at most n lg(n)^2 comparators at (n, k) (every
    registered one but the quadratic transposition sorter)."""
    return kinds_for(n, k, max_size=n * math.ceil(math.log2(n)) ** 2)


#: the constructions that build a sorter for any n (k = None)
SORTERS = [kind for kind in KINDS if not REGISTRY[kind].needs_k]


def _check(net, trials, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((trials, net.n))
    x[: trials // 2] = np.round(x[: trials // 2])  # ties
    assert np.array_equal(net.select(x), -np.sort(-x, axis=1)[:, : net.k])


@pytest.mark.parametrize("kind", scalable(10450, 5))  # transposition: 5e7 comparators, refused
def test_10450_top5(kind):
    _check(build(kind, 10450, 5), 64, 1)


@pytest.mark.parametrize("kind", SORTERS)
def test_1000_sorters(kind):
    _check(build(kind, 1000), 64, 2)


@pytest.mark.parametrize("n", [42, 43, 44, 45, 46, 54, 300, 1000, 3000])
def test_bitonic_sorts_where_published_networks_do_not(n):
    _check(build("bitonic", n), 200, n)
    _check(build("bitonic", n, 5), 200, n + 1)


@pytest.mark.parametrize("kind", scalable(65536, 8))
def test_65536_top8(kind):
    _check(build(kind, 65536, 8), 8, 3)


@pytest.mark.parametrize("n,k", [(65537, 3), (3000, 17), (777, 100)])
def test_odd_sizes(n, k):
    for kind in scalable(n, k):
        _check(build(kind, n, k), 16, n + k)
