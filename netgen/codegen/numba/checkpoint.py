"""Checkpointed lane sweeps for large rows (docs/operators.md, section 3),
the host side: when a call's sweeps are checkpointed (:func:`_ck_plan`),
in how many segments, which rows the 16-row kernels run and which their
1-row copies (:func:`_ck_split`), and the numpy-level calls
(:func:`ck_numpy`, :func:`ck_backward_numpy`) that :mod:`.lanes` makes. The
kernels, and what they keep, are :mod:`.checkpoint_kernels`; their 1-row
copies are made from the same source (:mod:`.narrow`).

Real code, copied into generated modules by source extraction (:data:`PARTS`,
then :data:`STATE` by name, before :mod:`.lanes`, which calls it); it reads
the module's tables and the kernels.

At B = 1 a 16-row block is 1/16 full: the 1-row copies run such rows.
Measured (AMD EPYC, 2 shared cores, float32, soft_rank forced
checkpointed, fwd+bwd, medians of 3; ``benchmarks/ck_narrow.py``), 1-row
copies against one 16-row block, 1 thread: n = 65,536 one row 137 against
274 ms, two rows 273 against 260, three 410 against 258; n = 16,384 one
row 28 against 46 ms, two 55 against 42. With 2 threads (the copies run
rows in parallel, a block does not; noisy) n = 65,536 two rows 424
against 440 ms, three 278 against 393. ``_CK_NARROW = 2`` trades up to
~25% of time at two rows and one thread for an eighth of the memory (the
checkpointed sweeps run where memory is the limit).
"""

from __future__ import annotations

import numpy as np

from ..runtime.tables import _COMPS, _K, _N, _OFFSETS, _OUTPUTS, _SIZE, _WA, _WB
from .checkpoint_kernels import _CK_KERNELS, _CK_KERNELS_SERIAL
from .host import _Saved, _Threads
from .vector import _W

__all__ = ["PARTS", "STATE"]

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
#: (the 1-row copies of the kernels: written by netgen/codegen/numba/narrow.py)
READS = ("NETWORK", "_CK_KERNELS_1", "_CK_KERNELS_SERIAL_1")
NETWORK: dict = {"n": 2, "layers": [[[0, 1]]], "outputs": [0]}
# the 16-row kernels run any rows: the stand-ins of their 1-row copies
_CK_KERNELS_1 = _CK_KERNELS
_CK_KERNELS_SERIAL_1 = _CK_KERNELS_SERIAL


# a copied part (PARTS), defined here before the state that calls it
def live(n, comparators, layer_offsets, outputs):
    """Which comparators can reach an output wire (the back sweep's
    non-empty lane ranges of :func:`netgen.codegen.runtime.tables.plan`,
    ``clo < chi``), layer by layer from the last with O(n) state: no int64
    copy of the comparators and no per-comparator ranges (a sorter at
    n = 2^20 has 100.7 million comparators)."""
    comps = np.asarray(comparators).reshape(-1, 2)
    offs = np.asarray(layer_offsets, dtype=np.int64)
    needed = np.zeros(n, dtype=bool)
    needed[np.asarray(outputs, dtype=np.int64)] = True
    keep = np.empty(len(comps), dtype=bool)
    for l in range(len(offs) - 2, -1, -1):
        s, e = offs[l], offs[l + 1]
        a, b = comps[s:e, 0], comps[s:e, 1]
        k = needed[a] | needed[b]
        keep[s:e] = k
        needed[a] = needed[a] | k
        needed[b] = needed[b] | k
    return keep


# ------------------------------------------------------- copied by name (STATE)
# The comparators that reach an output wire (the others cannot change W P,
# P V or the values): the back-sweep plan's non-empty ranges, layer by layer.
_LIVE = live(_N, _COMPS, _OFFSETS, NETWORK["outputs"])
# Checkpoint a call's sweeps when the saved state of lanes.py (p, d, the
# lane differences, dL/dp: (3 + m) floats per comparator and row) would
# exceed _CK_BYTES; _CK_SEG (None: from _ck_plan) forces the segment
# length in comparators (the tests' tiny segments).
_CK_BYTES = 256 << 20
_CK_SEG = None
# A call's last block of at most _CK_NARROW rows runs in the 1-row copies of
# the kernels (narrow.py; a 16-row block of one row spends 16x the memory
# and about half its time on padding rows): measured in the docstring above.
_CK_NARROW = 2


