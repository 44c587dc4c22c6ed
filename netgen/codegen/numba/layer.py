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

from ..runtime.common import check_labels, check_values, hard_network, refuse_second_order
from ..runtime.layer import LayerBase
from ..runtime.tables import _A, _B, _K, _N, _OFFSETS, _OUTS
from .host import column_backward_numpy, column_numpy, rows_backward_numpy, rows_numpy

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
    # skips these frames whole (one graph break where the layer is called)
    @torch.compiler.disable
    def forward(self, x, steepness=None):
        return LayerBase.forward(self, x, steepness)

    @torch.compiler.disable
    def values(self, x, steepness=None):
        return LayerBase.values(self, x, steepness)

    @torch.compiler.disable
    def column(self, x, y, steepness=None):
        return LayerBase.column(self, x, y, steepness)

    def _forward(self, x, s):
        x2, lead, dt, stp, s_t = _prepare(x, s)
        if x2.shape[0] == 0:  # an empty batch: empty outputs (connected to x for autograd), no kernel
            return (x2[:, :_K] * 0).reshape(*lead, _K).to(dt), (x2[:, None, :] * 0).expand(0, _K, _N).reshape(
                *lead, _K, _N).to(dt)
        values, P = _Rows.apply(x2, s_t, stp, self.threads)
        return values.reshape(*lead, _K).to(dt), P.reshape(*lead, _K, _N).to(dt)

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
PARTS = (_np, _sgrad, _Rows, _Column, _prepare, _check_threads, Layer)
