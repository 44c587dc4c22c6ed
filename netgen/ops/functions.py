"""The operators: soft sort, soft rank, soft top-k and the top-k mask.

Each is a relaxed comparator network applied along ``dim`` of a tensor of
any shape, written in terms of the network's relaxed permutation matrix P
(k x n, rank 0 = the largest; docs/operators.md) and computed by lane
sweeps without forming P (:mod:`netgen.ops.backends`):

=================  ============================  =====================================
operator           in terms of P                 result
=================  ============================  =====================================
``soft_sort``      ``P x`` (a sorter, k = n)     ``SortResult(values, indices)``
``soft_rank``      ``r^T P``, r = the ranks      tensor of 1-based ranks, x's shape
``soft_topk``      ``P x`` (k rows); P if asked  ``TopKResult(values, indices[, P])``
``topk_mask``      ``1^T P``                     tensor in [0, 1], x's shape, sums to k
=================  ============================  =====================================

Common keyword arguments: ``steepness`` (None: the network's default
``2 * depth``; a number, or a 0-d tensor, which then gets a gradient; or
``"auto"``: chosen from the detached scores of this call so that the
blur, :func:`netgen.blur`, is ``blur``, default 0.1, any number in (0, 1);
docs/relaxations.md section 8; the module forms calibrate on their first 4
training calls, at blur 0.75 unless told, and then keep s),
``distribution`` (None: ``cauchy``; any of
:data:`netgen.relax.DISTRIBUTIONS`), ``network`` (``"best"``, a kind, a
Network or a file; :mod:`netgen.ops.networks`) and ``target`` (``"auto"``
or a backend name). float16 / bfloat16 inputs are computed in float32 and
the results returned in the input dtype.

``max_size`` (None: the default budget, 10 million comparators plus
wires, :data:`netgen.network.DEFAULT_MAX_SIZE`) opts in to larger
networks: a network estimated past it is refused at once with a
ValueError naming the estimate and the ``max_size=`` to pass (a sorter at
n = 2^20 needs ``max_size=111_149_056``; docs/operators-measured.md, "Scale").
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..codegen.runtime.common import compiler_disable
from ..relax.distributions import default_relaxation
from ..relax.steepness import DEFAULT_BLUR, check_blur, estimate_steepness, is_auto
from .backends import Lanes, lanes_for
from .indices import sort_indices
from .networks import network_for

__all__ = ["soft_sort", "soft_rank", "soft_topk", "topk_mask", "topk_weights", "SortResult", "TopKResult", "TopKWithP"]


class SortResult(NamedTuple):
    """``soft_sort``'s result, as ``torch.sort``'s: the soft sorted values
    and the hard indices (``torch.sort``'s)."""

    values: torch.Tensor
    indices: torch.Tensor


class TopKResult(NamedTuple):
    """``soft_topk``'s result, as ``torch.topk``'s: soft values, hard indices."""

    values: torch.Tensor
    indices: torch.Tensor


class TopKWithP(NamedTuple):
    """``soft_topk(..., return_P=True)``: values, indices and P of shape
    ``(*batch, k, n)`` (batch: x's shape without ``dim``)."""

    values: torch.Tensor
    indices: torch.Tensor
    P: torch.Tensor


# ------------------------------------------------------------------ plumbing
class _Rows:
    """``x`` with ``dim`` moved last and the other dims flattened: ``(B, n)``
    in the compute dtype, and how to put results back."""

    def __init__(self, x, dim, name: str):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
        if not x.dtype.is_floating_point:
            raise ValueError(f"{name}: input must be floating point, got {x.dtype}")
        if x.dim() == 0:
            raise ValueError(f"{name}: input must have at least one dimension, got a 0-d tensor")
        if isinstance(dim, bool) or not isinstance(dim, int) or not -x.dim() <= dim < x.dim():
            raise ValueError(f"{name}: dim must be an integer in {-x.dim()}..{x.dim() - 1}, got {dim!r}")
        self.dim = dim % x.dim()
        self.dtype = x.dtype
        moved = x.movedim(self.dim, -1)
        self.batch = moved.shape[:-1]
        self.n = moved.shape[-1]
        if self.n == 0:
            raise ValueError(f"{name}: dim {dim} has size 0; there is nothing to sort")
        compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
        self.rows = moved.reshape(-1, self.n).to(compute)

    def put(self, t: torch.Tensor) -> torch.Tensor:
        """``(B, m)`` -> x's shape with ``dim`` of size m, in x's dtype."""
        return t.reshape(self.batch + t.shape[-1:]).movedim(-1, self.dim).to(self.dtype)

    def put_matrix(self, t: torch.Tensor) -> torch.Tensor:
        """``(B, a, b)`` -> ``(*batch, a, b)`` in x's dtype."""
        return t.reshape(self.batch + t.shape[-2:]).to(self.dtype)


def _flag(v, name: str) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{name} must be True or False, got {v!r}")
    return v


def _check_k(k, n: int, name: str) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValueError(f"{name}: k must be an integer, got {k!r}")
    if not 1 <= k <= n:
        raise ValueError(f"{name}: k = {k} must lie in 1..{n} (the size of dim)")
    return k


@compiler_disable
def _lanes(n: int, k: int, sorter: bool, network, distribution, target, device, max_size=None,
           name: str = "") -> Lanes:
    """The network's lanes (built or from the caches): outside any
    torch.compile trace, which cannot run a network's construction (one
    graph break)."""
    net = network_for(n, k, network, sorter=sorter, max_size=max_size, name=name)
    return lanes_for(net, default_relaxation(net, distribution), target, device)


@compiler_disable
def _estimate(net, r, x, blur):
    """``steepness="auto"``'s estimate, outside any torch.compile trace."""
    return estimate_steepness(net, r, x.detach(), blur)


def _s(lanes: Lanes, steepness, x=None, blur=DEFAULT_BLUR, auto=None):
    """The steepness to run with: given, the network's default, or "auto"'s
    choice from the rows ``x`` (``auto``: a module's AutoSteepness state,
    whose own blur then counts; None: its default for the mode)."""
    if auto is None:
        check_blur(blur)
    if not is_auto(steepness):
        return lanes.relaxation.steepness if steepness is None else steepness
    net, r = lanes.net, lanes.relaxation
    estimate = lambda t, b: _estimate(net, r, t, b)  # noqa: E731
    if auto is not None:
        return auto(x, estimate, r.steepness)
    est = estimate(x, blur)
    return r.steepness if est.steepness is None else est.steepness


def _weights(lanes: Lanes, w: torch.Tensor) -> torch.Tensor:
    """Pad ``w`` (m, k) with zero columns to the network's k outputs (a
    given network may have more outputs than asked for)."""
    extra = lanes.net.k - w.shape[-1]
    return w if extra == 0 else torch.nn.functional.pad(w, (0, extra))


# ----------------------------------------------------------------- operators
def soft_sort(x: torch.Tensor, dim: int = -1, descending: bool = False, *, steepness=None, distribution=None,
              network="best", target: str = "auto", blur: float = DEFAULT_BLUR, max_size: int | None = None,
              _auto=None) -> SortResult:
    """Soft sorted values along ``dim`` (ascending unless ``descending``),
    ``P x`` of a sorting network; and the hard indices ``torch.sort``
    returns (on CPU float32/float64 by numpy's argsort, 5x faster; ties in
    an unspecified order, as torch.sort's: :mod:`netgen.ops.indices`).
    Ascending values are the descending ones reversed (one network run
    either way)."""
    _flag(descending, "descending")
    rows = _Rows(x, dim, "soft_sort")
    lanes = _lanes(rows.n, rows.n, True, network, distribution, target, x.device, max_size, "soft_sort")
    v = lanes.values(rows.rows, _s(lanes, steepness, rows.rows, blur, _auto))
    if not descending:
        v = v.flip(-1)
    indices = sort_indices(x, rows.dim, descending)  # torch.sort's (ties: netgen/ops/indices.py)
    return SortResult(rows.put(v), indices)


def soft_rank(x: torch.Tensor, dim: int = -1, descending: bool = False, *, steepness=None, distribution=None,
              network="best", target: str = "auto", blur: float = DEFAULT_BLUR, max_size: int | None = None,
              _auto=None) -> torch.Tensor:
    """Soft ranks along ``dim``, 1-based as torchsort's: ascending (the
    smallest value has rank 1, the largest rank n) unless ``descending``
    (the largest has rank 1). ``r^T P`` of a sorting network with r the
    rank of each output; ranks lie in [1, n] and each row sums to
    n (n + 1) / 2. Needs a sorter: a given network with k < n is refused."""
    _flag(descending, "descending")
    rows = _Rows(x, dim, "soft_rank")
    n = rows.n
    lanes = _lanes(n, n, True, network, distribution, target, x.device, max_size, "soft_rank")
    out = torch.arange(n, dtype=rows.rows.dtype, device=x.device)  # output rank 0 = the largest
    r = out + 1 if descending else n - out
    ranks = lanes.back(rows.rows, _s(lanes, steepness, rows.rows, blur, _auto), r.unsqueeze(0))[:, 0]
    return rows.put(ranks)


def _topk_rows(x, k, dim, largest, name):
    _flag(largest, "largest")
    rows = _Rows(x, dim, name)
    k = _check_k(k, rows.n, name)
    xin = rows.rows if largest else -rows.rows  # the k smallest: the top k of -x
    return rows, k, xin


def soft_topk(x: torch.Tensor, k: int, dim: int = -1, largest: bool = True, return_P: bool = False, *,
              steepness=None, distribution=None, network="best", target: str = "auto", blur: float = DEFAULT_BLUR,
              max_size: int | None = None, _auto=None):
    """Soft top-k values along ``dim`` (``P x``; the largest first, or with
    ``largest=False`` the smallest first, as ``torch.topk``), the hard
    indices ``torch.topk`` returns and, with ``return_P``, P of shape
    ``(*batch, k, n)`` (``P[..., r, c]``: weight of input c in rank r;
    ``values = P @ x``). ``largest=False`` runs the network on ``-x``."""
    _flag(return_P, "return_P")
    rows, k, xin = _topk_rows(x, k, dim, largest, "soft_topk")
    lanes = _lanes(rows.n, k, False, network, distribution, target, x.device, max_size, "soft_topk")
    s = _s(lanes, steepness, xin, blur, _auto)
    v = lanes.values(xin, s)[:, :k]
    values = rows.put(v if largest else -v)
    indices = torch.topk(x.detach(), k, dim=rows.dim, largest=largest).indices
    if not return_P:
        return TopKResult(values, indices)
    eye = torch.eye(k, dtype=xin.dtype, device=x.device)
    return TopKWithP(values, indices, rows.put_matrix(lanes.back(xin, s, _weights(lanes, eye))))


def topk_mask(x: torch.Tensor, k: int, dim: int = -1, largest: bool = True, *, steepness=None,
              distribution=None, network="best", target: str = "auto", blur: float = DEFAULT_BLUR,
              max_size: int | None = None, _auto=None) -> torch.Tensor:
    """The soft top-k mask along ``dim``: ``1^T P``, for each input the soft
    probability that it is among the k largest (``largest=False``: the k
    smallest). Same shape as x, entries in [0, 1], summing to k along
    ``dim``."""
    rows, k, xin = _topk_rows(x, k, dim, largest, "topk_mask")
    return rows.put(_back_rows(rows, xin, k, torch.ones(1, k, dtype=xin.dtype, device=x.device), network,
                               distribution, target, steepness, blur, _auto, max_size, "topk_mask")[:, 0])


def _back_rows(rows: _Rows, xin, k, W, network, distribution, target, steepness, blur, auto, max_size, name):
    lanes = _lanes(rows.n, k, False, network, distribution, target, xin.device, max_size, name)
    return lanes.back(xin, _s(lanes, steepness, xin, blur, auto), _weights(lanes, W))


def topk_weights(x: torch.Tensor, k: int, W: torch.Tensor, dim: int = -1, largest: bool = True, *, steepness=None,
                 distribution=None, network="best", target: str = "auto", blur: float = DEFAULT_BLUR,
                 max_size: int | None = None, _auto=None) -> torch.Tensor:
    """``W P`` for weights ``W`` of shape ``(m, k)`` over the top-k ranks:
    m weightings of the inputs, shape ``(*batch, m, n)`` (``W = ones(1, k)``
    is :func:`topk_mask`; the rows of a lower-triangular ``W`` are the masks
    of the top 1, 2, ..., k). O(m size) per row, P never formed."""
    rows, k, xin = _topk_rows(x, k, dim, largest, "topk_weights")
    if not isinstance(W, torch.Tensor) or W.dim() != 2 or W.shape[1] != k:
        raise ValueError(f"topk_weights: W must be a tensor of shape (m, k = {k}), got "
                         f"{tuple(W.shape) if isinstance(W, torch.Tensor) else type(W).__name__}")
    W = W.to(device=x.device, dtype=xin.dtype)
    return rows.put_matrix(_back_rows(rows, xin, k, W, network, distribution, target, steepness, blur, _auto,
                                      max_size, "topk_weights"))
