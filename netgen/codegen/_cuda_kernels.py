"""Kernel sources of the ``cuda`` target (Numba CUDA), as text templates.

:func:`kernel_source` fills the templates for one float type; the emitter
(:mod:`netgen.codegen.cuda_target`) pastes them into the generated module.
Layout of every kernel: one thread block per batch row ``b``, threads
striding over the comparators of a layer, ``cuda.syncthreads()`` after each
layer (comparators of a layer touch distinct wires, so a layer is race-free).

Kernels (two launches per direction at most):

* rows forward: ``_fwd_vals`` (values; saves p, and d and dp/dd for
  backward), then ``_fwd_P`` (the k output rows of P by the back-sweep;
  saves the row differences ``R[r, a] - R[r, b]``);
* rows backward: ``_bwd_P`` (copies dL/dP into its state, sweeps the adjoint
  of the back-sweep forwards -> dL/dp), then ``_bwd_vals`` (adjoint of the
  values sweep -> dL/dx);
* column: ``_fwd_col`` (P[:, y] by pushing e_y forward with the values) and
  ``_bwd_col`` (its adjoint).

Bad rows, without a host synchronisation: a row of ``x`` with a NaN or inf
entry (and, for the column, a ``y`` outside 0..n-1) is flagged in ``bad[b]``
by the forward kernel (``cuda.syncthreads_or``); the row is swept as zeros
and every output of that row -- values, P, the column, and dL/dx in the
backward -- is NaN.

Wire arrays (``v``, ``u``) live in shared memory when they fit (the emitter
substitutes ``cuda.shared.array``), else in a global ``(B, n)`` scratch row.
Templates use ``@@NAME@@`` placeholders: ``SFX`` (kernel name suffix),
``ONE``/``ZERO``/``NAN`` literals, ``SWAP12`` (the swap-probability code,
:func:`netgen.codegen._numba_common.swap_code`), ``ALLOC_*`` (wire arrays).
"""

from __future__ import annotations

#: kernel name -> argument kinds, in order: "x" (float (B, n)), "f1"/"f2"/"f3"
#: (float arrays of that rank), "i1" (int64 vector), "b1" (int32 vector),
#: "bool" (a flag). Launchers, signatures and the compile check use these.
KERNEL_ARGS = {
    "fwd_vals": ("f2", "i1", "i1", "i1", "i1", "f2", "f2", "f2", "f2", "b1", "bool", "f2"),
    "fwd_P": ("i1", "i1", "i1", "i1", "i1", "i1", "i1", "f2", "b1", "f3", "f2", "bool"),
    "bwd_P": ("i1", "i1", "i1", "i1", "i1", "i1", "f2", "f2", "f3", "f3", "f2"),
    "bwd_vals": ("i1", "i1", "i1", "i1", "f2", "bool", "f2", "f2", "f2", "f2", "bool", "b1", "f2", "f2"),
    "fwd_col": ("f2", "i1", "i1", "i1", "i1", "i1", "f2", "f2", "f2", "f2", "f2", "b1", "bool", "f2", "f2"),
    "bwd_col": ("i1", "i1", "i1", "i1", "f2", "f2", "f2", "f2", "f2", "b1", "f2", "f2", "f2"),
}

