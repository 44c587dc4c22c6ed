"""The torch target's lane sweeps (docs/operators.md, section 3): the soft
values ``P x``, ``W P`` (m lanes swept from the last layer to the first)
and ``P V`` (d lanes swept beside the values), never forming P.

Each layer is a handful of vector ops over its comparators in the module's
wire-major layout (wires first, batch innermost; lanes ``(n, m, B)``),
in place: rows a, b mix as ``t[a] -= q D``, ``t[b] += q D`` with
``D = t[a] - t[b]`` and ``q = 1 - p`` (two ``index_add_``). One
``autograd.Function`` per sweep with the written backward of
docs/operators.md section 3 (the lanes' adjoint gives dL/dp of every
comparator, then the value sweep's adjoint gives dL/dx and dL/ds). Kept
per row for the backward: each comparator's q, d, dp/dd (and dp/ds with a
steepness gradient) and each lane's D: (3 + lanes) size floats, O(size)
per lane and row, never B x k x n unless the result is P itself; every op
of the backward touches a layer's comparators only (no full-width
temporaries). Once differentiable, as the module's other sweeps (a second
derivative raises).

Real code, copied into generated torch modules by source extraction
(:data:`PARTS`); the stand-ins below only let this file import and lint on
its own.
"""

from __future__ import annotations

import math

import torch

from ..runtime.common import refuse_second_order

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("_N", "_SIZE", "_DEPTH", "_OFFSETS", "_swap")
_N = _SIZE = _DEPTH = 0
_OFFSETS: tuple = (0,)


def _swap(d, s, ds=False):  # pragma: no cover - rendered per relaxation
    raise NotImplementedError


# ---------------------------------------------------------------- copied parts
class _Lanes(torch.autograd.Function):
    """One lane sweep with its written backward (docs/operators.md, section
    3). ``mode``: "values" (P x: (k, B)), "back" (W P: (n, m, B) for lanes
    Wt (k, m, B)) or "fwd" (P V: (k, d, B) for lanes Vt (n, d, B)). Layout
    wire-major: xt (n, B); a layer mixes rows a, b as t[a] -= q D,
    t[b] += q D (D = t[a] - t[b], q = 1 - p), by index_add_. Kept for the
    backward, per row: each comparator's q, d and dp/dd (and dp/ds with a
    steepness gradient) and, per lane, its D at each comparator (back: in
    the order the back-sweep made them)."""

    @staticmethod
    def forward(ctx, xt, s, lanes, bad, a, b, outs, mode):
        ctx.set_materialize_grads(False)
        n, B = xt.shape
        want_s = ctx.needs_input_grad[1]
        train = ctx.needs_input_grad[0] or want_s or ctx.needs_input_grad[2]
        v = xt.clone() if bad is None else xt.masked_fill(bad, 0.0)
        q_all = xt.new_empty(_SIZE, B)
        d_all = xt.new_empty(_SIZE, B) if train else None
        g_all = xt.new_empty(_SIZE, B) if train else None
        h_all = xt.new_empty(_SIZE, B) if want_s else None
        U = lanes.clone(memory_format=torch.contiguous_format) if mode == "fwd" else None
        D_all = xt.new_empty((_SIZE,) + tuple(lanes.shape[1:])) if train and mode != "values" else None
        for l in range(_DEPTH):
            s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
            al, bl = a[s0:e0], b[s0:e0]
            d = v.index_select(0, al) - v.index_select(0, bl)
            if want_s:
                p, g, h = _swap(d, s, True)
                h_all[s0:e0] = h
            else:
                p, g = _swap(d, s)
            q = torch.rsub(p, 1)
            c = q * d
            v.index_add_(0, al, c, alpha=-1)
            v.index_add_(0, bl, c)
            q_all[s0:e0] = q
            if train:
                d_all[s0:e0] = d
                g_all[s0:e0] = g
            if U is not None:
                D = U.index_select(0, al) - U.index_select(0, bl)
                if D_all is not None:
                    D_all[s0:e0] = D
                c = q.unsqueeze(1) * D
                U.index_add_(0, al, c, alpha=-1)
                U.index_add_(0, bl, c)
        if mode == "values":
            out = v.index_select(0, outs)
        elif mode == "fwd":
            out = U.index_select(0, outs)
        else:  # back: R <- R M_l from the last layer to the first
            out = lanes.new_zeros((n,) + tuple(lanes.shape[1:]))
            out.index_copy_(0, outs, lanes)
            for l in range(_DEPTH - 1, -1, -1):
                s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
                al, bl = a[s0:e0], b[s0:e0]
                D = out.index_select(0, al) - out.index_select(0, bl)
                if D_all is not None:
                    D_all[s0:e0] = D
                c = q_all[s0:e0].unsqueeze(1) * D
                out.index_add_(0, al, c, alpha=-1)
                out.index_add_(0, bl, c)
        if train:
            ctx.save_for_backward(bad, a, b, outs, q_all, d_all, g_all, h_all, D_all, xt,
                                  s if isinstance(s, torch.Tensor) else None, lanes)
        ctx.mode = mode
        return out if bad is None else out.masked_fill_(bad, math.nan)

    @staticmethod
    def backward(ctx, g_out):
        if g_out is None:
            return None, None, None, None, None, None, None, None
        bad, a, b, outs, q_all, d_all, g_all, h_all, D_all, xt, s, lanes = ctx.saved_tensors
        with torch.no_grad():
            gx, gs, gl = _lanes_backward(ctx.mode, g_out, bad, a, b, outs, q_all, d_all, g_all, h_all, D_all)
        gx, gs, gl = refuse_second_order((gx, gs, gl), (xt, s, lanes))
        return (gx if ctx.needs_input_grad[0] else None, gs if ctx.needs_input_grad[1] else None,
                gl if ctx.needs_input_grad[2] else None, None, None, None, None, None)