def _ck_plan(B, m, itemsize):
    """(nseg, seg): the comparators in nseg segments of seg, or None where
    the saved-state sweeps of :mod:`.lanes` fit in ``_CK_BYTES``."""
    if _CK_SEG is None and B * _SIZE * (3 + m) * itemsize <= _CK_BYTES:
        return None
    if _CK_SEG is not None:
        seg = max(1, int(_CK_SEG))
    else:  # (1 + m) n per checkpoint against (1 + m) floats per comparator of a segment
        seg = -(-_SIZE // max(1, round((_SIZE / _N) ** 0.5)))
    seg = max(1, min(seg, _SIZE))
    return -(-_SIZE // seg), seg


def _ck_split(B):
    """The rows the 16-row kernels run, 0..bw-1: all but a last partial
    block of at most ``_CK_NARROW`` rows, which the 1-row copies run."""
    tail = B % _W
    return B - tail if tail <= _CK_NARROW else B


def _ck_calls(B, serial):
    """(kernels, lo, hi): the rows lo..hi-1 each set of kernels runs, the
    16-row kernels first, then their 1-row copies (:func:`_ck_split`);
    empty ranges left out."""
    bw = _ck_split(B)
    wide = _CK_KERNELS_SERIAL if serial else _CK_KERNELS
    one = _CK_KERNELS_SERIAL_1 if serial else _CK_KERNELS_1
    return [(kernels, lo, hi) for kernels, lo, hi in ((wide, 0, bw), (one, bw, B)) if hi > lo]


def _ck_rows(S, lo, hi):
    # rows lo..hi-1 of S, or S itself where one S serves every row
    return S if S.shape[0] == 1 else S[lo:hi]


def ck_numpy(x, S, stp, plan_, keep, adj, sgrad, threads):
    """:func:`.lanes.lanes_numpy` for a back sweep (or the values alone),
    checkpointed as ``plan_`` = (nseg, seg) says: values (B, k), the lanes
    (B, m, n) and what :func:`ck_backward_numpy` needs (x and S themselves;
    None unless ``keep``)."""
    B = x.shape[0]
    dt = x.dtype
    m = S.shape[1]
    nseg, seg = plan_
    stp = dt.type(stp)
    values = np.empty((B, _K), dtype=dt)
    out = np.empty((B, m, _N), dtype=dt)
    with _Threads(threads, B * _SIZE * (m + 2), ("lanes_ck", dt)) as th:
        for kernels, lo, hi in _ck_calls(B, th.serial):
            kernels[0](x[lo:hi], stp, _WA, _WB, _LIVE, _OUTPUTS, _ck_rows(S, lo, hi), nseg, seg, values[lo:hi],
                       out[lo:hi])
    if not keep:
        return values, out, None
    adj = bool(adj or sgrad)
    return values, out, _Saved(B, (), ck=True, x=x, S=S, nseg=nseg, seg=seg, stp=stp, adj=adj, sgrad=sgrad,
                               dtype=dt)


def ck_backward_numpy(saved, gv, G0, threads, dS=True):
    """:func:`.lanes.lanes_backward_numpy` of :func:`ck_numpy`'s sweep
    (``dS`` False: dL/dS is not asked for, an empty array instead)."""
    B = saved.B
    dt = saved.dtype
    m = G0.shape[1]
    use_gv = gv is not None
    if gv is None:
        gv = np.zeros((B, 0), dtype=dt)
    adj = saved.adj
    gS = np.empty((B if dS else 0, m, _N), dtype=dt)
    gx = np.empty((B, _N) if adj else (0, _N), dtype=dt)
    gsr = np.zeros(B if adj else 0, dtype=dt)
    with _Threads(threads, B * _SIZE * (2 * m + 3), ("lanes_ck_bwd", dt)) as th:
        for kernels, lo, hi in _ck_calls(B, th.serial):
            kernels[1](saved.x[lo:hi], saved.stp, _WA, _WB, _LIVE, _OUTPUTS, _ck_rows(saved.S, lo, hi), G0[lo:hi],
                       gv[lo:hi], use_gv, saved.nseg, saved.seg, adj, saved.sgrad, gS[lo:hi], gx[lo:hi], gsr[lo:hi])
    gs = float(gsr.sum(dtype=np.float64)) if saved.sgrad and adj else 0.0
    return gS, (gx if adj else None), gs


#: what a generated module copies from this file, in order
PARTS = (live, _ck_plan, _ck_split, _ck_calls, _ck_rows, ck_numpy, ck_backward_numpy)

#: module-level state a generated module copies by name, after :data:`PARTS`
STATE = ("_LIVE", "_CK_BYTES", "_CK_SEG", "_CK_NARROW")
