"""SOFT top-k, Xie et al. (NeurIPS 2020): top-k as entropic optimal transport.

Unsorted: the n scores (mass 1/n each) are transported onto two anchors
``y = [1, 0]`` with masses ``[k/n, (n-k)/n]``, cost ``C_cj = (x_c - y_j)^2``
divided by its maximum, **detached** (no gradient flows through the
normaliser, as in the authors' ``C / C.max().detach()``), taken **per row**
(the authors' code takes the maximum over the whole batch, which couples
the rows). The soft top-k indicator is ``A_c = n * Gamma[c, 0]`` (in [0, 1],
sums to k).

Sorted (Appendix B): anchors ``y = [k, k-1, ..., 1, 0]`` with masses
``[1/n] * k + [(n-k)/n]``; ``P[r, c] = n * Gamma[c, r]`` for r < k is the
weight of input c in rank r (rank 0 largest) and ``values = P @ x``.

``epsilon`` is the temperature (entropic regularisation, on the normalised
cost scale [0, 1]); the default 0.1 and the 200 iterations are the
defaults of the authors' ``TopK_custom(k, epsilon=0.1, max_iter=200)``
(the code in the appendix of Xie et al., NeurIPS 2020). Forward:
``rule="fixed"`` (default, the authors'): exactly ``max_iter`` log-domain
Sinkhorn iterations, no check (``self.marginal_error`` still reports how
far the plan is from its marginals). Backward: implicit function theorem
(``_ot``), O(n m^2) with m = 2 or k + 1 anchors; it never raises (a plan
that is hard to working precision, e.g. n = 16, k = 1, epsilon = 1e-3,
makes the linear system singular; those rows use the pseudo-inverse).

netgen's earlier variants stay available as named options:
``normaliser="attached"`` (gradient through the per-row maximum) and
``rule="tolerance"`` (epsilon scaling, iterate until the L1 marginal
error is below ``tol``, up to ``max_iter``; non-convergence raises
``OTNotConverged`` or warns with ``on_nonconvergence="warn"``).
"""

from __future__ import annotations

import torch

from ._common import apply_rows, check_positive, check_scores
from ._ot import transport_plan


NORMALISERS = ("detached", "attached")


def _plan(x, k, anchors, nu, eps, max_iter, tol, on_nonconvergence, rule="fixed", normaliser="detached"):
    if normaliser not in NORMALISERS:
        raise ValueError(f"normaliser must be one of {', '.join(NORMALISERS)}; got {normaliser!r}")
    n = x.shape[-1]
    xf = x.reshape(-1, n)
    C = (xf.unsqueeze(-1) - anchors).square()
    scale = C.amax(dim=(-2, -1), keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
    C = C / (scale.detach() if normaliser == "detached" else scale)
    return transport_plan(C, nu, eps, max_iter=max_iter, tol=tol, on_nonconvergence=on_nonconvergence, rule=rule)


def soft_topk(x, k, epsilon=0.1, *, max_iter=200, tol=1e-4, on_nonconvergence="raise", rule="fixed",
              normaliser="detached", return_info=False):
    """Soft top-k indicator ``(..., n)`` (sums to k per row)."""
    n, _ = check_scores(x, k)
    eps = check_positive(epsilon, "epsilon")
    anchors = torch.tensor([1.0, 0.0], dtype=x.dtype, device=x.device)
    nu = torch.tensor([k / n, (n - k) / n], dtype=x.dtype, device=x.device)
    if k == n:  # every input is selected; the second anchor has no mass
        anchors, nu = anchors[:1], nu[:1]
    plan, info = _plan(x, k, anchors, nu, eps, max_iter, tol, on_nonconvergence, rule, normaliser)
    A = (n * plan[..., 0]).reshape(x.shape)
    return (A, info) if return_info else A


def sorted_soft_topk(x, k, epsilon=0.1, *, max_iter=200, tol=1e-4, on_nonconvergence="raise", rule="fixed",
                     normaliser="detached", return_info=False):
    """Sorted SOFT top-k: ``(values (..., k), P (..., k, n))``."""
    n, _ = check_scores(x, k)
    eps = check_positive(epsilon, "epsilon")
    anchors = torch.arange(k, -1, -1, dtype=x.dtype, device=x.device)
    nu = torch.full((k + 1,), 1.0 / n, dtype=x.dtype, device=x.device)
    nu[k] = (n - k) / n
    if k == n:
        anchors, nu = anchors[:k], nu[:k]
    plan, info = _plan(x, k, anchors, nu, eps, max_iter, tol, on_nonconvergence, rule, normaliser)
    P = (n * plan[..., :k]).transpose(-1, -2).reshape(*x.shape[:-1], k, n)
    values = apply_rows(P, x)
    return (values, P, info) if return_info else (values, P)


class _SoftTopKBase(torch.nn.Module):
    def __init__(self, k, epsilon=0.1, *, max_iter=200, tol=1e-4, on_nonconvergence="raise", rule="fixed",
                 normaliser="detached"):
        super().__init__()
        self.k = k
        self.epsilon = check_positive(epsilon, "epsilon")
        self.rule = rule
        self.normaliser = normaliser
        self.max_iter = max_iter
        self.tol = tol
        self.on_nonconvergence = on_nonconvergence
        self.converged = None
        self.marginal_error = None

    def _record(self, info, shape):
        self.converged = info.converged.reshape(shape)
        self.marginal_error = info.marginal_error.reshape(shape)


class SoftTopK(_SoftTopKBase):
    """SOFT top-k indicator layer: ``forward(x)`` -> ``(..., n)``."""

    kind = "indicator"

    def forward(self, x):
        A, info = soft_topk(x, self.k, self.epsilon, max_iter=self.max_iter, tol=self.tol,
                            on_nonconvergence=self.on_nonconvergence, rule=self.rule, normaliser=self.normaliser,
                            return_info=True)
        self._record(info, x.shape[:-1])
        return A


class SortedSoftTopK(_SoftTopKBase):
    """Sorted SOFT top-k layer: ``forward(x)`` -> ``(values, P)``."""

    kind = "permutation"

    def forward(self, x):
        values, P, info = sorted_soft_topk(x, self.k, self.epsilon, max_iter=self.max_iter, tol=self.tol,
                                           on_nonconvergence=self.on_nonconvergence, rule=self.rule,
                                           normaliser=self.normaliser, return_info=True)
        self._record(info, x.shape[:-1])
        return values, P
