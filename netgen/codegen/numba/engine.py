"""The P engine of the generated numba module: the kernels that compute P
and its adjoint, as real Python functions (docs/targets-numba.md, "numba: the P
engine"). Copied into generated modules by source extraction
(:data:`PARTS`); :mod:`.numba_kernels` compiles ``_fwd_P_py`` and
``_bwd_rows_py`` with the other kernels.

P is computed by one sweep over *lanes*, in one of two directions chosen at
build time (``fwd``, the module's ``_DIRECTION``): back over the k output
ranks (the back-sweep ``R <- R M_l``, last comparator first; P's rows) or
forward over the n input columns (``A <- M_l A`` from the identity, first
comparator first; P's columns: fewer (comparator, lane) pairs for sorters).
Lanes are processed in groups ``[g0, g1)`` of ``grp``: the scratch
``R[w, e, j]`` holds only the group's lanes (n x grp x 16 floats) and the
kernels run ``prange`` over (row block, lane group) pairs. Each
comparator's range of lanes (the plan's ``clo..chi``) is clipped to the
group.

* ``_fwd_P``: P by the lane sweep per (block, group), saving the
  differences ``D = R[e, a] - R[e, c]`` in mode ``save``;
* ``_bwd_rows``: per (block, group): dL/dP of the group pushed through the
  comparators the other way gives the group's share of dL/dp; mode
  ``recompute`` first re-runs the group's sweep into a thread-local
  ``Dg``. Then the values' adjoint (``_vals_adjoint``) swept back once with
  that share adds dL/dp * dp/dd; the sweep is linear, so the shares'
  results add up, per worker, in ``gxt`` (``gst`` for dL/ds).
"""

from __future__ import annotations

import numba
import numpy as np

from .vector import (
    _W,
    _ftz_off,
    _ftz_on,
    _load_block,
    _load_cols,
    _store_block,
    _store_cols,
    _vadj,
    _vmix,
    _vmixd,
    _vpush,
    _vq,
)

__all__ = ["PARTS"]

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("_CACHE",)
_CACHE = False


# ---------------------------------------------------------------- copied parts
@numba.njit(cache=_CACHE)
def _seed(R, g0, g1, fwd, outs):
    # the sweep's start for lanes g0..g1-1: back, R[outs[r], r - g0] = 1
    # (rank r sits on its output wire); forward, R[c, c - g0] = 1 (A = I:
    # input c on wire c)
    for e in range(g0, g1):
        R[e if fwd else outs[e], e - g0, :] = 1.0


def _fwd_P_py(ca, cb, clo, chi, doff, outs, ps, P, D, save, grp, fwd):
    # P by one sweep per (row block, lane group) pair, lanes g0..g1-1 in
    # R[w, e - g0, j], only lanes clo..chi of each comparator (the plan,
    # clipped to the group), with save D[blk, doff[i] + e - clo[i], j] =
    # R[a, e, j] - R[c, e, j] (before the update):
    # back (fwd False): lanes are ranks, the back-sweep R <- R M_l from the
    #   last comparator to the first; P[b, r, :] = R[:, r - g0];
    # forward (fwd True): lanes are input columns, A <- M_l A from the first
    #   comparator to the last; P[b, r, c] = A[outs[r], c - g0].
    B, k, n = P.shape
    size = ca.shape[0]
    m = n if fwd else k
    nblk = (B + _W - 1) // _W
    ngr = (m + grp - 1) // grp
    for t in numba.prange(nblk * ngr):
        blk = t // ngr
        g0 = (t % ngr) * grp
        g1 = min(m, g0 + grp)
        b0 = blk * _W
        nb = min(_W, B - b0)
        mx = _ftz_on()
        R = np.zeros((n, g1 - g0, _W), dtype=P.dtype)
        _seed(R, g0, g1, fwd, outs)
        pj = ps[blk]
        qv = np.empty(_W, dtype=P.dtype)
        for s in range(size):
            i = s if fwd else size - 1 - s
            lo = max(clo[i], g0)
            hi = min(chi[i], g1)
            if lo >= hi:
                continue
            Ra = R[ca[i]]
            Rc = R[cb[i]]
            _vq(pj[i], qv)
            o = doff[i] - clo[i]
            if save:
                Db = D[blk]
                for r in range(lo, hi):
                    _vmixd(Ra[r - g0], Rc[r - g0], qv, Db[o + r])
            else:
                for r in range(lo, hi):
                    _vmix(Ra[r - g0], Rc[r - g0], qv)
        if fwd:
            _store_cols(R, b0, nb, g0, g1, outs, P)
        else:
            for r in range(g0, g1):
                _store_block(R[:, r - g0], b0, nb, P[:, r])
        _ftz_off(mx)


