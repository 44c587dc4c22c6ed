"""Smooth top-k SVM loss, Berrada, Zisserman & Kumar (ICLR 2018).

For scores s (n,), true class y, margin alpha and temperature tau, with
Y_k the k-subsets of the classes and Y_k^y those containing y,

    L = tau * log sum_{S in Y_k} exp( (alpha * [y not in S] + (1/k) sum_{j in S} s_j) / tau )
      - tau * log sum_{S in Y_k^y} exp( (1/k) sum_{j in S} s_j / tau ).

(As tau -> 0 it becomes the top-k hinge loss max(0, alpha + mean of the best
k-subset without y - mean of the best k-subset with y).) Both sums are
elementary symmetric polynomials of ``exp(s_j / (k tau))``:

    sum_{S not containing y} = e_k(others),    sum_{S containing y} = exp(s_y / (k tau)) e_{k-1}(others),

computed in log space by the recurrence ``e_j^(i) = e_j^(i-1) + x_i e_{j-1}^(i-1)``
written as k logcumsumexp sweeps over the classes: O(k n) work, k vector
ops, autograd for the backward. ``tau`` is the temperature.
This method defines a loss only (no P, no indicator).
"""

from __future__ import annotations

import torch

from ._common import check_positive, check_scores


def log_esp(logx: torch.Tensor, k: int) -> torch.Tensor:
    """``log e_j(x)`` for j = 0..k along the last axis of ``logx`` (``(..., k+1)``)."""
    shape = logx.shape[:-1]
    out = [torch.zeros(shape, dtype=logx.dtype, device=logx.device)]
    # prev[i] = log e_{j-1}(x_0..x_{i-1}); start with e_0 = 1 for every prefix
    prev = torch.zeros_like(logx)
    # a finite stand-in for log 0: logcumsumexp's backward turns -inf into NaN
    ninf = torch.full(shape + (1,), torch.finfo(logx.dtype).min / 8, dtype=logx.dtype, device=logx.device)
    for _ in range(k):
        cur = torch.logcumsumexp(logx + prev, dim=-1)  # log e_j(x_0..x_i)
        out.append(cur[..., -1])
        prev = torch.cat([ninf, cur[..., :-1]], dim=-1)
    return torch.stack(out, dim=-1)


def smooth_topk_loss(scores, y, k, tau=1.0, alpha=1.0, reduction="mean"):
    """Berrada et al.'s smooth top-k loss; ``scores (..., n)``, integer ``y (...)``."""
    n, _ = check_scores(scores, k, "scores")
    tau = check_positive(tau, "tau")
    if not isinstance(y, torch.Tensor) or y.dtype not in (torch.int64, torch.int32):
        raise ValueError("y must be an integer tensor of class indices")
    if y.shape != scores.shape[:-1]:
        raise ValueError(f"y has shape {tuple(y.shape)}, expected {tuple(scores.shape[:-1])}")
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= n):
        raise ValueError(f"y must lie in [0, {n})")
    if k == n:
        raise ValueError("smooth top-k loss needs k < n (with k = n every subset contains y)")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    y = y.long().unsqueeze(-1)
    logx = scores / (k * tau)
    s_y = logx.gather(-1, y).squeeze(-1)
    pos = torch.arange(n - 1, device=scores.device)
    others = logx.gather(-1, pos + (pos >= y).long())  # the n - 1 classes other than y
    e = log_esp(others, k)  # e_j(others), j = 0..k
    with_y = s_y + e[..., k - 1]
    without_y = alpha / tau + e[..., k]
    loss = tau * (torch.logaddexp(without_y, with_y) - with_y)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


class SmoothTopKLoss(torch.nn.Module):
    """Smooth top-k SVM loss module: ``forward(scores, y)`` -> loss."""

    kind = "loss"

    def __init__(self, k, tau=1.0, alpha=1.0, reduction="mean"):
        super().__init__()
        self.k = k
        self.tau = check_positive(tau, "tau")
        self.alpha = float(alpha)
        self.reduction = reduction

    def forward(self, scores, y):
        return smooth_topk_loss(scores, y, self.k, self.tau, self.alpha, self.reduction)
