"""Exhaustive bit-parallel 0-1 testing against brute force."""


import numpy as np
import pytest
from verify_oracles import brute_force, drop, fails, random_network, transposition_sorter, with_prefix

from netgen.construct.best import data_dir
from netgen.io import load
from netgen.network import Network
from netgen.verify import exhaustive

DOB = str(data_dir())  # shipped package data


def _agree(net):
    ok, bad, fires = brute_force(net)
    r = exhaustive.check(net)
    assert r.method == "exhaustive"
    if ok:
        assert r.status == "proved", net
        assert np.array_equal(r.fires, fires)
    else:
        assert r.status == "counterexample"
        assert fails(net, r.counterexample)
        assert sum(r.counterexample) <= net.k
    return r


@pytest.mark.parametrize("seed", range(40))
def test_random_networks_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 11))
    k = int(rng.integers(1, n + 1))
    net = random_network(rng, n, int(rng.integers(0, 3 * n * n)), k)
    _agree(net)


@pytest.mark.parametrize("n", range(1, 11))
def test_correct_networks_with_idle_comparators(n):
    rng = np.random.default_rng(n)
    net = with_prefix(rng, transposition_sorter(n), 3 * n) if n > 1 else transposition_sorter(n)
    r = _agree(net)
    assert r.status == "proved"
    for k in range(1, n + 1):  # the same network read as top-k
        _agree(net.with_(outputs=net.outputs[:k]))


def test_both_kernels_agree():
    # bit-sliced (all 2^n inputs, masked to <= k ones) and combinations
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(7, 13))
        k = int(rng.integers(1, 4))
        net = random_network(rng, n, 4 * n, k)
        ok, _, fires = brute_force(net)
        comps = np.ascontiguousarray(net.comparators, dtype=np.int64)
        outputs = np.asarray(net.outputs, dtype=np.int64)
        is_out = np.zeros(n, dtype=np.bool_)
        is_out[outputs] = True
        f2 = np.zeros(net.size, dtype=np.bool_)
        found, mask = exhaustive._combinations(n, k, comps, outputs, is_out, f2)
        assert found == (not ok)
        if ok:
            assert np.array_equal(f2, fires)
        r = exhaustive.check(net)
        assert (r.status == "proved") == ok


def test_dobbelaere_up_to_24_and_single_removals():
    net = load(f"{DOB}/Sort_24_120_13.json")
    r = exhaustive.check(net)
    assert r.status == "proved" and r.checked == 2**24 - 1 and r.fires.all()
    for f, idx in [("Sort_10_29_8.json", [0, 7, 28]), ("Sort_16_60_10.json", [3, 30, 59])]:
        net = load(f"{DOB}/{f}")
        for i in idx:
            bad = drop(net, i)
            ok, _, _ = brute_force(bad)
            r = exhaustive.check(bad)
            assert r.status == ("proved" if ok else "counterexample")
            if not ok:
                assert fails(bad, r.counterexample)


def test_too_large_is_a_value_error():
    net = transposition_sorter(40)
    with pytest.raises(ValueError, match="exhaustive"):
        exhaustive.check(net)
    # but few inputs with <= k ones are fine beyond n = 32
    r = exhaustive.check(net.with_(outputs=net.outputs[:2]))
    assert r.status == "proved" and r.checked == 40 + 40 * 39 // 2


def test_no_comparators():
    assert exhaustive.check(Network.from_layers(1, [], outputs=[0])).status == "proved"
    r = exhaustive.check(Network.from_layers(3, [], outputs=[0, 1, 2]))
    assert r.status == "counterexample"


def test_numpy_and_numba_bitsliced_agree():
    rng = np.random.default_rng(11)
    for _ in range(12):
        n = int(rng.integers(1, 10))
        k = int(rng.integers(1, n + 1))
        net = random_network(rng, n, int(rng.integers(0, 2 * n * n)), k)
        a = exhaustive.check(net, engine="numpy")
        b = exhaustive.check(net, engine="numba")
        assert a.status == b.status
        if a.status == "proved":
            assert np.array_equal(a.fires, b.fires)
        else:
            assert fails(net, a.counterexample) and fails(net, b.counterexample)
    with pytest.raises(ValueError, match="engine"):
        exhaustive.check(net, engine="gpu")


def test_parallel_kernel_on_26_wires():
    net = load(f"{DOB}/Sort_26_138_15.json")
    r = exhaustive.check(net)  # n >= PARALLEL_FROM_N: numba, all cores
    assert r.status == "proved" and r.fires.all() and r.checked == 2**26 - 1
    bad = drop(net, 100)
    r = exhaustive.check(bad)
    assert r.status == "counterexample" and fails(bad, r.counterexample)
