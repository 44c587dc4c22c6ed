"""The torch target's lane sweeps (docs/operators.md, section 3): the soft
values ``P x``, ``W P`` (m lanes swept from the last layer to the first)
and ``P V`` (d lanes swept beside the values), never forming P.

Each layer is a handful of vector ops over its comparators in the module's
wire-major layout (wires first, batch innermost; lanes ``(n, m, B)``),
written in place and differentiated by autograd: the one node with a
written derivative is :class:`_Swap` (``p`` with the rendered ``dp/dd`` and
``dp/ds``), every other op (``index_select``, ``mul``, ``index_add_``) is
torch's. A layer mixes rows a, b as ``t[a] -= q D``, ``t[b] += q D`` with
``D = t[a] - t[b]`` and ``q = 1 - p``, so autograd keeps, per row, each
comparator's ``d`` and ``q`` (values: 2 size floats) and each lane's ``D``
(one size more per lane): O(size) per lane and row, never B x k x n
unless the result is P itself. (A written backward, as the
P engine's, would keep less; this one was chosen for being short and
checked by gradcheck, docs/operators.md.)

Real code, copied into generated torch modules by source extraction
(:data:`PARTS`); the stand-ins below only let this file import and lint on
its own.
"""

from __future__ import annotations

import math

import torch

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("_N", "_DEPTH", "_OFFSETS", "_swap")
_N = _DEPTH = 0
_OFFSETS: tuple = (0,)


def _swap(d, s, ds=False):  # pragma: no cover - rendered per relaxation
    raise NotImplementedError


# ---------------------------------------------------------------- copied parts
class _Swap(torch.autograd.Function):
    """p = F(s phi(d)) for the lane sweeps, with the rendered dp/dd and
    dp/ds as its derivative (finite at ART ties); ``s`` is a float or a 0-d
    tensor (then dL/ds is returned for it)."""

    @staticmethod
    def forward(ctx, d, s):
        ctx.save_for_backward(d, s if isinstance(s, torch.Tensor) else None)
        ctx.s = None if isinstance(s, torch.Tensor) else s
        return _swap(d, s)[0]

    @staticmethod
    def backward(ctx, g):
        d, st = ctx.saved_tensors
        s = ctx.s if st is None else st
        if ctx.needs_input_grad[1]:
            _, dp, dps = _swap(d, s, True)
            return g * dp, (g * dps).sum()
        return g * _swap(d, s)[1], None


def _mix(t, al, bl, q, D=None):
    """One layer's mixing of the rows al, bl of t, in place, with q = 1 - p:
    t[a] <- p t[a] + (1-p) t[b] = t[a] - q D, t[b] <- t[b] + q D for
    D = t[a] - t[b] (given, or computed). Written as two ``index_add_``:
    their backward passes the gradient of t through untouched (an
    ``index_copy_`` would copy all of it twice per layer)."""
    if D is None:
        D = t.index_select(0, al) - t.index_select(0, bl)
    qD = q * D
    t.index_add_(0, al, qD, alpha=-1)
    t.index_add_(0, bl, qD)


def _lane_sweep(xt, s, a, b, lanes=None, keep=False):
    """The value sweep of xt (n, B) (a copy is written), with ``lanes``
    (n, d, B) mixed beside it in place; returns the final wires and, with
    ``keep``, each layer's q = 1 - p (for the back-sweep)."""
    v = xt.clone()
    qs = []
    for l in range(_DEPTH):
        s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
        al, bl = a[s0:e0], b[s0:e0]
        d = v.index_select(0, al) - v.index_select(0, bl)
        q = torch.rsub(_Swap.apply(d, s), 1)
        _mix(v, al, bl, q, d)
        if lanes is not None:
            _mix(lanes, al, bl, q.unsqueeze(1))
        if keep:
            qs.append(q)
    return v, qs


def _lane_input(t, name, batch, rows, side, xt):
    """Lanes ``t`` of shape (rows, c) / (c, rows) or (*batch, ...) whose
    leading dims broadcast to x's batch, as (rows, c, B) in xt's dtype
    (``side``: the dim of ``t`` that P is applied to, -1 or -2)."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.dtype.is_floating_point:
        raise ValueError(f"{name} must be floating point, got {t.dtype}")
    if t.dim() < 2 or t.shape[side] != rows:
        want = f"(..., m, {rows})" if side == -1 else f"(..., {rows}, d)"
        raise ValueError(f"{name} must have shape {want}, got {tuple(t.shape)}")
    try:
        ok = torch.broadcast_shapes(t.shape[:-2], batch) == torch.Size(batch)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"{name}'s leading dims {tuple(t.shape[:-2])} do not broadcast to the batch shape "
                         f"{tuple(batch)} of x")
    if t.device != xt.device:
        raise ValueError(f"{name} is on {t.device}, x on {xt.device}")
    if t.device.type == "cpu" and not torch.compiler.is_compiling() and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or inf values")
    t = t.to(xt.dtype).expand(tuple(batch) + tuple(t.shape[-2:])).reshape((-1,) + tuple(t.shape[-2:]))
    t = t.permute(2, 1, 0) if side == -1 else t.permute(1, 2, 0)
    return t


def _nan_lanes(t, bad):
    """t (..., B) with the bad batch rows NaN (out of place: t may be
    recorded by autograd)."""
    return t if bad is None else t.masked_fill(bad, math.nan)


def _values_lanes(xt, s, bad, a, b, outs):
    """P x: (k, B)."""
    v, _ = _lane_sweep(xt if bad is None else xt.masked_fill(bad, 0.0), s, a, b)
    return _nan_lanes(v.index_select(0, outs), bad)


def _back_lanes(xt, s, bad, a, b, outs, Wt):
    """W P: (n, m, B) for Wt (k, m, B): the m lanes start on the output wires
    and are mixed from the last layer to the first with the sweep's p."""
    _, qs = _lane_sweep(xt if bad is None else xt.masked_fill(bad, 0.0), s, a, b, keep=True)
    R = Wt.new_zeros((xt.shape[0], Wt.shape[1], xt.shape[1]))
    R.index_copy_(0, outs, Wt)
    for l in range(_DEPTH - 1, -1, -1):
        s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
        _mix(R, a[s0:e0], b[s0:e0], qs[l].unsqueeze(1))
    return _nan_lanes(R, bad)


def _fwd_lanes(xt, s, bad, a, b, outs, Vt):
    """P V: (k, d, B) for Vt (n, d, B) mixed beside the values."""
    lanes = Vt.clone(memory_format=torch.contiguous_format)
    _lane_sweep(xt if bad is None else xt.masked_fill(bad, 0.0), s, a, b, lanes)
    return _nan_lanes(lanes.index_select(0, outs), bad)


#: what a generated torch module copies from this file, in order
PARTS = (_Swap, _mix, _lane_sweep, _lane_input, _nan_lanes, _values_lanes, _back_lanes, _fwd_lanes)
