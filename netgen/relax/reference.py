"""The reference executor: THE definition of netgen's relaxed semantics.

Plain PyTorch, any network, any leading batch dimensions, differentiable by
autograd. Every code-generation target is tested against these functions.

* :func:`forward` runs the soft network (docs/design.md section 6) on ``x`` of
  shape ``(..., n)`` and returns the soft values ``(..., k)`` (rank 0 = the
  largest) and ``P`` of shape ``(..., k, n)`` (rows = ranks, columns =
  inputs, ``values = P @ x``). P is computed by the back-sweep: start from
  the k output rows of the identity and multiply by each layer's mixing
  matrix from the last layer to the first (O(k * size) work).
* :func:`column` returns ``P[..., :, y]`` by pushing the unit vector e_y
  forward through the same mixing as the values (O(size) work, O(n) memory).
* :func:`hard` runs the exact network and returns values and the input
  index each output came from.

Inputs: float32/float64 are computed in their own dtype; float16/bfloat16
are computed in float32 and the results returned in the input dtype.
NaN or inf inputs raise ``ValueError`` (``check=False``: they are computed
with, and a row holding one comes out NaN).

Steepness: ``r.steepness``, or ``steepness=`` a number or a tensor that
broadcasts over the batch (0-d, ``(1,)``, or one value per row such as
``(B, 1)`` for ``x`` of shape ``(B, n)``); a tensor that requires grad gets
dL/ds. Taken as given (s = 0 gives p = 1/2 at every comparator, s < 0
reverses every comparator, as the formula says); :class:`Relaxation`'s
check (finite, > 0) applies to ``r`` only.

Differentiable to any order (the swap probability's derivatives are
formulas in torch ops, differentiated again by autograd) and under
``torch.func`` (``grad``, ``vmap``, ``jacrev``, ...; pass ``check=False``
there: a value check would need the host).
"""

from __future__ import annotations

import functools

import torch

from ..network import Network
from . import formulas as F
from .distributions import Relaxation, swap_probability, swap_probability_grad
from .expr import evaluate, var

__all__ = ["forward", "column", "hard", "Layer", "swap_prob", "check_input", "check_labels", "check_steepness"]


@functools.lru_cache(maxsize=64)
def _program_s(r: Relaxation):
    """The swap program of ``r`` with the steepness a variable ``s``."""
    return F.swap_exprs(r, var("s"))


def _eval(r: Relaxation, names, d: torch.Tensor, s: torch.Tensor):
    prog = _program_s(r)
    out = evaluate({n: prog[n] for n in names}, {"d": d, "s": s}, d.dtype)
    big = torch.finfo(d.dtype).max
    return [out[n] if n == "p" else out[n].clamp(-big, big) for n in names]


