"""The fixed part of every generated torch module: table decoding, the lazy
``NETWORK``, the two sweeps as ``torch.autograd.Function`` s with their
written backward (P's rows and their adjoint by the P engine of
:mod:`.engine`), input preparation and ``Layer`` (on the one Layer base,
:mod:`netgen.codegen.runtime.layer`).

Real code, copied into generated modules by source extraction
(:data:`PARTS`, :func:`netgen.codegen.runtime.assemble`). It reads the
module constants the torch emitter writes (:data:`READS`: among them the
wires ``_A``/``_B``/``_OUTS`` the emitter decodes, and the rendered
``_swap(d, s, ds=False) -> (p, dp/dd[, dp/ds])``); the stand-ins below only
let this file import and lint on its own.

Layout is wire-major: x (n, B), one slice of the index buffers ``a`` (max
wires) / ``b`` (min wires) per layer, every op over all comparators of a
layer at once with the batch innermost.
"""

from __future__ import annotations

import base64
import json
import math
import sys
import zlib

import torch

from ..runtime.common import check_labels, check_values, hard_network, refuse_second_order
from ..runtime.layer import LayerBase
from .engine import _rows, _rows_adjoint
from ..runtime.lanes import _back_lanes, _fwd_lanes, _lane_input, _values_lanes

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("_N", "_K", "_DEPTH", "_SIZE", "_MODE", "_S", "_OFFSETS", "_BLOB", "_CONSTRUCTION", "RELAXATION", "_A", "_B",
         "_OUTS", "_swap")
_N = _K = _DEPTH = _SIZE = 0
_MODE = "save"
_S = 1.0
_OFFSETS: tuple = (0,)
_BLOB: tuple = ()
_CONSTRUCTION = "{}"
RELAXATION: dict = {}
_A = _B = _OUTS = torch.zeros(0, dtype=torch.int64)


def _swap(d, s, ds=False):  # pragma: no cover - rendered per relaxation
    raise NotImplementedError


# ---------------------------------------------------------------- copied parts
def _decode():
    """Comparator wires (a = max, b = min) and output wires from _BLOB."""
    if sys.byteorder != "little":  # pragma: no cover
        raise RuntimeError("this generated module stores little-endian int32 data")
    raw = zlib.decompress(base64.b64decode("".join(_BLOB)))
    t = torch.frombuffer(bytearray(raw), dtype=torch.int32).to(torch.int64)
    a = torch.cumsum(t[:_SIZE], 0)
    b = a + t[_SIZE : 2 * _SIZE]
    return a, b, t[2 * _SIZE :]


