"""The lane sweeps of the generated numba module (docs/operators.md,
section 3): ``W P`` and ``P V`` without forming P, the soft values alone,
and their written backward.

Real code, copied into generated modules by source extraction (kernels and
host functions: :data:`PARTS`; the compiled kernels: :data:`STATE`, after
the parts); it reads the module's tables, the values kernel of
:mod:`.kernels`, the values' adjoint of :mod:`.engine` and the pool and
thread choice of :mod:`.host`.

Every kernel runs ``prange`` over blocks of ``_W`` batch rows (batch
innermost, like the other kernels), so a comparator's update of one lane
is one 16-row vector operation. Per block and lane the scratch is one
``(n, _W)`` slice: O(n) per lane and row, never B x k x n. A call of at
most ``_LANES_NARROW`` rows runs wholly in the 1-row copies of the kernels
(``_LANE_KERNELS_1``: :mod:`.narrow`), one row per block.

* ``_lanes_fwd``: m lanes ``S`` (in wire space: ``(1 or B, m, n)``) swept
  with the values' probabilities ``ps`` (from ``_fwd_vals``), from the last
  comparator to the first (``back``: ``R <- R M_l``, so ``W P`` when ``S``
  holds W on the output wires) or from the first to the last (``P V`` on
  the output wires when ``S`` holds V); with ``save``, each comparator's
  lane differences ``D`` (before the update) are kept for the backward.
* ``_lanes_bwd``: per block, the adjoint lanes pushed the other way
  through the comparators (``dL/dp_i += (G_a - G_c) . D_i`` over the
  lanes, then the same mixing: M_l is symmetric), giving dL/dS, then the
  values' adjoint swept back once with that dL/dp (``_vals_adjoint``:
  dL/dx and dL/ds; with ``use_gv`` also dL/dvalues). With no lane it is the
  backward of the values alone.

The comparators that reach no output wire (``_LIVE`` False) are skipped by
the lane sweeps: no lane is non-zero on their wires where it matters.
"""

from __future__ import annotations

import numba
import numpy as np

from ..runtime.tables import _K, _N, _OUTPUTS, _SIZE, _WA, _WB
from .checkpoint import _LIVE, _ck_plan, ck_backward_numpy, ck_numpy
from .engine import _vals_adjoint
from .host import _give, _Saved, _take, _Threads
from .kernels import _fwd_vals, _fwd_vals_s, _jit
from .vector import (_W, _ftz_off, _ftz_on, _load_block, _store_block, _vadjp, _vmix, _vmixd, _vmixdp, _vmixp,
                     _vpush, _vpush1, _vpush1p, _vq)

__all__ = ["PARTS", "STATE"]

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
#: (the 1-row copies of the lane kernels: written by netgen/codegen/numba/narrow.py)
READS = ("_PARALLEL", "_CACHE", "_swap", "_LANE_KERNELS_1", "_LANE_KERNELS_SERIAL_1")
_PARALLEL = True
_CACHE = False


def _swap(d, stp):  # pragma: no cover - rendered per relaxation and float type
    raise NotImplementedError


# ---------------------------------------------------------------- copied parts
def _lanes_vals_py(x, stp, ca, cb, outs, values, ps, ds, adj):
    # the values by the forward sweep keeping ps[blk, i, j] = p of row
    # blk * _W + j and, with adj, ds[blk, i, j] = d (without: one scratch
    # slot): the lean forward, whose backward recomputes dp from d
    # (_vals_adjoint_d); 2 floats per comparator and row against the 3 of
    # _fwd_vals (p, dp d, dp), which a steepness gradient still uses
    B, n = x.shape
    size = ca.shape[0]
    k = outs.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        mx = _ftz_on()
        v = np.zeros((n, _W), dtype=x.dtype)  # padding rows (j >= nb) stay 0
        _load_block(x, b0, nb, v)
        pj = ps[blk]
        for i in range(size):
            va = v[ca[i]]
            vc = v[cb[i]]
            pi = pj[i]
            di = ds[blk, i if adj else 0]
            for j in range(_W):
                d = va[j] - vc[j]
                p, dp, dps = _swap(d, stp)
                pi[j] = p
                di[j] = d
            _vmixp(va, vc, pi)
        for j in range(nb):
            for r in range(k):
                values[b0 + j, r] = v[outs[r], j]
        _ftz_off(mx)


