"""Checkpointed lane sweeps for large rows (docs/operators.md, section 3):
``W P`` (the back sweep: soft ranks, the top-k mask) and the values alone,
forward and backward, keeping O(n (segments + lanes)) numbers per row
instead of the O(size) of :mod:`.lanes`' saved state.

Real code, copied into generated modules by source extraction (:data:`PARTS`,
then :data:`STATE` by name, before :mod:`.lanes`, which calls it); it reads
the module's tables, the rendered ``_swap`` and the 16-row vector helpers
of :mod:`.vector`.

The comparators are cut into ``nseg`` segments of ``seg`` comparators
(:func:`_ck_plan`: ``nseg`` ~ sqrt(size / n) balances the checkpoints
against one segment's records). Per block of ``_W`` rows:

* forward (``_ck_fwd``): the value sweep, keeping the wire values at the
  start of each segment (``nseg x n``); then, segment by segment from the
  last, the segment's ``p`` recomputed from its checkpoint (``seg`` floats;
  the last segment's kept from the first sweep) and the m lanes ``S`` swept
  back through it. Nothing but the input is kept for the backward.
* backward (``_ck_bwd``): the value sweep again beside the adjoint lanes G
  (dL/dZ pushed first to last, as :mod:`.lanes`), keeping both at each
  segment start (``nseg x n (1 + m)``); G at the end is dL/dS. Then segment
  by segment from the last (recorded in the first sweep): the values and G recomputed through the
  segment from their checkpoints, keeping each comparator's ``d`` and the
  lanes' differences ``G_a - G_c`` (``seg (1 + m)`` floats), and
  the lanes ``R`` (from S, swept back as in the forward) and the values'
  adjoint u pushed back through it: ``dL/dp_i = sum_lanes (G_a - G_c)
  (R_a - R_c)`` (:mod:`.lanes`' formula; ``R_a - R_c`` is its saved
  ``D``), p, dp/dd and dp/ds recomputed from ``d`` by the same swap code.

Each helper calls the inlined ``_swap`` once (numba's SSA pass warned on
several copies in one function), and the ``prange`` kernels are loops of
calls of the block functions.

Cost: the value sweep about 2x in the forward and 2x in the backward
(instead of 1x and 0x) and one more adjoint-lane sweep: about twice the
time of the saved-state sweeps, for O(n sqrt(size / n)) floats per row in
place of (3 + m) size.
"""

from __future__ import annotations

import numba
import numpy as np

from ..runtime.tables import _COMPS, _K, _N, _OFFSETS, _OUTPUTS, _SIZE, _WA, _WB
from .host import _Saved, _Threads
from .kernels import _jit
from .vector import (_W, _ftz_off, _ftz_on, _load_block, _store_block, _vadjp, _vmix, _vmixd, _vmixdp, _vmixp,
                     _vpush, _vpush1, _vpush1p, _vq)

__all__ = ["PARTS", "STATE"]

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
#: (the 1-row copies of the kernels: written by netgen/codegen/numba/narrow.py;
#: stand-ins at the end of this file)
READS = ("NETWORK", "_PARALLEL", "_CACHE", "_swap", "_CK_KERNELS_1", "_CK_KERNELS_SERIAL_1")
NETWORK: dict = {"n": 2, "layers": [[[0, 1]]], "outputs": [0]}
_PARALLEL = True
_CACHE = False


def _swap(d, stp):  # pragma: no cover - rendered per relaxation and float type
    raise NotImplementedError


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
# and most of its time on padding rows). Measured (soft_rank n = 65,536,
# fwd+bwd, float32, 1 thread): see _ck_split.
_CK_NARROW = 2


# ---------------------------------------------------------------- copied parts
@numba.njit(cache=_CACHE)
def _ck_load_lanes(S, b0, nb, R):
    # R[w * m + e, j] = S[b0 + j or 0, e, w] (one S for every row when S.shape[0] == 1)
    m = S.shape[1]
    n = R.shape[0] // max(m, 1)
    for e in range(m):
        if S.shape[0] == 1:
            for w in range(n):
                R[w * m + e, :] = S[0, e, w]
        else:
            _load_block(S[:, e], b0, nb, R[e::m])