def __getattr__(name):
    # NETWORK (the interchange dict) is built on first use: cheap imports.
    if name == "NETWORK":
        pairs = torch.stack([_A, _B], 1).tolist()
        net = {
            "format": "netgen-network/1",
            "n": _N,
            "outputs": _OUTS.tolist(),
            "layers": [pairs[s:e] for s, e in zip(_OFFSETS[:-1], _OFFSETS[1:])],
            "construction": json.loads(_CONSTRUCTION),
            "stats": {"depth": _DEPTH, "size": _SIZE},
        }
        globals()["NETWORK"] = net
        return net
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _TopK(torch.autograd.Function):
    """Soft values and P. Layout is wire-major: x (n, B) -> values (k, B),
    R (n, k, B) with R[c, r, i] = P[i, r, c] (batch innermost: every
    elementwise op is contiguous and vectorised). ``s`` (steepness) is a
    float or a 0-d tensor; with a tensor that needs a gradient, dL/ds is
    returned for it."""

    @staticmethod
    def forward(ctx, x, s, bad, a, b, outs):
        ctx.set_materialize_grads(False)
        n, B = x.shape
        want_s = ctx.needs_input_grad[1]
        train = ctx.needs_input_grad[0] or want_s
        v = _zero_rows(x, bad)  # bad rows (NaN/inf input) run on zeros, reported as NaN
        p_all = x.new_empty(_SIZE, B)
        if train:
            d_all = x.new_empty(_SIZE, B)
            g_all = x.new_empty(_SIZE, B)
        gs_all = x.new_empty(_SIZE, B) if want_s else None
        # forward sweep of the values: v[a] <- p x + (1-p) y, v[b] <- (1-p) x + p y
        for l in range(_DEPTH):
            s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
            al, bl = a[s0:e0], b[s0:e0]
            xa, xb = v.index_select(0, al), v.index_select(0, bl)
            d = xa - xb
            if want_s:
                p, g, gs = _swap(d, s, True)
                gs_all[s0:e0] = gs
            else:
                p, g = _swap(d, s)
            v.index_copy_(0, al, torch.lerp(xb, xa, p))  # p xa + (1-p) xb
            v.index_copy_(0, bl, torch.lerp(xa, xb, p))  # (1-p) xa + p xb
            p_all[s0:e0] = p
            if train:
                d_all[s0:e0] = d
                g_all[s0:e0] = g
        values = v[outs]
        # P's k rows (the back-sweep, last layer first, by rank groups; torch_engine)
        q_all = torch.rsub(p_all, 1)
        R, ctx.group, D_all = _rows(x, a, b, outs, q_all, train and _MODE == "save")
        if train:
            ctx.save_for_backward(bad, a, b, outs, p_all, d_all, g_all, D_all, gs_all, x,
                                  s if isinstance(s, torch.Tensor) else None)
        return _nan_rows(values, bad), _nan_rows(R, bad)

    @staticmethod
    def backward(ctx, g_values, g_R):
        if g_values is None and g_R is None:  # no gradient reached the outputs: none (as numba and cuda)
            return None, None, None, None, None, None
        bad, a, b, outs, p_all, d_all, g_all, D_all, gs_all, x, s = ctx.saved_tensors
        with torch.no_grad():
            gx, gs = _topk_backward(g_values, g_R, bad, a, b, outs, p_all, d_all, g_all, D_all, ctx.group, gs_all)
        gx, gs = refuse_second_order((gx, gs), (x, s))
        return gx, gs, None, None, None, None


def _topk_backward(g_values, g_R, bad, a, b, outs, p_all, d_all, g_all, D_all, group, gs_all):
    """Adjoint sweeps of _TopK: (dL/dx (n, B), dL/ds or None)."""
    n, B = _N, p_all.shape[1]
    # dL/dp from P = R_0: G_0 = dL/dR_0, G_l = G_(l-1) M_l (first layer first);
    # dL/dp_l = sum_r (R_l[a] - R_l[b]) (G_(l-1)[a] - G_(l-1)[b]); R_l's differences
    # come from D_all (mode save) or a second back-sweep per rank group (recompute)
    gp_all = p_all.new_zeros(_SIZE, B)
    if g_R is not None:
        _rows_adjoint(g_R, a, b, outs, torch.rsub(p_all, 1), D_all, group, gp_all)
    # adjoint of the value sweep, last layer first; gp_all becomes dL/dp
    u = p_all.new_zeros(n, B)
    if g_values is not None:
        u.index_copy_(0, outs, g_values.to(u.dtype))
    for l in range(_DEPTH - 1, -1, -1):
        s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
        al, bl = a[s0:e0], b[s0:e0]
        ua, ub = u.index_select(0, al), u.index_select(0, bl)
        p = p_all[s0:e0]
        t = gp_all[s0:e0].addcmul_(ua - ub, d_all[s0:e0]).mul(g_all[s0:e0])  # dL/dd
        u.index_copy_(0, al, torch.lerp(ub, ua, p).add_(t))
        u.index_copy_(0, bl, torch.lerp(ua, ub, p).sub_(t))
    gs = None if gs_all is None else _nan_if_bad(torch.linalg.vecdot(gp_all.flatten(), gs_all.flatten()), bad)
    return _nan_rows(u, bad), gs


