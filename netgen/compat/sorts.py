"""difftopk's ``NeuralSort`` and ``SoftSort`` modules (their arguments and
output orientation), written with netgen's own formulas; they run in the
input's dtype (difftopk's NeuralSort computes in float32 only).

* ``NeuralSort(tau, hard)(s)`` -> ``(B, n, n)``, entry ``[b, i, r]`` = weight
  of input i at rank r, ranks ascending (Grover et al., on ``-s``).
* ``SoftSort(tau, hard, pow)(s)`` -> ``(B, n, n)``, entry ``[b, r, i]``,
  ranks descending (Prillo & Eisenschlos).

``hard=True``: the straight-through one-hot of each row's largest entry
(forward exact, gradient of the soft matrix)."""

from __future__ import annotations

import torch


def _straight_through(P: torch.Tensor) -> torch.Tensor:
    hard = torch.zeros_like(P).scatter_(-1, P.argmax(-1, keepdim=True), 1.0)
    return (hard - P).detach() + P


def _check(scores) -> None:
    if not isinstance(scores, torch.Tensor) or scores.dim() != 2:
        raise ValueError(f"scores must be a (batch, n) tensor, got {getattr(scores, 'shape', type(scores))}")


class NeuralSort(torch.nn.Module):
    def __init__(self, tau=1.0, hard=False):
        super().__init__()
        self.hard = hard
        self.tau = tau

    def forward(self, scores: torch.Tensor):
        _check(scores)
        s = -scores  # ranks of -s descending = ranks of s ascending
        n = s.shape[-1]
        rowsum = (s.unsqueeze(-1) - s.unsqueeze(-2)).abs().sum(-1)  # sum_j |s_i - s_j|
        coef = (n - 1 - 2 * torch.arange(n, dtype=s.dtype, device=s.device)).unsqueeze(-1)  # rank r
        P = torch.softmax((coef * s.unsqueeze(-2) - rowsum.unsqueeze(-2)) / self.tau, dim=-1)  # [b, r, i]
        P = P.transpose(-2, -1)  # [b, i, r]
        return _straight_through(P) if self.hard else P


class SoftSort(torch.nn.Module):
    def __init__(self, tau=1.0, hard=False, pow=1.0):
        super().__init__()
        self.hard = hard
        self.tau = tau
        self.pow = pow

    def forward(self, scores: torch.Tensor):
        _check(scores)
        top = torch.sort(scores, dim=-1, descending=True).values  # rank r (descending)
        d = (top.unsqueeze(-1) - scores.unsqueeze(-2)).abs()  # [b, r, i]
        if self.pow != 1.0:
            d = d.pow(self.pow)
        P = torch.softmax(-d / self.tau, dim=-1)
        return _straight_through(P) if self.hard else P
