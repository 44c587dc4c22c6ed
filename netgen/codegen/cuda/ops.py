"""The ``torch.library`` custom ops of a generated ``cuda`` module: forward
and backward of the rows (values and P, or values only) and of the column,
each one launch per direction (:func:`netgen.codegen.cuda.launch._launch`),
with fake implementations and registered autograd.

``torch.compile(fullgraph=True)`` sees one op each; CUDA graphs can
capture them. They take the steepness as a 1-element device tensor (a
kernel argument: changing it never recompiles, reading it never
synchronises) and return dL/ds when it requires grad. Once differentiable:
the gradients carry :func:`netgen.codegen.runtime.common.refuse_second_order`'s
node, so differentiating them again raises RuntimeError.

Real code, copied into generated modules by source extraction
(:data:`PARTS`); the emitter writes ``OPS_NAMESPACE`` (one per network,
relaxation and code) and the call ``_register()`` after the copied parts.
"""

from __future__ import annotations

import time

import torch

from ..runtime.common import refuse_second_order
from ..runtime.tables import _K, _N, _SIZE
from .group_ops import _groups_backward, _groups_forward, _use_groups
from .batch import _batch, _most, _part
from .driver import LOG
from .launch import _DLEN, LANES, _dummy, _launch, _tables
from .packing import _np_dtype

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("OPS_NAMESPACE", "SAVE_D")
OPS_NAMESPACE = "netgen_cuda_runtime"
SAVE_D = True


# ---------------------------------------------------------------- copied parts
def _rows_forward(x: torch.Tensor, s: torch.Tensor, want_P: bool,
                  save: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                       torch.Tensor]:
    """values (B, k), P (B, k, n; (0,) when not want_P) and what backward
    needs: ds and ps (B, size), the comparators' differences and swap
    probabilities (the sweeps over ranks and the values' adjoint read p;
    the adjoint recomputes only dp/dd and dp/ds from d), D (B, nnz) where SAVE_D and save
    (else 1 x 1), the back-sweep's row differences, and bad (B,) int32."""
    if want_P and _use_groups(x.device, _np_dtype(x)):  # a sorter's P in lane groups (group_ops.py)
        return _groups_forward(x, s)
    B = x.shape[0]
    t = _tables(x.device)
    values, ds, ps = x.new_empty((B, _K)), x.new_empty((B, _SIZE)), x.new_empty((B, _SIZE))
    P = x.new_empty((B, _K, _N) if want_P else (0,))
    keep_D = want_P and save and SAVE_D
    D = x.new_empty((B, _DLEN)) if keep_D else _dummy(x, 2)
    bad = x.new_empty((B,), dtype=torch.int32)
    rows = LANES if want_P else 1
    # the kernel indexes a launch's ds, ps, D and P flat, with 32 bits (_most)
    most = _most(max(_SIZE, _DLEN if keep_D else 0, _K * _N if want_P else 0))
    for b0, b1 in _batch("fwd", x, B, rows, 0, most):
        Pc = _part(P, b0, b1).view(-1) if want_P else _dummy(x, 1)
        _launch("fwd", x, b1 - b0, (_part(x, b0, b1), s, t["wab"], t["offs"], t["rtab"], t["dix"],
                                    t["outs"], _part(values, b0, b1), _part(ds, b0, b1).view(-1),
                                    _part(ps, b0, b1).view(-1), _part(bad, b0, b1), Pc,
                                    _part(D, b0, b1).view(-1) if keep_D else _dummy(x, 1), want_P, keep_D), rows,
                (want_P, keep_D))
    return values, P, ds, ps, D, bad


