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
* The lane sweeps, P applied to lanes without forming it (docs/operators.md):
  :func:`back` returns ``W P`` for ``W`` of shape ``(..., m, k)`` (m lanes
  swept from the last layer to the first: soft ranks ``r^T P``, the top-k
  mask ``1^T P``, any weighting) and :func:`fwd` returns ``P V`` for ``V``
  of shape ``(..., n, d)`` (d lanes swept forward beside the values:
  ``P x``, the column ``P e_y``); :func:`soft_values` is the sweep with no
  lane. Each takes a run-time steepness (a number or a 0-d tensor, which
  then gets a gradient). :func:`forward`'s P is ``back`` of the identity and
  :func:`column` is ``fwd`` of ``e_y``.

Inputs: float32/float64 are computed in their own dtype; float16/bfloat16
are computed in float32 and the results returned in the input dtype.
NaN or inf inputs raise ``ValueError`` (``check=False`` in :func:`forward`
and :func:`column`: they are computed with, and a row holding one comes out
NaN).

Steepness of :func:`forward` and :func:`column`: ``r.steepness``, or
``steepness=`` a number or a tensor that broadcasts over the batch (0-d,
``(1,)``, or one value per row such as ``(B, 1)`` for ``x`` of shape
``(B, n)``); a tensor that requires grad gets dL/ds. Taken as given (s = 0
gives p = 1/2 at every comparator, s < 0 reverses every comparator, as the
formula says); :class:`Relaxation`'s check (finite, > 0) applies to ``r``
only. The lane sweeps (:func:`back`, :func:`fwd`, :func:`soft_values`) take
the operators' steepness: a finite number > 0 or a 0-d tensor
(:func:`check_steepness`).

Differentiable to any order (the swap probability's derivatives are
formulas in torch ops, differentiated again by autograd) and under
``torch.func`` (``grad``, ``vmap``, ``jacrev``, ...; pass ``check=False``
there: a value check would need the host).

Memory under autograd (this is the oracle, not the fast path): each layer
keeps its swap probabilities and, for the lerp of each mixed pair, both
gathered operands, so a sweep with L lanes (L = 1 for the values, m for
``back``, 1 + d for ``fwd``) keeps about ``(2 L + 1) * size`` numbers per
row for the backward: O(size) per lane, never the n x n P (``forward``
forms P because it returns it). Time is O(depth * L * n) per row: every
layer copies the lanes once (out-of-place ``index_copy``).
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import replace

import torch

from ..network import Network
from .distributions import Relaxation, swap_probability, swap_probability_grad
from .expr import evaluate, var
from .formulas import swap_exprs

__all__ = ["forward", "column", "hard", "Layer", "swap_prob", "check_input", "check_labels", "check_steepness",
           "steepness_tensor", "back", "fwd", "soft_values"]


@functools.lru_cache(maxsize=64)
def _program_s(r: Relaxation):
    """The swap program of ``r`` with the steepness a variable ``s``."""
    return swap_exprs(r, var("s"))


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


def steepness_tensor(x: torch.Tensor, steepness) -> torch.Tensor | None:
    """``steepness`` (None, a number or a tensor) as a tensor in ``x``'s
    dtype and device that broadcasts against ``x[..., :1]`` (None stays
    None); ValueError for any other shape. Any value is taken as given."""
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


def _sweep(net: Network, x: torch.Tensor, prob, lanes: torch.Tensor | None = None):
    """Forward sweep of the values; returns (final wires, list of (a, b, p),
    final lanes). ``prob(d) -> p``; ``lanes`` of shape ``(..., L, n)`` are
    mixed beside the values with the same ``p``."""
    v = x
    steps = []
    for l in range(net.depth):
        a, b = _index(net, l, x.device)
        p = prob(v[..., a] - v[..., b])
        v = _mix(v, a, b, p)
        if lanes is not None:
            lanes = _mix(lanes, a, b, p.unsqueeze(-2))
        steps.append((a, b, p))
    return v, steps, lanes


def _outputs(net: Network, device: torch.device) -> torch.Tensor:
    return torch.tensor(net.outputs, dtype=torch.int64, device=device)


def _back(net: Network, x: torch.Tensor, W: torch.Tensor, prob, steps=None) -> torch.Tensor:
    """``W P`` for checked ``x`` (..., n) and ``W`` (..., m, k) of x's dtype
    (``steps``: :func:`_sweep`'s, when the caller swept already)."""
    if steps is None:
        _, steps, _ = _sweep(net, x, prob)
    shape = x.shape[:-1] + W.shape[-2:-1] + (net.n,)
    R = torch.zeros(shape, dtype=x.dtype, device=x.device).index_copy(
        -1, _outputs(net, x.device), W.expand(x.shape[:-1] + W.shape[-2:]))
    for a, b, p in reversed(steps):  # R <- R M_l, l = depth-1 .. 0
        R = _mix(R, a, b, p.unsqueeze(-2))
    return R


def _fwd(net: Network, x: torch.Tensor, V: torch.Tensor, prob) -> tuple[torch.Tensor, torch.Tensor]:
    """``(P x, P V)`` for checked ``x`` (..., n) and ``V`` (..., n, d)."""
    lanes = V.transpose(-1, -2).expand(x.shape[:-1] + (V.shape[-1], net.n))
    v, _, lanes = _sweep(net, x, prob, lanes)
    outs = _outputs(net, x.device)
    return v[..., outs], lanes[..., outs].transpose(-1, -2)


def _prob_given(r: Relaxation, x: torch.Tensor, steepness):
    """``d -> p`` with :func:`steepness_tensor`'s steepness (taken as given)."""
    s = steepness_tensor(x, steepness)
    return lambda d: swap_prob(d, r, s)


