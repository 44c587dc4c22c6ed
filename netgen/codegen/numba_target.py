"""``--target numba``: emit a module of ``@njit`` CPU kernels.

The emitted module (DESIGN.md section 8 contract) holds:

* ``NETWORK``, ``RELAXATION``, ``TARGET = "numba"`` and the comparator table
  (rebuilt from ``NETWORK`` at import);
* the build-time plan (:func:`netgen.codegen._numba_common.plan`): for each
  comparator, the range of P rows it can touch, so the back-sweep and its
  adjoint skip structural zeros (after the first cascade of a (5, 10450)
  splitter network only ~100 wires are live and rows stay sparse until the
  sweep reaches that cascade);
* four kernels, each ``@njit(parallel=True)`` over the batch (``prange``),
  with the chosen distribution pasted inline:

  - ``_fwd_rows``: values by the forward sweep, saved swap probabilities,
    P rows by the back-sweep (R <- R M_l from the last layer to the first,
    touching rows ``clo..chi`` only), and, when a gradient is needed, the
    differences ``R[r, a] - R[r, b]`` the adjoint needs;
  - ``_bwd_rows``: the written adjoint: dL/dP pushed forward through the
    layers (the adjoint of the back-sweep) gives dL/dp per comparator, then
    one backward sweep of the values' adjoint adds dL/dp * dp/dd;
  - ``_fwd_col`` / ``_bwd_col``: P[:, y] by pushing e_y forward with the
    values (O(size) work, O(n) memory per row) and its adjoint; these run
    ``_W`` = 16 batch rows per ``prange`` step, batch-innermost, so each
    comparator is a short loop over the rows that LLVM vectorises;
* ``Layer`` (``torch.nn.Module``): ``forward``, ``column``, ``hard``, wrapped
  in ``torch.autograd.Function`` s. Kernels are cached next to the module
  (``cache=True``) when it is a real file.
"""

from __future__ import annotations

from typing import Any

from ..network import Network
from ._numba_common import (
    FLOAT_TYPES,
    lit,
    network_literal,
    plan_source,
    relaxation_literal,
    relaxation_of,
    swap_code,
)

TARGET = "numba"


def emit(net: Network, r: Any = None) -> str:
    """Full source of the generated numba module for ``net`` relaxed by
    ``r`` (a :class:`~netgen.relax.distributions.Relaxation`; None = the
    default for ``net``). Deterministic: same inputs, same bytes."""
    if not isinstance(net, Network):
        raise ValueError(f"expected a Network, got {type(net).__name__}")
    r = relaxation_of(net, r)
    src = _TEMPLATE
    subs = {
        "@@DOC@@": _doc(net, r),
        "@@NETWORK@@": network_literal(net),
        "@@RELAXATION@@": relaxation_literal(r),
        "@@PLAN@@": plan_source().rstrip(),
    }
    kernels = []
    for ft in FLOAT_TYPES:
        k = _KERNELS
        for key, val in {
            "@@SFX@@": "_f32" if ft == "float32" else "_f64",
            "@@NPT@@": f"np.{ft}",
            "@@ONE@@": lit(1.0, ft),
            "@@ZERO@@": lit(0.0, ft),
            "@@SWAP16@@": swap_code(r, 16, ft, inline_exp=True),
        }.items():
            k = k.replace(key, val)
        kernels.append(k)
    subs["@@KERNELS@@"] = "\n\n".join(kernels)
    for key, val in subs.items():
        src = src.replace(key, val)
    return src


def _doc(net: Network, r) -> str:
    kind = net.construction.get("kind", "custom")
    return (
        f'"""netgen generated module (target numba): {kind} network, n={net.n}, k={net.k}, '
        f"depth={net.depth}, size={net.size};\n"
        f"relaxation {r.distribution}, steepness={r.steepness!r}, art_lambda={r.art_lambda!r}, "
        f"art_epsilon={r.art_epsilon!r}.\n\n"
        "Generated code: do not edit. Rebuild with `netgen build ... --target numba`.\n"
        "Layer().forward(x) -> (values (..., k), P (..., k, n)); Layer().column(x, y) -> P[..., :, y];\n"
        'Layer().hard(x) -> exact (values, indices). CPU tensors; float32/float64 (half computed in float32).\n"""'
    )


