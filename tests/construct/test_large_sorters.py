"""The large sorters' path (issue 31 item 5): Batcher sorters built layer by
layer into int32 (netgen.schedule.pack_layers), the exact (depth, size) the
portfolio skips candidates by, the construction guard under a raised
budget, and the IR's checks on wide layers."""

import numpy as np
import pytest

from netgen import portfolio
from netgen.construct import construct, sorters
from netgen.construct._common import MAX_COMPARATORS, refuse_if_too_large
from netgen.construct.registry import sorter_exact
from netgen.network import Network, size_limit
from netgen.passes.schedule import asap
from netgen.schedule import is_packed, pack_layers

KINDS = ("bitonic", "oddeven", "pairwise")


def _built(kind, n, large, monkeypatch):
    monkeypatch.setattr(sorters, "LARGE", 0 if large else 1 << 40)
    return sorters.sorter(kind, n)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 3, 100, 1000, 1024, 3000, 4096])
def test_int32_path_is_the_same_network(kind, n, monkeypatch):
    old = _built(kind, n, False, monkeypatch)
    new = _built(kind, n, True, monkeypatch)
    assert new == old  # comparator for comparator, layer offsets, outputs, construction record
    assert new.comparators.dtype == np.int32 and not new.comparators.flags.writeable
    x = np.random.default_rng(n).standard_normal((32, n))
    assert np.array_equal(new.select(x), -np.sort(-x, axis=1))


def test_pack_layers_moves_comparators_to_their_levels():
    # layer 1 holds (2, 3), which ASAP puts in level 0: not monotone, moved (stably)
    layers = [np.array([[0, 1]]), np.array([[0, 1], [2, 3]]), np.array([[1, 2]])]
    p = pack_layers(4, lambda: iter(layers))
    ref = Network.from_comparators(4, np.concatenate(layers))
    assert np.array_equal(p.comparators, ref.comparators) and np.array_equal(p.layer_offsets, ref.layer_offsets)
    assert p.comparators.tolist() == [[0, 1], [2, 3], [0, 1], [1, 2]]


@pytest.mark.parametrize("n", [128, 256, 1024, 4096])
@pytest.mark.parametrize("kind", KINDS)
def test_exact_depth_and_size(kind, n):
    net = construct(kind, n)
    assert sorter_exact(kind, n) == (net.depth, net.size)
    assert is_packed(n, net.comparators, net.layer_offsets) and asap(net) is net


def test_exact_only_where_it_holds():
    assert sorter_exact("oddeven", 64) is None  # n <= 64: the best-known sorters and proofs
    assert sorter_exact("oddeven", 1000) is None  # padding: sizes differ by kind
    assert sorter_exact("oddeven", 1 << 20) == (210, 100_663_295)


@pytest.mark.parametrize("n", [128, 1024])
@pytest.mark.parametrize("objective", ["depth", "size"])
def test_portfolio_winner_unchanged_by_the_exact_skip(n, objective, monkeypatch):
    fast, cands = portfolio.choose(n, None, objective, verify=False)
    assert sum(c.compiled is not None for c in cands) == 1  # one sorter built
    monkeypatch.setattr(portfolio, "_dominated", lambda c, cands, objective: "")
    slow, cands = portfolio.choose(n, None, objective, verify=False)
    assert sum(c.compiled is not None for c in cands) >= 2
    assert fast.network == slow.network


def test_construction_guard_follows_a_raised_budget():
    with pytest.raises(ValueError, match="too large"):
        refuse_if_too_large("x sorter", 10, 10, MAX_COMPARATORS + 1)
    with size_limit(MAX_COMPARATORS * 4):
        refuse_if_too_large("x sorter", 10, 10, MAX_COMPARATORS + 1)  # no error
        with pytest.raises(ValueError, match="too large"):
            refuse_if_too_large("x sorter", 10, 10, MAX_COMPARATORS * 4 + 1)


@pytest.mark.parametrize("wide", [True, False])
def test_duplicate_wire_in_a_layer(wide):
    # wide layers are checked layer by layer, narrow ones by the sorted keys: the same message
    n = 8 if wide else 1000
    comps = np.array([[0, 1], [2, 3], [4, 1], [5, 6]], dtype=np.int32)
    with pytest.raises(ValueError, match="layer 0 uses wire 1 twice"):
        Network.from_arrays(n, comps, [0, 4], copy=False)


def test_from_arrays_copies_unless_told():
    comps = np.array([[0, 1]], dtype=np.int32)
    Network.from_arrays(2, comps, [0, 1])
    assert comps.flags.writeable  # copied: the caller's array untouched
    net = Network.from_arrays(2, comps, [0, 1], copy=False)
    assert net.comparators is comps and not comps.flags.writeable


def test_build_estimate_at_2_20_counts_one_int32_build():
    from netgen.estimate import DEFAULT_MAX_SECONDS, build_seconds

    with size_limit(1 << 28):
        est = build_seconds(1 << 20, None, None, verify=False)
    assert [label for label, _ in est.parts] == ["start-up", "oddeven sorter: construct and passes"]
    assert est.seconds < DEFAULT_MAX_SECONDS  # measured: 7.4 s
