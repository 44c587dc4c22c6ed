"""SoftSort, Prillo & Eisenschlos (ICML 2020).

For scores s (n,), the sorted scores (descending) s_(0) >= s_(1) >= ... and
temperature tau, row r (rank r, 0 = largest) is

    P[r, :] = softmax( -|s_(r) - s|^power / tau ),      values = P @ s,

``power = 1`` is the paper's default d(x, y) = |x - y|. Only the k largest
sorted scores are needed (``torch.topk``), so the k rows cost O(n log k + k n).
The sorted scores enter P as they are (the paper does not detach them).

``hard=True`` (the authors' option): the forward P is each row's one-hot
argmax, the gradient the soft P's (straight-through estimator); values are
then ``P_hard @ s``, the exact top-k values, with the soft gradient.
"""

from __future__ import annotations

import torch

from ._common import apply_rows, check_positive, check_scores, straight_through


def softsort(x, k, tau=1.0, power=1.0, hard=False):
    """``(values (..., k), P (..., k, n))`` of SoftSort."""
    n, _ = check_scores(x, k)
    tau = check_positive(tau, "tau")
    power = check_positive(power, "power")
    top = torch.topk(x, k, dim=-1, sorted=True).values  # (..., k) descending
    d = (top.unsqueeze(-1) - x.unsqueeze(-2)).abs()
    if power != 1.0:
        d = d.pow(power)
    P = torch.softmax(-d / tau, dim=-1)
    if hard:
        P = straight_through(P)
    return apply_rows(P, x), P


class SoftSort(torch.nn.Module):
    """SoftSort layer: ``forward(x)`` -> ``(values, P)``; ``tau`` is the temperature."""

    kind = "permutation"

    def __init__(self, k, tau=1.0, *, power=1.0, hard=False):
        super().__init__()
        self.k = k
        self.tau = check_positive(tau, "tau")
        self.power = check_positive(power, "power")
        self.hard = bool(hard)

    def forward(self, x):
        return softsort(x, self.k, self.tau, self.power, hard=self.hard)