KERNELS = '''@cuda.jit
def _fwd_vals@@SFX@@(x, ca, cb, offs, outs, values, ps, ds, dps, bad, save, scratch0):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = x.shape[1]
    @@ALLOC_VALS_V@@
    nonfinite = 0
    for w in range(t, n, nt):
        xw = x[b, w]
        if not math.isfinite(xw):
            nonfinite = 1
        v[w] = xw
    isbad = cuda.syncthreads_or(nonfinite)
    if isbad:
        for w in range(t, n, nt):
            v[w] = @@ZERO@@
        cuda.syncthreads()
    for l in range(offs.shape[0] - 1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            a = ca[i]
            c = cb[i]
            xa = v[a]
            xc = v[c]
            d = xa - xc
@@SWAP12@@
            q = @@ONE@@ - p
            v[a] = p * xa + q * xc
            v[c] = q * xa + p * xc
            ps[b, i] = p
            if save:
                ds[b, i] = d
                dps[b, i] = dp
        cuda.syncthreads()
    for r in range(t, outs.shape[0], nt):
        values[b, r] = @@NAN@@ if isbad else v[outs[r]]
    if t == 0:
        bad[b] = 1 if isbad else 0


@cuda.jit
def _fwd_P@@SFX@@(ca, cb, offs, clo, chi, doff, outs, ps, bad, P, D, save):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    k = P.shape[1]
    n = P.shape[2]
    for r in range(k):
        for w in range(t, n, nt):
            P[b, r, w] = @@ZERO@@
    cuda.syncthreads()
    for r in range(t, k, nt):
        P[b, r, outs[r]] = @@ONE@@
    cuda.syncthreads()
    for l in range(offs.shape[0] - 2, -1, -1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            lo = clo[i]
            hi = chi[i]
            if lo < hi:
                a = ca[i]
                c = cb[i]
                p = ps[b, i]
                q = @@ONE@@ - p
                o = doff[i] - lo
                for r in range(lo, hi):
                    ra = P[b, r, a]
                    rc = P[b, r, c]
                    if save:
                        D[b, o + r] = ra - rc
                    P[b, r, a] = p * ra + q * rc
                    P[b, r, c] = q * ra + p * rc
        cuda.syncthreads()
    if bad[b]:
        for r in range(k):
            for w in range(t, n, nt):
                P[b, r, w] = @@NAN@@


@cuda.jit
def _bwd_P@@SFX@@(ca, cb, offs, clo, chi, doff, ps, D, gP, G, gpp):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    k = G.shape[1]
    n = G.shape[2]
    for r in range(k):
        for w in range(t, n, nt):
            G[b, r, w] = gP[b, r, w]
    cuda.syncthreads()
    for l in range(offs.shape[0] - 1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            lo = clo[i]
            hi = chi[i]
            acc = @@ZERO@@
            if lo < hi:
                a = ca[i]
                c = cb[i]
                p = ps[b, i]
                q = @@ONE@@ - p
                o = doff[i] - lo
                for r in range(lo, hi):
                    ga = G[b, r, a]
                    gc = G[b, r, c]
                    acc += (ga - gc) * D[b, o + r]
                    G[b, r, a] = p * ga + q * gc
                    G[b, r, c] = q * ga + p * gc
            gpp[b, i] = acc
        cuda.syncthreads()


@cuda.jit
def _bwd_vals@@SFX@@(ca, cb, offs, outs, gv, has_gv, ps, ds, dps, gpp, has_gpp, bad, gx, scratch0):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = gx.shape[1]
    @@ALLOC_VALS_V@@
    g = v
    for w in range(t, n, nt):
        g[w] = @@ZERO@@
    cuda.syncthreads()
    if has_gv:
        for r in range(t, outs.shape[0], nt):
            g[outs[r]] = gv[b, r]
        cuda.syncthreads()
    for l in range(offs.shape[0] - 2, -1, -1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            a = ca[i]
            c = cb[i]
            p = ps[b, i]
            q = @@ONE@@ - p
            ga = g[a]
            gc = g[c]
            gp = (ga - gc) * ds[b, i]
            if has_gpp:
                gp += gpp[b, i]
            gd = gp * dps[b, i]
            g[a] = p * ga + q * gc + gd
            g[c] = q * ga + p * gc - gd
        cuda.syncthreads()
    isbad = bad[b] != 0
    for w in range(t, n, nt):
        gx[b, w] = @@NAN@@ if isbad else g[w]


@cuda.jit
def _fwd_col@@SFX@@(x, y, ca, cb, offs, outs, col, ps, ds, dps, dus, bad, save, scratch0, scratch1):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = x.shape[1]
    @@ALLOC_COL_V@@
    @@ALLOC_COL_U@@
    yb = y[b]
    nonfinite = 1 if yb < 0 or yb >= n else 0
    for w in range(t, n, nt):
        xw = x[b, w]
        if not math.isfinite(xw):
            nonfinite = 1
        v[w] = xw
        u[w] = @@ZERO@@
    isbad = cuda.syncthreads_or(nonfinite)
    if isbad:
        for w in range(t, n, nt):
            v[w] = @@ZERO@@
    elif t == 0:
        u[yb] = @@ONE@@
    cuda.syncthreads()
    for l in range(offs.shape[0] - 1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            a = ca[i]
            c = cb[i]
            xa = v[a]
            xc = v[c]
            d = xa - xc
@@SWAP12@@
            q = @@ONE@@ - p
            v[a] = p * xa + q * xc
            v[c] = q * xa + p * xc
            ua = u[a]
            uc = u[c]
            u[a] = p * ua + q * uc
            u[c] = q * ua + p * uc
            if save:
                ps[b, i] = p
                ds[b, i] = d
                dps[b, i] = dp
                dus[b, i] = ua - uc
        cuda.syncthreads()
    for r in range(t, outs.shape[0], nt):
        col[b, r] = @@NAN@@ if isbad else u[outs[r]]
    if t == 0:
        bad[b] = 1 if isbad else 0


@cuda.jit
def _bwd_col@@SFX@@(ca, cb, offs, outs, gcol, ps, ds, dps, dus, bad, gx, scratch0, scratch1):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = gx.shape[1]
    @@ALLOC_COL_V@@
    @@ALLOC_COL_U@@
    g = v
    gu = u
    for w in range(t, n, nt):
        g[w] = @@ZERO@@
        gu[w] = @@ZERO@@
    cuda.syncthreads()
    for r in range(t, outs.shape[0], nt):
        gu[outs[r]] = gcol[b, r]
    cuda.syncthreads()
    for l in range(offs.shape[0] - 2, -1, -1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            a = ca[i]
            c = cb[i]
            p = ps[b, i]
            q = @@ONE@@ - p
            ga = g[a]
            gc = g[c]
            ua = gu[a]
            uc = gu[c]
            gd = ((ga - gc) * ds[b, i] + (ua - uc) * dus[b, i]) * dps[b, i]
            g[a] = p * ga + q * gc + gd
            g[c] = q * ga + p * gc - gd
            gu[a] = p * ua + q * uc
            gu[c] = q * ua + p * uc
        cuda.syncthreads()
    isbad = bad[b] != 0
    for w in range(t, n, nt):
        gx[b, w] = @@NAN@@ if isbad else g[w]
'''
