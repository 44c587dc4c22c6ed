"""A prototype of the lane-sweep kernel family (docs/cuda-round6.md): P
applied to lanes without forming P, one thread block per (batch row, lane
group), in numba-cuda. Not part of netgen; run in Numba's CUDA
simulator by research/lane_sweep/check.py and compiled for sm_90 by
research/lane_sweep/ptx.py.

Per row, the comparators' swap probabilities ``p`` (B, size) come from the
values sweep (today's kernels; the prototype takes them as input). A
network's relaxed map is P = E_out M_{L-1} ... M_0 (k x n), M_l mixing each
comparator's wires (a, c): a' = p a + (1 - p) c, c' = (1 - p) a + p c,
written t = p (a - c), a' = c + t, c' = a - t.

* **back sweep** ``back_fwd``: Y = W P for W (B, m, k): the state R (lanes
  x n) starts at R[:, outs[r]] = W[:, r] and sweeps the layers last to
  first (R <- R M_l). The rows' P is W = I_k (k lanes), soft ranks r^T P
  and the top-k mask 1^T P are m = 1.
* **forward sweep** ``fwd_fwd``: Y = P V for V (B, n, d): the state A
  (lanes x n) starts at A[lane, w] = V[w, lane] and sweeps first to last
  (A <- M_l A); Y[r, lane] = A[lane, outs[r]]. The sorters' P is V = I_n
  (n lanes), the column P e_y and the values P x are d = 1.

Both save, per lane and comparator, the difference of the state's two
entries before the update (``D``, B x m x size, lane-major: a warp's
consecutive comparators write consecutive floats). Their backward kernels
run the opposite sweep over the lanes from the output gradient Gy and
accumulate, per comparator, dL/dp over the block's lanes (one float per
(row, group, comparator): ``gpart``, summed over groups by the caller, in
the design by the values' adjoint kernel), and end with the gradient of the
lanes' input for free: dL/dW = Gy P^T (``back_bwd``), dL/dV = P^T Gy
(``fwd_bwd``).

A block holds ``G`` lanes (G x n floats of dynamic shared memory, lane-major
``st[q * n + w]``); the grid is (B, ceil(m / G)): lane groups spread a
row's work over blocks. Threads stride over a layer's comparators, each
running its comparator's update for the block's lanes (tables and p read
once per comparator and block). Plan ranges (lanes a comparator cannot
reach), uint32 index arithmetic, narrow layers on one warp and the
prefetching of today's kernels are left out: this prototype checks the
algebra and the layout, and gives the SASS per (comparator, lane) pair.
"""

from __future__ import annotations

import numba
from numba import cuda