def _rows_backward(gv: torch.Tensor | None, gP: torch.Tensor | None, s: torch.Tensor, ds: torch.Tensor,
                   ps: torch.Tensor, D: torch.Tensor, bad: torch.Tensor,
                   want_gs: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """dL/dx (B, n) from dL/dvalues and dL/dP (either may be None), and the
    rows' shares of dL/ds (B,) when want_gs (else a 1-element dummy)."""
    if gP is not None and _use_groups(ds.device, _np_dtype(ds)):  # as the forward ran (group_ops.py)
        return _groups_backward(gv, gP, s, ds, ps, bad, want_gs)
    B = ds.shape[0]
    t = _tables(ds.device)
    gx = ds.new_empty((B, _N))
    has_gv, has_gP = gv is not None, gP is not None
    gv = _operand(gv, ds, (B, _K)) if has_gv else _dummy(ds, 2)
    recompute = has_gP and not SAVE_D
    rows = LANES if has_gP else 1
    gs = ds.new_zeros((B,)) if want_gs else _dummy(ds, 1)
    if has_gP:
        gP = _operand(gP, ds, (B, _K, _N))
        gp = ds.new_empty((B, _SIZE))
    else:
        gp = _dummy(ds, 1)
    # ds, ps, D, gp and dL/dP indexed flat with 32 bits, as in the forward
    chunks = _batch("bwd", ds, B, rows, _DLEN * ds.element_size() if recompute else 0,
                    _most(max(_SIZE, _DLEN, _K * _N) if has_gP else _SIZE))
    Dr = ds.new_empty(((chunks[0][1] - chunks[0][0]) * _DLEN,)) if recompute and B else None
    for b0, b1 in chunks:
        if not has_gP:
            Dc = _dummy(ds, 1)
        elif recompute:  # the chunk's scratch rows
            Dc = Dr[: (b1 - b0) * _DLEN]
        else:
            Dc = _part(D, b0, b1).view(-1)
        gPc = _part(gP, b0, b1).view(-1) if has_gP else _dummy(ds, 1)
        _launch("bwd", ds, b1 - b0, (s, t["wab"], t["offs"], t["rtab"], t["dix"], t["outs"],
                                     _part(gv, b0, b1) if has_gv else gv, gPc,
                                     _part(ds, b0, b1).view(-1), _part(ps, b0, b1).view(-1), Dc,
                                     _part(gp, b0, b1).view(-1) if has_gP else _dummy(ds, 1),
                                     _part(bad, b0, b1), _part(gx, b0, b1), _part(gs, b0, b1) if want_gs else gs,
                                     has_gv, has_gP, recompute, want_gs), rows, (has_gv, has_gP, recompute, want_gs))
    return gx, gs


def _column_forward(x: torch.Tensor, y: torch.Tensor, s: torch.Tensor,
                    save: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """P[:, y] (B, k) and what backward needs: cs (B, 3 size; 1 x 1 when
    not save), per comparator the difference of the values, of the pushed
    unit vector, and p, side by side (one base address; the backward reads
    p instead of rerunning the swap code's arctangent), and bad (B,)
    int32."""
    B = x.shape[0]
    t = _tables(x.device)
    col = x.new_empty((B, _K))
    cs = x.new_empty((B, 3 * _SIZE)) if save else _dummy(x, 2)
    bad = x.new_empty((B,), dtype=torch.int32)
    # the kernel indexes a launch's cs flat, with 32 bits (_most)
    for b0, b1 in _batch("fwd_col", x, B, 2, 0, _most(3 * _SIZE)):
        _launch("fwd_col", x, b1 - b0, (_part(x, b0, b1), _part(y, b0, b1), s, t["wab"], t["offs"], t["outs"],
                                        _part(col, b0, b1), (_part(cs, b0, b1) if save else cs).view(-1),
                                        _part(bad, b0, b1), save), 2, (save,))
    return col, cs, bad


def _column_backward(gcol: torch.Tensor, s: torch.Tensor, cs: torch.Tensor, bad: torch.Tensor,
                     want_gs: bool) -> tuple[torch.Tensor, torch.Tensor]:
    B = cs.shape[0]
    t = _tables(cs.device)
    gx = cs.new_empty((B, _N))
    gcol = _operand(gcol, cs, (B, _K))
    gs = cs.new_zeros((B,)) if want_gs else _dummy(cs, 1)
    for b0, b1 in _batch("bwd_col", cs, B, 2, 0, _most(3 * _SIZE)):
        _launch("bwd_col", cs, b1 - b0, (s, t["wab"], t["offs"], t["outs"], _part(gcol, b0, b1),
                                         _part(cs, b0, b1).view(-1), _part(bad, b0, b1), _part(gx, b0, b1),
                                         _part(gs, b0, b1) if want_gs else gs, want_gs), 2, (want_gs,))
    return gx, gs


def _operand(g, like, shape):
    """Gradient ``g`` as the kernels read it: like's dtype, ``shape``, contiguous (``g`` itself where it is)."""
    if g.dtype != like.dtype or not g.is_contiguous() or g.shape != shape:
        g = g.to(like.dtype).reshape(shape).contiguous()
    return g


def _rows_fake(x, s, want_P, save):
    B = x.shape[0]
    return (x.new_empty((B, _K)), x.new_empty((B, _K, _N) if want_P else (0,)), x.new_empty((B, _SIZE)),
            x.new_empty((B, _SIZE)),
            x.new_empty((B, _DLEN) if want_P and save and SAVE_D and not _use_groups(x.device, _np_dtype(x))
                        else (1, 1)),
            x.new_empty((B,), dtype=torch.int32))


def _rows_backward_fake(gv, gP, s, ds, ps, D, bad, want_gs):
    return ds.new_empty((ds.shape[0], _N)), ds.new_empty((ds.shape[0],) if want_gs else (1,))


def _column_fake(x, y, s, save):
    B = x.shape[0]
    return x.new_empty((B, _K)), x.new_empty((B, 3 * _SIZE) if save else (1, 1)), x.new_empty((B,), dtype=torch.int32)


def _column_backward_fake(gcol, s, cs, bad, want_gs):
    return cs.new_empty((cs.shape[0], _N)), cs.new_empty((cs.shape[0],) if want_gs else (1,))


def _rows_setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(inputs[0], inputs[1], *output[2:])


def _rows_grad(ctx, gv, gP, *unused):
    """The registered autograd of the rows op (under torch.compile)."""
    x, s, ds, ps, D, bad = ctx.saved_tensors
    if gv is None and gP is None:
        return None, None, None, None
    want_gs = bool(ctx.needs_input_grad[1])
    gx, gs = _op("rows_backward")(gv, gP, s, ds, ps, D, bad, want_gs)
    gx, gs = _once_differentiable(gx, gs.sum().reshape(s.shape) if want_gs else None, x, s)
    return gx, gs, None, None


def _column_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[2], *output[1:])


def _column_grad(ctx, gcol, *unused):
    """The registered autograd of the column op (under torch.compile)."""
    x, s, cs, bad = ctx.saved_tensors
    if gcol is None:
        return None, None, None, None
    want_gs = bool(ctx.needs_input_grad[2])
    gx, gs = _op("column_backward")(gcol, s, cs, bad, want_gs)
    gx, gs = _once_differentiable(gx, gs.sum().reshape(s.shape) if want_gs else None, x, s)
    return gx, None, gs, None


class _Rows(torch.autograd.Function):
    """The rows (values and P, or values only) of an eager call that
    records a graph: one Function whose forward and backward call the
    launcher directly (no custom-op dispatch, schema or dynamo wrapper;
    the ops are torch.compile's)."""

    @staticmethod
    def forward(ctx, x, s, want_P):
        values, P, ds, ps, D, bad = _rows_forward(x, s, want_P, True)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, s, ds, ps, D, bad)
        return values, P

    @staticmethod
    def backward(ctx, gv, gP):
        x, s, ds, ps, D, bad = ctx.saved_tensors
        if gv is None and gP is None:
            return None, None, None
        want_gs = ctx.needs_input_grad[1]
        gx, gs = _rows_backward(gv, gP, s, ds, ps, D, bad, want_gs)
        gs = gs.sum().reshape(s.shape) if want_gs else None
        if torch.is_grad_enabled():  # create_graph: a second derivative raises
            gx, gs = refuse_second_order((gx, gs), (x, s))
        return gx, gs, None