def _lanes_backward(mode, g_out, bad, a, b, outs, q_all, d_all, g_all, h_all, D_all):
    """The adjoint sweeps of _Lanes: (dL/dx (n, B), dL/ds or None, dL/dlanes
    or None). dL/dp of every comparator (gp) comes from the lanes' adjoint
    (back: forward over the layers; fwd: backward), then the value sweep's
    adjoint runs last layer first with it."""
    n, B = _N, q_all.shape[1]
    gp = q_all.new_zeros(_SIZE, B)
    u = q_all.new_zeros(n, B)
    gl = None
    g_out = g_out if bad is None else g_out.masked_fill(bad, 0.0)
    if mode == "values":
        u.index_copy_(0, outs, g_out.to(u.dtype))
    elif mode == "back":  # G = dL/dR; layer 0 made the result: l = 0 .. L-1
        G = g_out.to(u.dtype).clone(memory_format=torch.contiguous_format)
        _lane_adjoint(G, range(_DEPTH), a, b, q_all, D_all, gp)
        gl = G.index_select(0, outs)
    else:  # fwd: the lanes' adjoint, last layer first
        G = q_all.new_zeros((n,) + tuple(g_out.shape[1:]))
        G.index_copy_(0, outs, g_out.to(u.dtype))
        _lane_adjoint(G, range(_DEPTH - 1, -1, -1), a, b, q_all, D_all, gp)
        gl = G
    # the value sweep's adjoint: dL/dd = (gp + w d) dp/dd, dL/ds += (gp + w d) dp/ds
    for l in range(_DEPTH - 1, -1, -1):
        s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
        al, bl = a[s0:e0], b[s0:e0]
        w = u.index_select(0, al) - u.index_select(0, bl)
        gp_l = gp[s0:e0].addcmul_(w, d_all[s0:e0])  # dL/dp of the layer, in place in gp
        c = q_all[s0:e0] * w - gp_l * g_all[s0:e0]
        u.index_add_(0, al, c, alpha=-1)
        u.index_add_(0, bl, c)
    gs = None
    if h_all is not None:
        gs = torch.linalg.vecdot(gp.flatten(), h_all.flatten())
        if bad is not None:
            gs = torch.where(bad.any(), math.nan, gs)
    if bad is not None:
        u.masked_fill_(bad, math.nan)
        if gl is not None:
            gl = gl.masked_fill(bad, math.nan)
    return u, gs, gl


def _lane_adjoint(G, layers, a, b, q_all, D_all, gp):
    """The lanes' adjoint through ``layers`` (in that order), in place in G
    (n, c, B): at each layer dL/dp += sum over lanes of (G[a] - G[b]) D
    (into gp), then G <- G M_l (M_l is symmetric)."""
    for l in layers:
        s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
        al, bl = a[s0:e0], b[s0:e0]
        w = G.index_select(0, al) - G.index_select(0, bl)
        gp[s0:e0] = torch.linalg.vecdot(w, D_all[s0:e0], dim=1)
        c = q_all[s0:e0].unsqueeze(1) * w
        G.index_add_(0, al, c, alpha=-1)
        G.index_add_(0, bl, c)


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
    lead, batch = tuple(t.shape[:-2]), tuple(batch)  # (torch.broadcast_shapes imports sympy: 0.7 s once)
    if len(lead) > len(batch) or any(e not in (1, f) for e, f in zip(lead[::-1], batch[::-1])):
        raise ValueError(f"{name}'s leading dims {tuple(t.shape[:-2])} do not broadcast to the batch shape "
                         f"{tuple(batch)} of x")
    if t.device != xt.device:
        raise ValueError(f"{name} is on {t.device}, x on {xt.device}")
    if t.device.type == "cpu" and not torch.compiler.is_compiling() and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or inf values")
    t = t.to(xt.dtype).expand(tuple(batch) + tuple(t.shape[-2:])).reshape((-1,) + tuple(t.shape[-2:]))
    t = t.permute(2, 1, 0) if side == -1 else t.permute(1, 2, 0)
    return t


def _values_lanes(xt, s, bad, a, b, outs):
    """P x: (k, B)."""
    return _Lanes.apply(xt, s, None, bad, a, b, outs, "values")


def _back_lanes(xt, s, bad, a, b, outs, Wt):
    """W P: (n, m, B) for Wt (k, m, B): the m lanes start on the output wires
    and are mixed from the last layer to the first with the sweep's p."""
    return _Lanes.apply(xt, s, Wt, bad, a, b, outs, "back")


def _fwd_lanes(xt, s, bad, a, b, outs, Vt):
    """P V: (k, d, B) for Vt (n, d, B) mixed beside the values."""
    return _Lanes.apply(xt, s, Vt, bad, a, b, outs, "fwd")


#: what a generated torch module copies from this file, in order
PARTS = (_Lanes, _lanes_backward, _lane_adjoint, _lane_input, _values_lanes, _back_lanes, _fwd_lanes)
