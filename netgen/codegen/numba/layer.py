"""The torch-facing part of the generated numba module: the autograd
Functions around the numpy-level wrappers of :mod:`.host`, input
preparation and ``Layer`` (on the one Layer base,
:mod:`netgen.codegen.runtime.layer`, which checks the arguments and the
steepness).

Real code, copied into generated modules by source extraction (:data:`PARTS`
and, by name, :data:`STATE`); it reads :data:`READS` from the emitter
(stand-ins below let it import and lint alone).

* Steepness: ``Layer(steepness=None)`` (None: ``RELAXATION["steepness"]``);
  ``layer.steepness`` is read at every call and passed to the kernels as a
  run-time argument (no recompilation). A tensor steepness that requires
  grad gets dL/ds (the kernels sum dL/dp * dp/ds over comparators).
* Refusals (from :mod:`.common`): second-order gradients (RuntimeError when
  the gradient is differentiated), ``torch.func`` transforms (ValueError),
  steepness x input range overflowing the compute dtype (ValueError naming
  both).
* No layer writes to its inputs: kernels only read ``x``; ``hard`` works on
  a copy.
"""

from __future__ import annotations

import numpy as np
import torch

from ..runtime.common import check_labels, check_values, compiler_disable, hard_network, refuse_second_order
from ..runtime.layer import LayerBase
from ..runtime.tables import _A, _B, _K, _N, _OFFSETS, _OUTS
from .host import column_backward_numpy, column_numpy, rows_backward_numpy, rows_numpy
from .lanes import lanes_backward_numpy, lanes_numpy

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("RELAXATION", "_MODE", "_GROUP", "_DIRECTION")
RELAXATION: dict = {"steepness": 1.0, "distribution": ""}
_MODE, _GROUP, _DIRECTION = "save", 1, "back"

# ------------------------------------------------------- copied by name (STATE)
_TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}


# ---------------------------------------------------------------- copied parts
def _np(t, dtype):
    # read-only use: may share memory with the caller's tensor (kernels never write to it)
    return np.ascontiguousarray(t.detach().to(dtype).numpy())


def _sgrad(s, dtype):
    return torch.tensor(s, dtype=dtype)


class _Rows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s_t, stp, threads):
        ctx.set_materialize_grads(False)
        sgrad = bool(ctx.needs_input_grad[1])
        save = bool(ctx.needs_input_grad[0]) or sgrad
        values, P, saved = rows_numpy(_np(x, x.dtype), stp, save, sgrad, threads)
        ctx.saved = saved
        ctx.threads = threads
        ctx.s_dtype = None if s_t is None else s_t.dtype
        ctx.save_for_backward(x, s_t)  # what a second derivative would be taken with respect to
        return torch.from_numpy(values), torch.from_numpy(P)

    @staticmethod
    def backward(ctx, gv, gP):
        if gv is None and gP is None:
            return None, None, None, None
        saved = ctx.saved
        B = saved.B
        dt = saved.ps.dtype
        gvn = np.zeros((B, _K), dtype=dt) if gv is None else _np(gv, _TORCH[dt])
        gPn = None if gP is None else _np(gP, _TORCH[dt])
        gx, gs = rows_backward_numpy(saved, gvn, gPn, ctx.threads)
        gxt = torch.from_numpy(gx) if ctx.needs_input_grad[0] else None
        gst = _sgrad(gs, ctx.s_dtype) if ctx.needs_input_grad[1] else None
        gxt, gst = refuse_second_order((gxt, gst), ctx.saved_tensors)  # create_graph=True: no silent term
        return gxt, gst, None, None


class _Column(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s_t, y, stp, threads):
        ctx.set_materialize_grads(False)
        sgrad = bool(ctx.needs_input_grad[1])
        save = bool(ctx.needs_input_grad[0]) or sgrad
        col, saved = column_numpy(_np(x, x.dtype), y, stp, save, sgrad, threads)
        ctx.saved = saved
        ctx.threads = threads
        ctx.s_dtype = None if s_t is None else s_t.dtype
        ctx.save_for_backward(x, s_t)  # what a second derivative would be taken with respect to
        return torch.from_numpy(col)

    @staticmethod
    def backward(ctx, gcol):
        if gcol is None:
            return None, None, None, None, None
        dt = ctx.saved.cs.dtype
        gx, gs = column_backward_numpy(ctx.saved, _np(gcol, _TORCH[dt]), ctx.threads)
        gxt = torch.from_numpy(gx) if ctx.needs_input_grad[0] else None
        gst = _sgrad(gs, ctx.s_dtype) if ctx.needs_input_grad[1] else None
        gxt, gst = refuse_second_order((gxt, gst), ctx.saved_tensors)
        return gxt, gst, None, None, None