class _Column(torch.autograd.Function):
    """The column of an eager call that records a graph (see :class:`_Rows`)."""

    @staticmethod
    def forward(ctx, x, y, s):
        col, cs, bad = _column_forward(x, y, s, True)
        ctx.save_for_backward(x, s, cs, bad)
        return col

    @staticmethod
    def backward(ctx, gcol):
        x, s, cs, bad = ctx.saved_tensors
        want_gs = ctx.needs_input_grad[2]
        gx, gs = _column_backward(gcol, s, cs, bad, want_gs)
        gs = gs.sum().reshape(s.shape) if want_gs else None
        if torch.is_grad_enabled():
            gx, gs = refuse_second_order((gx, gs), (x, s))
        return gx, None, gs


def _call_rows(x, s, want_P):
    """values and P (or (0,)) of x (B, n), contiguous, in a kernel dtype:
    eager through :class:`_Rows` where a graph is recorded (else the
    launcher alone), under torch.compile through the custom op."""
    save = torch.is_grad_enabled() and (x.requires_grad or s.requires_grad)
    if torch.compiler.is_compiling():
        out = _op("rows_forward")(x, s, want_P, save)
        return out[0], out[1]
    if save:
        return _Rows.apply(x, s, want_P)
    out = _rows_forward(x, s, want_P, False)
    return out[0], out[1]