_KERNELS = '''@numba.njit(parallel=_PARALLEL, cache=_CACHE, error_model="numpy")
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
        for j in range(nb):
            for w in range(n):
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
        for j in range(nb):
            for r in range(k):
                for w in range(n):
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
            for j in range(nb):
                for r in range(k):
                    for w in range(n):
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
        for j in range(nb):
            for w in range(n):
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
        v = np.zeros((n, _W), dtype=@@NPT@@)  # padding rows (j >= nb) stay 0
        u = np.zeros((n, _W), dtype=@@NPT@@)
        for j in range(nb):
            for w in range(n):
                v[w, j] = x[b0 + j, w]
            u[y[b0 + j], j] = @@ONE@@
        pj = np.empty(_W, dtype=@@NPT@@)  # this comparator's p and dp per row
        dpj = np.empty(_W, dtype=@@NPT@@)
        for i in range(size):
            va = v[ca[i]]
            vc = v[cb[i]]
            ua_ = u[ca[i]]
            uc_ = u[cb[i]]
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
                col[b0 + j, r] = u[outs[r], j]


@numba.njit(parallel=_PARALLEL, cache=_CACHE, error_model="numpy")
def _bwd_col@@SFX@@(gcol, ca, cb, outs, cs, gx):
    B, n = gx.shape
    size = ca.shape[0]
    k = outs.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        g = np.zeros((n, _W), dtype=@@NPT@@)
        gu = np.zeros((n, _W), dtype=@@NPT@@)
        for j in range(nb):
            for r in range(k):
                gu[outs[r], j] += gcol[b0 + j, r]
        for i in range(size - 1, -1, -1):
            ga_ = g[ca[i]]
            gc_ = g[cb[i]]
            ua_ = gu[ca[i]]
            uc_ = gu[cb[i]]
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
        for j in range(nb):
            for w in range(n):
                gx[b0 + j, w] = g[w, j]
'''


