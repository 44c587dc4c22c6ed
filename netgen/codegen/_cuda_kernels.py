"""Kernel sources of the ``cuda`` target (Numba CUDA), as text templates.

The emitter (:mod:`netgen.codegen.cuda_target`) fills the templates for each
float type and each *variant* and pastes them into the generated module.

Kernels, two launches per direction at most:

* rows forward: ``_fwd_vals`` (one block per batch row: the values sweep;
  saves each comparator's difference d = x - y, from which every later
  kernel recomputes p and dp/dd: one float per comparator instead of three),
  then ``_fwd_P`` (one block per
  (batch row, rank): the back-sweep of that rank's row of P, ``R <- R M_l``
  from the last layer to the first, over the comparators whose planned row
  range holds the rank; saves the differences ``R[a] - R[b]`` in a CSR
  layout, ``D[b, doff[i] + r - clo[i]]``; writes the row to P once, coalesced);
* rows backward: ``_bwd_P`` (one block per (row, rank): dL/dP's row pushed
  forward through the layers, the adjoint of the back-sweep; writes each
  comparator's share of dL/dp in D's layout, ``C``), then ``_bwd_vals`` (one
  block per row: sums those shares and sweeps the values' adjoint back);
* column: ``_fwd_col`` (P[:, y] by pushing e_y forward with the values) and
  ``_bwd_col`` (its adjoint), one block per row.

Within a block, threads stride over the comparators of a layer and
``cuda.syncthreads()`` closes each layer (comparators of a layer touch
distinct wires, so a layer is race-free).

Variants: the per-block wire arrays (``v``, ``u``, the rank's row ``R`` or
its adjoint ``G``: one or two arrays of n floats) live in dynamic shared
memory (``shared``; the launcher asks for ``SHARED_BYTES`` of it) or, when
that does not fit the device, in a global scratch row (``global``). The
code between allocation and store is the same text for both.

Bad rows, without a host synchronisation: a row of ``x`` with a NaN or inf
entry (and, for the column, a ``y`` outside 0..n-1) is flagged in ``bad[b]``
by the forward kernel (``cuda.syncthreads_or``); the row is swept as zeros
and every output of that row -- values, P, the column, and dL/dx in the
backward -- is NaN.

Placeholders: ``SFX`` (kernel name suffix), ``ONE``/``ZERO``/``NAN``
literals, ``SWAP12`` (the swap-probability code,
:func:`netgen.codegen._numba_common.swap_code`; ``SWAP16`` indented deeper),
``ALLOC names FROM source`` (the wire arrays, :func:`alloc`) and
``STORE_R`` (the end of ``_fwd_P``).
"""

from __future__ import annotations

#: kernel name -> argument kinds, in order: "f2"/"f3" (float arrays of that
#: rank), "i1" (int64 vector), "b1" (int32 vector), "bool" (a flag).
#: Launchers, signatures and the compile check use these.
KERNEL_ARGS = {
    "fwd_vals": ("f2", "i1", "i1", "i1", "i1", "f2", "f2", "b1", "f2"),
    "fwd_P": ("i1", "i1", "i1", "i1", "i1", "i1", "i1", "f2", "b1", "f2", "f2", "bool"),
    "bwd_P": ("i1", "i1", "i1", "i1", "i1", "i1", "f2", "f2", "f2", "f2", "f2"),
    "bwd_vals": ("i1", "i1", "i1", "i1", "i1", "f2", "bool", "f2", "f2", "bool", "b1", "f2", "f2"),
    "fwd_col": ("f2", "i1", "i1", "i1", "i1", "i1", "f2", "f2", "f2", "b1", "bool", "f2"),
    "bwd_col": ("i1", "i1", "i1", "i1", "f2", "f2", "f2", "b1", "f2", "f2"),
}

#: wire arrays of n floats per block, per kernel (shared bytes = this * n * itemsize)
WIRE_ARRAYS = {"fwd_vals": 1, "fwd_P": 1, "bwd_P": 1, "bwd_vals": 1, "fwd_col": 2, "bwd_col": 2}

def alloc(names: list[str], source: str, shared: bool, ft: str) -> str:
    """Code binding the wire arrays ``names`` (one or two rows of n floats)
    of a block: slices of dynamic shared memory, or rows of the global array
    ``source`` (one row per array per block ``blk``)."""
    if shared:
        if len(names) == 1:
            return f"{names[0]} = cuda.shared.array(0, dtype=numba.{ft})[:n]"
        return "\n    ".join([f"sm = cuda.shared.array(0, dtype=numba.{ft})"]
                               + [f"{nm} = sm[:n]" if j == 0 else f"{nm} = sm[{'n' if j == 1 else f'{j} * n'}:{j + 1} * n]"
                                  for j, nm in enumerate(names)])
    if len(names) == 1:
        return f"{names[0]} = {source}[blk]"
    return "\n    ".join(f"{nm} = {source}[{len(names)} * blk + {j}]" if j else f"{nm} = {source}[{len(names)} * blk]"
                           for j, nm in enumerate(names))


#: the end of _fwd_P: a shared row is copied out; a global row *is* P's row
STORE_R = (
    "    if bad[b] != 0:\n        for w in range(t, n, nt):\n            P[blk, w] = @@NAN@@",
    "    isbad = bad[b] != 0\n    for w in range(t, n, nt):\n        P[blk, w] = @@NAN@@ if isbad else R[w]",
)


