"""The CPU kernels of the generated numba module, as real Python functions.

Copied into generated modules by source extraction (:data:`PARTS`,
:func:`netgen.codegen.runtime.assemble`); the module then compiles each
``_*_py`` kernel twice with :func:`_jit`: parallel (``prange`` over blocks)
and serial (suffix ``_s``, for small calls). One dispatcher serves both
float types: arrays are allocated in the input's dtype, constants come from
:func:`~.numba_vector._one_like`, and ``_swap(d, stp) -> (p, dp/dd, dp/ds)``
is the per-module swap code (rendered per float type by the emitter from
:mod:`netgen.relax.formulas`, picked by :func:`~.numba_vector._by_float`
and inlined), so float32 stays float32 and vectorised.

Every kernel works on blocks of ``_W`` = 16 batch rows, batch-innermost:
each comparator is a branch-free loop over the rows that LLVM vectorises
(the swap code) and explicit vector updates (:mod:`.numba_vector`),
``t = q (c - a); a + t; c - t``. Padding rows of a partial block are zeros.

The P engine (docs/targets.md, "numba: the P engine"): P is computed by
one sweep over *lanes*, in one of two directions chosen at build time
(``fwd``, the module's ``_DIRECTION``): back over the k output ranks (the
back-sweep ``R <- R M_l``, last comparator first; P's rows) or forward over
the n input columns (``A <- M_l A`` from the identity, first comparator
first; P's columns: fewer (comparator, lane) pairs for sorters). Lanes are
processed in groups ``[g0, g1)`` of ``grp``: the scratch ``R[w, e, j]``
holds only the group's lanes (n x grp x 16 floats) and the kernels run
``prange`` over (row block, lane group) pairs. Each comparator's range of
lanes (the plan's ``clo..chi``) is clipped to the group.

* ``_fwd_vals``: values by the forward sweep, saving p (and with a gradient
  dp/dd * d, dp/dd; with a steepness gradient dp/ds * d, dp/ds);
* ``_fwd_P``: P by the lane sweep per (block, group), saving the
  differences ``D = R[e, a] - R[e, c]`` in mode ``save``;
* ``_bwd_rows``: per (block, group): dL/dP of the group pushed through the
  comparators the other way gives the group's share of dL/dp; mode
  ``recompute`` first re-runs the group's sweep into a thread-local ``Dg``. Then the
  values' adjoint (``_vals_adjoint``) swept back once with that share adds
  dL/dp * dp/dd; the sweep is linear, so the shares' results add up, per
  worker, in ``gxt`` (``gst`` for dL/ds);
* ``_fwd_col`` / ``_bwd_col``: P[:, y] by pushing e_y forward with the
  values, and its adjoint.
"""

from __future__ import annotations

import numba
import numpy as np

from .numba_vector import _W, _ftz_off, _ftz_on, _one_like, _vadj, _vmix, _vmixd, _vpush, _vq

__all__ = ["PARTS", "STATE", "_T"]

#: wires per tile when transposing between (row, wire) and (wire, row)
_T = 64

# ---- stand-ins for what the emitter writes (not copied into modules) ----
_CACHE = False
_PARALLEL = True


def _swap(d, stp):  # pragma: no cover - rendered per relaxation and float type
    raise NotImplementedError


# ---------------------------------------------------------------- copied parts
def _jit(f, parallel, suffix=""):
    """``f`` compiled by numba (``parallel``: prange runs on numba's threads).
    A copy named with ``suffix`` gets its own entry in numba's on-disk cache,
    which keys a function by its name and line only."""
    if suffix:
        f = type(f)(f.__code__, f.__globals__, f.__name__ + suffix, f.__defaults__, f.__closure__)
        f.__qualname__ = f.__name__
    return numba.njit(parallel=parallel, cache=_CACHE, error_model="numpy", fastmath={"contract"})(f)


