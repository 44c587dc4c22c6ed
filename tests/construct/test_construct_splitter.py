"""The splitter construction's bookkeeping (what renderers draw)."""

import numpy as np
import pytest

from netgen.construct import splitter_trace


def reference_cascade(wires):
    """Splitter cascade straight from the definition: compare l_i with
    l_{i+s}, s = 2^(ceil(lg m) - 1), for i <= m-1-s; recurse on both halves."""
    m = len(wires)
    if m < 2:
        return []
    s = 1 << ((m - 1).bit_length() - 1)
    here = [(wires[i], wires[i + s]) for i in range(m - s)]
    return here + reference_cascade(wires[:s]) + reference_cascade(wires[s:])


@pytest.mark.parametrize("n,k", [(16, 5), (37, 4), (100, 8), (64, 64), (1, 1), (2, 1)])
def test_trace_is_consistent(n, k):
    tr = splitter_trace(n, k)
    net = tr.network
    assert list(tr.outputs) == list(net.outputs)
    before = np.zeros(n, dtype=np.int64)
    dead = set()
    for c in tr.cascades:
        w = c.wires.tolist()
        assert len(w) >= 2 and not dead & set(w)
        assert (before[c.wires] == c.rank).all()
        # same comparators as the recursive definition (order may differ between parallel halves)
        got = sorted(map(tuple, tr.comparators[c.start : c.stop].tolist()))
        assert got == sorted(reference_cascade(w))
        i = np.arange(len(w))
        popcount = np.array([bin(x).count("1") for x in i])
        assert np.array_equal(c.min_ranks, c.rank + 2**popcount - 1)
        before[c.wires] = c.min_ranks
        assert set(c.dropped.tolist()) == {x for x, r in zip(w, c.min_ranks) if r >= k}
        dead |= set(c.dropped.tolist())
    assert np.array_equal(before[tr.outputs], np.arange(k))
    assert tr.comp_offsets[-1] == len(tr.comparators)
    # kept comparators in layer order are the network's
    kept = np.flatnonzero(tr.kept)
    order = kept[np.argsort(tr.layer[kept], kind="stable")]
    assert np.array_equal(tr.comparators[order], net.comparators)
    assert np.array_equal(np.sort(tr.layer[kept]), net.layer_of())
    assert (tr.layer[~tr.kept] == -1).all()


@pytest.mark.parametrize("n,k", [(16, 5), (40, 6), (200, 3)])
def test_min_ranks_are_sound(n, k):
    """After each cascade, the value on a wire with minimum rank r is beaten
    by at least r others, on random inputs."""
    tr = splitter_trace(n, k)
    x = np.random.default_rng(n).permutation(n * 50).reshape(50, n)[:, :n].astype(float)
    v = x.copy()
    done = 0
    for c in tr.cascades:
        for a, b in tr.comparators[done : c.stop].tolist():
            va, vb = v[:, a].copy(), v[:, b].copy()
            v[:, a], v[:, b] = np.maximum(va, vb), np.minimum(va, vb)
        done = c.stop
        rank = (v[:, None, :] > v[:, c.wires, None]).sum(axis=2)  # (trials, m): values above each wire's
        assert (rank >= c.min_ranks[None, :]).all()
