import networkx as nx
import numpy as np
import pytest
from pass_oracles import random_network

from netgen.construct import construct
from netgen.network import Network
from netgen.passes import prune


def test_hand_example():
    # (1,2) runs after the only output wire 0 has seen its last comparator
    net = Network.from_layers(3, [[(0, 1)], [(1, 2)]], outputs=[0])
    out = prune(net)
    assert out.comparators.tolist() == [[0, 1]] and out.depth == 1
    assert out.outputs == (0,)


@pytest.mark.parametrize("seed", range(20))
def test_matches_networkx_reachability_and_keeps_behaviour(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12))
    net = random_network(rng, n, int(rng.integers(0, 40)), k=int(rng.integers(1, n + 1)))
    out = prune(net)
    # reference: comparator i matters iff the DAG has a path from it to an output wire's end
    g = net.to_networkx()
    targets = {("out", w) for w in net.outputs}
    want = [i for i in range(net.size) if any(t in targets for t in nx.descendants(g, i))]
    assert out.comparators.tolist() == net.comparators[want].tolist()
    x = rng.standard_normal((50, n))
    assert np.array_equal(out.select(x), net.select(x))
    assert prune(out) == out  # idempotent


def test_sorter_is_untouched_and_transposition_top1_shrinks():
    net = construct("oddeven", 16)
    assert prune(net) is net
    full = construct("transposition", 12)
    top1 = prune(full.with_(outputs=(0,)))
    assert top1.size < full.size
    x = np.random.default_rng(0).standard_normal((100, 12))
    assert np.array_equal(top1.select(x)[:, 0], x.max(axis=1))


def test_large_network_is_fast():
    import time

    net = construct("bitonic", 65536, 8)
    wider = net.with_(outputs=net.outputs[:1])  # top-1: most of it goes
    t = time.perf_counter()
    out = prune(wider)
    assert time.perf_counter() - t < 10
    assert out.size < net.size


@pytest.mark.parametrize("seed", range(5))
def test_numpy_interpreted_and_compiled_paths_agree(seed, monkeypatch):
    from netgen import schedule

    rng = np.random.default_rng(seed)
    net = random_network(rng, 20, 300, k=3)
    per_layer = schedule.cone_mask(net.n, net.comparators, net.outputs, net.layer_offsets)
    interpreted = schedule.cone_mask(net.n, net.comparators, net.outputs)  # no chunks: the loop, interpreted
    monkeypatch.setattr(schedule, "MIN_COMPILED", 0)
    compiled = schedule.cone_mask(net.n, net.comparators, net.outputs)  # the same loop, compiled
    assert np.array_equal(per_layer, interpreted) and np.array_equal(per_layer, compiled)
    assert 0 < per_layer.sum() < net.size


def test_prune_then_pack_is_prune_then_asap():
    from netgen import schedule
    from netgen.passes import asap

    rng = np.random.default_rng(3)
    for _ in range(20):
        net = random_network(rng, 12, 80, k=int(rng.integers(1, 12)))
        for chunks in (net.layer_offsets, None):
            packed = schedule.pack(net.n, net.comparators, chunks, net.outputs)
            want = asap(prune(net))
            assert np.array_equal(packed.comparators, want.comparators)
            assert np.array_equal(packed.layer_offsets, want.layer_offsets)
            assert packed.kept.sum() == want.size