@numba.njit(cache=_CACHE)
def _load_block(src, b0, nb, dst):
    # dst[w, j] = src[b0 + j, w] for the block's nb rows, in tiles of _T
    # wires (L1-sized)
    n = src.shape[1]
    for w0 in range(0, n, _T):
        for j in range(nb):
            for w in range(w0, min(w0 + _T, n)):
                dst[w, j] = src[b0 + j, w]


@numba.njit(cache=_CACHE)
def _store_block(src, b0, nb, dst):
    # dst[b0 + j, w] = src[w, j]: the inverse of _load_block
    n = dst.shape[1]
    for w0 in range(0, n, _T):
        for j in range(nb):
            for w in range(w0, min(w0 + _T, n)):
                dst[b0 + j, w] = src[w, j]


def _fwd_vals_py(x, stp, ca, cb, outs, values, ps, sv, ss, save, sgrad):
    # values by the forward sweep; ps[blk, i, j] = p of row blk * _W + j;
    # sv[blk, i, :, j] = (dp * d, dp) and ss[blk, i, :, j] = (dps * d, dps)
    # (without save / sgrad: one scratch slot, overwritten)
    B, n = x.shape
    size = ca.shape[0]
    k = outs.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        mx = _ftz_on()  # subnormals read and written as 0 on this thread
        v = np.zeros((n, _W), dtype=x.dtype)  # padding rows (j >= nb) stay 0
        _load_block(x, b0, nb, v)
        qv = np.empty(_W, dtype=x.dtype)
        pj = ps[blk]
        for i in range(size):
            va = v[ca[i]]
            vc = v[cb[i]]
            pi = pj[i]
            sw = sv[blk, i if save else 0]
            sx = ss[blk, i if sgrad else 0]
            # a loop that LLVM vectorises (few pointers, no branches): the swap
            # probabilities and what backward needs; then the update
            for j in range(_W):
                d = va[j] - vc[j]
                p, dp, dps = _swap(d, stp)
                pi[j] = p
                sw[0, j] = dp * d
                sw[1, j] = dp
                sx[0, j] = dps * d
                sx[1, j] = dps
            _vq(pi, qv)
            _vmix(va, vc, qv)
        for j in range(nb):
            for r in range(k):
                values[b0 + j, r] = v[outs[r], j]
        _ftz_off(mx)


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
            for r in range(k):
                _store_block(R[outs[r]], b0, nb, P[:, r, g0:g1])
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
                for r in range(k):
                    _load_block(gP[:, r, g0:g1], b0, nb, G[outs[r]])
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


def _fwd_col_py(x, y, stp, ca, cb, outs, col, cs, css, save, sgrad):
    # vu[w, :_W] = v[w] and vu[w, _W:] = u[w] of the block's rows, so a
    # comparator's state is two contiguous 2 * _W tiles.
    # cs[blk, i, :, j] = (p, dp * d, dp * (u[a] - u[c])) of row blk * _W + j:
    # all the adjoint needs; css[blk, i, :, j] = (dps * d, dps * du) for
    # dL/ds (without save / sgrad: one scratch slot, overwritten).
    B, n = x.shape
    size = ca.shape[0]
    k = outs.shape[0]
    one = _one_like(stp)
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        mx = _ftz_on()
        vu = np.zeros((n, 2 * _W), dtype=x.dtype)  # padding rows (j >= nb) stay 0
        _load_block(x, b0, nb, vu)
        for j in range(nb):
            vu[y[b0 + j], _W + j] = one
        q2 = np.empty(2 * _W, dtype=x.dtype)  # each row's 1 - p, for its v and its u
        for i in range(size):
            ta = vu[ca[i]]
            tc = vu[cb[i]]
            sw = cs[blk, i if save else 0]
            sx = css[blk, i if sgrad else 0]
            for j in range(_W):
                d = ta[j] - tc[j]
                p, dp, dps = _swap(d, stp)
                q = one - p
                q2[j] = q
                q2[_W + j] = q
                du = ta[_W + j] - tc[_W + j]
                sw[0, j] = p
                sw[1, j] = dp * d
                sw[2, j] = dp * du
                sx[0, j] = dps * d
                sx[1, j] = dps * du
            for e in range(2 * _W):
                a = ta[e]
                c = tc[e]
                t = q2[e] * (c - a)
                ta[e] = a + t
                tc[e] = c - t
        for j in range(nb):
            for r in range(k):
                col[b0 + j, r] = vu[outs[r], _W + j]
        _ftz_off(mx)


