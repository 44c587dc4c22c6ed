"""Entropic optimal transport shared by Sinkhorn sort and SOFT top-k.

``transport_plan(C, nu, epsilon)`` returns the entropic OT plan

    Gamma = argmin_{Gamma 1 = mu, Gamma^T 1 = nu} <C, Gamma> - epsilon H(Gamma)

between n sources of mass ``mu = 1/n`` and m targets of mass ``nu`` for every
batch row of the cost ``C (B, n, m)`` independently.

Forward: log-domain Sinkhorn (never overflows for small epsilon), with one
of three stopping rules (``rule``):

* ``"tolerance"`` (netgen's own): epsilon scaling (a geometric schedule
  from max(C) down to epsilon, warm-starting the dual potentials), then
  iterations at epsilon until the L1 row-marginal error
  ``sum_i |sum_j Gamma_ij - mu_i|`` is below ``tol`` in every row (columns
  are exact after each g-update);
* ``"fixed"`` (Xie et al.'s SOFT top-k code): exactly ``max_iter``
  iterations at epsilon from zero potentials (f-update, then g-update), no
  check;
* ``"decay"`` (Cuturi et al.'s soft_sort code): epsilon starts at 0.1 and is
  multiplied by 0.95 after every iteration until it reaches ``epsilon``;
  each iteration updates g (targets) then f (inputs); every 5 iterations
  the relative target-marginal error ``max_j |sum_i Gamma_ij - nu_j| / nu_j``
  is checked, and iterating stops once epsilon is reached and the error is
  at most ``tol`` (their threshold 1e-2), or after ``max_iter`` iterations.
  Their code checks the worst row of the batch; here each row stops on its
  own (its result does not depend on the rest of the batch).

With ``"tolerance"`` or ``"decay"`` a row that misses the tolerance after
``max_iter`` iterations raises :class:`OTNotConverged`, or, with
``on_nonconvergence="warn"``, warns (:class:`OTConvergenceWarning`) and is
flagged in the returned info. ``"fixed"`` never raises (the authors' rule
has no check); the info still reports the marginal error.

Backward: the implicit function theorem at the optimum, not autograd through
the loop. With W = G * Gamma / epsilon (G = dL/dGamma), a = W 1, b = W^T 1,
and the redundant last column constraint dropped, solve

    [diag(mu)   Gamma'   ] [u]   [a ]
    [Gamma'^T  diag(nu') ] [v] = [b']

through its Schur complement (an (m-1) x (m-1) system: O(n m^2 + m^3)),
then dL/dC = Gamma * (u_i + v_j) - W (v_m = 0). Memory is O(n m) whatever the
number of iterations.

The backward never raises. Near a hard plan (each input sending all its
mass to one target, e.g. n = 16, k = 1, epsilon = 1e-3) the Schur complement
is singular to working precision; those rows (detected by
``torch.linalg.solve_ex``, or a non-finite solution) are solved with the
Moore-Penrose pseudo-inverse instead (the minimum-norm solution of the
same system; for an exactly hard plan the gradient is then the one of the
locally constant plan). Other rows keep the exact solve.
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


def _sinkhorn_fixed(C, log_mu, log_nu, eps, iters):
    """Exactly ``iters`` log-domain iterations at ``eps`` (f, then g)."""
    B, n, m = C.shape
    f = C.new_zeros(B, n)
    g = C.new_zeros(B, m)
    for _ in range(iters):
        f = eps * (log_mu - torch.logsumexp((g.unsqueeze(-2) - C) / eps, dim=-1))
        g = eps * (log_nu - torch.logsumexp((f.unsqueeze(-1) - C) / eps, dim=-2))
    plan = torch.exp((f.unsqueeze(-1) + g.unsqueeze(-2) - C) / eps)
    err = (plan.sum(-1) - log_mu.exp()).abs().sum(-1)
    return plan, err, iters


#: Cuturi et al.'s schedule: start, factor per iteration, iterations per check
DECAY_EPS0, DECAY_FACTOR, DECAY_CHECK = 0.1, 0.95, 5


def _sinkhorn_decay(C, log_mu, log_nu, eps, max_iter, tol):
    """Epsilon decay from 0.1 by 0.95 per iteration to ``eps``; g then f;
    stop per row once eps is reached and the relative target-marginal error
    is at most ``tol`` (checked every 5 iterations)."""
    B, n, m = C.shape
    f = C.new_zeros(B, n)
    g = C.new_zeros(B, m)
    nu = log_nu.exp()
    active = torch.ones(B, 1, dtype=torch.bool, device=C.device)
    e = DECAY_EPS0
    e_row = torch.full((B, 1), e, dtype=C.dtype, device=C.device)  # each row's current epsilon
    it = 0
    err = torch.full((B,), float("inf"), dtype=C.dtype, device=C.device)
    while True:
        rel = ((torch.exp((f.unsqueeze(-1) + g.unsqueeze(-2) - C) / e_row.unsqueeze(-1)).sum(-2) - nu).abs() / nu)
        err = rel.amax(-1)
        active = ((err > tol) | (e_row.squeeze(-1) > eps)).unsqueeze(-1) & active
        if it >= max_iter or not bool(active.any()):
            break
        for _ in range(DECAY_CHECK):
            g_new = e * (log_nu - torch.logsumexp((f.unsqueeze(-1) - C) / e, dim=-2))
            g = torch.where(active, g_new, g)
            f_new = e * (log_mu - torch.logsumexp((g.unsqueeze(-2) - C) / e, dim=-1))
            f = torch.where(active, f_new, f)
            e = max(e * DECAY_FACTOR, eps)
            e_row = torch.where(active, torch.full_like(e_row, e), e_row)
            it += 1
    plan = torch.exp((f.unsqueeze(-1) + g.unsqueeze(-2) - C) / e_row.unsqueeze(-1))
    return plan, err, it, e_row.squeeze(-1)


def _solve_never_raises(S, rhs):
    """``S v = rhs`` per batch row; rows where S is singular to working
    precision (or the solution is not finite) use the pseudo-inverse."""
    v, info = torch.linalg.solve_ex(S, rhs)
    bad = (info != 0) | ~torch.isfinite(v).flatten(1).all(-1)
    if bool(bad.any()):
        v = v.clone()
        v[bad] = torch.linalg.pinv(S[bad]) @ rhs[bad]
    return v


class _EntropicOT(torch.autograd.Function):
    @staticmethod
    def forward(ctx, C, nu, eps, max_iter, tol, scaling, check_every, rule):
        n = C.shape[-2]
        log_mu = torch.full((1, n), -math.log(n), dtype=C.dtype, device=C.device)
        log_nu = torch.log(nu).unsqueeze(0) if nu.dim() == 1 else torch.log(nu)
        eps_rows = None
        with torch.no_grad():
            if rule == "fixed":
                plan, err, it = _sinkhorn_fixed(C, log_mu, log_nu, eps, max_iter)
            elif rule == "decay":
                plan, err, it, eps_rows = _sinkhorn_decay(C, log_mu, log_nu, eps, max_iter, tol)
            else:
                plan, err, it = _sinkhorn(C, log_mu, log_nu, eps, max_iter, tol, scaling, check_every)
        if eps_rows is None:
            eps_rows = torch.full((C.shape[0],), eps, dtype=C.dtype, device=C.device)
        ctx.save_for_backward(plan, nu, eps_rows)
        ctx.mark_non_differentiable(err)
        return plan, err

    @staticmethod
    def backward(ctx, grad_plan, _grad_err):
        plan, nu, eps_rows = ctx.saved_tensors
        eps = eps_rows.view(-1, 1, 1)
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
            v = _solve_never_raises(S, rhs.unsqueeze(-1)).squeeze(-1)
            u = (a - (Gp @ v.unsqueeze(-1)).squeeze(-1)) / mu
            v_full = torch.cat([v, torch.zeros_like(v[..., :1])], dim=-1)
        grad_C = plan * (u.unsqueeze(-1) + v_full.unsqueeze(-2)) - W
        return grad_C, None, None, None, None, None, None, None


RULES = ("tolerance", "fixed", "decay")


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
    rule: str = "tolerance",
) -> tuple[torch.Tensor, OTInfo]:
    """Entropic OT plan for each row of ``C (B, n, m)``; source masses 1/n,
    target masses ``nu (m,)`` or ``(B, m)`` (summing to 1). Returns
    ``(Gamma (B, n, m), OTInfo)``. See the module docstring."""
    if on_nonconvergence not in ("raise", "warn"):
        raise ValueError(f"on_nonconvergence must be 'raise' or 'warn', got {on_nonconvergence!r}")
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    if not 0 < scaling < 1:
        raise ValueError(f"scaling must be in (0, 1), got {scaling}")
    plan, err = _EntropicOT.apply(C, nu, float(epsilon), int(max_iter), float(tol), float(scaling), int(check_every),
                                  rule)
    converged = err <= tol
    if rule != "fixed" and not bool(converged.all()):
        worst = float(err.max())
        msg = (
            f"Sinkhorn did not converge: L1 marginal error {worst:.3g} > tol {tol:.3g} after "
            f"{max_iter} iterations (epsilon = {epsilon:g}); raise max_iter or epsilon"
        )
        if on_nonconvergence == "raise":
            raise OTNotConverged(msg)
        warnings.warn(msg, OTConvergenceWarning, stacklevel=3)
    return plan, OTInfo(converged=converged, marginal_error=err.detach())
