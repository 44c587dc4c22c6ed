import numpy as np
import pytest
from pass_oracles import random_network, wire_orders

from netgen.construct import construct
from netgen.network import Network
from netgen.passes import asap


def test_hand_example():
    net = Network.from_layers(4, [[(0, 1)], [(2, 3)], [(1, 2)]])
    out = asap(net)
    assert [c.tolist() for c in out.layers] == [[[0, 1], [2, 3]], [[1, 2]]]


@pytest.mark.parametrize("seed", range(20))
def test_asap_properties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 16))
    comps = [tuple(rng.choice(n, 2, replace=False).tolist()) for _ in range(int(rng.integers(1, 60)))]
    net = Network.from_layers(n, [[c] for c in comps])  # one comparator per layer: deepest form
    out = asap(net)
    assert out.size == net.size and out.depth <= net.depth
    # same sequence on every wire, so the same function
    assert wire_orders(out) == wire_orders(net)
    x = rng.standard_normal((30, n))
    assert np.array_equal(out.apply(x), net.apply(x))
    # as soon as possible: each comparator in layer l > 0 shares a wire with layer l - 1
    for l in range(1, out.depth):
        prev = set(out.layer(l - 1).ravel().tolist())
        for a, b in out.layer(l).tolist():
            assert a in prev or b in prev
    # deterministic order inside a layer: first appearance in the input
    todo: dict[tuple, list[int]] = {}
    for i, c in enumerate(comps):
        todo.setdefault(c, []).append(i)
    for layer in out.layers:
        idx = [todo[tuple(c)].pop(0) for c in layer.tolist()]
        assert idx == sorted(idx)
    assert asap(out) == out  # idempotent


def test_keeps_outputs_and_construction():
    rng = np.random.default_rng(0)
    net = random_network(rng, 10, 40, k=3)
    out = asap(net)
    assert out.outputs == net.outputs and out.construction == net.construction


def test_large_network_is_fast():
    import time

    net = construct("oddeven", 65536, 8)
    # the same comparators, one per layer (~3e5 layers)
    deep = Network.from_arrays(net.n, net.comparators, np.arange(net.size + 1), net.outputs, net.construction)
    t = time.perf_counter()
    out = asap(deep)
    assert time.perf_counter() - t < 10
    assert out == net  # construct() already returns ASAP layers


@pytest.mark.parametrize("seed", range(5))
def test_numpy_interpreted_and_compiled_paths_agree(seed, monkeypatch):
    from netgen import schedule

    rng = np.random.default_rng(seed)
    net = random_network(rng, 20, 300)
    per_layer = schedule.asap_levels(net.n, net.comparators, net.layer_offsets)  # one numpy step per layer
    interpreted = schedule.asap_levels(net.n, net.comparators)  # no chunks, short: the loop, interpreted
    monkeypatch.setattr(schedule, "MIN_COMPILED", 0)
    compiled = schedule.asap_levels(net.n, net.comparators)  # the same loop, compiled by numba
    assert schedule._asap_loop in schedule._COMPILED
    assert np.array_equal(per_layer, interpreted) and np.array_equal(per_layer, compiled)
    assert np.array_equal(per_layer, net.layer_of())  # from_comparators packs ASAP too


def test_one_asap_implementation():
    """The IR, the pass and the constructions all pack with netgen.schedule."""
    from netgen import network, schedule
    from netgen.passes import schedule as pass_schedule

    assert network.asap_layers is schedule.asap_levels is pass_schedule.asap_levels
    rng = np.random.default_rng(7)
    comps = rng.integers(0, 9, (200, 2))
    comps = comps[comps[:, 0] != comps[:, 1]]
    packed = schedule.pack(9, comps)
    net = Network.from_comparators(9, comps)
    assert np.array_equal(net.comparators, packed.comparators) and np.array_equal(net.layer_offsets, packed.layer_offsets)
    assert asap(Network.from_arrays(9, comps, np.arange(len(comps) + 1))) == net