def _sum_to(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``t`` summed over the dimensions ``like`` was broadcast along."""
    return t.sum() if like.dim() == 0 else t.sum_to_size(like.shape)


class _SwapProbS(torch.autograd.Function):
    """p = F(s phi(d)) for a tensor steepness ``s`` (broadcast against d),
    with the documented derivatives dp/dd and dp/ds. Its backward is torch
    ops on the saved inputs, so autograd differentiates it again (double
    backward); ``setup_context`` and the generated vmap rule make it usable
    under torch.func."""

    generate_vmap_rule = True

    @staticmethod
    def forward(d: torch.Tensor, s: torch.Tensor, r: Relaxation) -> torch.Tensor:  # type: ignore[override]
        return _eval(r, ("p",), d, s)[0]

    @staticmethod
    def setup_context(ctx, inputs, output):
        d, s, r = inputs
        ctx.save_for_backward(d, s)
        ctx.r = r

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[override]
        d, s = ctx.saved_tensors
        dp, dps = _eval(ctx.r, ("dp", "dps"), d, s)
        gs = _sum_to(g * dps, s) if ctx.needs_input_grad[1] else None
        return g * dp, gs, None


class _SwapProb(torch.autograd.Function):
    """p = F(s phi(d)) with the documented derivative (finite at ART ties),
    the steepness ``r.steepness``; differentiable again and usable under
    torch.func, like :class:`_SwapProbS`."""

    generate_vmap_rule = True

    @staticmethod
    def forward(d: torch.Tensor, r: Relaxation) -> torch.Tensor:  # type: ignore[override]
        return swap_probability(d, r)

    @staticmethod
    def setup_context(ctx, inputs, output):
        d, r = inputs
        ctx.save_for_backward(d)
        ctx.r = r

    @staticmethod
    def backward(ctx, g: torch.Tensor):  # type: ignore[override]
        (d,) = ctx.saved_tensors
        return g * swap_probability_grad(d, ctx.r), None


def swap_prob(d: torch.Tensor, r: Relaxation, s: torch.Tensor | None = None) -> torch.Tensor:
    """Swap probability usable under autograd (see :func:`swap_probability`),
    with ``r.steepness`` or the tensor ``s`` (broadcast against ``d``)."""
    if s is None:
        return _SwapProb.apply(d, r)
    return _SwapProbS.apply(d, s.to(d.dtype), r)


def check_steepness(x: torch.Tensor, steepness) -> torch.Tensor | None:
    """``steepness`` (None, a number or a tensor) as a tensor in ``x``'s
    dtype and device that broadcasts against ``x[..., :1]`` (None stays
    None); ValueError for any other shape."""
    if steepness is None:
        return None
    if isinstance(steepness, torch.Tensor):
        if not steepness.dtype.is_floating_point and steepness.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"steepness must be a real number or tensor, got {steepness.dtype}")
        s = steepness.to(device=x.device, dtype=x.dtype)
    elif isinstance(steepness, bool) or not hasattr(steepness, "__float__"):
        raise ValueError(f"steepness must be a real number or tensor, got {type(steepness).__name__}")
    else:
        s = torch.tensor(float(steepness), dtype=x.dtype, device=x.device)
    want = tuple(x.shape[:-1]) + (1,)
    try:
        ok = torch.broadcast_shapes(tuple(s.shape), want) == torch.Size(want)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"steepness of shape {tuple(s.shape)} does not broadcast over the batch of an input of "
                         f"shape {tuple(x.shape)}: use a number, a 1-element tensor or one value per row, shape "
                         f"{want}")
    return s


def check_input(net: Network, x: torch.Tensor, check: bool = True) -> tuple[torch.Tensor, torch.dtype]:
    """Validate ``x`` (shape ``(..., n)``, floating, and finite unless
    ``check`` is False); return it in the compute dtype, plus the dtype to
    return results in."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() < 1 or x.shape[-1] != net.n:
        raise ValueError(f"input must have shape (..., {net.n}), got {tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise ValueError(f"input must be floating point, got {x.dtype}")
    if check and not bool(torch.isfinite(x).all()):
        bad = "NaN" if bool(torch.isnan(x).any()) else "inf"
        raise ValueError(f"input contains {bad} values; relaxed networks need finite inputs")
    out_dtype = x.dtype
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.float()
    return x, out_dtype


def _index(net: Network, l: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    c = torch.from_numpy(net.layer(l).astype("int64"))
    return c[:, 0].to(device), c[:, 1].to(device)


def _mix(u: torch.Tensor, a: torch.Tensor, b: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Apply one layer's mixing to the last dim of ``u`` (out of place):
    u[a] <- p u[a] + (1-p) u[b], u[b] <- (1-p) u[a] + p u[b]
    (``torch.lerp(start, end, w) = start + w (end - start)``, one rounding-
    careful kernel; the generated targets use the same expression)."""
    ua, ub = u[..., a], u[..., b]
    return u.index_copy(-1, a, torch.lerp(ub, ua, p)).index_copy(-1, b, torch.lerp(ua, ub, p))


def _sweep(net: Network, x: torch.Tensor, r: Relaxation, extra: torch.Tensor | None = None,
           s: torch.Tensor | None = None):
    """Forward sweep of the values; returns (final wires, list of (a, b, p)),
    mixing ``extra`` (same shape as x) alongside when given; ``s``: the
    steepness tensor (None: ``r.steepness``)."""
    v = x
    steps = []
    for l in range(net.depth):
        a, b = _index(net, l, x.device)
        p = swap_prob(v[..., a] - v[..., b], r, s)
        v = _mix(v, a, b, p)
        if extra is not None:
            extra = _mix(extra, a, b, p)
        steps.append((a, b, p))
    return v, steps, extra


def forward(net: Network, x: torch.Tensor, r: Relaxation, steepness=None,
            check: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft values ``(..., k)`` and ``P`` ``(..., k, n)`` (see module doc)."""
    x, out_dtype = check_input(net, x, check)
    v, steps, _ = _sweep(net, x, r, s=check_steepness(x, steepness))
    outs = torch.tensor(net.outputs, dtype=torch.int64, device=x.device)
    values = v[..., outs]
    # back-sweep: R = E_out, then R <- R M_l for l = depth-1 .. 0
    R = torch.zeros(x.shape[:-1] + (net.k, net.n), dtype=x.dtype, device=x.device)
    R[..., torch.arange(net.k, device=x.device), outs] = 1
    for a, b, p in reversed(steps):
        R = _mix(R, a, b, p.unsqueeze(-2))
    return values.to(out_dtype), R.to(out_dtype)


def column(net: Network, x: torch.Tensor, y: torch.Tensor, r: Relaxation, steepness=None,
           check: bool = True) -> torch.Tensor:
    """``P[..., :, y]`` of shape ``(..., k)`` for integer ``y`` of shape
    ``(...)`` (the batch shape of ``x``)."""
    x, out_dtype = check_input(net, x, check)
    y = check_labels(net, x, y)
    e = torch.nn.functional.one_hot(y, net.n).to(x.dtype)
    _, _, c = _sweep(net, x, r, extra=e, s=check_steepness(x, steepness))
    outs = torch.tensor(net.outputs, dtype=torch.int64, device=x.device)
    return c[..., outs].to(out_dtype)


def check_labels(net: Network, x: torch.Tensor, y) -> torch.Tensor:
    """Validate class indices ``y`` against ``x``'s batch shape."""
    y = torch.as_tensor(y, device=x.device)
    if y.dtype.is_floating_point or y.dtype == torch.bool or y.is_complex():
        raise ValueError(f"y must hold integer indices, got {y.dtype}")
    if tuple(y.shape) != tuple(x.shape[:-1]):
        raise ValueError(f"y must have shape {tuple(x.shape[:-1])} (the batch shape of x), got {tuple(y.shape)}")
    y = y.long()
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= net.n):
        raise ValueError(f"y must lie in 0..{net.n - 1}")
    return y


def hard(net: Network, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact network: ``(values, indices)`` of shape ``(..., k)``;
    ``indices`` (int64) are the input positions the outputs came from. A
    comparator swaps only when the min wire holds a strictly larger value."""
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != net.n:
        raise ValueError(f"input must be a tensor of shape (..., {net.n})")
    if x.dtype.is_floating_point and bool(torch.isnan(x).any()):
        raise ValueError("input contains NaN values; the exact network needs ordered inputs")
    v = x.clone()
    idx = torch.arange(net.n, device=x.device).expand(x.shape).clone()
    for l in range(net.depth):
        a, b = _index(net, l, x.device)
        va, vb, ia, ib = v[..., a], v[..., b], idx[..., a], idx[..., b]
        swap = vb > va
        v[..., a], v[..., b] = torch.where(swap, vb, va), torch.where(swap, va, vb)
        idx[..., a], idx[..., b] = torch.where(swap, ib, ia), torch.where(swap, ia, ib)
    outs = torch.tensor(net.outputs, dtype=torch.int64, device=x.device)
    return v[..., outs], idx[..., outs]



class Layer(torch.nn.Module):
    """The reference executor wrapped like a generated layer (``forward``,
    ``column``, ``hard``), e.g. for :class:`netgen.relax.loss.TopKCrossEntropyLoss`.
    Differentiated by autograd; slow but the definition."""

    def __init__(self, net: Network, r: Relaxation):
        super().__init__()
        self.net, self.relaxation = net, r
        self.n, self.k = net.n, net.k

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return forward(self.net, x, self.relaxation)

    def column(self, x: torch.Tensor, y) -> torch.Tensor:
        return column(self.net, x, y, self.relaxation)

    def hard(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return hard(self.net, x)
