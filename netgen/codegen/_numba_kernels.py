"""Kernel sources of the generated numba module (``--target numba``),
one template per float type (``@@SFX@@`` _f32/_f64, ``@@NPT@@`` the numpy
type, ``@@ONE@@``/``@@ZERO@@`` typed literals, ``@@SWAP16@@`` the swap code
of :mod:`._swap_code` indented into the batch loop).

Every kernel is ``@njit(parallel=True)`` over blocks of ``_W`` = 16 batch
rows (``prange``), batch-innermost: the state of a wire is a vector of 16
rows, so each comparator is a few short loops over the rows with a constant
trip count that LLVM vectorises (the swap probabilities in one loop that
only stores p and dp/dd, the updates in another); padding rows of a partial
last block are zeros and never written out.

* ``_fwd_rows``: values by the forward sweep (saving p; with a gradient
  also dp/dd * d and dp/dd), then P rows by the back-sweep
  ``R <- R M_l`` in a wire-major scratch ``R[w, r, j]``, touching the plan's
  rows ``clo..chi`` only and saving their differences ``R[r, a] - R[r, c]``
  when a gradient is needed; R is transposed into P at the end;
* ``_bwd_rows``: dL/dP pushed forward through the layers (the back-sweep's
  adjoint) gives dL/dp per comparator and row, then one backward sweep of
  the values' adjoint adds dL/dp * dp/dd;
* ``_fwd_col`` / ``_bwd_col``: P[:, y] by pushing e_y forward with the
  values, and its adjoint.
"""

