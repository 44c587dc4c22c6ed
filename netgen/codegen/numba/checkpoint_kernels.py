"""The kernels of the checkpointed lane sweeps (docs/operators.md,
section 3): ``W P`` (the back sweep: soft ranks, the top-k mask) and the
values alone, forward and backward, keeping O(n (segments + lanes))
numbers per row instead of the O(size) of :mod:`.lanes`' saved state; the
host side (the plan, which kernels run which rows) is :mod:`.checkpoint`.

Real code, copied into generated modules by source extraction (:data:`PARTS`,
then :data:`STATE` by name); it reads the rendered ``_swap`` and the
vector helpers of :mod:`.vector`. The module also gets their 1-row copies
(``_ck_vals_1``, ..., ``_CK_KERNELS_1``: the same source with ``_W``
renamed, :mod:`.narrow`), which run a call's last block when it holds
few rows.

The comparators are cut into ``nseg`` segments of ``seg`` comparators
(:func:`.checkpoint._ck_plan`: ``nseg`` ~ sqrt(size / n) balances the checkpoints
against one segment's records). Per block of ``_W`` rows:

* forward (``_ck_fwd``): the value sweep, keeping the wire values at the
  start of each segment (``nseg x n``); then, segment by segment from the
  last, the segment's ``p`` recomputed from its checkpoint (``seg`` floats;
  the last segment's kept from the first sweep) and the m lanes ``S`` swept
  back through it. Nothing but the input is kept for the backward.
* backward (``_ck_bwd``): the value sweep again beside the adjoint lanes G
  (dL/dZ pushed first to last, as :mod:`.lanes`), keeping both at each
  segment start (``nseg x n (1 + m)``); G at the end is dL/dS. Then segment
  by segment from the last (recorded in the first sweep): the values and G
  recomputed through the segment from their checkpoints, keeping each
  comparator's ``d`` and the lanes' differences ``G_a - G_c``
  (``seg (1 + m)`` floats), and
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
place of (3 + m) size. Per block of ``_W`` rows the backward holds
``(2 (nseg - 2) n + 2 seg) x _W`` floats and v, G, R, u of ``n x _W``
each: at n = 2^20 (nseg = 10, seg ~ 10 M) ~2.3 GiB for a 16-row block in
float32, ~160 MiB for a 1-row one (soft_rank's measured working memory:
2,540 and 188 MiB).
"""


from __future__ import annotations

import numba
import numpy as np

from .kernels import _jit
from .vector import (_W, _ftz_off, _ftz_on, _load_block, _store_block, _vadjp, _vmix, _vmixd, _vmixdp, _vmixp,
                     _vpush, _vpush1, _vpush1p, _vq)

__all__ = ["PARTS", "STATE"]

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("_PARALLEL", "_CACHE", "_swap")
_PARALLEL = True
_CACHE = False


def _swap(d, stp):  # pragma: no cover - rendered per relaxation and float type
    raise NotImplementedError


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


#: what a generated module copies from this file, in order
PARTS = (_ck_load_lanes, _ck_vals, _ck_vals_lanes, _ck_reverse, _ck_fwd_block, _ck_fwd_py, _ck_bwd_block, _ck_bwd_py)

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
STATE = ("_ck_fwd", "_ck_bwd", "_ck_fwd_s", "_ck_bwd_s", "_CK_KERNELS", "_CK_KERNELS_SERIAL")
