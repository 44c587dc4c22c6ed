"""Ranking losses over the operators, beside the DiffTopK loss
(:mod:`netgen.relax.loss`).

* :func:`spearman` / :class:`SpearmanLoss`: Spearman's correlation of the
  soft ranks of predictions with the ranks of the targets (torchsort's
  README use), per row along ``dim``; the loss is ``1 - rho``.
* :class:`MultiLabelTopKLoss`: multi-label top-k classification with
  K-hot targets (difftopk issue #8): every positive class should rank among
  the top k, with weights ``p_k`` over k = 1..K as in DiffTopK. One lane:
  ``q = w^T P`` with ``w_r = sum_{k > r} p_k`` is, for each class, the
  ``p_k``-weighted soft probability that it ranks among the top k;
  the loss is ``-mean over positives of log q`` (``log`` guarded as the
  DiffTopK loss's, ``log(q (1 - 2 eps) + eps)``).
"""

from __future__ import annotations

import torch

from ..relax.loss import check_p_k
from .functions import soft_rank, topk_weights

__all__ = ["spearman", "exact_rank", "SpearmanLoss", "MultiLabelTopKLoss"]

_REDUCTIONS = ("mean", "sum", "none")


def _reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return loss.mean() if loss.numel() else loss.sum()  # an empty batch: 0, not NaN
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_reduction(reduction: str) -> str:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(map(repr, _REDUCTIONS))}, got {reduction!r}")
    return reduction


def exact_rank(t: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The exact 1-based ascending ranks along ``dim``, ties given their
    average rank (as ``scipy.stats.rankdata``), in ``t``'s dtype (float)
    without gradient."""
    moved = t.detach().movedim(dim, -1).contiguous()
    s = moved.sort(-1).values
    lo = torch.searchsorted(s, moved, right=False)
    hi = torch.searchsorted(s, moved, right=True)
    dtype = t.dtype if t.dtype.is_floating_point else torch.float64
    return ((lo + hi + 1).to(dtype) / 2).movedim(-1, dim)


def _corr(a: torch.Tensor, b: torch.Tensor, dim: int) -> torch.Tensor:
    a = a - a.mean(dim, keepdim=True)
    b = b - b.mean(dim, keepdim=True)
    den = (a.norm(dim=dim) * b.norm(dim=dim)).clamp_min(torch.finfo(a.dtype).tiny)
    return (a * b).sum(dim) / den  # a constant row gives 0, not NaN


def spearman(pred: torch.Tensor, target: torch.Tensor, dim: int = -1, *, soft_target: bool = False, **kw):
    """Spearman's rho of ``pred`` and ``target`` along ``dim`` (one value
    per row), differentiable w.r.t. ``pred`` through :func:`soft_rank`
    (``kw``: its ``steepness``, ``distribution``, ``network``, ``target``).
    The targets' ranks are exact (ties averaged) unless ``soft_target``,
    which soft-ranks them too (torchsort's README does)."""
    if not isinstance(target, torch.Tensor) or target.shape != pred.shape:
        raise ValueError(f"target must be a tensor of pred's shape {tuple(pred.shape)}, got "
                         f"{tuple(target.shape) if isinstance(target, torch.Tensor) else type(target).__name__}")
    rp = soft_rank(pred, dim, **kw)
    rt = soft_rank(target, dim, **kw) if soft_target else exact_rank(target, dim).to(rp.dtype)
    return _corr(rp, rt.to(rp.device), dim)


class SpearmanLoss(torch.nn.Module):
    """``1 - spearman(pred, target)`` per row along ``dim``, reduced by
    ``reduction`` (``"mean"``, ``"sum"``, ``"none"``). Keyword arguments go
    to :func:`soft_rank` (``steepness``: a number or a learnable
    ``nn.Parameter``; ``distribution``; ``network``; ``target``)."""

    def __init__(self, dim: int = -1, reduction: str = "mean", soft_target: bool = False, **kw):
        super().__init__()
        self.dim, self.reduction, self.soft_target = dim, _check_reduction(reduction), soft_target
        self.steepness = kw.pop("steepness", None)
        self.kw = kw

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        rho = spearman(pred, target, self.dim, soft_target=self.soft_target, steepness=self.steepness, **self.kw)
        return _reduce(1 - rho, self.reduction)


def _check_multi_hot(targets, scores: torch.Tensor) -> torch.Tensor:
    if not isinstance(targets, torch.Tensor) or targets.shape != scores.shape:
        raise ValueError(f"targets must be a K-hot tensor of the scores' shape {tuple(scores.shape)}, got "
                         f"{tuple(targets.shape) if isinstance(targets, torch.Tensor) else type(targets).__name__}")
    if targets.is_complex() or not bool(((targets == 0) | (targets == 1)).all()):
        raise ValueError("targets must be K-hot: every entry 0 or 1 (or bool)")
    return targets.to(device=scores.device, dtype=torch.bool)


class MultiLabelTopKLoss(torch.nn.Module):
    """Multi-label top-k loss for scores ``(..., C)`` and K-hot targets of
    the same shape (bool or 0/1): for each row,
    ``-(1/|pos|) sum_{c in pos} log q_c`` with ``q = w^T P`` the
    ``p_k``-weighted soft probability of ranking among the top k (module
    doc); ``p_k`` weights k = 1..K (non-negative, summing to 1; ``[0, ...,
    0, 1]`` asks for the top K only). A row without a positive has loss 0.
    Keyword arguments go to the operator (``steepness``, ``distribution``,
    ``network``, ``target``)."""

    def __init__(self, p_k, reduction: str = "mean", eps: float = 1e-7, **kw):
        super().__init__()
        self.p_k = check_p_k(p_k)
        self.K = len(self.p_k)
        self.reduction, self.eps = _check_reduction(reduction), eps
        self.steepness = kw.pop("steepness", None)
        self.kw = kw

    def forward(self, scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if not isinstance(scores, torch.Tensor) or scores.dim() < 1:
            raise ValueError("scores must be a tensor of shape (..., classes)")
        pos = _check_multi_hot(targets, scores)
        p = torch.tensor(self.p_k, dtype=torch.float64)
        w = p.flip(0).cumsum(0).flip(0)  # w_r = sum_{k > r} p_k (rank r, 0-based, counts for k = r+1..K)
        q = topk_weights(scores, self.K, w.unsqueeze(0), steepness=self.steepness, **self.kw)[..., 0, :]
        logq = torch.log(q * (1 - 2 * self.eps) + self.eps)
        count = pos.sum(-1)
        loss = -(logq * pos).sum(-1) / count.clamp_min(1)
        return _reduce(loss, self.reduction)
