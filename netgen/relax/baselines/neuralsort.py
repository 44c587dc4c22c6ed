"""NeuralSort, Grover, Wang, Zweig & Ermon (ICLR 2019), deterministic and
Gumbel (stochastic, Plackett-Luce) variants.

For scores s (n,) and temperature tau, row r (rank r, 0 = largest) is

    P[r, :] = softmax( ((n - 1 - 2r) * s - A_s 1) / tau ),   A_s[i, j] = |s_i - s_j|,

(the paper's ``(n + 1 - 2i)`` with 1-based i), values = P @ s. Only the
row sums ``(A_s 1)_i = sum_j |s_i - s_j|`` are needed; the reference code
forms them with an (n x n)(n x n) product. Here they come from one sort and
prefix sums in O(n log n); the k rows cost O(k n). ``tau`` is the
temperature (smaller = closer to the hard permutation).

Gumbel variant: the scores are treated as log-scores of a Plackett-Luce
distribution and perturbed, ``s + noise_scale * g`` with g ~ Gumbel(0, 1)
i.i.d. (pass ``generator`` for reproducible samples); the returned values
are ``P @ s`` for the unperturbed s, P from the perturbed scores.

``hard=True`` (the authors' option): the forward P is each row's one-hot
argmax, the gradient the soft P's (straight-through estimator).
"""

from __future__ import annotations

import torch

from ._common import apply_rows, check_positive, check_scores, straight_through


def abs_diff_row_sums(s: torch.Tensor) -> torch.Tensor:
    """``sum_j |s_i - s_j|`` for every i, in O(n log n) (differentiable)."""
    n = s.shape[-1]
    srt, idx = torch.sort(s, dim=-1)  # ascending
    csum = torch.cumsum(srt, dim=-1)
    total = csum[..., -1:]
    pos = torch.arange(n, dtype=s.dtype, device=s.device)
    below = pos * srt - (csum - srt)  # sum over smaller elements of (s_i - s_j)
    above = (total - csum) - (n - 1 - pos) * srt  # sum over larger elements of (s_j - s_i)
    return torch.empty_like(s).scatter(-1, idx, below + above)


def neuralsort(x, k, tau=1.0, hard=False):
    """``(values (..., k), P (..., k, n))`` of deterministic NeuralSort."""
    n, _ = check_scores(x, k)
    tau = check_positive(tau, "tau")
    return _neuralsort(x, x, k, tau, hard)


def _neuralsort(s, x, k, tau, hard=False):
    n = s.shape[-1]
    rowsum = abs_diff_row_sums(s)
    coef = (n - 1 - 2 * torch.arange(k, dtype=s.dtype, device=s.device)).unsqueeze(-1)  # (k, 1)
    logits = (coef * s.unsqueeze(-2) - rowsum.unsqueeze(-2)) / tau  # (..., k, n)
    P = torch.softmax(logits, dim=-1)
    if hard:
        P = straight_through(P)
    return apply_rows(P, x), P


def gumbel_neuralsort(x, k, tau=1.0, noise_scale=1.0, generator=None, hard=False):
    """Stochastic NeuralSort: one Gumbel-perturbed sample per row."""
    n, _ = check_scores(x, k)
    tau = check_positive(tau, "tau")
    u = torch.rand(x.shape, dtype=x.dtype, device=x.device, generator=generator)
    tiny = torch.finfo(x.dtype).tiny
    g = -torch.log((-torch.log(u.clamp_min(tiny))).clamp_min(tiny))
    return _neuralsort(x + noise_scale * g, x, k, tau, hard)


class NeuralSort(torch.nn.Module):
    """NeuralSort layer: ``forward(x)`` -> ``(values, P)``; ``tau`` is the
    temperature. ``gumbel=True`` samples the stochastic variant."""

    kind = "permutation"

    def __init__(self, k, tau=1.0, *, gumbel=False, noise_scale=1.0, generator=None, hard=False):
        super().__init__()
        self.k = k
        self.hard = bool(hard)
        self.tau = check_positive(tau, "tau")
        self.gumbel = gumbel
        self.noise_scale = noise_scale
        self.generator = generator

    def forward(self, x):
        if self.gumbel:
            return gumbel_neuralsort(x, self.k, self.tau, self.noise_scale, self.generator, self.hard)
        return neuralsort(x, self.k, self.tau, self.hard)
