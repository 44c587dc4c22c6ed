"""Blur: how far a relaxed network is from the hard one (docs/relaxations.md,
"Blur").

For a relaxed P (``(..., k, n)``, rows = ranks, rank 0 = the largest) and
the hard network's one-hot rows H (``H[r, h_r] = 1``, ``h_r`` the input the
exact network puts at rank r)::

    blur = mean over rows and ranks r of  TV(P[r], H[r]) = 1/2 sum_c |P[r, c] - H[r, c]|

0 is the hard network, 1 - 1/n a uniform P. A netgen P has rows that are
probability vectors (every layer mixes with a doubly stochastic matrix), so
``TV(P[r], H[r]) = 1 - P[r, h_r]``: the blur needs only P's entries at the
hard indices. :func:`blur` computes the TV itself (any P); the estimator
(:mod:`netgen.relax.steepness_estimate`) uses ``1 - P[r, h_r]`` read by lane sweeps
(:func:`lane_blur`: ``P[:, h_r]`` is the column of ``h_r``, one forward lane,
so m ranks cost O(m size) per row, all k ranks O(k size) as P's back-sweep),
and :class:`HardPaths` follows each output element through the exact
network on a few rows (what the cheap blur model reads).
"""

from __future__ import annotations

import weakref

import numpy as np
import torch

from ..network import Network

__all__ = ["blur", "layer_columns", "lane_blur", "HardPaths", "sample_rows", "sample_ranks"]


def blur(P, indices=None, *, reduction: str = "mean", chunk: int = 64) -> torch.Tensor:
    """The blur of a relaxed top-k / sort (see the module docstring):

    * ``blur(P, indices)``: ``P`` of shape ``(..., k, n)`` and the hard
      network's indices ``(..., k)`` (rank 0 = the largest): the total
      variation itself, ``1/2 sum_c |P[r, c] - H[r, c]|`` (any P);
    * ``blur(result)``: an operator result holding both, e.g.
      ``soft_topk(x, k, return_P=True)``;
    * ``blur(layer, x)``: a netgen layer (``layer.hard(x)`` and
      ``layer.fwd(x, V)``, or ``layer(x) -> (values, P)``) on scores
      ``x``: ``1 - P[r, h_r]`` read from the columns ``P e_{h_r}`` by
      forward lane sweeps, ``chunk`` ranks at a time (O(chunk * n) memory
      per row, P never formed); a layer without ``fwd`` forms P.

    ``reduction``: ``"mean"`` (a 0-d tensor) or ``"none"`` (one TV per row
    and rank, shape ``(..., k)``). Differentiable w.r.t. P (a regulariser
    may use it); read it under ``torch.no_grad()`` to only log it."""
    if reduction not in ("mean", "none"):
        raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")
    if indices is None and hasattr(P, "P") and hasattr(P, "indices"):
        P, indices = P.P, P.indices
    elif hasattr(P, "hard") and callable(P):
        return _layer_blur(P, indices, reduction, chunk)
    if not isinstance(P, torch.Tensor) or P.dim() < 2 or not P.dtype.is_floating_point:
        raise ValueError("blur: P must be a floating tensor of shape (..., k, n) (or pass an operator result with P, "
                         "or a layer and its scores)")
    if not isinstance(indices, torch.Tensor) or indices.dtype.is_floating_point or indices.dtype == torch.bool:
        raise ValueError("blur: indices must be an integer tensor of shape (..., k)")
    if tuple(indices.shape) != tuple(P.shape[:-1]):
        raise ValueError(f"blur: indices of shape {tuple(indices.shape)} do not match P of shape {tuple(P.shape)} "
                         f"(want {tuple(P.shape[:-1])})")
    n = P.shape[-1]
    if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= n):
        raise ValueError(f"blur: indices must lie in 0..{n - 1}")
    ph = P.gather(-1, indices.long().unsqueeze(-1)).squeeze(-1)
    tv = 0.5 * (P.abs().sum(-1) - ph.abs() + (1.0 - ph).abs())  # 1/2 sum_c |P - H|, H one-hot at h
    return tv.mean() if reduction == "mean" else tv


def _layer_blur(layer, x, reduction: str, chunk: int) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ValueError("blur(layer, x): x must be a tensor of scores")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"blur: chunk must be a positive integer, got {chunk!r}")
    h = layer.hard(x)[1]
    if not hasattr(layer, "fwd") and not hasattr(layer, "column"):
        return blur(layer(x)[1], h, reduction=reduction)
    k = h.shape[-1]
    parts = []
    for r0 in range(0, k, chunk):
        y = h[..., r0:r0 + chunk]  # (..., m)
        cols = layer_columns(layer, x, y)[..., r0:r0 + y.shape[-1], :]  # (..., m, m): rank r0 + i, column h_{r0+j}
        parts.append(1.0 - cols.diagonal(dim1=-2, dim2=-1))
    tv = torch.cat(parts, -1) if parts else x.new_zeros(h.shape)
    return tv.mean() if reduction == "mean" else tv