@numba.njit(cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _vals_adjoint(gv, use_gv, b0, nb, ca, cb, outs, pj, svb, ssb, sgrad, gpp, gx, gs):
    # the values' adjoint of one row block, swept back once: adds
    # dL/dp * dp/dd for the given dL/dp (gpp) and, with use_gv, dL/dvalues;
    # adds into gx[w, j] and gs[j] (dL/ds, with sgrad). Linear in (gv, gpp).
    size = ca.shape[0]
    k = outs.shape[0]
    n = gx.shape[0]
    g = np.zeros((n, _W), dtype=gx.dtype)
    qv = np.empty(_W, dtype=gx.dtype)
    if use_gv:
        for j in range(nb):
            for r in range(k):
                g[outs[r], j] += gv[b0 + j, r]
    for i in range(size - 1, -1, -1):
        ga_ = g[ca[i]]
        gc_ = g[cb[i]]
        sw = svb[i]
        gi = gpp[i]
        if sgrad:
            sx = ssb[i]
            for j in range(_W):
                gs[j] += (ga_[j] - gc_[j]) * sx[0, j] + gi[j] * sx[1, j]
        _vq(pj[i], qv)
        _vadj(ga_, gc_, qv, sw[0], sw[1], gi)
    for w in range(n):
        for j in range(_W):
            gx[w, j] += g[w, j]


def _bwd_rows_py(gv, gP, has_gP, ca, cb, clo, chi, doff, outs, ps, sv, ss, sgrad, D, save, grp, fwd, gxt, gst):
    # The (row block, lane group) pairs t = blk * ngr + group are split into
    # nw = gxt.shape[0] contiguous runs, one per worker (prange). A worker
    # sums its groups' shares of dL/dp for the block at hand in gpp and,
    # when the block changes, sweeps the values' adjoint back once with it
    # (group 0 adds dL/dvalues), adding into gxt[w, blk] (wire-major) and
    # gst[w, blk] (dL/ds per row): the workers' results add up (the host
    # sums over w). A group's share: dL/dP pushed through the comparators
    # in the order opposite to the P sweep (back: first to last; forward:
    # last to first), dL/dp_i += (G[a] - G[c]) . D_i over the group's lanes.
    nblk = ps.shape[0]
    size = ca.shape[0]
    k = outs.shape[0]
    nw = gxt.shape[0]
    n = gxt.shape[2]
    B = gv.shape[0]
    m = n if fwd else k
    ngr = (m + grp - 1) // grp if has_gP else 1
    total = nblk * ngr
    for w in numba.prange(nw):
        t0 = (total * w) // nw
        t1 = (total * (w + 1)) // nw
        if t0 >= t1:
            continue
        mx = _ftz_on()
        gpp = np.zeros((size, _W), dtype=ps.dtype)  # dL/dp per comparator and row, this worker's groups
        qv = np.empty(_W, dtype=ps.dtype)
        cur = t0 // ngr
        with_gv = False
        for t in range(t0, t1 + 1):
            blk = t // ngr if t < t1 else -1
            if blk != cur:  # flush the block finished
                b0 = cur * _W
                _vals_adjoint(gv, with_gv, b0, min(_W, B - b0), ca, cb, outs, ps[cur], sv[cur], ss[cur],
                              sgrad, gpp, gxt[w, cur], gst[w, cur])
                if t == t1:
                    break
                gpp[:] = 0.0
                cur = blk
                with_gv = False
            gi_ = t % ngr
            if gi_ == 0:
                with_gv = True
            if not has_gP:
                continue
            g0 = gi_ * grp
            g1 = min(m, g0 + grp)
            gw = g1 - g0
            b0 = blk * _W
            nb = min(_W, B - b0)
            pj = ps[blk]
            if save:
                Dg = D[blk]
            else:
                # recompute the group's sweep: its differences fill Dg from
                # the top (in sweep order), so the push below, which runs
                # the other way, reads them in order
                cnt = 0
                for i in range(size):
                    lo = max(clo[i], g0)
                    hi = min(chi[i], g1)
                    if lo < hi:
                        cnt += hi - lo
                Dg = np.empty((cnt, _W), dtype=ps.dtype)
                R = np.zeros((n, gw, _W), dtype=ps.dtype)
                _seed(R, g0, g1, fwd, outs)
                pos = cnt
                for s in range(size):
                    i = s if fwd else size - 1 - s
                    lo = max(clo[i], g0)
                    hi = min(chi[i], g1)
                    if lo >= hi:
                        continue
                    pos -= hi - lo
                    Ra = R[ca[i]]
                    Rc = R[cb[i]]
                    _vq(pj[i], qv)
                    for r in range(lo, hi):
                        _vmixd(Ra[r - g0], Rc[r - g0], qv, Dg[pos + r - lo])
            # dL/dP of the group, pushed the other way through the comparators
            G = np.zeros((n, gw, _W), dtype=ps.dtype)
            if fwd:
                _load_cols(gP, b0, nb, g0, g1, outs, G)
            else:
                for r in range(g0, g1):
                    _load_block(gP[:, r], b0, nb, G[:, r - g0])
            pos = 0
            for s in range(size):
                i = size - 1 - s if fwd else s
                lo = max(clo[i], g0)
                hi = min(chi[i], g1)
                if lo >= hi:
                    continue
                Ga = G[ca[i]]
                Gc = G[cb[i]]
                _vq(pj[i], qv)
                o = doff[i] - clo[i] if save else pos - lo
                pos += hi - lo
                gi = gpp[i]  # accumulates over this worker's groups
                for r in range(lo, hi):
                    _vpush(Ga[r - g0], Gc[r - g0], qv, Dg[o + r], gi)
        _ftz_off(mx)


#: what a generated module copies from this file, in order
PARTS = (_seed, _fwd_P_py, _vals_adjoint, _bwd_rows_py)
