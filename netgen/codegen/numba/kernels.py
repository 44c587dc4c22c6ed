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

The kernels that compute P and its adjoint (``_fwd_P_py``,
``_bwd_rows_py``) are in :mod:`.numba_engine`; this file compiles them with
the others:

* ``_fwd_vals``: values by the forward sweep, saving p (and with a gradient
  dp/dd * d, dp/dd; with a steepness gradient dp/ds * d, dp/ds);
* ``_fwd_P`` / ``_bwd_rows``: P and its adjoint (:mod:`.numba_engine`);
* ``_fwd_col`` / ``_bwd_col``: P[:, y] by pushing e_y forward with the
  values, and its adjoint.
"""

from __future__ import annotations

import numba
import numpy as np

from .engine import _bwd_rows_py, _fwd_P_py
from .vector import _W, _ftz_off, _ftz_on, _load_block, _one_like, _store_block, _vmix, _vq

__all__ = ["PARTS", "STATE"]

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("_CACHE", "_PARALLEL", "_swap")
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
PARTS = (_jit, _fwd_vals_py, _fwd_col_py, _bwd_col_py)