def layer_columns(layer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``P[..., :, y_j]`` of shape ``(..., k, m)`` for indices ``y`` of shape
    ``(..., m)``: one forward lane sweep ``layer.fwd(x, e_y)`` (m lanes), or
    m calls of ``layer.column`` where the layer has no ``fwd`` yet."""
    if hasattr(layer, "fwd"):
        V = torch.nn.functional.one_hot(y, x.shape[-1]).to(x.dtype).transpose(-1, -2)  # (..., n, m)
        try:
            return layer.fwd(x, V)
        except NotImplementedError:
            pass
    return torch.stack([layer.column(x, y[..., j]) for j in range(y.shape[-1])], -1)


# ------------------------------------------------------- rows, ranks, lanes
def sample_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """At most ``rows`` rows of ``x`` (flattened to ``(B, n)``), evenly
    spaced, detached: deterministic (no random state is read or changed)."""
    x2 = x.detach().reshape(-1, x.shape[-1])
    B = x2.shape[0]
    if B <= rows:
        return x2
    return x2[torch.arange(rows, device=x.device) * B // rows]


def sample_ranks(k: int, ranks: int) -> torch.Tensor:
    """All k ranks, or ``ranks`` of them evenly spaced (the middle of equal
    strata: a stratified sample of a smooth profile over the ranks)."""
    if k <= ranks:
        return torch.arange(k)
    return ((torch.arange(ranks) * 2 + 1) * k) // (2 * ranks)


def lane_blur(columns, x: torch.Tensor, indices: torch.Tensor, ranks: torch.Tensor, s) -> float:
    """``mean (1 - P[r, h_r])`` over the rows of ``x`` (``(R, n)``) and the
    given ranks, read from the columns ``P[:, h_r]``: ``columns(x, s, y)``
    returns ``P[..., :, y_j]`` of shape ``(R, k, m)`` for indices ``y`` of
    shape ``(R, m)`` (m forward lanes, O(m size) per row)."""
    y = indices[:, ranks]
    cols = columns(x, s, y)  # (R, k, m)
    diag = cols[:, ranks.to(cols.device), torch.arange(len(ranks), device=cols.device)]
    return float((1.0 - diag).mean())


# --------------------------------------------------------------- hard paths
_LAYERS: dict[int, tuple] = {}  # id(net) -> (weakref to it, [(a, b) index arrays per layer])


def _layers(net: Network) -> list[tuple[np.ndarray, np.ndarray]]:
    got = _LAYERS.get(id(net))
    if got is not None and got[0]() is net:
        return got[1]
    layers = [(c[:, 0].astype(np.intp), c[:, 1].astype(np.intp)) for c in (net.layer(l) for l in range(net.depth))]
    if len(_LAYERS) > 64:
        _LAYERS.clear()
    _LAYERS[id(net)] = (weakref.ref(net), layers)
    return layers


class HardPaths:
    """The exact network on a few rows ``x`` (``(R, n)``, numpy float64),
    following each output element: ``indices`` (``(R, k)``, the hard
    network's, as ``layer.hard``), and for every comparator an output
    element passes, the gap ``|d|`` it meets there (``gaps``) and which
    output (``slot`` = row * k + rank) it belongs to. O(size) per row, one
    numpy step per layer (wire-major, so each gather moves contiguous rows)."""

    def __init__(self, net: Network, x: np.ndarray):
        R, n = x.shape
        k = net.k
        v = np.ascontiguousarray(x.T, dtype=np.float64)  # (n, R)
        idx = np.repeat(np.arange(n, dtype=np.int64)[:, None], R, 1)
        seen = []
        for a, b in _layers(net):
            va, vb, ia, ib = v[a], v[b], idx[a], idx[b]
            swap = vb > va  # the exact network: swap only on a strict inequality
            v[a], v[b] = np.where(swap, vb, va), np.where(swap, va, vb)
            idx[a], idx[b] = np.where(swap, ib, ia), np.where(swap, ia, ib)
            seen.append((np.abs(va - vb), ia, ib))
        outs = np.asarray(net.outputs, dtype=np.intp)
        self.indices = idx[outs].T.copy()  # (R, k)
        where = np.full((R, n), -1, dtype=np.int64)  # element -> its output slot, or -1
        rows = np.arange(R)[:, None]
        where[rows, self.indices] = rows * k + np.arange(k)[None, :]
        col = np.arange(R)[None, :]
        gaps, slots = [], []
        for d, ia, ib in seen:
            for e in (ia, ib):
                sl = where[col, e]
                on = sl >= 0
                gaps.append(d[on])
                slots.append(sl[on])
        self.gaps = np.concatenate(gaps) if gaps else np.zeros(0)
        self.slot = np.concatenate(slots) if slots else np.zeros(0, dtype=np.int64)
        self.outputs = R * k
        self.rows, self.k = R, k

    def subset(self, rows: np.ndarray) -> "HardPaths":
        """The same paths for some of the rows (``rows``: sorted indices)."""
        sub = object.__new__(HardPaths)
        k = self.k
        new = np.full(self.rows, -1, dtype=np.int64)
        new[rows] = np.arange(len(rows))
        row_of = new[self.slot // k]
        on = row_of >= 0
        sub.gaps, sub.slot = self.gaps[on], row_of[on] * k + self.slot[on] % k
        sub.indices = self.indices[rows]
        sub.rows, sub.k, sub.outputs = len(rows), k, len(rows) * k
        return sub
