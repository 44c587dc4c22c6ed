"""One call of a compat module (``DiffSortNet``, ``DiffTopkNet``, the
functional ``sort``/``topk``, ``TopKCrossEntropyLoss``'s column): the fast
generated layer where it computes what the published packages compute, the
reference executor (:mod:`netgen.relax.reference`, plain autograd) where
only it does.

* **Steepness** of any shape that broadcasts over the batch: a number, a
  numpy scalar, a 1-element tensor of any shape (``nn.Parameter(torch.ones(1)
  * 10)``) go to the generated layer (run-time steepness, dL/ds by the
  written backward); one value per row (``(B, 1)`` for scores ``(B, n)``,
  any ``(..., 1)`` that broadcasts over the batch) runs on the reference
  (the kernels read one steepness per call). A steepness that is not > 0
  or not finite is computed as the published packages compute it (s = 0:
  every comparator 1/2; s < 0: every comparator reversed; NaN: NaN out),
  on the reference, with a one-time warning. A tensor on a GPU or under
  ``torch.compile`` is not read (that would synchronise): the kernels use
  it as given.
* **Non-finite scores** (``check_finite=False``, the default, as
  published): a row holding NaN or inf comes out NaN (values, P, column)
  and its gradient is NaN; the other rows are computed as usual. The
  generated CPU layers refuse such rows, so they get zeros in place of the
  row and the outputs are set to NaN afterwards. ``check_finite=True``:
  netgen's ValueError (on a GPU too, at the cost of one synchronisation;
  not under ``torch.compile``).
* **Second order and torch.func**: when a gradient is taken with
  ``create_graph=True`` (gradient penalties, double backward), it is
  computed by the reference from the same inputs (the written backward is
  once-differentiable), with a one-time warning; under ``torch.func``
  transforms (``grad``, ``vmap``, ``jacrev``, ...) the whole call runs on
  the reference. First-order training runs the generated layer alone.
"""

from __future__ import annotations

import math
import numbers
import warnings

import torch

from ..relax import reference

__all__ = ["call", "check_steepness"]