KERNELS = '''@numba.njit(parallel=_PARALLEL, cache=_CACHE, error_model="numpy")
def _fwd_rows@@SFX@@(x, ca, cb, clo, chi, doff, outs, values, P, ps, sv, D, save):
    # _W batch rows per prange step, batch-innermost like the column
    # kernels: v[w, j], and the back-sweep scratch R[w, r, j] (a comparator
    # touches two contiguous (k, _W) tiles). ps[blk, i, j] = p of row
    # blk * _W + j; with save, sv[blk, i, :, j] = (dp * d, dp) and
    # D[blk, doff[i] + r - clo[i], j] = R[a, r, j] - R[c, r, j].
    B, n = x.shape
    size = ca.shape[0]
    k = outs.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        v = np.zeros((n, _W), dtype=@@NPT@@)  # padding rows (j >= nb) stay 0
        for w0 in range(0, n, _T):  # transposes in tiles of _T wires (L1-sized)
            for j in range(nb):
                for w in range(w0, min(w0 + _T, n)):
                    v[w, j] = x[b0 + j, w]
        pj = ps[blk]
        dpj = np.empty(_W, dtype=@@NPT@@)
        for i in range(size):
            va = v[ca[i]]
            vc = v[cb[i]]
            pi = pj[i]
            for j in range(_W):  # the swap probabilities: one vector loop
                d = va[j] - vc[j]
@@SWAP16@@
                pi[j] = p
                dpj[j] = dp
            for j in range(_W):
                p = pi[j]
                q = @@ONE@@ - p
                xa = va[j]
                xc = vc[j]
                va[j] = p * xa + q * xc
                vc[j] = q * xa + p * xc
                if save:
                    sv[blk, i, 0, j] = dpj[j] * (xa - xc)
                    sv[blk, i, 1, j] = dpj[j]
        for j in range(nb):
            for r in range(k):
                values[b0 + j, r] = v[outs[r], j]
        # back-sweep R <- R M_l, last layer first, rows clo..chi only
        R = np.zeros((n, k, _W), dtype=@@NPT@@)
        for r in range(k):
            R[outs[r], r, :] = @@ONE@@
        for i in range(size - 1, -1, -1):
            lo = clo[i]
            hi = chi[i]
            if lo >= hi:
                continue
            Ra = R[ca[i]]
            Rc = R[cb[i]]
            pi = pj[i]
            o = doff[i] - lo
            for r in range(lo, hi):
                ra_ = Ra[r]
                rc_ = Rc[r]
                for j in range(_W):
                    p = pi[j]
                    q = @@ONE@@ - p
                    ra = ra_[j]
                    rc = rc_[j]
                    if save:
                        D[blk, o + r, j] = ra - rc
                    ra_[j] = p * ra + q * rc
                    rc_[j] = q * ra + p * rc
        for w0 in range(0, n, _T):
            for r in range(k):
                for j in range(nb):
                    for w in range(w0, min(w0 + _T, n)):
                        P[b0 + j, r, w] = R[w, r, j]


@numba.njit(parallel=_PARALLEL, cache=_CACHE, error_model="numpy")
def _bwd_rows@@SFX@@(gv, gP, has_gP, ca, cb, clo, chi, doff, outs, ps, sv, D, gx):
    B, n = gx.shape
    size = ca.shape[0]
    k = outs.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        gpp = np.zeros((size, _W), dtype=@@NPT@@)  # dL/dp per comparator and row
        if has_gP:
            # dL/dP pushed forward through the layers (the back-sweep's adjoint)
            G = np.zeros((n, k, _W), dtype=@@NPT@@)
            for w0 in range(0, n, _T):
                for r in range(k):
                    for j in range(nb):
                        for w in range(w0, min(w0 + _T, n)):
                            G[w, r, j] = gP[b0 + j, r, w]
            acc = np.empty(_W, dtype=@@NPT@@)
            for i in range(size):
                lo = clo[i]
                hi = chi[i]
                if lo >= hi:
                    continue
                Ga = G[ca[i]]
                Gc = G[cb[i]]
                pi = ps[blk, i]
                o = doff[i] - lo
                acc[:] = @@ZERO@@
                for r in range(lo, hi):
                    ga_ = Ga[r]
                    gc_ = Gc[r]
                    Dr = D[blk, o + r]
                    for j in range(_W):
                        p = pi[j]
                        q = @@ONE@@ - p
                        ga = ga_[j]
                        gc = gc_[j]
                        acc[j] += (ga - gc) * Dr[j]
                        ga_[j] = p * ga + q * gc
                        gc_[j] = q * ga + p * gc
                for j in range(_W):
                    gpp[i, j] = acc[j]
        # the values' adjoint, swept back once, adds dL/dp * dp/dd
        g = np.zeros((n, _W), dtype=@@NPT@@)
        for j in range(nb):
            for r in range(k):
                g[outs[r], j] += gv[b0 + j, r]
        for i in range(size - 1, -1, -1):
            ga_ = g[ca[i]]
            gc_ = g[cb[i]]
            pi = ps[blk, i]
            s = sv[blk, i]
            gi = gpp[i]
            for j in range(_W):
                p = pi[j]
                q = @@ONE@@ - p
                ga = ga_[j]
                gc = gc_[j]
                gd = (ga - gc) * s[0, j] + gi[j] * s[1, j]
                ga_[j] = p * ga + q * gc + gd
                gc_[j] = q * ga + p * gc - gd
        for w0 in range(0, n, _T):
            for j in range(nb):
                for w in range(w0, min(w0 + _T, n)):
                    gx[b0 + j, w] = g[w, j]


@numba.njit(parallel=_PARALLEL, cache=_CACHE, error_model="numpy")
def _fwd_col@@SFX@@(x, y, ca, cb, outs, col, cs, save):
    # _W batch rows at a time, batch-innermost (v[w, j]): every comparator is
    # short loops over j that LLVM vectorises (no exceptions on division:
    # error_model="numpy"). cs[blk, i, :, j] = (p, dp * d, dp * (u[a] - u[c]))
    # of row blk * _W + j: all the adjoint needs.
    B, n = x.shape
    size = ca.shape[0]
    k = outs.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        # vu[w, 0] = v[w], vu[w, 1] = u[w]: a comparator's four row vectors
        # lie in two contiguous (2, _W) tiles; padding rows (j >= nb) stay 0
        vu = np.zeros((n, 2, _W), dtype=@@NPT@@)
        for w0 in range(0, n, _T):  # transposes in tiles of _T wires (L1-sized)
            for j in range(nb):
                for w in range(w0, min(w0 + _T, n)):
                    vu[w, 0, j] = x[b0 + j, w]
        for j in range(nb):
            vu[y[b0 + j], 1, j] = @@ONE@@
        pj = np.empty(_W, dtype=@@NPT@@)  # this comparator's p and dp per row
        dpj = np.empty(_W, dtype=@@NPT@@)
        for i in range(size):
            va = vu[ca[i], 0]
            vc = vu[cb[i], 0]
            ua_ = vu[ca[i], 1]
            uc_ = vu[cb[i], 1]
            # two loops with a constant trip count: the swap probabilities
            # (stores only to pj, dpj, so LLVM vectorises it), then the update
            for j in range(_W):
                d = va[j] - vc[j]
@@SWAP16@@
                pj[j] = p
                dpj[j] = dp
            for j in range(_W):
                p = pj[j]
                q = @@ONE@@ - p
                xa = va[j]
                xc = vc[j]
                va[j] = p * xa + q * xc
                vc[j] = q * xa + p * xc
                ua = ua_[j]
                uc = uc_[j]
                ua_[j] = p * ua + q * uc
                uc_[j] = q * ua + p * uc
                if save:
                    cs[blk, i, 0, j] = p
                    cs[blk, i, 1, j] = dpj[j] * (xa - xc)
                    cs[blk, i, 2, j] = dpj[j] * (ua - uc)
        for j in range(nb):
            for r in range(k):
                col[b0 + j, r] = vu[outs[r], 1, j]


@numba.njit(parallel=_PARALLEL, cache=_CACHE, error_model="numpy")
def _bwd_col@@SFX@@(gcol, ca, cb, outs, cs, gx):
    B, n = gx.shape
    size = ca.shape[0]
    k = outs.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        gg = np.zeros((n, 2, _W), dtype=@@NPT@@)  # the adjoints of v and u, interleaved like vu
        for j in range(nb):
            for r in range(k):
                gg[outs[r], 1, j] += gcol[b0 + j, r]
        for i in range(size - 1, -1, -1):
            ga_ = gg[ca[i], 0]
            gc_ = gg[cb[i], 0]
            ua_ = gg[ca[i], 1]
            uc_ = gg[cb[i], 1]
            s = cs[blk, i]
            for j in range(_W):  # a constant trip count: one vector loop
                p = s[0, j]
                q = @@ONE@@ - p
                ga = ga_[j]
                gc = gc_[j]
                ua = ua_[j]
                uc = uc_[j]
                gd = (ga - gc) * s[1, j] + (ua - uc) * s[2, j]
                ga_[j] = p * ga + q * gc + gd
                gc_[j] = q * ga + p * gc - gd
                ua_[j] = p * ua + q * uc
                uc_[j] = q * ua + p * uc
        for w0 in range(0, n, _T):
            for j in range(nb):
                for w in range(w0, min(w0 + _T, n)):
                    gx[b0 + j, w] = gg[w, 0, j]
'''