_TEMPLATE = '''@@DOC@@

import math
import os

import numba
import numpy as np
import torch

TARGET = "numba"

@@NETWORK@@

@@RELAXATION@@


@@PLAN@@
_CA = np.ascontiguousarray(_COMPS[:, 0])
_CB = np.ascontiguousarray(_COMPS[:, 1])
# NETGEN_NUMBA_PARALLEL=0 compiles serial kernels (same code, prange runs as
# range; ~3x faster to compile, used by netgen's unit tests). Only the
# parallel kernels are cached on disk, next to this file.
_PARALLEL = os.environ.get("NETGEN_NUMBA_PARALLEL", "1") != "0"
_CACHE = _PARALLEL and os.path.isfile(globals().get("__file__") or "")
_W = 16  # batch rows per block in every kernel (one or two SIMD vectors)


@@KERNELS@@

# ------------------------------------------------------------ host wrappers
_KERNELS = {
    np.dtype(np.float32): (_fwd_rows_f32, _bwd_rows_f32, _fwd_col_f32, _bwd_col_f32),
    np.dtype(np.float64): (_fwd_rows_f64, _bwd_rows_f64, _fwd_col_f64, _bwd_col_f64),
}


def rows_numpy(x, save=True):
    """Forward kernel on a (B, n) float32/float64 C-contiguous array.
    Returns ``values, P, saved`` (``saved`` feeds :func:`rows_backward_numpy`)."""
    B = x.shape[0]
    dt = x.dtype
    nblk = (B + _W - 1) // _W
    values = np.empty((B, _K), dtype=dt)
    P = np.empty((B, _K, _N), dtype=dt)
    ps = np.empty((nblk, _SIZE, _W), dtype=dt)
    sv = np.empty((nblk, _SIZE if save else 0, 2, _W), dtype=dt)
    D = np.empty((nblk, _NNZ if save else 0, _W), dtype=dt)
    _KERNELS[dt][0](x, _CA, _CB, _CLO, _CHI, _DOFF, _OUTPUTS, values, P, ps, sv, D, save)
    return values, P, (B, ps, sv, D)


def rows_backward_numpy(saved, gv, gP):
    """Adjoint of :func:`rows_numpy`: gradient w.r.t. x from the gradients
    of values (B, k) and P (B, k, n) (``gP`` may be None)."""
    B, ps, sv, D = saved
    gx = np.empty((B, _N), dtype=ps.dtype)
    has_gP = gP is not None
    if gP is None:
        gP = np.zeros((B, 0, 0), dtype=ps.dtype)
    _KERNELS[ps.dtype][1](gv, gP, has_gP, _CA, _CB, _CLO, _CHI, _DOFF, _OUTPUTS, ps, sv, D, gx)
    return gx


def column_numpy(x, y, save=True):
    """P[:, y] for (B, n) ``x`` and (B,) int64 ``y``; returns ``col, saved``."""
    B = x.shape[0]
    dt = x.dtype
    m = _SIZE if save else 0
    col = np.empty((B, _K), dtype=dt)
    cs = np.empty(((B + _W - 1) // _W, m, 3, _W), dtype=dt)
    _KERNELS[dt][2](x, y, _CA, _CB, _OUTPUTS, col, cs, save)
    return col, cs


def column_backward_numpy(saved, gcol):
    cs = saved
    gx = np.empty((gcol.shape[0], _N), dtype=cs.dtype)
    _KERNELS[cs.dtype][3](gcol, _CA, _CB, _OUTPUTS, cs, gx)
    return gx


def _np(t, dtype):
    return np.ascontiguousarray(t.detach().to(dtype).numpy())


class _Rows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        save = bool(ctx.needs_input_grad[0])
        values, P, saved = rows_numpy(_np(x, x.dtype), save)
        ctx.saved = saved
        return torch.from_numpy(values), torch.from_numpy(P)

    @staticmethod
    def backward(ctx, gv, gP):
        if gv is None and gP is None:
            return None
        B, ps = ctx.saved[:2]
        dt = ps.dtype
        gvn = np.zeros((B, _K), dtype=dt) if gv is None else _np(gv, _TORCH[dt])
        gPn = None if gP is None else _np(gP, _TORCH[dt])
        return torch.from_numpy(rows_backward_numpy(ctx.saved, gvn, gPn))


class _Column(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.set_materialize_grads(False)
        col, saved = column_numpy(_np(x, x.dtype), y, bool(ctx.needs_input_grad[0]))
        ctx.saved = saved
        return torch.from_numpy(col)

    @staticmethod
    def backward(ctx, gcol):
        if gcol is None:
            return None, None
        return torch.from_numpy(column_backward_numpy(ctx.saved, _np(gcol, _TORCH[ctx.saved.dtype]))), None


_TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}


def _prepare(x):
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"expected a torch.Tensor, got {type(x).__name__}")
    if x.shape[-1:] != (_N,):
        raise ValueError(f"input must have shape (..., {_N}), got {tuple(x.shape)}")
    if x.device.type != "cpu":
        raise ValueError(f"the numba target runs on CPU tensors; got a tensor on {x.device} (use the cuda target)")
    if not x.dtype.is_floating_point:
        raise ValueError(f"input must be floating point, got {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("input contains NaN or inf")
    cdt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    return x.reshape(-1, _N).to(cdt), x.shape[:-1], x.dtype


class Layer(torch.nn.Module):
    """Relaxed top-k / sorting layer for the network in ``NETWORK``."""

    n = _N
    k = _K

    def forward(self, x):
        x2, lead, dt = _prepare(x)
        values, P = _Rows.apply(x2)
        return values.reshape(*lead, _K).to(dt), P.reshape(*lead, _K, _N).to(dt)

    def column(self, x, y):
        x2, lead, dt = _prepare(x)
        y = torch.as_tensor(y)
        if y.dtype.is_floating_point or y.dtype == torch.bool or y.is_complex():
            raise ValueError(f"y must be an integer tensor, got {y.dtype}")
        if tuple(y.shape) != tuple(lead):
            raise ValueError(f"y must have shape {tuple(lead)}, got {tuple(y.shape)}")
        yn = np.ascontiguousarray(y.reshape(-1).cpu().numpy().astype(np.int64))
        if yn.size and (yn.min() < 0 or yn.max() >= _N):
            raise ValueError(f"y must lie in 0..{_N - 1}")
        col = _Column.apply(x2, yn)
        return col.reshape(*lead, _K).to(dt)

    def hard(self, x):
        """The exact network: ``(values, indices)`` of shapes (..., k)."""
        if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != _N:
            raise ValueError(f"input must be a tensor of shape (..., {_N})")
        if x.dtype.is_floating_point and bool(torch.isnan(x).any()):
            raise ValueError("input contains NaN values; the exact network needs ordered inputs")
        lead = x.shape[:-1]
        v = x.detach().reshape(-1, _N).clone()
        idx = torch.arange(_N, device=v.device).expand(v.shape[0], _N).clone()
        for l in range(len(_OFFSETS) - 1):
            a = torch.from_numpy(_CA[_OFFSETS[l]:_OFFSETS[l + 1]])
            c = torch.from_numpy(_CB[_OFFSETS[l]:_OFFSETS[l + 1]])
            va, vc = v[:, a], v[:, c]
            ia, ic = idx[:, a], idx[:, c]
            swap = vc > va
            v[:, a] = torch.where(swap, vc, va)
            v[:, c] = torch.where(swap, va, vc)
            idx[:, a] = torch.where(swap, ic, ia)
            idx[:, c] = torch.where(swap, ia, ic)
        o = torch.from_numpy(_OUTPUTS)
        return v[:, o].reshape(*lead, _K), idx[:, o].reshape(*lead, _K)

    def extra_repr(self):
        return f"n={_N}, k={_K}, target=numba, {RELAXATION['distribution']}"
'''