def make(ft: str):
    """The four kernels for float type ``ft`` ("float32" or "float64")."""
    dt = numba.float32 if ft == "float32" else numba.float64
    fast = ft == "float32"

    @cuda.jit(fastmath=fast)
    def back_fwd(W, p, wa, wb, offs, outs, G, Y, D, save_D):
        b = cuda.blockIdx.x
        l0 = cuda.blockIdx.y * G
        tx = cuda.threadIdx.x
        nt = cuda.blockDim.x
        m, n, k = Y.shape[1], Y.shape[2], W.shape[2]
        nl = min(G, m - l0)
        st = cuda.shared.array(0, dtype=dt)
        for j in range(tx, nl * n, nt):
            st[j] = 0
        cuda.syncthreads()
        for j in range(tx, nl * k, nt):
            q = j // k
            st[q * n + outs[j - q * k]] = W[b, l0 + q, j - q * k]
        cuda.syncthreads()
        L = offs.shape[0] - 1
        for li in range(L):
            lay = L - 1 - li
            for i in range(offs[lay] + tx, offs[lay + 1], nt):
                a, c, pi = wa[i], wb[i], p[b, i]
                for q in range(nl):
                    va = st[q * n + a]
                    vc = st[q * n + c]
                    dv = va - vc
                    if save_D:
                        D[b, l0 + q, i] = dv
                    t = pi * dv
                    st[q * n + a] = vc + t
                    st[q * n + c] = va - t
            cuda.syncthreads()
        for j in range(tx, nl * n, nt):
            q = j // n
            Y[b, l0 + q, j - q * n] = st[j]

    @cuda.jit(fastmath=fast)
    def back_bwd(Gy, p, wa, wb, offs, outs, G, D, gpart, dW):
        b = cuda.blockIdx.x
        g = cuda.blockIdx.y
        l0 = g * G
        tx = cuda.threadIdx.x
        nt = cuda.blockDim.x
        m, n, k = Gy.shape[1], Gy.shape[2], dW.shape[2]
        nl = min(G, m - l0)
        st = cuda.shared.array(0, dtype=dt)
        for j in range(tx, nl * n, nt):
            q = j // n
            st[j] = Gy[b, l0 + q, j - q * n]
        cuda.syncthreads()
        L = offs.shape[0] - 1
        for lay in range(L):  # U <- U M_l, first layer first
            for i in range(offs[lay] + tx, offs[lay + 1], nt):
                a, c, pi = wa[i], wb[i], p[b, i]
                acc = dt(0)
                for q in range(nl):
                    ua = st[q * n + a]
                    uc = st[q * n + c]
                    du = ua - uc
                    acc += du * D[b, l0 + q, i]
                    t = pi * du
                    st[q * n + a] = uc + t
                    st[q * n + c] = ua - t
                gpart[b, g, i] = acc
            cuda.syncthreads()
        for j in range(tx, nl * k, nt):  # dL/dW = Gy P^T = U_L[:, outs]
            q = j // k
            dW[b, l0 + q, j - q * k] = st[q * n + outs[j - q * k]]

    @cuda.jit(fastmath=fast)
    def fwd_fwd(V, p, wa, wb, offs, outs, G, Y, D, save_D):
        b = cuda.blockIdx.x
        l0 = cuda.blockIdx.y * G
        tx = cuda.threadIdx.x
        nt = cuda.blockDim.x
        n, d, k = V.shape[1], V.shape[2], Y.shape[1]
        nl = min(G, d - l0)
        st = cuda.shared.array(0, dtype=dt)
        for j in range(tx, nl * n, nt):
            q = j // n
            st[j] = V[b, j - q * n, l0 + q]
        cuda.syncthreads()
        L = offs.shape[0] - 1
        for lay in range(L):  # A <- M_l A, first layer first
            for i in range(offs[lay] + tx, offs[lay + 1], nt):
                a, c, pi = wa[i], wb[i], p[b, i]
                for q in range(nl):
                    va = st[q * n + a]
                    vc = st[q * n + c]
                    dv = va - vc
                    if save_D:
                        D[b, l0 + q, i] = dv
                    t = pi * dv
                    st[q * n + a] = vc + t
                    st[q * n + c] = va - t
            cuda.syncthreads()
        for j in range(tx, nl * k, nt):
            q = j // k
            Y[b, j - q * k, l0 + q] = st[q * n + outs[j - q * k]]

    @cuda.jit(fastmath=fast)
    def fwd_bwd(Gy, p, wa, wb, offs, outs, G, D, gpart, dV):
        b = cuda.blockIdx.x
        g = cuda.blockIdx.y
        l0 = g * G
        tx = cuda.threadIdx.x
        nt = cuda.blockDim.x
        n, d, k = dV.shape[1], dV.shape[2], Gy.shape[1]
        nl = min(G, d - l0)
        st = cuda.shared.array(0, dtype=dt)
        for j in range(tx, nl * n, nt):
            st[j] = 0
        cuda.syncthreads()
        for j in range(tx, nl * k, nt):
            q = j // k
            st[q * n + outs[j - q * k]] = Gy[b, j - q * k, l0 + q]
        cuda.syncthreads()
        L = offs.shape[0] - 1
        for li in range(L):  # the adjoint: last layer first
            lay = L - 1 - li
            for i in range(offs[lay] + tx, offs[lay + 1], nt):
                a, c, pi = wa[i], wb[i], p[b, i]
                acc = dt(0)
                for q in range(nl):
                    ga = st[q * n + a]
                    gc = st[q * n + c]
                    dg = ga - gc
                    acc += dg * D[b, l0 + q, i]
                    t = pi * dg
                    st[q * n + a] = gc + t
                    st[q * n + c] = ga - t
                gpart[b, g, i] = acc
            cuda.syncthreads()
        for j in range(tx, nl * n, nt):  # dL/dV = P^T Gy
            q = j // n
            dV[b, j - q * n, l0 + q] = st[j]

    return {"back_fwd": back_fwd, "back_bwd": back_bwd, "fwd_fwd": fwd_fwd, "fwd_bwd": fwd_bwd}