class _LaneSweep(torch.autograd.Function):
    """(values (B, k), lanes (B, m, n)) of :func:`.lanes.lanes_numpy` for
    lanes ``S`` of shape (1 or B, m, n) in wire space, with its written
    backward: gradients to x, the steepness tensor and S (summed over the
    rows when one S serves every row)."""

    @staticmethod
    def forward(ctx, x, s_t, S, back, stp, threads):
        ctx.set_materialize_grads(False)
        sgrad = bool(ctx.needs_input_grad[1])
        adj = bool(ctx.needs_input_grad[0]) or sgrad
        keep = adj or bool(ctx.needs_input_grad[2])
        values, out, saved = lanes_numpy(_np(x, x.dtype), _np(S, x.dtype), back, stp, keep, adj, sgrad, threads)
        ctx.saved, ctx.back, ctx.threads = saved, back, threads
        ctx.s_dtype = None if s_t is None else s_t.dtype
        ctx.shared = S.shape[0] == 1
        ctx.m = S.shape[1]
        ctx.save_for_backward(x, s_t, S)  # what a second derivative would be taken with respect to
        return torch.from_numpy(values), torch.from_numpy(out)

    @staticmethod
    def backward(ctx, gv, gout):
        if (gv is None and gout is None) or ctx.saved is None:
            return None, None, None, None, None, None
        saved = ctx.saved
        dt = saved.dtype
        G0 = np.zeros((saved.B, ctx.m, _N), dtype=dt) if gout is None else _np(gout, _TORCH[dt])
        gS, gx, gs = lanes_backward_numpy(saved, None if gv is None else _np(gv, _TORCH[dt]), G0, ctx.back,
                                          ctx.threads, bool(ctx.needs_input_grad[2]))
        gxt = torch.from_numpy(gx) if ctx.needs_input_grad[0] else None
        gst = _sgrad(gs, ctx.s_dtype) if ctx.needs_input_grad[1] else None
        gSt = None
        if ctx.needs_input_grad[2]:
            gSt = torch.from_numpy(gS)
            gSt = gSt.sum(0, keepdim=True) if ctx.shared else gSt
        gxt, gst, gSt = refuse_second_order((gxt, gst, gSt), ctx.saved_tensors)
        return gxt, gst, gSt, None, None, None


def _prepare(x, s):
    """x (checked by the Layer base) on the CPU, NaN/inf and an overflowing
    steepness refused, as (B, n) in the compute dtype, with the steepness
    ``s`` (the base's value) as (float, tensor or None)."""
    if x.device.type != "cpu":
        raise ValueError(f"the numba target runs on CPU tensors; got a tensor on {x.device} (use the cuda target)")
    stp = float(s.detach()) if isinstance(s, torch.Tensor) else s
    # the steepness as a tensor only where its gradient is asked for
    learn = isinstance(s, torch.Tensor) and s.dtype.is_floating_point and s.requires_grad and torch.is_grad_enabled()
    cdt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    x2 = x.reshape(-1, _N).to(cdt)
    check_values(x2.t(), stp)
    return x2, x.shape[:-1], x.dtype, stp, s if learn else None


def _lane_arg(t, name, lead, rows, cdt):
    """W (m, k) / V (n, d), or with leading dims that broadcast to the batch
    ``lead``, as (1 or B, a, b) in the compute dtype ``cdt`` (``rows``: the
    size of the side P is applied to: k for W's last dim, n for V's rows)."""
    what = f"(..., m, {_K})" if name == "W" else f"(..., {_N}, d)"
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.dtype.is_floating_point:
        raise ValueError(f"{name} must be floating point, got {t.dtype}")
    if t.dim() < 2 or t.shape[-1 if name == "W" else -2] != rows:
        raise ValueError(f"{name} must have shape {what}, got {tuple(t.shape)}")
    if t.device.type != "cpu":
        raise ValueError(f"{name} is on {t.device}; the numba target runs on CPU tensors")
    try:
        ok = t.dim() == 2 or torch.broadcast_shapes(t.shape[:-2], lead) == lead
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"{name}'s leading dims {tuple(t.shape[:-2])} do not broadcast to the batch shape "
                         f"{tuple(lead)} of x")
    if t.numel() and not bool(torch.isfinite(t.detach()).all()):
        raise ValueError(f"{name} contains NaN or inf values")
    t = t.to(cdt)
    if t.dim() == 2:
        return t.unsqueeze(0)
    return t.expand(*lead, *t.shape[-2:]).reshape(-1, *t.shape[-2:])


def _empty(x2, s_t, S, shape, dt):
    """An empty batch's result of ``shape`` (connected to x, s and S for
    autograd: zero gradients), no kernel."""
    z = x2.sum() * 0 + S.sum() * 0 + (0 if s_t is None else s_t * 0)
    return (torch.zeros(shape, dtype=x2.dtype) + z).to(dt)


