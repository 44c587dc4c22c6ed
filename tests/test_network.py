"""The IR: validation, layer views, execution, networkx view, content key."""

import numpy as np
import pytest

from netgen.network import Network, asap_layers


def batcher4():
    # a 4-sorter, descending onto wires 0..3
    return Network.from_layers(4, [[(0, 1), (2, 3)], [(0, 2), (1, 3)], [(1, 2)]])


def test_properties_and_layers():
    net = batcher4()
    assert (net.n, net.k, net.depth, net.size) == (4, 4, 3, 5)
    assert net.layer_sizes() == [2, 2, 1]
    assert net.layer(2).tolist() == [[1, 2]]
    assert net.layer_of().tolist() == [0, 0, 1, 1, 2]
    assert net.is_sorter


def test_arrays_are_read_only():
    net = batcher4()
    with pytest.raises(ValueError):
        net.comparators[0, 0] = 3
    with pytest.raises(ValueError):
        net.layer_offsets[0] = 1


def test_apply_sorts_descending_all_01_inputs_and_random_reals():
    net = batcher4()
    bits = (np.arange(16)[:, None] >> np.arange(4)) & 1
    assert (net.select(bits) == -np.sort(-bits, axis=1)).all()
    x = np.random.default_rng(0).normal(size=(100, 4))
    assert np.array_equal(net.select(x), -np.sort(-x, axis=1))


def test_apply_respects_direction():
    net = Network.from_layers(2, [[(1, 0)]])  # max -> wire 1
    assert net.apply(np.array([5.0, 7.0])).tolist() == [5.0, 7.0]
    assert net.apply(np.array([7.0, 5.0])).tolist() == [5.0, 7.0]


@pytest.mark.parametrize(
    "layers, outputs, message",
    [
        ([[(0, 4)]], None, "outside 0..3"),
        ([[(0, 0)]], None, "itself"),
        ([[(0, 1), (1, 2)]], None, "uses wire 1 twice"),
        ([[(0, 1)], []], None, "empty"),
        ([[(0, 1)]], [0, 0], "distinct"),
        ([[(0, 1)]], [5], "0..3"),
        ([[(0, 1)]], [], "at least one"),
    ],
)
def test_validation_names_the_problem(layers, outputs, message):
    with pytest.raises(ValueError, match=message):
        Network.from_layers(4, layers, outputs)


@pytest.mark.parametrize("n", [0, -3, 2.5, True, "4"])
def test_bad_n(n):
    with pytest.raises(ValueError, match="n must be"):
        Network.from_layers(n, [])


def test_from_comparators_packs_asap():
    comps = [(0, 1), (2, 3), (0, 2), (1, 3), (1, 2)]
    net = Network.from_comparators(4, comps)
    assert net.layer_sizes() == [2, 2, 1]
    assert asap_layers(4, np.array(comps)).tolist() == [0, 0, 1, 1, 2]
    assert net == batcher4()


def test_with_comparators_drops_empty_layers():
    net = batcher4()
    sub = net.with_comparators(np.array([True, True, False, False, True]))
    assert sub.layer_sizes() == [2, 1]
    assert sub.comparators.tolist() == [[0, 1], [2, 3], [1, 2]]


def test_key_and_equality():
    a, b = batcher4(), batcher4()
    assert a == b and a.key() == b.key() and hash(a) == hash(b)
    c = a.with_(outputs=(0, 1))
    assert c != a and c.key() != a.key()


def test_networkx_view_is_the_comparator_dag():
    import networkx as nx

    net = batcher4()
    g = net.to_networkx()
    assert nx.is_directed_acyclic_graph(g)
    comparator_nodes = [v for v in g if isinstance(v, int)]
    assert len(comparator_nodes) == net.size
    # comparator 4 = (1, 2) follows comparator 2 on wire... (0,2) uses wire 2, (1,3) uses wire 1
    assert set(g.predecessors(4)) == {2, 3}
    assert g.nodes[("out", 3)]["rank"] == 3
    # longest comparator chain = depth
    assert nx.dag_longest_path_length(g.subgraph(comparator_nodes)) + 1 == net.depth


def test_large_network_is_compact():
    rng = np.random.default_rng(1)
    n, depth = 65536, 16
    comps = np.concatenate([rng.permutation(n).reshape(-1, 2) for _ in range(depth)])
    net = Network.from_arrays(n, comps, np.arange(depth + 1) * (n // 2), outputs=[0, 1])
    assert net.comparators.dtype == np.int32 and net.comparators.nbytes == net.size * 8
