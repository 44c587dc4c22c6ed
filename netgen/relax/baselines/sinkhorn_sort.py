"""Sinkhorn (optimal-transport) sort, Cuturi, Teboul & Vert (NeurIPS 2019).

The n inputs, squashed to [0, 1] by ``sigmoid((x - mean) / std)`` (per row),
are transported with entropic regularisation ``epsilon`` onto n equally
spaced targets ``y_r = 1 - r/(n-1)`` (target r = rank r, rank 0 largest),
all masses 1/n, cost ``(z_c - y_r)^2``. With Gamma the (n, n) plan,

    P[r, c] = n * Gamma[c, r],    values = P @ x,

a doubly stochastic matrix; the first k rows are returned. ``epsilon`` is
the temperature (in squashed units; smaller = closer to the hard sort, more
iterations). The forward is log-domain Sinkhorn with epsilon scaling and a
convergence check on the marginals (``tol``, L1); non-convergence raises
:class:`~netgen.relax.baselines._ot.OTNotConverged` (or warns and sets
``self.converged`` with ``on_nonconvergence="warn"``). The backward is
implicit (see ``_ot``): O(n^3) per row for the (n-1)-dimensional solve, but
no memory per iteration. Cost per iteration is O(n^2).
"""

from __future__ import annotations

import torch

from ._common import apply_rows, check_positive, check_scores
from ._ot import transport_plan


def squash(x: torch.Tensor) -> torch.Tensor:
    """Per-row standardisation followed by a sigmoid (Cuturi et al.)."""
    mean = x.mean(-1, keepdim=True)
    std = (x - mean).square().mean(-1, keepdim=True).add(1e-12).sqrt()
    return torch.sigmoid((x - mean) / std)


def sinkhorn_sort(x, k, epsilon=1e-2, *, squash_inputs=True, max_iter=2000, tol=1e-4,
                  on_nonconvergence="raise", return_info=False):
    """``(values (..., k), P (..., k, n))`` of the Sinkhorn sort."""
    n, _ = check_scores(x, k)
    eps = check_positive(epsilon, "epsilon")
    lead = x.shape[:-1]
    xf = x.reshape(-1, n)
    z = squash(xf) if squash_inputs else xf
    if n > 1:
        y = 1.0 - torch.arange(n, dtype=x.dtype, device=x.device) / (n - 1)
    else:
        y = torch.full((1,), 0.5, dtype=x.dtype, device=x.device)
    C = (z.unsqueeze(-1) - y).square()  # (B, n inputs, n targets)
    nu = torch.full((n,), 1.0 / n, dtype=x.dtype, device=x.device)
    plan, info = transport_plan(C, nu, eps, max_iter=max_iter, tol=tol, on_nonconvergence=on_nonconvergence)
    P = (n * plan[..., :k]).transpose(-1, -2).reshape(*lead, k, n)
    values = apply_rows(P, x)
    if return_info:
        return values, P, info
    return values, P


class SinkhornSort(torch.nn.Module):
    """Sinkhorn sort as a layer: ``forward(x)`` -> ``(values, P)``.

    ``epsilon`` is the temperature. After each call ``self.converged``
    ((...,) bool) and ``self.marginal_error`` hold the convergence report."""

    kind = "permutation"

    def __init__(self, k, epsilon=1e-2, *, squash_inputs=True, max_iter=2000, tol=1e-4, on_nonconvergence="raise"):
        super().__init__()
        self.k = k
        self.epsilon = check_positive(epsilon, "epsilon")
        self.squash_inputs = squash_inputs
        self.max_iter = max_iter
        self.tol = tol
        self.on_nonconvergence = on_nonconvergence
        self.converged = None
        self.marginal_error = None

    def forward(self, x):
        values, P, info = sinkhorn_sort(
            x, self.k, self.epsilon, squash_inputs=self.squash_inputs, max_iter=self.max_iter,
            tol=self.tol, on_nonconvergence=self.on_nonconvergence, return_info=True)
        self.converged = info.converged.reshape(x.shape[:-1])
        self.marginal_error = info.marginal_error.reshape(x.shape[:-1])
        return values, P