def _check_threads(threads):
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be None or an integer >= 1, got {threads!r}")
    return int(threads)


class Layer(LayerBase):
    """Relaxed top-k / sorting layer for the network in ``NETWORK``.

    ``steepness`` (None: ``RELAXATION["steepness"]``) is read at every call:
    a Python number, numpy scalar, 0-d tensor or ``nn.Parameter`` (then it
    gets a gradient), finite and > 0. ``threads`` (None: follow
    ``torch.get_num_threads()``) caps the kernels' threads."""

    n = _N
    k = _K

    def __init__(self, steepness=None, threads=None):
        super().__init__(RELAXATION["steepness"] if steepness is None else steepness)
        self.threads = threads

    def __setattr__(self, name, value):
        if name == "threads":
            value = _check_threads(value)
        super().__setattr__(name, value)

    def _default_steepness(self):
        return RELAXATION["steepness"]

    # the kernels and their P pool stay out of torch.compile's graph: dynamo
    # skips these frames whole (one graph break where the layer is called);
    # compiler_disable imports torch._dynamo only once something has
    @compiler_disable
    def forward(self, x, steepness=None):
        return LayerBase.forward(self, x, steepness)

    @compiler_disable
    def values(self, x, steepness=None):
        return LayerBase.values(self, x, steepness)

    @compiler_disable
    def column(self, x, y, steepness=None):
        return LayerBase.column(self, x, y, steepness)

    def _forward(self, x, s):
        x2, lead, dt, stp, s_t = _prepare(x, s)
        if x2.shape[0] == 0:  # an empty batch: empty outputs (connected to x for autograd), no kernel
            return (x2[:, :_K] * 0).reshape(*lead, _K).to(dt), (x2[:, None, :] * 0).expand(0, _K, _N).reshape(
                *lead, _K, _N).to(dt)
        values, P = _Rows.apply(x2, s_t, stp, self.threads)
        return values.reshape(*lead, _K).to(dt), P.reshape(*lead, _K, _N).to(dt)

    @compiler_disable
    def back(self, x, W, steepness=None):
        return LayerBase.back(self, x, W, steepness)

    @compiler_disable
    def fwd(self, x, V, steepness=None):
        return LayerBase.fwd(self, x, V, steepness)

    def _values(self, x, s):
        x2, lead, dt, stp, s_t = _prepare(x, s)
        S = x2.new_zeros(1, 0, _N)
        if x2.shape[0] == 0:
            return _empty(x2, s_t, S, (*lead, _K), dt)
        values, _ = _LaneSweep.apply(x2, s_t, S, False, stp, self.threads)
        return values.reshape(*lead, _K).to(dt)

    def _back(self, x, W, s):
        x2, lead, dt, stp, s_t = _prepare(x, s)
        W = _lane_arg(W, "W", lead, _K, x2.dtype)
        m = W.shape[1]
        S = W.new_zeros(W.shape[0], m, _N).index_copy(2, _OUTS, W)  # W on the output wires
        if x2.shape[0] == 0:
            return _empty(x2, s_t, S, (*lead, m, _N), dt)
        _, Z = _LaneSweep.apply(x2, s_t, S, True, stp, self.threads)
        return Z.reshape(*lead, m, _N).to(dt)

    def _fwd(self, x, V, s):
        x2, lead, dt, stp, s_t = _prepare(x, s)
        V = _lane_arg(V, "V", lead, _N, x2.dtype)
        d = V.shape[2]
        S = V.transpose(1, 2)
        if x2.shape[0] == 0:
            return _empty(x2, s_t, S, (*lead, _K, d), dt)
        _, U = _LaneSweep.apply(x2, s_t, S, False, stp, self.threads)
        return U[:, :, _OUTS].transpose(1, 2).reshape(*lead, _K, d).to(dt)

    def _column(self, x, y, s):
        x2, lead, dt, stp, s_t = _prepare(x, s)
        y, _ = check_labels(y, lead, _N, x2.device, True)
        col = _Column.apply(x2, s_t, np.ascontiguousarray(y.numpy()), stp, self.threads)
        return col.reshape(*lead, _K).to(dt)

    def _hard(self, x):
        return hard_network(x, _N, _A, _B, _OFFSETS, _OUTS)

    def extra_repr(self):
        return f"n={_N}, k={_K}, target=numba, {RELAXATION['distribution']}, engine={_DIRECTION}/{_MODE}/{_GROUP}"


#: module-level state a generated module copies by name
STATE = ("_TORCH",)
#: what a generated module copies from this file, in order
PARTS = (_np, _sgrad, _Rows, _Column, _LaneSweep, _prepare, _lane_arg, _empty, _check_threads, Layer)