@numba.njit(cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _vals_adjoint_d(gv, use_gv, b0, nb, ca, cb, outs, dsb, psb, stp, gpp, use_gpp, gx):
    # _vals_adjoint of the P engine for the lean forward: p saved (psb),
    # dp d and dp recomputed from the saved d (the same swap code: the same
    # numbers; p unused there, so its arctangent is compiled out);
    # dL/dp = gpp (use_gpp; else 0: the values alone); no dL/ds (that takes
    # _fwd_vals' saved state)
    size = ca.shape[0]
    k = outs.shape[0]
    n = gx.shape[0]
    g = np.zeros((n, _W), dtype=gx.dtype)
    s0 = np.empty(_W, dtype=gx.dtype)
    s1 = np.empty(_W, dtype=gx.dtype)
    zero = np.zeros(_W, dtype=gx.dtype)
    if use_gv:
        for j in range(nb):
            for r in range(k):
                g[outs[r], j] += gv[b0 + j, r]
    for i in range(size - 1, -1, -1):
        di = dsb[i]
        for j in range(_W):
            d = di[j]
            _p, dp, _dps = _swap(d, stp)
            s0[j] = dp * d
            s1[j] = dp
        _vadjp(g[ca[i]], g[cb[i]], psb[i], s0, s1, gpp[i] if use_gpp else zero)
    for w in range(n):
        for j in range(_W):
            gx[w, j] += g[w, j]


def _lanes_fwd_py(S, back, ca, cb, live, ps, D, save, out):
    # out[b, e, :] = the lanes S[b or 0, e, :] swept through the comparators
    # (back: last to first, else first to last) with p = ps[blk, i, j];
    # save: D[blk, i * m + e, j] = R[a * m + e, j] - R[c * m + e, j] before
    # comparator i. R[w * m + e, j]: lane e of wire w, row b0 + j.
    B, m, n = out.shape
    size = ca.shape[0]
    shared = S.shape[0] == 1
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        mx = _ftz_on()
        R = np.zeros((n * m, _W), dtype=out.dtype)  # padding rows (j >= nb) stay 0 unless shared
        for e in range(m):
            if shared:
                for w in range(n):
                    R[w * m + e, :] = S[0, e, w]
            else:
                _load_block(S[:, e], b0, nb, R[e::m])
        pj = ps[blk]
        Db = D[blk]
        qv = np.empty(_W, dtype=out.dtype)
        for t in range(size):
            i = size - 1 - t if back else t
            if not live[i]:
                continue
            a = ca[i] * m
            c = cb[i] * m
            if m == 1:  # one lane: q in a register
                if save:
                    _vmixdp(R[a], R[c], pj[i], Db[i])
                else:
                    _vmixp(R[a], R[c], pj[i])
                continue
            _vq(pj[i], qv)
            if save:
                for e in range(m):
                    _vmixd(R[a + e], R[c + e], qv, Db[i * m + e])
            else:
                for e in range(m):
                    _vmix(R[a + e], R[c + e], qv)
        for e in range(m):
            _store_block(R[e::m], b0, nb, out[:, e])
        _ftz_off(mx)


def _lanes_bwd_py(gv, use_gv, G0, back, ca, cb, outs, live, ps, sv, ss, sgrad, ds, stp, lean, D, adj, gpp, gS,
                  gx, gsr):
    # per block: the adjoint lanes G0 (B, m, n) pushed through the
    # comparators in the order opposite to _lanes_fwd, accumulating dL/dp
    # in gpp[blk] (scratch, with adj); gS = the pushed lanes (dL/dS per row). With adj,
    # the values' adjoint (dL/dvalues = gv with use_gv) then gives
    # gx (B, n) and gsr[b] = dL/ds of row b (with sgrad): from the lean
    # forward's d (lean) or from _fwd_vals' saved state.
    B, m, n = gS.shape
    size = ca.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        mx = _ftz_on()
        G = np.zeros((n * m, _W), dtype=gS.dtype)  # laid out like R of _lanes_fwd
        for e in range(m):
            _load_block(G0[:, e], b0, nb, G[e::m])
        gp = gpp[blk]  # dL/dp per comparator and row
        pj = ps[blk]
        Db = D[blk]
        qv = np.empty(_W, dtype=gS.dtype)
        if m == 0 and adj and not lean:
            gp[:] = 0.0
        if m > 0:
            for t in range(size):
                i = t if back else size - 1 - t
                if not live[i]:
                    if adj:
                        gp[i, :] = 0.0
                    continue
                a = ca[i] * m
                c = cb[i] * m
                if m == 1 and adj:  # one lane: q in a register
                    _vpush1p(G[a], G[c], pj[i], Db[i], gp[i])
                    continue
                _vq(pj[i], qv)
                if adj:  # gp[i] written by the first lane (no zeroing, no read), added to by the others
                    gi = gp[i]
                    _vpush1(G[a], G[c], qv, Db[i * m], gi)
                    for e in range(1, m):
                        _vpush(G[a + e], G[c + e], qv, Db[i * m + e], gi)
                else:
                    for e in range(m):
                        _vmix(G[a + e], G[c + e], qv)
            for e in range(m):
                _store_block(G[e::m], b0, nb, gS[:, e])
        if adj:
            gxb = np.zeros((n, _W), dtype=gS.dtype)
            gsb = np.zeros(_W, dtype=gS.dtype)
            if lean:
                _vals_adjoint_d(gv, use_gv, b0, nb, ca, cb, outs, ds[blk], pj, stp, gp, m > 0, gxb)
            else:
                _vals_adjoint(gv, use_gv, b0, nb, ca, cb, outs, pj, sv[blk], ss[blk], sgrad, gp, gxb, gsb)
            _store_block(gxb, b0, nb, gx)
            for j in range(nb):
                gsr[b0 + j] = gsb[j]
        _ftz_off(mx)


def _lane_set(narrow, serial):
    """The lane kernels a call runs: the 1-row copies (``narrow``) or the
    16-row kernels, each serial or parallel."""
    if narrow:
        return _LANE_KERNELS_SERIAL_1 if serial else _LANE_KERNELS_1
    return _LANE_KERNELS_SERIAL if serial else _LANE_KERNELS


def lanes_numpy(x, S, back, stp, keep, adj, sgrad, threads):
    """Values ``(B, k)`` and the lanes ``S`` (``(1 or B, m, n)``, wire space)
    swept (``back``: last comparator first) as ``(B, m, n)``, for a (B, n)
    C-contiguous ``x``; ``saved`` feeds :func:`lanes_backward_numpy` (None
    unless ``keep``: the probabilities, for dL/dS; ``adj``: what dL/dx
    needs too; ``sgrad``: and dL/ds)."""
    B = x.shape[0]
    dt = x.dtype
    m = S.shape[1]
    ckp = _ck_plan(B, m, dt.itemsize) if back or m == 0 else None
    if ckp is not None:  # large rows: checkpointed (netgen/codegen/numba/checkpoint.py)
        return ck_numpy(x, S, stp, ckp, keep, adj, sgrad, threads)
    stp = dt.type(stp)
    narrow = B <= _LANES_NARROW  # the whole call in the 1-row copies (narrow.py)
    w = 1 if narrow else _W
    nblk = (B + w - 1) // w
    adj = bool(adj or sgrad)
    keep = bool(keep or adj)
    values = np.empty((B, _K), dtype=dt)
    out = np.empty((B, m, _N), dtype=dt)
    ps = _take((nblk, _SIZE, w), dt)
    lean = not sgrad  # keep d alone (dL/ds takes _fwd_vals' dp d, dp, dps d, dps)
    # without adj / sgrad: one scratch slot per block, overwritten
    ds = _take((nblk, _SIZE, w), dt) if adj and lean else np.empty((nblk, 1, w), dtype=dt)
    sv = _take((nblk, _SIZE, 2, w), dt) if sgrad else np.empty((nblk, 1, 2, w), dtype=dt)
    ss = _take((nblk, _SIZE, 2, w), dt) if sgrad else np.empty((nblk, 1, 2, w), dtype=dt)
    keep_D = adj and m > 0
    D = _take((nblk, _SIZE * m, w), dt) if keep_D else np.empty((nblk, 0, w), dtype=dt)
    with _Threads(threads, B * _SIZE * (m + 1), ("lanes", dt)) as th:
        kern = _lane_set(narrow, th.serial)
        if lean:
            kern[0](x, stp, _WA, _WB, _OUTPUTS, values, ps, ds, adj)
        else:
            kern[3](x, stp, _WA, _WB, _OUTPUTS, values, ps, sv, ss, adj, sgrad)
        if m > 0:
            kern[1](S, back, _WA, _WB, _LIVE, ps, D, keep_D, out)
    if not keep:
        _give(ps)
        return values, out, None
    arrays = (ps,) + ((ds,) if adj and lean else ()) + ((sv, ss) if sgrad else ()) + ((D,) if keep_D else ())
    return values, out, _Saved(B, arrays, ck=False, dtype=dt, ps=ps, ds=ds, sv=sv, ss=ss, D=D, sgrad=sgrad, adj=adj,
                               lean=lean, stp=stp)


def lanes_backward_numpy(saved, gv, G0, back, threads, dS=True):
    """Adjoint of :func:`lanes_numpy`: from dL/dvalues ``gv`` ((B, k) or
    None) and dL/dlanes ``G0`` ((B, m, n)), returns dL/dS per row
    ``(B, m, n)``, dL/dx ``(B, n)`` (with ``adj``, else None) and dL/ds (a
    float; 0.0 unless the forward ran with ``sgrad``). ``dS`` False: dL/dS
    is not needed (the checkpointed sweep then skips it)."""
    if saved.ck:
        return ck_backward_numpy(saved, gv, G0, threads, dS)
    B = saved.B
    adj = saved.adj
    ps = saved.ps
    dt = ps.dtype
    m = G0.shape[1]
    use_gv = gv is not None
    if gv is None:
        gv = np.zeros((B, 0), dtype=dt)
    gS = np.empty((B, m, _N), dtype=dt)
    gx = np.empty((B, _N) if adj else (0, _N), dtype=dt)
    gsr = np.zeros(B if adj else 0, dtype=dt)
    nblk, _, w = ps.shape  # w: the forward's rows per block (1: it ran in the 1-row copies)
    need = adj and (m > 0 or not saved.lean)  # dL/dp from lanes, or zeros for _vals_adjoint
    gpp = _take((nblk, _SIZE, w), dt) if need else np.empty((nblk, 0, w), dtype=dt)
    with _Threads(threads, B * _SIZE * (m + 1), ("lanes_bwd", dt)) as th:
        _lane_set(w < _W, th.serial)[2](
            gv, use_gv, G0, back, _WA, _WB, _OUTPUTS, _LIVE, ps, saved.sv, saved.ss, saved.sgrad, saved.ds, saved.stp,
            saved.lean, saved.D, adj, gpp, gS, gx, gsr)
    if need:
        _give(gpp)
    gs = float(gsr.sum(dtype=np.float64)) if saved.sgrad and adj else 0.0
    return gS, (gx if adj else None), gs


#: what a generated module copies from this file, in order
PARTS = (_lanes_vals_py, _vals_adjoint_d, _lanes_fwd_py, _lanes_bwd_py, _lane_set, lanes_numpy, lanes_backward_numpy)

# ------------------------------------------------------- copied by name (STATE)
# Each lane kernel twice, like the kernels of netgen.codegen.numba.kernels:
# parallel and a serial copy (suffix _s) for small calls; with the values
# kernel that keeps what dL/ds needs (_fwd_vals).
_lanes_vals = _jit(_lanes_vals_py, _PARALLEL)
_lanes_fwd = _jit(_lanes_fwd_py, _PARALLEL)
_lanes_bwd = _jit(_lanes_bwd_py, _PARALLEL)
_lanes_vals_s = _jit(_lanes_vals_py, False, "_s")
_lanes_fwd_s = _jit(_lanes_fwd_py, False, "_s")
_lanes_bwd_s = _jit(_lanes_bwd_py, False, "_s")
_LANE_KERNELS = (_lanes_vals, _lanes_fwd, _lanes_bwd, _fwd_vals)
_LANE_KERNELS_SERIAL = (_lanes_vals_s, _lanes_fwd_s, _lanes_bwd_s, _fwd_vals_s)
# A call of at most _LANES_NARROW rows runs wholly in the 1-row copies of the
# lane kernels (narrow.py; one saved state per call). A 16-row block of one
# row costs a full block, but the 1-row code is scalar: the swap's
# arithmetic per comparator costs about half a 16-row vector update, so two
# rows gain nothing (soft_rank fwd+bwd, float32, 1 thread, ms, 16-row
# blocks / 1-row copies: n = 1,024 B = 1 0.89 / 0.60, B = 2 0.80 / 0.89;
# n = 16,384 B = 1 22.0 / 10.8, B = 2 22.3 / 21.0; benchmarks/lanes_narrow.py).
_LANES_NARROW = 1

# the 16-row kernels run any rows: the stand-ins of their 1-row copies
_LANE_KERNELS_1 = _LANE_KERNELS
_LANE_KERNELS_SERIAL_1 = _LANE_KERNELS_SERIAL

#: module-level state a generated module copies by name, after :data:`PARTS`
STATE = ("_lanes_vals", "_lanes_fwd", "_lanes_bwd", "_lanes_vals_s", "_lanes_fwd_s", "_lanes_bwd_s",
         "_LANE_KERNELS", "_LANE_KERNELS_SERIAL", "_LANES_NARROW")
