"""``--target numba``: emit a module of ``@njit`` CPU kernels.

The emitted module (docs/design.md section 8 contract) holds:

* ``NETWORK``, ``RELAXATION``, ``TARGET = "numba"`` and the comparator table
  (rebuilt from ``NETWORK`` at import);
* the build-time plan (:func:`netgen.codegen._numba_common.plan`): for each
  comparator, the range of P rows it can touch, so the back-sweep and its
  adjoint skip structural zeros (after the first cascade of a (5, 10450)
  splitter network only ~100 wires are live and rows stay sparse until the
  sweep reaches that cascade);
* four kernels per float type (sources in :mod:`._numba_kernels`, the
  swap code of the chosen distribution from :mod:`._swap_code` pasted
  inline): ``_fwd_rows`` / ``_bwd_rows`` (values and P rows, and their
  written adjoint) and ``_fwd_col`` / ``_bwd_col`` (P[:, y] and its
  adjoint), each ``@njit(parallel=True)`` over blocks of ``_W`` = 16 batch
  rows, batch-innermost, so each comparator is short loops over the rows
  that LLVM vectorises;
* ``Layer`` (``torch.nn.Module``): ``forward``, ``column``, ``hard``, wrapped
  in ``torch.autograd.Function`` s. Kernels are cached next to the module
  (``cache=True``) when it is a real file.
"""

from __future__ import annotations

from typing import Any

from ..network import Network
from ._numba_kernels import HELPERS, KERNELS
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
        "@@HELPERS@@": HELPERS.rstrip(),
    }
    kernels = []
    for ft in FLOAT_TYPES:
        k = KERNELS
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
    from .literals import docstring  # network text reaches the module only as a literal

    kind = net.construction.get("kind", "custom")
    return docstring(
        f"netgen generated module (target numba): {kind} network, n={net.n}, k={net.k}, "
        f"depth={net.depth}, size={net.size};\n"
        f"relaxation {r.distribution}, steepness={r.steepness!r}, art_lambda={r.art_lambda!r}, "
        f"art_epsilon={r.art_epsilon!r}.\n\n"
        "Generated code: do not edit. Rebuild with `netgen build ... --target numba`.\n"
        "Layer().forward(x) -> (values (..., k), P (..., k, n)); Layer().column(x, y) -> P[..., :, y];\n"
        "Layer().hard(x) -> exact (values, indices). CPU tensors; float32/float64 (half computed in float32)."
    )


_TEMPLATE = '''@@DOC@@

import math
import os
import platform

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
_T = 64  # wires per tile when transposing between (row, wire) and (wire, row)


@@HELPERS@@


@@KERNELS@@

# ------------------------------------------------------------ host wrappers
_KERNELS = {
    np.dtype(np.float32): (_fwd_rows_f32, _bwd_rows_f32, _fwd_col_f32, _bwd_col_f32),
    np.dtype(np.float64): (_fwd_rows_f64, _bwd_rows_f64, _fwd_col_f64, _bwd_col_f64),
}


# ------------------------------------------------ reused saved-state buffers
# What a forward saves for backward (ps, sv, D, cs: ~60 MB at B = 64 for a
# (5, 10450) network) comes from a small pool and goes back to it when autograd
# frees the graph (_Saved.__del__), so a training loop does not fault in fresh
# pages every step. At most 2 free arrays per shape, _POOL_SHAPES shapes
# (the oldest dropped); free_buffers() empties it.
_POOL = {}
_POOL_SHAPES = 8


def _take(shape, dtype):
    free = _POOL.get((shape, np.dtype(dtype)))
    return free.pop() if free else np.empty(shape, dtype=dtype)


def _give(*arrays):
    for a in arrays:
        key = (a.shape, a.dtype)
        if key not in _POOL and len(_POOL) >= _POOL_SHAPES:
            del _POOL[next(iter(_POOL))]
        free = _POOL.setdefault(key, [])
        if len(free) < 2:
            free.append(a)


def free_buffers():
    """Drop the pooled saved-state buffers (memory goes back to the system)."""
    _POOL.clear()


class _Saved:
    """A forward's saved arrays; back to the pool when autograd frees them."""

    def __init__(self, B, *arrays):
        self.B = B
        self.arrays = arrays

    def __del__(self):
        _give(*self.arrays)


def rows_numpy(x, save=True):
    """Forward kernel on a (B, n) float32/float64 C-contiguous array.
    Returns ``values, P, saved`` (``saved`` feeds :func:`rows_backward_numpy`;
    None without ``save``)."""
    B = x.shape[0]
    dt = x.dtype
    nblk = (B + _W - 1) // _W
    values = np.empty((B, _K), dtype=dt)
    P = np.empty((B, _K, _N), dtype=dt)
    ps = _take((nblk, _SIZE, _W), dt)
    if save:
        sv = _take((nblk, _SIZE, 2, _W), dt)
        D = _take((nblk, _NNZ, _W), dt)
    else:  # one scratch slot, overwritten
        sv = np.empty((nblk, 1, 2, _W), dtype=dt)
        D = np.empty((nblk, 0, _W), dtype=dt)
    _KERNELS[dt][0](x, _CA, _CB, _CLO, _CHI, _DOFF, _OUTPUTS, values, P, ps, sv, D, save)
    if not save:
        _give(ps)
        return values, P, None
    return values, P, _Saved(B, ps, sv, D)


def rows_backward_numpy(saved, gv, gP):
    """Adjoint of :func:`rows_numpy`: gradient w.r.t. x from the gradients
    of values (B, k) and P (B, k, n) (``gP`` may be None)."""
    B = saved.B
    ps, sv, D = saved.arrays
    gx = np.empty((B, _N), dtype=ps.dtype)
    has_gP = gP is not None
    if gP is None:
        gP = np.zeros((B, 0, 0), dtype=ps.dtype)
    _KERNELS[ps.dtype][1](gv, gP, has_gP, _CA, _CB, _CLO, _CHI, _DOFF, _OUTPUTS, ps, sv, D, gx)
    return gx


def column_numpy(x, y, save=True):
    """P[:, y] for (B, n) ``x`` and (B,) int64 ``y``; returns ``col, saved``
    (None without ``save``)."""
    B = x.shape[0]
    dt = x.dtype
    col = np.empty((B, _K), dtype=dt)
    nblk = (B + _W - 1) // _W
    # without save: one scratch slot, overwritten
    cs = _take((nblk, _SIZE, 3, _W), dt) if save else np.empty((nblk, 1, 3, _W), dtype=dt)
    _KERNELS[dt][2](x, y, _CA, _CB, _OUTPUTS, col, cs, save)
    return col, (_Saved(B, cs) if save else None)


def column_backward_numpy(saved, gcol):
    (cs,) = saved.arrays
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
        B = ctx.saved.B
        dt = ctx.saved.arrays[0].dtype
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
        dt = ctx.saved.arrays[0].dtype
        return torch.from_numpy(column_backward_numpy(ctx.saved, _np(gcol, _TORCH[dt]))), None


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