def _call_column(x, y, s):
    """P[:, y] of x (B, n) (see :func:`_call_rows`)."""
    save = torch.is_grad_enabled() and (x.requires_grad or s.requires_grad)
    if torch.compiler.is_compiling():
        return _op("column_forward")(x, y, s, save)[0]
    if save:
        return _Column.apply(x, y, s)
    return _column_forward(x, y, s, False)[0]


def _op(name):
    return getattr(getattr(torch.ops, OPS_NAMESPACE), name)


def _register():
    """Define the four ops once per process (a second import of the same
    module, e.g. from another path, reuses them: same network, same code).
    Only torch.compile calls them (~0.6 ms per op to define, measured: they
    are defined at import, as a trace cannot define them)."""
    try:
        _op("rows_forward")
        return
    except (AttributeError, RuntimeError):
        pass
    t0 = time.perf_counter()
    ops = {}
    for name, fn, fake in (
        ("rows_forward", _rows_forward, _rows_fake),
        ("rows_backward", _rows_backward, _rows_backward_fake),
        ("column_forward", _column_forward, _column_fake),
        ("column_backward", _column_backward, _column_backward_fake),
    ):
        ops[name] = torch.library.custom_op(f"{OPS_NAMESPACE}::{name}", fn, mutates_args=())
        ops[name].register_fake(fake)
    ops["rows_forward"].register_autograd(_rows_grad, setup_context=_rows_setup)
    ops["column_forward"].register_autograd(_column_grad, setup_context=_column_setup)
    LOG.debug("netgen cuda: ops %s registered in %.1f ms", OPS_NAMESPACE, 1e3 * (time.perf_counter() - t0))


def _once_differentiable(gx, gs, x, s):
    """The gradients (dL/dx, dL/ds or None), differentiable no further:
    under create_graph=True a second derivative with respect to x or s
    raises (never a silently missing term). Left alone while torch.compile
    traces the backward."""
    if torch.compiler.is_compiling():
        return gx, gs
    return refuse_second_order((gx, gs), (x, s))


#: what a generated module copies from this file, in order
PARTS = (_rows_forward, _rows_backward, _column_forward, _column_backward, _operand, _rows_fake,
         _rows_backward_fake, _column_fake, _column_backward_fake, _rows_setup, _rows_grad, _column_setup, _column_grad,
         _Rows, _Column, _call_rows, _call_column, _op, _register, _once_differentiable)
