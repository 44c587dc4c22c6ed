"""Entropic optimal transport shared by Sinkhorn sort and SOFT top-k.

``transport_plan(C, nu, epsilon)`` returns the entropic OT plan

    Gamma = argmin_{Gamma 1 = mu, Gamma^T 1 = nu} <C, Gamma> - epsilon H(Gamma)

between n sources of mass ``mu = 1/n`` and m targets of mass ``nu`` for every
batch row of the cost ``C (B, n, m)`` independently.

Forward: log-domain Sinkhorn (never overflows for small epsilon) with
epsilon scaling (a geometric schedule from max(C) down to epsilon,
warm-starting the dual potentials), then iterations at epsilon until the
L1 row-marginal error ``sum_i |sum_j Gamma_ij - mu_i|`` is below ``tol`` in
every row (columns are exact after each g-update). A row that misses the
tolerance after ``max_iter`` iterations raises :class:`OTNotConverged`, or,
with ``on_nonconvergence="warn"``, warns (:class:`OTConvergenceWarning`) and
is flagged in the returned info.

Backward: the implicit function theorem at the optimum, not autograd through
the loop. With W = G * Gamma / epsilon (G = dL/dGamma), a = W 1, b = W^T 1,
and the redundant last column constraint dropped, solve

    [diag(mu)   Gamma'   ] [u]   [a ]
    [Gamma'^T  diag(nu') ] [v] = [b']

through its Schur complement (an (m-1) x (m-1) system: O(n m^2 + m^3)),
then dL/dC = Gamma * (u_i + v_j) - W (v_m = 0). Memory is O(n m) whatever the
number of iterations.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch


class OTNotConverged(RuntimeError):
    """Sinkhorn did not reach the marginal tolerance within max_iter."""


class OTConvergenceWarning(RuntimeWarning):
    """Sinkhorn did not reach the marginal tolerance (on_nonconvergence='warn')."""


@dataclass
class OTInfo:
    converged: torch.Tensor  # (B,) bool
    marginal_error: torch.Tensor  # (B,) L1 row-marginal error of the returned plan


def _sinkhorn(C, log_mu, log_nu, eps, max_iter, tol, scaling, check_every):
    B, n, m = C.shape
    f = C.new_zeros(B, n)
    g = C.new_zeros(B, m)
    active = torch.ones(B, 1, dtype=torch.bool, device=C.device)

    def update(e):
        nonlocal f, g
        f_new = e * (log_mu - torch.logsumexp((g.unsqueeze(-2) - C) / e, dim=-1))
        g_new = e * (log_nu - torch.logsumexp((f_new.unsqueeze(-1) - C) / e, dim=-2))
        # rows that already converged are frozen, so a row's result does not
        # depend on the other rows of the batch
        f = torch.where(active, f_new, f)
        g = torch.where(active, g_new, g)

    # epsilon scaling: a few sweeps per stage from the cost scale down to eps
    # (costs are normalised to [0, 1] by both callers, so the schedule starts at 1)
    e = max(1.0, float(C.detach().amax())) if C.numel() else eps
    while e > eps:
        for _ in range(3):
            update(e)
        e *= scaling
    it = 0
    mu = log_mu.exp()
    err = torch.full((B,), float("inf"), dtype=C.dtype, device=C.device)
    while it < max_iter:
        for _ in range(min(check_every, max_iter - it)):
            update(eps)
            it += 1
        rows = torch.exp((f.unsqueeze(-1) + g.unsqueeze(-2) - C) / eps).sum(-1)
        err = (rows - mu).abs().sum(-1)
        active = (err > tol).unsqueeze(-1)
        if not bool(active.any()):
            break
    plan = torch.exp((f.unsqueeze(-1) + g.unsqueeze(-2) - C) / eps)
    return plan, err, it


class _EntropicOT(torch.autograd.Function):
    @staticmethod
    def forward(ctx, C, nu, eps, max_iter, tol, scaling, check_every):
        n = C.shape[-2]
        log_mu = torch.full((1, n), -math.log(n), dtype=C.dtype, device=C.device)
        log_nu = torch.log(nu).unsqueeze(0) if nu.dim() == 1 else torch.log(nu)
        with torch.no_grad():
            plan, err, it = _sinkhorn(C, log_mu, log_nu, eps, max_iter, tol, scaling, check_every)
        ctx.save_for_backward(plan, nu)
        ctx.eps = eps
        ctx.mark_non_differentiable(err)
        return plan, err

    @staticmethod
    def backward(ctx, grad_plan, _grad_err):
        plan, nu = ctx.saved_tensors
        eps = ctx.eps
        n, m = plan.shape[-2], plan.shape[-1]
        mu = 1.0 / n
        W = grad_plan * plan / eps
        a = W.sum(-1)  # (B, n)
        b = W.sum(-2)  # (B, m)
        if m == 1:
            v_full = torch.zeros_like(b)
            u = a / mu
        else:
            Gp = plan[..., :, : m - 1]  # (B, n, m-1)
            nup = nu.expand(plan.shape[0], m)[..., : m - 1]
            S = torch.diag_embed(nup) - Gp.transpose(-1, -2) @ Gp / mu
            rhs = b[..., : m - 1] - (Gp.transpose(-1, -2) @ (a / mu).unsqueeze(-1)).squeeze(-1)
            v = torch.linalg.solve(S, rhs.unsqueeze(-1)).squeeze(-1)
            u = (a - (Gp @ v.unsqueeze(-1)).squeeze(-1)) / mu
            v_full = torch.cat([v, torch.zeros_like(v[..., :1])], dim=-1)
        grad_C = plan * (u.unsqueeze(-1) + v_full.unsqueeze(-2)) - W
        return grad_C, None, None, None, None, None, None


def transport_plan(
    C: torch.Tensor,
    nu: torch.Tensor,
    epsilon: float,
    *,
    max_iter: int = 2000,
    tol: float = 1e-4,
    scaling: float = 0.5,
    check_every: int = 10,
    on_nonconvergence: str = "raise",
) -> tuple[torch.Tensor, OTInfo]:
    """Entropic OT plan for each row of ``C (B, n, m)``; source masses 1/n,
    target masses ``nu (m,)`` or ``(B, m)`` (summing to 1). Returns
    ``(Gamma (B, n, m), OTInfo)``. See the module docstring."""
    if on_nonconvergence not in ("raise", "warn"):
        raise ValueError(f"on_nonconvergence must be 'raise' or 'warn', got {on_nonconvergence!r}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    if not 0 < scaling < 1:
        raise ValueError(f"scaling must be in (0, 1), got {scaling}")
    plan, err = _EntropicOT.apply(C, nu, float(epsilon), int(max_iter), float(tol), float(scaling), int(check_every))
    converged = err <= tol
    if not bool(converged.all()):
        worst = float(err.max())
        msg = (
            f"Sinkhorn did not converge: L1 marginal error {worst:.3g} > tol {tol:.3g} after "
            f"{max_iter} iterations (epsilon = {epsilon:g}); raise max_iter or epsilon"
        )
        if on_nonconvergence == "raise":
            raise OTNotConverged(msg)
        warnings.warn(msg, OTConvergenceWarning, stacklevel=3)
    return plan, OTInfo(converged=converged, marginal_error=err.detach())