@numba.njit(cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _ck_vals(v, ca, cb, i0, i1, stp, P, keep):
    # the block's values v through comparators i0..i1-1; with keep,
    # P[i - i0] = p (else P[0] is scratch). Each helper calls _swap once:
    # numba's SSA pass warns on several inlined copies in one function.
    for i in range(i0, i1):
        va = v[ca[i]]
        vc = v[cb[i]]
        pi = P[i - i0 if keep else 0]
        for j in range(_W):
            p, _dp, _dps = _swap(va[j] - vc[j], stp)
            pi[j] = p
        _vmixp(va, vc, pi)


@numba.njit(cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _ck_vals_lanes(v, G, ca, cb, live, i0, i1, stp, m, rd, rg, record):
    # the values v and the adjoint lanes G (G[w * m + e]) through
    # comparators i0..i1-1, first to last; with record, comparator i's d
    # and lane differences G_a - G_c (before its update) in rd[i - i0] and
    # rg[(i - i0) * m + e]
    qv = np.empty(_W, dtype=v.dtype)
    pv = np.empty(_W, dtype=v.dtype)
    for i in range(i0, i1):
        va = v[ca[i]]
        vc = v[cb[i]]
        t = i - i0
        di = rd[t if record else 0]
        for j in range(_W):
            d = va[j] - vc[j]
            p, _dp, _dps = _swap(d, stp)
            pv[j] = p
            di[j] = d
        if live[i] and m == 1:  # one lane: q in a register
            if record:
                _vmixdp(G[ca[i]], G[cb[i]], pv, rg[t])
            else:
                _vmixp(G[ca[i]], G[cb[i]], pv)
        elif live[i]:
            _vq(pv, qv)
            a = ca[i] * m
            c = cb[i] * m
            if record:
                for e in range(m):
                    _vmixd(G[a + e], G[c + e], qv, rg[t * m + e])
            else:
                for e in range(m):
                    _vmix(G[a + e], G[c + e], qv)
        _vmixp(va, vc, pv)


@numba.njit(cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _ck_reverse(R, u, ca, cb, live, i0, i1, stp, m, rd, rg, sgrad, gs):
    # comparators i1-1..i0 from the records of _ck_vals_lanes: dL/dp_i =
    # sum_lanes (G_a - G_c) (R_a - R_c), the lanes R swept back, then the
    # values' adjoint u (lanes.py's _vals_adjoint_d: p, dp and dp/ds from
    # d; recording p too made the reverse pass no faster, measured at
    # n = 65,536), adding dL/ds into gs with sgrad
    dt = u.dtype
    qv = np.empty(_W, dtype=dt)
    pv = np.empty(_W, dtype=dt)
    s0 = np.empty(_W, dtype=dt)
    s1 = np.empty(_W, dtype=dt)
    s2 = np.empty(_W, dtype=dt)
    gp = np.zeros(_W, dtype=dt)
    for i in range(i1 - 1, i0 - 1, -1):
        t = i - i0
        di = rd[t]
        for j in range(_W):
            d = di[j]
            p, dp, dps = _swap(d, stp)
            pv[j] = p
            s0[j] = dp * d
            s1[j] = dp
            s2[j] = dps
        if m == 1 and live[i]:  # one lane: q in a register
            _vpush1p(R[ca[i]], R[cb[i]], pv, rg[t], gp)
        elif m > 0 and live[i]:
            _vq(pv, qv)
            a = ca[i] * m
            c = cb[i] * m
            _vpush1(R[a], R[c], qv, rg[t * m], gp)
            for e in range(1, m):
                _vpush(R[a + e], R[c + e], qv, rg[t * m + e], gp)
        else:
            gp[:] = 0.0
        ua = u[ca[i]]
        uc = u[cb[i]]
        if sgrad:
            for j in range(_W):
                gs[j] += (ua[j] - uc[j]) * (s2[j] * di[j]) + gp[j] * s2[j]
        _vadjp(ua, uc, pv, s0, s1, gp)


@numba.njit(cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _ck_fwd_block(x, stp, ca, cb, live, outs, S, nseg, seg, values, out, b0, nb):
    # _ck_fwd for the block of rows b0..b0+nb-1 (a function of its own: the
    # prange kernels stay a loop of calls)
    n = x.shape[1]
    size = ca.shape[0]
    k = outs.shape[0]
    m = out.shape[1]
    v = np.zeros((n, _W), dtype=x.dtype)  # padding rows (j >= nb) stay 0
    _load_block(x, b0, nb, v)
    # the checkpoints (segment 0 starts from x itself) and a segment's p,
    # in one allocation (see _ck_bwd_block)
    nck = nseg - 1 if m > 0 else 0
    ps = seg if m > 0 else 1
    buf = np.empty((nck * n + ps, _W), dtype=x.dtype)
    ck = buf[:nck * n].reshape((nck, n, _W))
    pseg = buf[nck * n:]
    last = nseg - 1
    for s in range(nseg):
        i0 = s * seg
        if m > 0 and s > 0:
            ck[s - 1] = v
        _ck_vals(v, ca, cb, i0, min(size, i0 + seg), stp, pseg, m > 0 and s == last)  # the last p kept
    for j in range(nb):
        for r in range(k):
            values[b0 + j, r] = v[outs[r], j]
    if m > 0:
        qv = np.empty(_W, dtype=x.dtype)
        R = np.zeros((n * m, _W), dtype=x.dtype)
        _ck_load_lanes(S, b0, nb, R)
        for s in range(last, -1, -1):
            i0 = s * seg
            i1 = min(size, i0 + seg)
            if s < last:
                if s > 0:
                    v[:, :] = ck[s - 1]
                else:
                    v[:, :] = 0.0
                    _load_block(x, b0, nb, v)
                _ck_vals(v, ca, cb, i0, i1, stp, pseg, True)
            for i in range(i1 - 1, i0 - 1, -1):
                if not live[i]:
                    continue
                if m == 1:
                    _vmixp(R[ca[i]], R[cb[i]], pseg[i - i0])
                    continue
                a = ca[i] * m
                c = cb[i] * m
                _vq(pseg[i - i0], qv)
                for e in range(m):
                    _vmix(R[a + e], R[c + e], qv)
        for e in range(m):
            _store_block(R[e::m], b0, nb, out[:, e])


def _ck_fwd_py(x, stp, ca, cb, live, outs, S, nseg, seg, values, out):
    # values (B, k) and out (B, m, n): the lanes S swept back (last
    # comparator first) with p recomputed segment by segment from the
    # block's values kept at each segment start
    B = x.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        mx = _ftz_on()
        _ck_fwd_block(x, stp, ca, cb, live, outs, S, nseg, seg, values, out, b0, min(_W, B - b0))
        _ftz_off(mx)


@numba.njit(cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _ck_bwd_block(x, stp, ca, cb, live, outs, S, G0, gv, use_gv, nseg, seg, adj, sgrad, gS, gx, gsr, b0, nb):
    # _ck_bwd for the block of rows b0..b0+nb-1
    n = x.shape[1]
    size = ca.shape[0]
    k = outs.shape[0]
    m = G0.shape[1]
    dt = x.dtype
    v = np.zeros((n, _W), dtype=dt)
    _load_block(x, b0, nb, v)
    G = np.zeros((n * m, _W), dtype=dt)  # laid out like R
    for e in range(m):
        _load_block(G0[:, e], b0, nb, G[e::m])
    # the checkpoints of segments 1..nseg-2 (segment 0 starts from x and G0,
    # the last one is recorded in the first sweep), with the records of one
    # segment, in one allocation: the C allocator maps a block this large
    # and unmaps it when freed, while separate blocks of 20-30 MiB came
    # from its heap after an earlier free raised its mapping threshold, and
    # the forward's freed blocks stayed in the process (176 against 162 MiB
    # at n = 65,536, B = 16)
    nck = max(nseg - 2, 0) if adj else 0
    nr = seg if adj else 0
    buf = np.empty((nck * n * (1 + m) + nr * (1 + m), _W), dtype=dt)
    ckv = buf[:nck * n].reshape((nck, n, _W))
    ckg = buf[nck * n:nck * n * (1 + m)].reshape((nck, n * m, _W))
    o = nck * n * (1 + m)
    scratch = np.empty((1, _W), dtype=dt)
    rd = buf[o:o + nr]  # a segment's d and lane differences G_a - G_c
    rg = buf[o + nr:o + nr * (1 + m)]
    # the values and G, first comparator to last, checkpointed (the last
    # segment recorded on the way: the reverse pass starts there)
    last = nseg - 1
    for s in range(nseg):
        i0 = s * seg
        i1 = min(size, i0 + seg)
        if adj and s == last:
            _ck_vals_lanes(v, G, ca, cb, live, i0, i1, stp, m, rd, rg, True)
            continue
        if adj and s > 0:
            ckv[s - 1] = v
            ckg[s - 1] = G
        _ck_vals_lanes(v, G, ca, cb, live, i0, i1, stp, m, scratch, scratch, False)
    if gS.shape[0] > 0:  # dL/dS asked for
        for e in range(m):
            _store_block(G[e::m], b0, nb, gS[:, e])
    if not adj:
        return
    R = np.zeros((n * m, _W), dtype=dt)
    _ck_load_lanes(S, b0, nb, R)
    u = np.zeros((n, _W), dtype=dt)
    if use_gv:
        for j in range(nb):
            for r in range(k):
                u[outs[r], j] += gv[b0 + j, r]
    gs = np.zeros(_W, dtype=dt)
    for s in range(last, -1, -1):
        i0 = s * seg
        i1 = min(size, i0 + seg)
        if s < last:
            if s > 0:
                v[:, :] = ckv[s - 1]
                G[:, :] = ckg[s - 1]
            else:
                v[:, :] = 0.0
                _load_block(x, b0, nb, v)
                G[:, :] = 0.0
                for e in range(m):
                    _load_block(G0[:, e], b0, nb, G[e::m])
            _ck_vals_lanes(v, G, ca, cb, live, i0, i1, stp, m, rd, rg, True)
        _ck_reverse(R, u, ca, cb, live, i0, i1, stp, m, rd, rg, sgrad, gs)
    _store_block(u, b0, nb, gx)
    for j in range(nb):
        gsr[b0 + j] = gs[j]


def _ck_bwd_py(x, stp, ca, cb, live, outs, S, G0, gv, use_gv, nseg, seg, adj, sgrad, gS, gx, gsr):
    # the backward of _ck_fwd: gS (B, m, n) = dL/dS per row; with adj gx
    # (B, n) = dL/dx and, with sgrad, gsr[b] = dL/ds of row b
    B = x.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        mx = _ftz_on()
        _ck_bwd_block(x, stp, ca, cb, live, outs, S, G0, gv, use_gv, nseg, seg, adj, sgrad, gS, gx, gsr, b0,
                      min(_W, B - b0))
        _ftz_off(mx)


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
    bw = _ck_split(B)
    with _Threads(threads, B * _SIZE * (m + 2), ("lanes_ck", dt)) as th:
        for kernels, lo, hi in (((_CK_KERNELS_SERIAL if th.serial else _CK_KERNELS), 0, bw),
                                ((_CK_KERNELS_SERIAL_1 if th.serial else _CK_KERNELS_1), bw, B)):
            if hi > lo:
                kernels[0](x[lo:hi], stp, _WA, _WB, _LIVE, _OUTPUTS, _ck_rows(S, lo, hi), nseg, seg,
                           values[lo:hi], out[lo:hi])
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
    bw = _ck_split(B)
    with _Threads(threads, B * _SIZE * (2 * m + 3), ("lanes_ck_bwd", dt)) as th:
        for kernels, lo, hi in (((_CK_KERNELS_SERIAL if th.serial else _CK_KERNELS), 0, bw),
                                ((_CK_KERNELS_SERIAL_1 if th.serial else _CK_KERNELS_1), bw, B)):
            if hi > lo:
                kernels[1](saved.x[lo:hi], saved.stp, _WA, _WB, _LIVE, _OUTPUTS, _ck_rows(saved.S, lo, hi),
                           G0[lo:hi], gv[lo:hi], use_gv, saved.nseg, saved.seg, adj, saved.sgrad,
                           gS[lo:hi], gx[lo:hi], gsr[lo:hi])
    gs = float(gsr.sum(dtype=np.float64)) if saved.sgrad and adj else 0.0
    return gS, (gx if adj else None), gs


#: what a generated module copies from this file, in order
PARTS = (live, _ck_load_lanes, _ck_vals, _ck_vals_lanes, _ck_reverse, _ck_fwd_block, _ck_fwd_py, _ck_bwd_block,
         _ck_bwd_py, _ck_plan, _ck_split, _ck_rows, ck_numpy, ck_backward_numpy)

# ------------------------------------------------------- copied by name (STATE)
# Each kernel twice (parallel, and a serial copy for small calls), as in
# netgen.codegen.numba.kernels.
_ck_fwd = _jit(_ck_fwd_py, _PARALLEL)
_ck_bwd = _jit(_ck_bwd_py, _PARALLEL)
_ck_fwd_s = _jit(_ck_fwd_py, False, "_s")
_ck_bwd_s = _jit(_ck_bwd_py, False, "_s")
_CK_KERNELS = (_ck_fwd, _ck_bwd)
_CK_KERNELS_SERIAL = (_ck_fwd_s, _ck_bwd_s)

#: module-level state a generated module copies by name, after :data:`PARTS`
STATE = ("_LIVE", "_CK_BYTES", "_CK_SEG", "_CK_NARROW", "_ck_fwd", "_ck_bwd", "_ck_fwd_s", "_ck_bwd_s", "_CK_KERNELS",
         "_CK_KERNELS_SERIAL")

# ---- stand-ins (not copied): the emitter writes the 1-row copies (narrow.py);
# the 16-row kernels run any rows, so this file runs on its own
_CK_KERNELS_1 = _CK_KERNELS
_CK_KERNELS_SERIAL_1 = _CK_KERNELS_SERIAL