class _Column(torch.autograd.Function):
    """P[i, :, y_i] by pushing e_y forward with the values. Layout: x (n, B),
    y (B,) -> (k, B). V is (n, 2, B): channel 0 carries the values, 1 e_y."""

    @staticmethod
    def forward(ctx, x, s, y, bad, a, b, outs):
        ctx.set_materialize_grads(False)
        n, B = x.shape
        want_s = ctx.needs_input_grad[1]
        train = ctx.needs_input_grad[0] or want_s
        V = torch.stack([x if bad is None else x.masked_fill(bad, 0.0), torch.zeros_like(x)], 1)
        V[y, 1, torch.arange(B, device=x.device)] = 1
        if train:
            p_all = x.new_empty(_SIZE, B)
            d_all = x.new_empty(_SIZE, 2, B)
            g_all = x.new_empty(_SIZE, B)
        gs_all = x.new_empty(_SIZE, B) if want_s else None
        for l in range(_DEPTH):
            s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
            al, bl = a[s0:e0], b[s0:e0]
            Va, Vb = V.index_select(0, al), V.index_select(0, bl)
            W = Va - Vb
            if want_s:
                p, g, gs = _swap(W[:, 0], s, True)
                gs_all[s0:e0] = gs
            else:
                p, g = _swap(W[:, 0], s)
            pp = p.unsqueeze(1)
            V.index_copy_(0, al, torch.lerp(Vb, Va, pp))
            V.index_copy_(0, bl, torch.lerp(Va, Vb, pp))
            if train:
                p_all[s0:e0] = p
                d_all[s0:e0] = W
                g_all[s0:e0] = g
        if train:
            ctx.save_for_backward(bad, a, b, outs, p_all, d_all, g_all, gs_all, x,
                                  s if isinstance(s, torch.Tensor) else None)
        return _nan_rows(V[outs, 1], bad)

    @staticmethod
    def backward(ctx, g_col):
        if g_col is None:
            return None, None, None, None, None, None, None
        *saved, x, s = ctx.saved_tensors
        with torch.no_grad():
            gx, gs = _column_backward(g_col, *saved)
        gx, gs = refuse_second_order((gx, gs), (x, s))
        return gx, gs, None, None, None, None, None


def _column_backward(g_col, bad, a, b, outs, p_all, d_all, g_all, gs_all):
    """Adjoint sweep of _Column: (dL/dx (n, B), dL/ds or None)."""
    n, B = _N, p_all.shape[1]
    U = p_all.new_zeros(n, 2, B)
    U[outs, 1] = g_col.to(U.dtype)
    gp_all = None if gs_all is None else p_all.new_empty(_SIZE, B)
    for l in range(_DEPTH - 1, -1, -1):
        s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
        al, bl = a[s0:e0], b[s0:e0]
        Ua, Ub = U.index_select(0, al), U.index_select(0, bl)
        gp = torch.linalg.vecdot(Ua - Ub, d_all[s0:e0], dim=1)  # dL/dp
        if gp_all is not None:
            gp_all[s0:e0] = gp
        t = gp * g_all[s0:e0]  # dL/dd
        p = p_all[s0:e0].unsqueeze(1)
        na, nb = torch.lerp(Ub, Ua, p), torch.lerp(Ua, Ub, p)
        na[:, 0] += t
        nb[:, 0] -= t
        U.index_copy_(0, al, na)
        U.index_copy_(0, bl, nb)
    gs = None if gs_all is None else _nan_if_bad(torch.linalg.vecdot(gp_all.flatten(), gs_all.flatten()), bad)
    return _nan_rows(U[:, 0], bad), gs


def _zero_rows(x, bad):
    """A copy of x (n, B) with the bad batch rows zeroed."""
    return x.clone() if bad is None else x.masked_fill(bad, 0.0)


def _nan_rows(t, bad):
    """t (..., B) with the bad batch rows set to NaN, in place."""
    return t if bad is None else t.masked_fill_(bad, math.nan)


def _nan_if_bad(gs, bad):
    """dL/ds is NaN when any row was bad (no host sync)."""
    return gs if bad is None else torch.where(bad.any(), math.nan, gs)


def _checked():
    """Whether value checks may synchronise: eager CPU tensors only. On a GPU,
    under torch.compile or while capturing a CUDA graph, bad rows are
    reported as NaN instead (see the module docstring)."""
    return not torch.compiler.is_compiling()


