"""The splitter-tail construction (issue 12): its parts checked against
brute force, its networks proved, and the (5, 10450) depth it reaches."""

import itertools

import numpy as np
import pytest
from zero_one_check import assert_correct, check_random

from netgen.construct import build
from netgen.construct.splitter import splitter
from netgen.construct.splitter_tail import cascade_pairs, class_bound, odd_even_merge, splitter_tail
from netgen.verify import verify


@pytest.mark.parametrize("la", range(0, 6))
@pytest.mark.parametrize("lb", range(0, 6))
def test_odd_even_merge_any_lengths(la, lb):
    """Every pair of sorted 0-1 lists (a ones of la, b ones of lb) comes out sorted."""
    a, b = list(range(la)), list(range(la, la + lb))
    comps = []
    out = odd_even_merge(a, b, comps)
    assert sorted(out) == a + b
    for ones_a in range(la + 1):
        for ones_b in range(lb + 1):
            v = np.array([1] * ones_a + [0] * (la - ones_a) + [1] * ones_b + [0] * (lb - ones_b))
            for x, y in comps:
                v[x], v[y] = max(v[x], v[y]), min(v[x], v[y])
            assert list(v[out]) == sorted(v, reverse=True), (ones_a, ones_b)


def _most_c_sets(c, k, bits):
    """Brute force: grow every down-closed family of <= k subsets of
    {0..bits-1} one set at a time (a set may join once all its maximal proper
    subsets are in) and count its c-sets."""
    best, seen = 0, set()
    stack = [frozenset([()])]
    while stack:
        fam = stack.pop()
        if fam in seen:
            continue
        seen.add(fam)
        best = max(best, sum(len(s) == c for s in fam))
        if len(fam) == k:
            continue
        for s in itertools.chain.from_iterable(itertools.combinations(range(bits), r) for r in range(1, bits + 1)):
            if s not in fam and all(s[:i] + s[i + 1 :] in fam for i in range(len(s))):
                stack.append(fam | {s})
    return best


@pytest.mark.parametrize("k", range(1, 9))
def test_class_bound_matches_brute_force(k):
    for c in range(0, 4):
        assert class_bound(c, k, 5) == _most_c_sets(c, k, 5), (c, k)


def test_cascade_levels_match_the_splitter():
    """The first cascade is the standard construction's first pass."""
    for m in (2, 3, 7, 16, 37):
        got = sorted(map(tuple, np.concatenate(cascade_pairs(m)).tolist()))
        net = splitter(m, m)  # the sorter starts with the same cascade
        first = sorted(map(tuple, net.comparators.tolist()))
        assert set(got) <= set(first)


@pytest.mark.parametrize("n", [8, 13, 16, 33, 64, 100])
def test_small_networks_are_correct(n):
    rng = np.random.default_rng(n)
    for k in range(2, min(n, 9) + 1):
        net = splitter_tail(n, k)
        assert net.n == n and net.k == k
        if n < 63:  # the independent checker packs 0-1 inputs into int64 masks
            assert_correct(net, rng)
        else:
            check_random(net, rng)
        assert verify(net).status == "proved"


def test_bad_k_is_a_value_error():
    with pytest.raises(ValueError, match="2 <= k <= n"):
        splitter_tail(16, 1)
    with pytest.raises(ValueError, match="2 <= k <= n"):
        splitter_tail(16, 17)


def test_splitter_is_never_deeper_than_the_paper_construction():
    for n, k in [(16, 5), (100, 6), (300, 8), (1024, 5)]:
        assert build("splitter", n, k).depth <= splitter(n, k).depth, (n, k)


@pytest.mark.parametrize("k", [5, 8])
def test_compiled_networks_are_proved_and_shallower(k):
    """After the passes `netgen build` runs, the (k, 1024) network is proved
    and shallower than the paper's construction after the same passes."""
    from netgen.compiler import compile_network

    new = compile_network(build("splitter", 1024, k))
    old = compile_network(splitter(1024, k), verify=False)
    assert new.report.status == "proved" and new.report.method == "reachable states"
    assert new.network.depth < old.network.depth
    assert new.network.size <= old.network.size * 1.01


def test_deterministic_across_processes():
    """Same inputs, same network: two fresh interpreters with different hash
    seeds build the same (7, 300) network."""
    import os
    import subprocess
    import sys

    code = "from netgen.construct.splitter_tail import splitter_tail; print(splitter_tail(300, 7).key())"
    keys = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        keys.add(out.stdout.strip())
    assert keys == {splitter_tail(300, 7).key()}
