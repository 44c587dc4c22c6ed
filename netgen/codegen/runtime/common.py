"""Runtime pieces every generated torch-facing module can carry: argument
checks with one wording, the refusals (second order, torch.func) and the
exact network ``hard`` (the steepness rule is the Layer base's,
:mod:`.layer`).

Real code: imported, linted and tested here, and copied into generated
modules by source extraction (:func:`netgen.codegen.runtime.assemble`), so
a generated module needs torch only. Everything takes what it needs as
arguments (no module constants), so any target can adopt it.
"""

from __future__ import annotations

import torch

__all__ = [
    "PARTS", "refuse_transforms", "check_input", "check_labels", "check_values", "refuse_second_order",
    "hard_network", "numba_disk_cache", "compiler_disable",
]


def refuse_transforms():
    """torch.func transforms (vmap, grad, jacrev, jvp, ...) cannot see
    through the written kernels: refuse at the call."""
    if torch._C._are_functorch_transforms_active():
        raise ValueError(
            "netgen: torch.func transforms (vmap, grad, jacrev, jvp, ...) are not supported by generated "
            "layers; call the layer on a batch instead of vmap, use torch.autograd for gradients, or "
            "netgen.relax.reference (plain autograd) for transforms"
        )


def check_input(x, n):
    """x must be a floating tensor of shape (..., n)."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() < 1 or x.shape[-1] != n:
        raise ValueError(f"input must have shape (..., {n}), got {tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise ValueError(f"input must be floating point, got {x.dtype}")


def check_labels(y, batch, n, device, checked):
    """Class indices y of shape ``batch``, flattened to int64 on ``device``;
    returns ``(y, outside)``: with ``checked`` True an index outside 0..n-1
    raises and ``outside`` is None; False: ``outside`` masks those rows; None:
    the range is not looked at (the kernels flag it) and ``outside`` is None."""
    if isinstance(y, torch.Tensor) and y.device.type == "meta":
        raise ValueError("y is on the meta device (shapes only, no values); pass labels with values")
    y = torch.as_tensor(y, device=device)
    if y.dtype.is_floating_point or y.dtype == torch.bool or y.is_complex():
        raise ValueError(f"y must hold integer indices, got {y.dtype}")
    if tuple(y.shape) != tuple(batch):
        raise ValueError(f"y must have shape {tuple(batch)} (the batch shape of x), got {tuple(y.shape)}")
    y = y.reshape(-1).long()
    if checked is None:
        return y, None
    outside = (y < 0) | (y >= n)
    if checked:
        if bool(outside.any()):
            raise ValueError(f"y must lie in 0..{n - 1}")
        return y, None
    return y, outside


def check_values(xt, s):
    """Eager CPU check of ``xt`` (wires x batch, compute dtype): NaN or inf
    values, or ``s * (max(x) - min(x))`` over a batch row not finite in that
    dtype (the relaxation would overflow), raise ValueError. One reduction
    and one host read in the common case (the span is NaN or inf whenever a
    value is)."""
    if xt.numel() == 0:
        return
    xd = xt.detach()
    span = float((xd.amax(0).double() - xd.amin(0).double()).max())  # in double: the span itself may overflow
    sv = float(s.detach()) if isinstance(s, torch.Tensor) else float(s)
    big = torch.finfo(xt.dtype).max
    if span * sv <= big:
        return
    if bool(torch.isnan(xd).any()):
        raise ValueError("input contains NaN values; relaxed networks need finite inputs")
    if bool(torch.isinf(xd).any()):
        raise ValueError("input contains inf values; relaxed networks need finite inputs")
    raise ValueError(
        f"steepness {sv!r} times the input range {span!r} overflows {xt.dtype} (steepness {sv!r} * "
        f"(max(x) - min(x)) must stay below {big!r}); scale the inputs or lower the steepness"
    )


class _SecondOrder(torch.autograd.Function):
    """Identity on gradients, placed after the inputs they were computed for
    (the first ``n_inputs`` arguments), so that any second derivative with
    respect to those inputs passes through here; its own backward refuses."""

    @staticmethod
    def forward(ctx, n_inputs, *tensors):
        return tuple(g.clone() for g in tensors[n_inputs:])

    @staticmethod
    def backward(ctx, *unused):
        raise RuntimeError(
            "netgen: second-order gradients through a generated layer are not supported (its backward is "
            "written out and once-differentiable); use netgen.relax.reference (plain autograd, fully "
            "differentiable) for gradient penalties, Hessians or double backward"
        )


def refuse_second_order(grads, inputs=()):
    """``grads`` as computed; when autograd is recording (create_graph=True)
    they get a node, downstream of ``inputs`` (the tensors the gradients are
    for), that raises on any second derivative (``backward`` or
    ``autograd.grad`` with respect to those inputs): never a silently
    missing term."""
    if not torch.is_grad_enabled():
        return grads
    live = [i for i, g in enumerate(grads) if isinstance(g, torch.Tensor)]
    if not live:
        return grads
    deps = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    if not deps:  # still part of a graph: a backward through it raises
        deps = [torch.zeros((), device=grads[live[0]].device, requires_grad=True)]
    out = list(grads)
    wrapped = _SecondOrder.apply(len(deps), *deps, *[grads[i] for i in live])
    for i, g in zip(live, wrapped):
        out[i] = g
    return tuple(out)


@torch.no_grad()
def hard_network(x, n, a, b, offsets, outs):
    """The exact network on x (..., n): values (..., k) and the input
    indices they came from (int64); a comparator swaps only on a strict
    inequality. Works on a copy: never writes to ``x``."""
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != n:
        raise ValueError(f"input must be a tensor of shape (..., {n})")
    if x.is_complex() or x.dtype == torch.bool:
        raise ValueError(f"input must be real numbers (an ordered dtype), got {x.dtype}")
    if x.device.type == "meta":
        raise ValueError("input is on the meta device (shapes only, no values); the exact network compares values")
    if x.dtype.is_floating_point and bool(torch.isnan(x).any()):
        raise ValueError("input contains NaN values; the exact network needs ordered inputs")
    batch = tuple(x.shape[:-1])
    k = outs.shape[0]
    v = x.reshape(-1, n).t().clone(memory_format=torch.contiguous_format)  # always a copy
    a, b, outs = a.to(v.device), b.to(v.device), outs.to(v.device)
    idx = torch.arange(n, device=v.device).unsqueeze(1).expand(v.shape).contiguous()
    for l in range(len(offsets) - 1):
        s, e = offsets[l], offsets[l + 1]
        al, bl = a[s:e].long(), b[s:e].long()  # int32 wires (the operators' tables): index_copy_ needs int64
        va, vb = v.index_select(0, al), v.index_select(0, bl)
        ia, ib = idx.index_select(0, al), idx.index_select(0, bl)
        swap = vb > va
        v.index_copy_(0, al, torch.where(swap, vb, va))
        v.index_copy_(0, bl, torch.where(swap, va, vb))
        idx.index_copy_(0, al, torch.where(swap, ib, ia))
        idx.index_copy_(0, bl, torch.where(swap, ia, ib))
    return v[outs].t().reshape(batch + (k,)), idx[outs].t().reshape(batch + (k,))


def compiler_disable(fn):
    """``torch.compiler.disable(fn)`` without importing ``torch._dynamo``
    (0.7 CPU s) before anything can compile: applied now when dynamo is
    loaded, else on the first call after it is (until then ``fn`` runs as
    is: nothing can be tracing). The wrapper carries dynamo's mark, so a
    trace breaks the graph at its call and never inlines it (the same break,
    "Skip inlining `torch.compiler.disable()`d function", as the real
    decorator's)."""
    import functools
    import sys

    if "torch._dynamo" in sys.modules:
        return torch.compiler.disable(fn)
    real = []

    @functools.wraps(fn)
    def lazy(*args, **kwargs):
        if not real:
            if "torch._dynamo" not in sys.modules:
                return fn(*args, **kwargs)
            real.append(torch.compiler.disable(fn))
        return real[0](*args, **kwargs)

    lazy._torchdynamo_disable = True
    return lazy


def numba_disk_cache(path):
    """Whether numba can keep this module's kernels on disk: the module is a
    file (``path``) and numba finds a writable folder for its cache (a
    ``__pycache__`` beside the file, ``$NUMBA_CACHE_DIR`` or the user-wide
    cache dir). Where it cannot (a read-only install with a read-only HOME)
    ``cache=True`` would refuse every kernel at import ("no locator"), so the
    kernels are compiled in each process instead, with one warning."""
    import os
    import warnings

    if not path or not os.path.isfile(path):
        return False
    from numba.core.caching import FunctionCache

    probe = {}
    exec(compile("def _probe():\n    pass\n", path, "exec"), probe)
    try:
        FunctionCache(probe["_probe"])
    except RuntimeError:  # "cannot cache function ...: no locator available for file ..."
        warnings.warn(f"netgen: numba has no writable folder to cache the kernels of {path!r} (no writable "
                      "__pycache__ beside it, NUMBA_CACHE_DIR or user cache dir); they are compiled in every "
                      "process (set NUMBA_CACHE_DIR to a writable folder to keep them)", RuntimeWarning, stacklevel=2)
        return False
    return True


#: what a generated module copies from this file, in order
PARTS = (refuse_transforms, check_input, check_labels, check_values, _SecondOrder, refuse_second_order,
         hard_network)
