"""The optimal-depth SAT search for sorted top-k selectors
(netgen.search.select_depth): its symmetry breaking agrees with the plain
model of select_sat (which has none beyond the first layer), known optimal
depths come out SAT at the optimum and UNSAT one below, and every network it
returns is proved."""

import itertools
import sys

import numpy as np
import pytest

from netgen.network import Network
from netgen.search import select_depth as sd
from netgen.verify import verify


def _brute_ok(net):
    for bits in itertools.product([0, 1], repeat=net.n):
        out = net.apply(np.array(bits))
        c = sum(bits)
        if any(out[w] != (c > r) for r, w in enumerate(net.outputs)):
            return False
    return True


def test_masks_and_layers_match_the_network():
    m = sd.masks_upto(7, 3)
    assert len(m) == len(set(m.tolist())) == 7 + 21 + 35
    assert all(1 <= bin(int(v)).count("1") <= 3 for v in m)
    layers = [[(0, 3), (1, 2)], [(2, 0), (4, 6)], [(5, 1)]]
    net = Network.from_layers(7, layers)
    got = sd.apply_layers(m, layers)
    for v, g in zip(m.tolist(), got.tolist()):
        bits = np.array([(v >> w) & 1 for w in range(7)])
        want = net.apply(bits)
        assert g == sum(int(b) << w for w, b in enumerate(want))


def test_untangle_gives_a_relabelled_standard_network():
    rng = np.random.default_rng(1)
    for _ in range(20):
        n = 6
        layers = []
        for _ in range(4):
            perm = rng.permutation(n)
            layers.append([(int(perm[2 * i]), int(perm[2 * i + 1])) for i in range(rng.integers(1, 4))])
        std = sd.untangle(layers)
        assert all(a < b for layer in std for a, b in layer)
        x = rng.normal(size=(50, n))
        a = Network.from_layers(n, layers).apply(x)
        b = Network.from_layers(n, std).apply(x)
        for w in range(n):  # each original wire's content is on some wire of the standard network
            assert any(np.array_equal(a[:, w], b[:, v]) for v in range(n))


@pytest.mark.parametrize("n,k,d", [(5, 2, 3), (5, 2, 4), (6, 2, 3), (6, 2, 4), (6, 3, 4), (6, 3, 5), (7, 2, 4), (7, 2, 5)])
def test_symmetry_breaking_agrees_with_the_plain_model(n, k, d):
    pytest.importorskip("pysat")
    from netgen.search import select_sat

    plain = select_sat.solve(n, {r: d for r in range(k)}, depth=d)
    ours = sd.search(n, k, d, time_limit=60)
    assert ours.status == plain.status
    if ours.status == "SAT":
        assert _brute_ok(ours.network) and verify(ours.network).status == "proved"


@pytest.mark.parametrize("n,k,optimal", [(4, 3, 3), (5, 4, 5), (6, 5, 5), (8, 1, 3), (8, 2, 5)])
def test_known_optimal_depths(n, k, optimal):
    pytest.importorskip("pysat")
    found = sd.search(n, k, optimal, time_limit=60)
    assert found.status == "SAT" and found.network.depth <= optimal and _brute_ok(found.network)
    assert found.network.construction == {"kind": "sat-select", "n": n, "k": k}
    assert sd.search(n, k, optimal - 1, time_limit=60).status == "UNSAT"


@pytest.mark.parametrize("n,r,d", [(6, 1, 3), (6, 1, 4), (7, 2, 4), (8, 1, 4), (8, 1, 5)])
def test_single_rank_agrees_with_the_plain_model(n, r, d):
    pytest.importorskip("pysat")
    from netgen.search import select_sat

    plain = select_sat.solve(n, {r: d}, depth=d)
    ours = sd.search(n, r + 1, d, ranks=[r], time_limit=60)
    assert ours.status == plain.status
    if ours.status == "SAT":  # rank r on wire r on every 0-1 input
        for bits in itertools.product([0, 1], repeat=n):
            assert ours.network.apply(np.array(bits))[r] == (sum(bits) > r)


def test_second_layers_are_standard_matchings_and_fewer_than_orbits():
    reps = sd._orbit_reps(8)
    kept = sd.second_layers(8, 3)
    assert 0 < len(kept) <= len(reps)
    for layer in kept:
        wires = [w for c in layer for w in c]
        assert len(wires) == len(set(wires)) and all(a < b for a, b in layer)
        assert not any(a // 2 == b // 2 for a, b in layer)  # never the first-layer pair again


def test_time_limit_gives_unknown_not_a_bound():
    pytest.importorskip("pysat")
    r = sd.search(9, 8, 6, time_limit=0.05)  # UNSAT, but not in 0.05 s
    assert r.status == "UNKNOWN" and r.network is None


def test_prefix_search_improves_a_network():
    pytest.importorskip("pysat")
    from netgen.construct import build

    net = build("oddeven", 6, 2)  # Wah-Chen: depth 5
    status, better = sd.improve(net, 1, 3, time_limit=60)
    assert status == "SAT" and better.depth <= 4 and _brute_ok(better)


def test_bad_arguments():
    pytest.importorskip("pysat")
    with pytest.raises(ValueError, match="1 <= k < n"):
        sd.search(5, 5, 3)
    with pytest.raises(ValueError, match="depth >= 1"):
        sd.search(5, 2, 0)
    with pytest.raises(ValueError, match="ranks"):
        sd.search(5, 2, 3, ranks=[2])


def test_missing_pysat_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pysat.solvers", None)
    with pytest.raises(ValueError, match="python-sat"):
        sd.search(4, 2, 3)