def _prepare(x, s):
    """x (..., n), checked by the Layer base, wire-major (n, B) in the
    compute dtype, the mask of rows with a NaN/inf value (B,) or None where
    the values were checked (eager CPU: a bad value raises, as does an
    overflowing steepness), and the steepness ``s`` (the base's value) to
    compute with (a float or a 0-d tensor in the compute dtype)."""
    cdtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    xt = x.to(cdtype).reshape(-1, _N).t().contiguous()
    if isinstance(s, torch.Tensor):
        s = s.to(device=xt.device, dtype=cdtype)
    if xt.device.type == "cpu" and _checked():
        check_values(xt, s)  # NaN/inf values or an overflowing steepness raise
        return xt, None, s  # checked: no row to mask
    return xt, ~torch.isfinite(xt).all(0), s


class Layer(LayerBase):
    """The relaxed network as a layer (see the module docstring).
    ``steepness``: None for ``RELAXATION["steepness"]``, else a number, a
    numpy scalar, a 1-element tensor or an ``nn.Parameter`` (learned: it
    gets a gradient). ``layer.steepness`` is read at every call."""

    n = _N
    k = _K

    def __init__(self, steepness=None):
        super().__init__(_S if steepness is None else steepness)
        self.register_buffer("a", _A.clone(), persistent=False)
        self.register_buffer("b", _B.clone(), persistent=False)
        self.register_buffer("outs", _OUTS.clone(), persistent=False)

    def _default_steepness(self):
        return _S

    def _index(self, device):
        if self.a.device == device:
            return self.a, self.b, self.outs
        return self.a.to(device), self.b.to(device), self.outs.to(device)

    def _forward(self, x, s):
        xt, bad, s = _prepare(x, s)
        batch = tuple(x.shape[:-1])
        values, R = _TopK.apply(xt, s, bad, *self._index(xt.device))
        values = values.t().reshape(batch + (_K,)).to(x.dtype)
        P = R.permute(2, 1, 0).reshape(batch + (_K, _N)).to(x.dtype)
        return values, P

    def _column(self, x, y, s):
        xt, bad, s = _prepare(x, s)
        batch = tuple(x.shape[:-1])
        y, outside = check_labels(y, batch, _N, xt.device, bad is None)
        if outside is not None:
            bad = bad | outside
        col = _Column.apply(xt, s, y.clamp(0, _N - 1), bad, *self._index(xt.device))
        return col.t().reshape(batch + (_K,)).to(x.dtype)

    # the lane sweeps (netgen.codegen.runtime.lanes): P x, W P and P V without P
    def _values(self, x, s):
        xt, bad, s = _prepare(x, s)
        v = _values_lanes(xt, s, bad, *self._index(xt.device))
        return v.t().reshape(tuple(x.shape[:-1]) + (_K,)).to(x.dtype)

    def _back(self, x, W, s):
        xt, bad, s = _prepare(x, s)
        Wt = _lane_input(W, "W", x.shape[:-1], _K, -1, xt)
        R = _back_lanes(xt, s, bad, *self._index(xt.device), Wt)
        return R.permute(2, 1, 0).reshape(tuple(x.shape[:-1]) + (Wt.shape[1], _N)).to(x.dtype)

    def _fwd(self, x, V, s):
        xt, bad, s = _prepare(x, s)
        Vt = _lane_input(V, "V", x.shape[:-1], _N, -2, xt)
        Y = _fwd_lanes(xt, s, bad, *self._index(xt.device), Vt)
        return Y.permute(2, 0, 1).reshape(tuple(x.shape[:-1]) + (_K, Vt.shape[1])).to(x.dtype)

    def _hard(self, x):
        return hard_network(x, _N, self.a, self.b, _OFFSETS, self.outs)

    def extra_repr(self):
        return f"n={_N}, k={_K}, depth={_DEPTH}, size={_SIZE}, relaxation={RELAXATION}"


#: what a generated torch module copies from this file, in order
PARTS = (_decode, __getattr__, _TopK, _topk_backward, _Column, _column_backward, _zero_rows, _nan_rows,
         _nan_if_bad, _checked, _prepare, Layer)
