import numpy as np
import pytest
from pass_oracles import brute_force_fires, random_network, relevant_inputs

from netgen.construct import construct
from netgen.network import Network
from netgen.passes import remove_never_swapping


def _same_on_relevant_inputs(a, b):
    x = relevant_inputs(a.n, a.k)
    return np.array_equal(a.select(x), b.select(x))


def test_repeated_comparator_is_removed():
    net = Network.from_layers(2, [[(0, 1)], [(0, 1)]])
    fires = brute_force_fires(net)
    assert fires.tolist() == [True, False]
    out = remove_never_swapping(net, fires)
    assert out.comparators.tolist() == [[0, 1]] and out.depth == 1


# splitter (16, 5) is the splitter-tail network (issue 12): 45 comparators, 2
# never swap (4 of the paper construction's 48 did)
@pytest.mark.parametrize(
    "kind,n,k,lost",
    [("splitter", 16, 5, 2), ("pairwise", 16, 5, 4), ("oddeven", 16, 5, 3), ("bitonic", 13, 5, 2), ("transposition", 9, 2, 0)],
)
def test_selection_networks_lose_comparators_and_stay_correct(kind, n, k, lost):
    net = construct(kind, n, k)
    fires = brute_force_fires(net)
    out = remove_never_swapping(net, fires)
    assert out.size == net.size - lost
    assert _same_on_relevant_inputs(net, out)
    x = relevant_inputs(n, k)
    want = -np.sort(-x, axis=1)[:, :k]
    assert np.array_equal(out.select(x), want)


@pytest.mark.parametrize("seed", range(10))
def test_random_networks_keep_their_behaviour(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    net = random_network(rng, n, 30, k=int(rng.integers(1, n + 1)))
    out = remove_never_swapping(net, brute_force_fires(net))
    assert _same_on_relevant_inputs(net, out)


def test_bad_masks():
    net = construct("oddeven", 8)
    with pytest.raises(ValueError, match="one entry per comparator"):
        remove_never_swapping(net, np.ones(net.size + 1, dtype=bool))
    with pytest.raises(ValueError, match="boolean"):
        remove_never_swapping(net, np.ones(net.size, dtype=int))
    assert remove_never_swapping(net, np.ones(net.size, dtype=bool)) is net