def finite_rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` detached, without its rows that hold NaN / inf (compat computes
    those rows as NaN): the rows ``steepness="auto"`` estimates from."""
    xs = x.detach()
    if xs.is_floating_point() and not bool(torch.isfinite(xs).all()):
        xs = xs[torch.isfinite(xs).all(-1)]
    return xs


_WARNED: set = set()

_WARNINGS = {
    "steepness": "netgen.compat: a steepness that is not finite and > 0 is computed as diffsort/difftopk compute it "
                 "(s = 0: every comparator 1/2, s < 0: every comparator reversed, NaN: NaN out), on netgen's "
                 "reference executor (plain autograd, slower); shown once",
    "rows": "netgen.compat: a steepness per row runs on netgen's reference executor (plain autograd, slower than "
            "the generated kernels, which read one steepness per call); shown once",
    "second": "netgen.compat: a gradient with create_graph=True (double backward, gradient penalties) is computed "
              "by netgen's reference executor (plain autograd, slower); first-order gradients use the generated "
              "layer; shown once",
}


def _warn_once(key: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(_WARNINGS[key], UserWarning, stacklevel=4)


def check_steepness(s) -> None:
    """ValueError unless ``s`` is a real number, a 1-element tensor or a
    tensor of shape ``(..., 1)`` (one value per row). Values are not
    checked: see the module docstring for s <= 0 and NaN."""
    if isinstance(s, torch.Tensor):
        if s.is_complex() or s.dtype == torch.bool:
            raise ValueError(f"steepness must be real, got a {s.dtype} tensor")
        if s.numel() != 1 and (s.dim() == 0 or s.shape[-1] != 1):
            raise ValueError(f"steepness must be a number, a 1-element tensor or one value per row (shape "
                             f"(..., 1), e.g. (B, 1)), got a tensor of shape {tuple(s.shape)}")
        return
    if isinstance(s, bool) or type(s).__name__ == "bool_" or not isinstance(s, numbers.Real):  # numpy scalars are Real
        raise ValueError(f"steepness must be a number or a tensor, got {s!r}")


def _per_row(s) -> bool:
    return isinstance(s, torch.Tensor) and s.numel() != 1


def _fast_ok(s, compiling: bool) -> bool:
    """Whether the generated layer takes this (1-element) steepness: finite
    and > 0; a tensor that cannot be read without a sync is taken."""
    if isinstance(s, torch.Tensor):
        if compiling or s.device.type != "cpu":
            return True
        v = float(s.detach().reshape(()))
    else:
        v = float(s)
    return math.isfinite(v) and v > 0


# ------------------------------------------------------------------ bad rows
class _ZeroBadRows(torch.autograd.Function):
    """x with the rows in ``bad`` zeroed (the generated CPU layers refuse
    NaN/inf); their gradient is NaN, as the published packages' is."""

    @staticmethod
    def forward(ctx, x, bad):
        ctx.save_for_backward(bad)
        return x.masked_fill(bad.unsqueeze(-1), 0.0)

    @staticmethod
    def backward(ctx, g):
        (bad,) = ctx.saved_tensors
        return g.masked_fill(bad.unsqueeze(-1), math.nan), None


def _nan_rows(t: torch.Tensor, bad: torch.Tensor, trailing: int) -> torch.Tensor:
    return t.masked_fill(bad.reshape(bad.shape + (1,) * trailing), math.nan)


# ----------------------------------------- first order fast, second on the reference
class _SecondOrderRouter(torch.autograd.Function):
    """Identity on the generated layer's outputs, placed after them: a
    first-order backward passes the gradients on to the layer's written
    backward; one that autograd records (create_graph=True) returns the
    reference's gradient of the same function with respect to the inputs
    instead (differentiable again) and nothing to the layer."""

    @staticmethod
    def forward(ctx, x, s, slow, *outs):
        ctx.set_materialize_grads(False)
        ctx.slow = slow
        ctx.s_value = None if isinstance(s, torch.Tensor) else s
        ctx.save_for_backward(x, s if isinstance(s, torch.Tensor) else None)
        # aliases, not the inputs themselves: an input (or a view of one) returned as-is would keep
        # its own history beside this node's, and the layer's backward would run under create_graph too
        return tuple(o.detach() for o in outs)

    @staticmethod
    def backward(ctx, *gouts):
        if not torch.is_grad_enabled():  # first order: the written backward
            return (None, None, None) + gouts
        _warn_once("second")
        x, s = ctx.saved_tensors
        s = ctx.s_value if s is None else s
        wanted = [i for i, need in enumerate(ctx.needs_input_grad[:2]) if need]
        live = [i for i, g in enumerate(gouts) if g is not None]
        grads = [None, None]
        if wanted and live:
            outs = ctx.slow(x, s)
            got = torch.autograd.grad([outs[i] for i in live], [(x, s)[i] for i in wanted],
                                      [gouts[i] for i in live], create_graph=True, allow_unused=True)
            for i, g in zip(wanted, got):
                grads[i] = g
        return (grads[0], grads[1], None) + (None,) * len(gouts)


# ---------------------------------------------------------------- the call
def call(auto, x: torch.Tensor, s, y=None, check_finite: bool = False):
    """``auto`` (an :class:`~netgen.codegen.auto.AutoLayer`) on scores ``x``
    with steepness ``s``: ``(values, P)`` (netgen's orientation), or the
    column ``P[..., :, y]`` when ``y`` is given. See the module docstring."""
    check_steepness(s)
    net, r = auto.net, auto.relaxation

    def slow(xx, ss, check=check_finite):
        if y is None:
            return reference.forward(net, xx, r, steepness=ss, check=check)
        return (reference.column(net, xx, y, r, steepness=ss, check=check),)

    if torch._C._are_functorch_transforms_active():
        out = slow(x, s, check=False)  # a value check would need the host
        return out if y is None else out[0]
    compiling = torch.compiler.is_compiling()
    if check_finite and x.device.type != "cpu" and not compiling and x.numel():
        # the GPU layers report bad rows as NaN (no sync); the strict check asked for one
        if not bool(torch.isfinite(x).all()):
            raise ValueError("input contains NaN or inf values; relaxed networks need finite inputs "
                             "(check_finite=True)")
    if _per_row(s) or not _fast_ok(s, compiling):
        _warn_once("rows" if _per_row(s) else "steepness")
        out = slow(x, s)
        return out if y is None else out[0]
    bad = None
    if not check_finite and x.device.type == "cpu" and x.dtype.is_floating_point:
        # a finite sum means every value is finite (one reduction: ~2 us at 64 x 100, isfinite ~14 us);
        # under compile always masked (no host read)
        if compiling or not math.isfinite(x.detach().sum().item()):
            bad = ~torch.isfinite(x).all(-1)
    xin = x if bad is None else _ZeroBadRows.apply(x, bad)
    layer = auto.layer_for(x.device, s)
    out = layer(xin) if y is None else (layer.column(xin, y),)
    grad = torch.is_grad_enabled() and (xin.requires_grad or (isinstance(s, torch.Tensor) and s.requires_grad))
    if grad and not compiling:
        out = _SecondOrderRouter.apply(xin, s, slow, *out)
    if bad is not None:
        out = tuple(_nan_rows(t, bad, t.dim() - bad.dim()) for t in out)
    return out if y is None else out[0]