KERNELS = '''@cuda.jit
def _fwd_vals@@SFX@@(x, ca, cb, offs, outs, values, ds, bad, scratch):
    blk = cuda.blockIdx.x
    b = blk
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = x.shape[1]
    @@ALLOC v FROM scratch@@
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
            ds[b, i] = d
        cuda.syncthreads()
    for r in range(t, outs.shape[0], nt):
        values[b, r] = @@NAN@@ if isbad else v[outs[r]]
    if t == 0:
        bad[b] = 1 if isbad else 0


@cuda.jit
def _fwd_P@@SFX@@(ca, cb, offs, clo, chi, doff, outs, ds, bad, P, D, save):
    # P is (B * k, n): block blk = b * k + r sweeps row r of batch row b
    blk = cuda.blockIdx.x
    k = outs.shape[0]
    b = blk // k
    r = blk - b * k
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = P.shape[1]
    @@ALLOC R FROM P@@
    for w in range(t, n, nt):
        R[w] = @@ZERO@@
    cuda.syncthreads()
    if t == 0:
        R[outs[r]] = @@ONE@@
    cuda.syncthreads()
    for l in range(offs.shape[0] - 2, -1, -1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            lo = clo[i]
            if lo <= r and r < chi[i]:
                a = ca[i]
                c = cb[i]
                d = ds[b, i]
@@SWAP16@@
                q = @@ONE@@ - p
                ra = R[a]
                rc = R[c]
                if save:
                    D[b, doff[i] + r - lo] = ra - rc
                R[a] = p * ra + q * rc
                R[c] = q * ra + p * rc
        cuda.syncthreads()
@@STORE_R@@


@cuda.jit
def _bwd_P@@SFX@@(ca, cb, offs, clo, chi, doff, ds, D, gP, C, scratch):
    # gP is (B * k, n): block blk = b * k + r pushes row r of dL/dP forward
    blk = cuda.blockIdx.x
    k = gP.shape[0] // ds.shape[0]
    b = blk // k
    r = blk - b * k
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = gP.shape[1]
    @@ALLOC G FROM scratch@@
    for w in range(t, n, nt):
        G[w] = gP[blk, w]
    cuda.syncthreads()
    for l in range(offs.shape[0] - 1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            lo = clo[i]
            if lo <= r and r < chi[i]:
                a = ca[i]
                c = cb[i]
                d = ds[b, i]
@@SWAP16@@
                q = @@ONE@@ - p
                ga = G[a]
                gc = G[c]
                j = doff[i] + r - lo
                C[b, j] = (ga - gc) * D[b, j]
                G[a] = p * ga + q * gc
                G[c] = q * ga + p * gc
        cuda.syncthreads()


@cuda.jit
def _bwd_vals@@SFX@@(ca, cb, offs, doff, outs, gv, has_gv, ds, C, has_C, bad, gx, scratch):
    blk = cuda.blockIdx.x
    b = blk
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = gx.shape[1]
    @@ALLOC g FROM scratch@@
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
            d = ds[b, i]
@@SWAP12@@
            q = @@ONE@@ - p
            ga = g[a]
            gc = g[c]
            gp = (ga - gc) * d
            if has_C:
                for j in range(doff[i], doff[i + 1]):
                    gp += C[b, j]
            gd = gp * dp
            g[a] = p * ga + q * gc + gd
            g[c] = q * ga + p * gc - gd
        cuda.syncthreads()
    isbad = bad[b] != 0
    for w in range(t, n, nt):
        gx[b, w] = @@NAN@@ if isbad else g[w]


@cuda.jit
def _fwd_col@@SFX@@(x, y, ca, cb, offs, outs, col, ds, dus, bad, save, scratch):
    blk = cuda.blockIdx.x
    b = blk
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = x.shape[1]
    @@ALLOC v u FROM scratch@@
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
                ds[b, i] = d
                dus[b, i] = ua - uc
        cuda.syncthreads()
    for r in range(t, outs.shape[0], nt):
        col[b, r] = @@NAN@@ if isbad else u[outs[r]]
    if t == 0:
        bad[b] = 1 if isbad else 0


@cuda.jit
def _bwd_col@@SFX@@(ca, cb, offs, outs, gcol, ds, dus, bad, gx, scratch):
    blk = cuda.blockIdx.x
    b = blk
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = gx.shape[1]
    @@ALLOC g gu FROM scratch@@
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
            d = ds[b, i]
@@SWAP12@@
            q = @@ONE@@ - p
            ga = g[a]
            gc = g[c]
            ua = gu[a]
            uc = gu[c]
            gd = ((ga - gc) * d + (ua - uc) * dus[b, i]) * dp
            g[a] = p * ga + q * gc + gd
            g[c] = q * ga + p * gc - gd
            gu[a] = p * ua + q * uc
            gu[c] = q * ua + p * uc
        cuda.syncthreads()
    isbad = bad[b] != 0
    for w in range(t, n, nt):
        gx[b, w] = @@NAN@@ if isbad else g[w]
'''


def split_kernels(source: str) -> list[str]:
    """The template's kernels, one source string each (split at ``@cuda.jit``)."""
    parts = source.split("@cuda.jit\n")
    return ["@cuda.jit\n" + p.rstrip() + "\n" for p in parts if p.strip()]