def _bwd_col_py(gcol, ca, cb, outs, cs, css, sgrad, gx, gsr):
    # the adjoint of _fwd_col; gsr[b] = dL/ds of row b (with sgrad)
    B, n = gx.shape
    size = ca.shape[0]
    k = outs.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        mx = _ftz_on()
        gg = np.zeros((n, 2 * _W), dtype=gx.dtype)  # the adjoints of v and u, laid out like vu
        for j in range(nb):
            for r in range(k):
                gg[outs[r], _W + j] += gcol[b0 + j, r]
        q2 = np.empty(2 * _W, dtype=gx.dtype)
        g2 = np.zeros(2 * _W, dtype=gx.dtype)  # dL/dd per row; g2[_W:] stays 0 (u has no such term)
        gs = np.zeros(_W, dtype=gx.dtype)
        for i in range(size - 1, -1, -1):
            ta = gg[ca[i]]
            tc = gg[cb[i]]
            sw = cs[blk, i]
            if sgrad:
                sx = css[blk, i]
                for j in range(_W):
                    gs[j] += (ta[j] - tc[j]) * sx[0, j] + (ta[_W + j] - tc[_W + j]) * sx[1, j]
            for j in range(_W):
                q = _one_like(sw[0, j]) - sw[0, j]
                q2[j] = q
                q2[_W + j] = q
                g2[j] = (ta[j] - tc[j]) * sw[1, j] + (ta[_W + j] - tc[_W + j]) * sw[2, j]
            for e in range(2 * _W):
                a = ta[e]
                c = tc[e]
                t = q2[e] * (c - a) + g2[e]
                ta[e] = a + t
                tc[e] = c - t
        _store_block(gg, b0, nb, gx)
        for j in range(nb):
            gsr[b0 + j] = gs[j]
        _ftz_off(mx)


# ------------------------------------------------------- copied by name (STATE)
# Each kernel twice: parallel (serial under NETGEN_NUMBA_PARALLEL=0) and a
# serial copy (suffix _s) for calls below _SERIAL_WORK, which never enter
# numba's thread pool; the host indexes these tuples in this order.
_fwd_vals = _jit(_fwd_vals_py, _PARALLEL)
_fwd_P = _jit(_fwd_P_py, _PARALLEL)
_bwd_rows = _jit(_bwd_rows_py, _PARALLEL)
_fwd_col = _jit(_fwd_col_py, _PARALLEL)
_bwd_col = _jit(_bwd_col_py, _PARALLEL)
_fwd_vals_s = _jit(_fwd_vals_py, False, "_s")
_fwd_P_s = _jit(_fwd_P_py, False, "_s")
_bwd_rows_s = _jit(_bwd_rows_py, False, "_s")
_fwd_col_s = _jit(_fwd_col_py, False, "_s")
_bwd_col_s = _jit(_bwd_col_py, False, "_s")
_KERNELS = (_fwd_vals, _fwd_P, _bwd_rows, _fwd_col, _bwd_col)
_KERNELS_SERIAL = (_fwd_vals_s, _fwd_P_s, _bwd_rows_s, _fwd_col_s, _bwd_col_s)

#: module-level state a generated module copies by name, after :data:`PARTS`
STATE = ("_fwd_vals", "_fwd_P", "_bwd_rows", "_fwd_col", "_bwd_col", "_fwd_vals_s", "_fwd_P_s", "_bwd_rows_s",
         "_fwd_col_s", "_bwd_col_s", "_KERNELS", "_KERNELS_SERIAL")
#: what a generated module copies from this file, in order
PARTS = (_jit, _load_block, _store_block, _seed, _fwd_vals_py, _fwd_P_py, _vals_adjoint, _bwd_rows_py, _fwd_col_py,
         _bwd_col_py)
