"""Table layouts of the ``cuda`` kernels, derived from the P sweep's plan
(:func:`netgen.codegen.runtime.tables.plan`: each comparator's lanes
``clo[i] <= l < chi[i]``): where a lane-group block's comparators are
(:func:`spans`) and where the rows kernels keep the sweep's differences D
(:func:`d_slots`; :func:`d_stride` picks its layout at emit time). The
table functions are real code, copied into generated cuda modules by
source extraction (:data:`PARTS`); docs/cuda-round9.md.
"""

from __future__ import annotations

import numpy as np

__all__ = ["WARP", "spans", "d_slots", "d_stride"]

#: threads of a warp: the rows kernels' threads take a layer's comparators
#: in chunks of WARP from the layer's start (netgen.codegen.cuda.sweeps.layers)
WARP = 32
#: D's windowed layout is kept where it costs at most this many times nnz
WINDOW_MAX = 1.1


def spans(clo, chi, layer_offsets, m, G):
    """Per lane group and layer, the comparators that can touch the group:
    (ceil(m / G), layers, 2) int64 [start, end) indices, a superset of the
    comparators of the layer whose plan range ``clo[i] <= l < chi[i]``
    meets the group's lanes ``g G <= l < (g + 1) G`` (an empty span is
    ``start = end``). The lane-group kernels visit only these: a sorter's
    early layers touch a group of 32 input columns with a few of their
    comparators (odd-even, n = 1024: 41% of the visits).

    The group range of comparator i is [glo, ghi] = [clo // G, (chi - 1)
    // G]. The first comparator covering group g is at least the first
    with ghi >= g and at least the first with glo <= g (both are prefix or
    suffix minima, O(layer + groups)); likewise the last. Exact where the
    ranges grow with the index within a layer (the sorters, the splitter
    networks), a superset always."""
    clo = np.asarray(clo, dtype=np.int64)
    chi = np.asarray(chi, dtype=np.int64)
    offs = np.asarray(layer_offsets, dtype=np.int64)
    groups = -(-int(m) // int(G))
    out = np.empty((groups, len(offs) - 1, 2), dtype=np.int64)
    big = np.iinfo(np.int64).max
    for l in range(len(offs) - 1):
        s, e = int(offs[l]), int(offs[l + 1])
        live = chi[s:e] > clo[s:e]
        i = np.arange(s, e, dtype=np.int64)[live]
        glo = clo[s:e][live] // G
        ghi = np.minimum((chi[s:e][live] - 1) // G, groups - 1)
        first_hi, first_lo = np.full(groups, big), np.full(groups, big)
        last_hi, last_lo = np.full(groups, -1), np.full(groups, -1)
        np.minimum.at(first_hi, ghi, i)
        np.minimum.at(first_lo, glo, i)
        np.maximum.at(last_hi, ghi, i)
        np.maximum.at(last_lo, glo, i)
        start = np.maximum(np.minimum.accumulate(first_hi[::-1])[::-1], np.minimum.accumulate(first_lo))
        end = np.minimum(np.maximum.accumulate(last_hi[::-1])[::-1], np.maximum.accumulate(last_lo)) + 1
        empty = end <= start
        out[:, l, 0] = np.where(empty, s, start)
        out[:, l, 1] = np.where(empty, s, end)
    return out


def d_slots(clo, chi, layer_offsets, stride):
    """Where the rows kernels keep D, the sweep's difference of comparator
    i on lane l (``clo[i] <= l < chi[i]``): at ``dix[i] + l stride`` in a
    row of ``dix[size]`` floats; returns ``dix`` ((size + 1,) int64).

    ``stride`` 1: a comparator's lanes side by side (the plan's CSR, nnz
    floats, plus ``max(clo)`` so that no ``dix`` is negative). ``stride``
    WARP: per chunk of WARP comparators of a layer (from the layer's start,
    as the kernels' threads take them) a window of its lanes ``min clo ..
    max chi``, lane-major, WARP floats per lane: the chunk's comparators
    write (and the backward reads) lane l as WARP consecutive floats, one
    128-byte line per instruction, where the CSR spread a warp's store over
    ~4 lines (issue 29: 60,400 L2 requests per row at (5, 10450), 4.2x
    D's size). It costs the windows' empty entries (1.02 nnz at (5, 10450)).
    Either way distinct planned (i, l) get distinct slots inside the row
    (tests/codegen/cuda/test_cuda_layout.py)."""
    clo = np.asarray(clo, dtype=np.int64)
    chi = np.asarray(chi, dtype=np.int64)
    offs = np.asarray(layer_offsets, dtype=np.int64)
    size = len(clo)
    live = chi > clo
    dix = np.empty(size + 1, dtype=np.int64)
    if size == 0:
        dix[0] = 0
        return dix
    pad = int(clo[live].max()) * stride if live.any() else 0
    if stride == 1:
        cnt = np.where(live, chi - clo, 0)
        start = pad + np.cumsum(cnt) - cnt
        dix[:size] = np.where(live, start - clo, pad)
        dix[size] = pad + int(cnt.sum())
        return dix
    starts = np.concatenate([np.arange(s, e, stride, dtype=np.int64) for s, e in zip(offs[:-1], offs[1:]) if e > s])
    big = np.iinfo(np.int64).max
    low = np.minimum.reduceat(np.where(live, clo, big), starts)
    high = np.maximum.reduceat(np.where(live, chi, 0), starts)
    low = np.where(high > 0, low, 0)
    region = np.maximum(high - low, 0) * stride
    base = pad + np.cumsum(region) - region
    chunk = np.searchsorted(starts, np.arange(size), side="right") - 1
    dix[:size] = np.where(live, base[chunk] + (np.arange(size) - starts[chunk]) - low[chunk] * stride, pad)
    dix[size] = pad + int(region.sum())
    return dix


def d_stride(clo, chi, layer_offsets):
    """The rows kernels' D layout for this plan: WARP (windows) where they
    cost at most WINDOW_MAX x the CSR's floats, else 1 (sorters' early
    chunks mix small and large lane ranges: 2.5x at odd-even 64)."""
    csr = d_slots(clo, chi, layer_offsets, 1)[-1]
    return WARP if d_slots(clo, chi, layer_offsets, WARP)[-1] <= WINDOW_MAX * max(1, csr) else 1


#: what a generated module copies (its launcher computes the tables; the
#: emitter picks the stride, written as the module's D_STRIDE)
PARTS = (spans, d_slots)
STATE = ()
