"""Sinkhorn (optimal-transport) sort, Cuturi, Teboul & Vert (NeurIPS 2019),
as their code (google-research ``soft_sort``) defines it.

1. **Squash** each row to [0, 1] with the logistic CDF of unit variance:
   ``z = sigmoid(pi / sqrt(3) * (x - mean) / std)`` (population std, floored
   at 1e-6). ``squash="sigmoid"`` is netgen's earlier variant without the
   ``pi / sqrt(3)`` factor; ``squash=None`` uses x as it is.
2. **Targets**, rank 0 first (descending):

   * ``formulation="topk"`` (the authors' top-k, default for k < n): k + 1
     targets ``y_r = 1 - r / k`` (r = 0..k), masses ``1/n`` for the k ranks
     and ``(n - k)/n`` for the last, which collects everything else;
   * ``formulation="full"`` (the full sort, always used when k = n): n
     targets ``y_r = 1 - r / (n - 1)``, all of mass 1/n, and the first k
     rows kept (netgen's earlier top-k, n x n per row).

3. **Transport** the n inputs (mass 1/n each) with cost ``(z_c - y_r)^2``
   and entropic regularisation ``epsilon`` (default 1e-3, the authors'
   ``Sinkhorn1D`` default). Stopping (``rule``): ``"decay"`` (default, the
   authors': epsilon from 0.1 down by 0.95 per iteration, stop once it is
   reached and the relative target-marginal error is at most ``tol`` =
   1e-2, at most 2000 iterations), or ``"tolerance"`` (netgen's own:
   epsilon scaling, L1 marginal error below ``tol``); see
   :mod:`netgen.relax.baselines._ot`.
4. ``P[r, c] = n * Gamma[c, r]`` for r < k (weight of input c in rank r),
   ``values = P @ x``.

The backward is implicit (the optimum's first-order conditions), not
autograd through the loop: O(n m^2 + m^3) per row with m targets, no memory
per iteration, and it never raises (see ``_ot``). The authors' code
differentiates through the unrolled loop instead; both give the same
forward values.
"""

from __future__ import annotations

import math

import torch

from ._common import apply_rows, check_positive, check_scores
from ._ot import transport_plan

SQUASHES = ("logistic", "sigmoid", None)
FORMULATIONS = ("topk", "full")


def squash(x: torch.Tensor, kind: str | None = "logistic") -> torch.Tensor:
    """Per-row standardisation, then the logistic CDF (``kind="logistic"``:
    unit variance, the authors'; ``"sigmoid"``: the plain sigmoid)."""
    if kind is None:
        return x
    if kind not in ("logistic", "sigmoid"):
        raise ValueError(f"squash must be one of 'logistic', 'sigmoid', None; got {kind!r}")
    mean = x.mean(-1, keepdim=True)
    std = (x - mean).square().mean(-1, keepdim=True).sqrt().clamp_min(1e-6)
    z = (x - mean) / std
    if kind == "logistic":
        z = z * (math.pi / math.sqrt(3.0))
    return torch.sigmoid(z)


def _targets(n, k, formulation, dtype, device):
    if formulation not in FORMULATIONS:
        raise ValueError(f"formulation must be one of {', '.join(FORMULATIONS)}; got {formulation!r}")
    if formulation == "topk" and k < n:
        y = 1.0 - torch.arange(k + 1, dtype=dtype, device=device) / k
        nu = torch.full((k + 1,), 1.0 / n, dtype=dtype, device=device)
        nu[k] = (n - k) / n
        return y, nu
    if n > 1:
        y = 1.0 - torch.arange(n, dtype=dtype, device=device) / (n - 1)
    else:
        y = torch.full((1,), 0.5, dtype=dtype, device=device)
    return y, torch.full((n,), 1.0 / n, dtype=dtype, device=device)


def sinkhorn_sort(x, k, epsilon=1e-3, *, squash_inputs="logistic", formulation="topk", rule="decay",
                  max_iter=2000, tol=None, on_nonconvergence="raise", return_info=False):
    """``(values (..., k), P (..., k, n))`` of the Sinkhorn sort (see the module
    docstring). ``tol`` defaults to the rule's: 1e-2 relative for "decay",
    1e-4 L1 for "tolerance"."""
    n, _ = check_scores(x, k)
    eps = check_positive(epsilon, "epsilon")
    if squash_inputs is True:  # the old boolean spelling
        squash_inputs = "sigmoid"
    elif squash_inputs is False:
        squash_inputs = None
    if squash_inputs not in SQUASHES:
        raise ValueError(f"squash_inputs must be one of 'logistic', 'sigmoid', None; got {squash_inputs!r}")
    if tol is None:
        tol = 1e-2 if rule == "decay" else 1e-4
    lead = x.shape[:-1]
    xf = x.reshape(-1, n)
    z = squash(xf, squash_inputs)
    y, nu = _targets(n, k, formulation, x.dtype, x.device)
    C = (z.unsqueeze(-1) - y).square()  # (B, n inputs, m targets)
    plan, info = transport_plan(C, nu, eps, max_iter=max_iter, tol=tol, on_nonconvergence=on_nonconvergence,
                                rule=rule)
    P = (n * plan[..., :k]).transpose(-1, -2).reshape(*lead, k, n)
    values = apply_rows(P, x)
    if return_info:
        return values, P, info
    return values, P


class SinkhornSort(torch.nn.Module):
    """Sinkhorn sort as a layer: ``forward(x)`` -> ``(values, P)``.

    ``epsilon`` is the temperature (default 1e-3, the authors'). The
    authors' definition is the default; ``squash_inputs="sigmoid"``,
    ``formulation="full"`` and ``rule="tolerance"`` select netgen's earlier
    variants. After each call ``self.converged`` ((...,) bool) and
    ``self.marginal_error`` hold the convergence report."""

    kind = "permutation"

    def __init__(self, k, epsilon=1e-3, *, squash_inputs="logistic", formulation="topk", rule="decay",
                 max_iter=2000, tol=None, on_nonconvergence="raise"):
        super().__init__()
        self.k = k
        self.epsilon = check_positive(epsilon, "epsilon")
        self.squash_inputs = squash_inputs
        self.formulation = formulation
        self.rule = rule
        self.max_iter = max_iter
        self.tol = tol
        self.on_nonconvergence = on_nonconvergence
        self.converged = None
        self.marginal_error = None

    def forward(self, x):
        values, P, info = sinkhorn_sort(
            x, self.k, self.epsilon, squash_inputs=self.squash_inputs, formulation=self.formulation,
            rule=self.rule, max_iter=self.max_iter, tol=self.tol, on_nonconvergence=self.on_nonconvergence,
            return_info=True)
        self.converged = info.converged.reshape(x.shape[:-1])
        self.marginal_error = info.marginal_error.reshape(x.shape[:-1])
        return values, P