def forward(net: Network, x: torch.Tensor, r: Relaxation, steepness=None,
            check: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft values ``(..., k)`` and ``P`` ``(..., k, n)`` (see module doc)."""
    x, out_dtype = check_input(net, x, check)
    prob = _prob_given(r, x, steepness)
    v, steps, _ = _sweep(net, x, prob)
    values = v[..., _outputs(net, x.device)]
    P = _back(net, x, torch.eye(net.k, dtype=x.dtype, device=x.device), prob, steps)  # P = I_k P, one sweep
    return values.to(out_dtype), P.to(out_dtype)


def column(net: Network, x: torch.Tensor, y: torch.Tensor, r: Relaxation, steepness=None,
            check: bool = True) -> torch.Tensor:
    """``P[..., :, y]`` of shape ``(..., k)`` for integer ``y`` of shape
    ``(...)`` (the batch shape of ``x``)."""
    x, out_dtype = check_input(net, x, check)
    y = check_labels(net, x, y)
    e = torch.nn.functional.one_hot(y, net.n).to(x.dtype)
    _, c = _fwd(net, x, e.unsqueeze(-1), _prob_given(r, x, steepness))  # P e_y
    return c[..., 0].to(out_dtype)


# ------------------------------------------------------------- lane sweeps
def check_steepness(s) -> None:
    """ValueError unless ``s`` is None, a finite number > 0 or a 0-d
    floating tensor holding one (a tensor off the CPU is not read: that
    would synchronise a GPU)."""
    if s is None:
        return
    if isinstance(s, torch.Tensor):
        if s.dim() != 0 or not s.dtype.is_floating_point:
            raise ValueError(f"steepness must be a number or a 0-d floating tensor, got a {s.dtype} tensor "
                             f"of shape {tuple(s.shape)}")
        if s.device.type != "cpu":
            return
        v = float(s.detach())
    else:
        if isinstance(s, bool) or not isinstance(s, numbers.Real):
            raise ValueError(f"steepness must be a number, got {s!r}")
        v = float(s)
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"steepness must be finite and > 0, got {v}")


def _prob(r: Relaxation, s):
    """``d -> p`` for relaxation ``r`` with steepness ``s`` (None: r's; a
    tensor that requires grad gets dL/ds)."""
    check_steepness(s)
    if s is None:
        return lambda d: swap_prob(d, r)
    if isinstance(s, torch.Tensor) and s.requires_grad:
        return lambda d: swap_prob(d, r, s)
    rs = replace(r, steepness=float(s))
    return lambda d: swap_prob(d, rs)


def _check_lanes(net: Network, x: torch.Tensor, t, name: str, rows: int, what: str) -> torch.Tensor:
    """``t`` of shape ``(..., a, b)`` whose batch dims broadcast to x's, in
    x's (compute) dtype; ``rows`` is the size the lanes must have on the
    side that P is applied to (k for W's last dim, n for V's rows)."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.dtype.is_floating_point:
        raise ValueError(f"{name} must be floating point, got {t.dtype}")
    side = -1 if name == "W" else -2
    if t.dim() < 2 or t.shape[side] != rows:
        raise ValueError(f"{name} must have shape {what}, got {tuple(t.shape)}")
    try:
        batch = torch.broadcast_shapes(t.shape[:-2], x.shape[:-1])
    except RuntimeError:
        batch = None
    if batch != x.shape[:-1]:
        raise ValueError(f"{name}'s leading dims {tuple(t.shape[:-2])} do not broadcast to the batch shape "
                         f"{tuple(x.shape[:-1])} of x")
    if t.device != x.device:
        raise ValueError(f"{name} is on {t.device}, x on {x.device}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or inf values")
    return t.to(x.dtype)


def back(net: Network, x: torch.Tensor, W: torch.Tensor, r: Relaxation, steepness=None) -> torch.Tensor:
    """``W P`` of shape ``(..., m, n)`` for ``W`` of shape ``(..., m, k)``
    (leading dims broadcast to x's batch shape; ``(m, k)`` is one W for
    every row), without forming P: the m lanes start on the output wires
    and are swept from the last layer to the first. ``1^T P`` (m = 1, W =
    ones) is the top-k mask, ``r^T P`` the soft ranks. ``steepness``: None
    (``r``'s), a number, or a 0-d tensor (then it gets a gradient)."""
    x, out_dtype = check_input(net, x)
    W = _check_lanes(net, x, W, "W", net.k, f"(..., m, {net.k})")
    return _back(net, x, W, _prob(r, steepness)).to(out_dtype)


def fwd(net: Network, x: torch.Tensor, V: torch.Tensor, r: Relaxation, steepness=None) -> torch.Tensor:
    """``P V`` of shape ``(..., k, d)`` for ``V`` of shape ``(..., n, d)``
    (leading dims broadcast to x's batch shape), without forming P: the d
    lanes are mixed beside the values, from the first layer to the last.
    ``V = x[..., None]`` gives the soft values, ``V = e_y`` the column."""
    x, out_dtype = check_input(net, x)
    V = _check_lanes(net, x, V, "V", net.n, f"(..., {net.n}, d)")
    return _fwd(net, x, V, _prob(r, steepness))[1].to(out_dtype)


def soft_values(net: Network, x: torch.Tensor, r: Relaxation, steepness=None) -> torch.Tensor:
    """``P x`` of shape ``(..., k)`` (the sweep with no lane): the soft
    values, rank 0 = the largest."""
    x, out_dtype = check_input(net, x)
    v, _, _ = _sweep(net, x, _prob(r, steepness))
    return v[..., _outputs(net, x.device)].to(out_dtype)


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
