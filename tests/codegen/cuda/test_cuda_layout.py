"""Table layouts of the cuda kernels (netgen/codegen/cuda/layout.py).

The span table of the lane-group kernels (``spans``): per lane group and
layer, a [start, end) of comparator indices
that holds every comparator whose plan range meets the group's lanes. A
span that misses one would leave a lane un-updated (a wrong P on a GPU);
one that is the whole layer would cost the visits the table is there to
save. Checked here on random networks (any comparator order, both sweep
directions, any group size) and, for the sorters, against the exact spans
and the fraction of visits they leave.

Where the rows kernels keep D (``d_slots``): every planned (comparator,
lane) pair gets its own slot inside the row, in both layouts; in the
windowed one a warp's 32 comparators keep each lane as 32 consecutive
floats (one 128-byte line per store), at about the CSR's size for the
(5, 10450) splitter network."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from netgen.codegen.cuda.layout import WARP, d_slots, d_stride, spans
from netgen.codegen.runtime.tables import plan
from netgen.construct import build


def _exact(clo, chi, offs, m, G):
    """The smallest spans, by brute force: (groups, layers, 2), None where
    no comparator of the layer meets the group."""
    groups = -(-m // G)
    out = []
    for g in range(groups):
        g0, ge = g * G, min(m, g * G + G)
        live = np.minimum(chi, ge) > np.maximum(clo, g0)
        row = []
        for s, e in zip(offs[:-1], offs[1:]):
            idx = np.nonzero(live[s:e])[0] + s
            row.append((int(idx[0]), int(idx[-1]) + 1) if len(idx) else None)
        out.append(row)
    return out


@st.composite
def networks(draw):
    """A random network: layers of disjoint wire pairs in a random order
    (so plan ranges need not grow with the comparator index), random
    outputs."""
    n = draw(st.integers(2, 20))
    layers = []
    for _ in range(draw(st.integers(0, 8))):
        wires = draw(st.permutations(range(n)))
        pairs = draw(st.integers(0, n // 2))
        layers.append([(max(wires[2 * j], wires[2 * j + 1]), min(wires[2 * j], wires[2 * j + 1]))
                       for j in range(pairs)])
    k = draw(st.integers(1, n))
    outputs = draw(st.permutations(range(n)))[:k]
    return n, layers, outputs


@settings(max_examples=300, deadline=None)
@given(networks(), st.sampled_from(["back", "forward"]), st.integers(1, 21))
def test_spans_hold_every_comparator_that_meets_a_group(net, direction, G):
    n, layers, outputs = net
    comps = [c for layer in layers for c in layer]
    offs = np.concatenate([[0], np.cumsum([len(layer) for layer in layers])]).astype(np.int64)
    clo, chi, _ = plan(n, comps, offs, outputs, direction=direction)
    m = n if direction == "forward" else len(outputs)
    got = spans(clo, chi, offs, m, G)
    assert got.shape == (-(-m // G), len(layers), 2) and got.dtype == np.int64
    for g, row in enumerate(_exact(np.asarray(clo), np.asarray(chi), offs, m, G)):
        for l, want in enumerate(row):
            start, end = got[g, l]
            assert offs[l] <= start <= end <= offs[l + 1], (g, l, got[g, l])
            if want is not None:
                assert start <= want[0] and want[1] <= end, (g, l, got[g, l], want)


def test_sorter_spans_are_exact_and_skip_most_visits():
    # odd-even n = 1024 in groups of 32 input columns (the H100's G): a block visits 41% of the comparators
    for n, G, most in ((64, 8, 0.58), (1024, 32, 0.41)):
        net = build("oddeven", n, n)
        offs = np.asarray(net.layer_offsets)
        clo, chi, _ = plan(n, net.comparators, offs, list(net.outputs), direction="forward")
        got = spans(clo, chi, offs, n, G)
        exact = _exact(np.asarray(clo), np.asarray(chi), offs, n, G)
        for g, row in enumerate(exact):
            for l, want in enumerate(row):
                start, end = got[g, l]
                assert (start, end) == want if want is not None else start == end, (n, g, l)
        visits = (got[..., 1] - got[..., 0]).sum() / (net.size * got.shape[0])
        assert 0.2 < visits <= most, (n, visits)


def _planned(clo, chi):
    """(comparator, lane) of every planned pair."""
    return [(i, l) for i in range(len(clo)) for l in range(int(clo[i]), int(chi[i]))]


@settings(max_examples=200, deadline=None)
@given(networks(), st.sampled_from(["back", "forward"]), st.sampled_from([1, WARP]))
def test_d_slots_give_every_planned_pair_its_own_slot(net, direction, stride):
    n, layers, outputs = net
    comps = [c for layer in layers for c in layer]
    offs = np.concatenate([[0], np.cumsum([len(layer) for layer in layers])]).astype(np.int64)
    clo, chi, doff = plan(n, comps, offs, outputs, direction=direction)
    dix = d_slots(clo, chi, offs, stride)
    assert dix.shape == (len(comps) + 1,) and dix.dtype == np.int64
    slots = [int(dix[i]) + l * stride for i, l in _planned(clo, chi)]
    assert len(set(slots)) == len(slots) == int(doff[-1])  # one slot per pair, none shared
    assert all(0 <= s < dix[-1] for s in slots)
    if stride == 1:  # the CSR: the plan's nnz floats, padded so that no dix is negative
        assert dix[-1] <= int(doff[-1]) + max([int(c) for c in clo] + [0])
    else:  # a warp's comparators (from the layer's start) keep a lane as consecutive floats
        for s, e in zip(offs[:-1], offs[1:]):
            for c0 in range(s, e, WARP):
                for l in range(n):
                    got = [int(dix[i]) + l * stride - (i - c0) for i in range(c0, min(e, c0 + WARP))
                           if clo[i] <= l < chi[i]]
                    assert len(set(got)) <= 1, (c0, l, got)


def test_the_top5_layer_keeps_d_in_windows_at_the_csr_size():
    from netgen.compiler import compile_network

    net = compile_network(build("splitter", 10450, 5)).network
    offs = np.asarray(net.layer_offsets)
    clo, chi, doff = plan(net.n, net.comparators, offs, list(net.outputs))
    assert d_stride(clo, chi, offs) == WARP
    assert d_slots(clo, chi, offs, WARP)[-1] <= 1.03 * int(doff[-1])
    # a sorter's chunks mix small and large lane ranges: the CSR there
    sorter = build("oddeven", 64, 64)
    c2, h2, _ = plan(64, sorter.comparators, sorter.layer_offsets, list(sorter.outputs), direction="forward")
    assert d_stride(c2, h2, sorter.layer_offsets) == 1
