"""LapSum, Struski et al. (ICML 2025): soft order from a sum of Laplace CDFs.

With F the standard Laplace CDF (F(z) = e^z / 2 for z <= 0, 1 - e^-z / 2
otherwise), f = F' and ``alpha > 0`` the scale (the temperature; smaller =
harder), define for scores r (n,)

    G(b) = sum_i F((r_i - b) / alpha)        (decreasing from n to 0 in b).

* **top-k indicator**: ``p_i = F((r_i - b_k) / alpha)`` where ``G(b_k) = k``;
  ``sum_i p_i = k`` exactly, p -> hard top-k as alpha -> 0.
* **soft permutation** (doubly stochastic, rows = ranks, rank 0 largest):
  ``P[r, c] = p_c(w = r + 1) - p_c(w = r)`` with ``p(w = 0) = 0``; rows and
  columns of the full n x n matrix sum to 1. The top k rows need
  ``b_1 .. b_k``; ``values = P @ r``.
* **soft rank** (descending, 0-based): ``rho_i = sum_{j != i} F((r_j - r_i) / alpha)``,
  i.e. ``G(r_i) - 1/2``; -> the number of larger elements.
* **soft sort** (descending): ``s_j = b_{j + 1/2}``, the point whose soft
  rank among r is j (partial inverse of the soft rank); -> sorted r.

Everything is O(n log n) (one sort) plus O(n) per requested level w.
Between consecutive sorted scores G is ``m - t A / 2 + D B / (2 t)`` with
``t = exp((b - r_(m-1)) / alpha)`` and prefix sums A, B of Laplace weights,
so ``G(b) = w`` is a quadratic in t solved in closed form. Evaluating that
closed form directly underflows when alpha is small against the gaps
(``exp(-gap / alpha) = 0``); here the prefix sums are logcumsumexp's, the
root is taken in log space (``log(a + sqrt(a^2 + Q)) = log(Q)/2 +
asinh(a / sqrt(Q))``) and the solve runs in float64, so alpha = 1e-3 with
float32 inputs stays finite and sums to k.

Backward passes are written (``torch.autograd.Function``), O(n) per level:
``d b / d r = softmax(-|r - b| / alpha)`` (implicit differentiation of
``G(b) = w``) and ``d p_i = f_i (d r_i - d b)``; the soft rank's backward
uses the same prefix sums with the incoming gradient as weights, O(n log n).
"""

from __future__ import annotations

import math

import torch

from ._common import apply_rows, check_k, check_positive, check_scores


def _rev_logcumsumexp(a):
    return torch.logcumsumexp(a.flip(-1), dim=-1).flip(-1)


def _neg_inf_like(a, shape):
    return torch.full(shape, float("-inf"), dtype=a.dtype, device=a.device)


def _log_prefix_sums(c, logw=None):
    """For increasing c (sorted position j), returns
    log sum_{i<j} w_i exp(c_i - c_j) and log sum_{i>j} w_i exp(c_j - c_i)."""
    a = c if logw is None else c + logw
    lower = torch.cat([_neg_inf_like(c, c.shape[:-1] + (1,)), torch.logcumsumexp(a, dim=-1)[..., :-1]], -1) - c
    a = -c if logw is None else -c + logw
    upper = torch.cat([_rev_logcumsumexp(a)[..., 1:], _neg_inf_like(c, c.shape[:-1] + (1,))], -1) + c
    return lower, upper


def _log_root(a, lq):
    """log(a + sqrt(a^2 + exp(lq))) for a >= 0 without overflow/underflow."""
    la = torch.log(a)
    lz = la - 0.5 * lq
    big = lz > 0
    lz_big = torch.where(big, lz, torch.zeros_like(lz))
    lz_small = torch.where(big, torch.zeros_like(lz), lz)
    out_big = la + torch.log1p(torch.sqrt(1 + torch.exp(-2 * lz_big)))
    out_small = 0.5 * lq + torch.asinh(torch.exp(lz_small))
    return torch.where(big, out_big, out_small)


def solve_levels(r: torch.Tensor, w: torch.Tensor, alpha: float) -> torch.Tensor:
    """``b`` with ``sum_i F((r_i - b)/alpha) = w`` for each level in ``w``.

    ``r (B, n)``, ``w (m,)`` with 0 < w < n; returns ``(B, m)`` float64.
    No gradient (see :class:`LapSumLevels`)."""
    rd = torch.sort(r.detach(), dim=-1, descending=True).values.double()  # same order, cheaper sort
    B, n = rd.shape
    c = -rd / alpha  # increasing
    LU, LV = _log_prefix_sums(c)
    K = torch.arange(n, dtype=rd.dtype, device=rd.device) + 0.5 - 0.5 * LU.exp() + 0.5 * LV.exp()
    K = torch.cummax(K, dim=-1).values  # guard monotonicity against rounding
    wd = w.double().to(rd.device).expand(B, -1).contiguous()
    m = torch.searchsorted(K, wd)  # K[m-1] < w <= K[m]
    mm1 = (m - 1).clamp(0, n - 1)
    mc = m.clamp(0, n - 1)
    r_hi = rd.gather(-1, mm1)  # r_(m-1)
    r_lo = rd.gather(-1, mc)  # r_(m)
    zero = torch.zeros_like(wd)
    logA = torch.logaddexp(LU.gather(-1, mm1), zero)
    logB = torch.logaddexp(LV.gather(-1, mc), zero)
    logD = -(r_hi - r_lo) / alpha
    lq = logA + logD + logB
    mf = m.to(wd.dtype)
    a = (wd - mf).abs()
    L = _log_root(a, lq)
    logt = torch.where(wd > mf, lq - logA - L, L - logA)
    b_mid = r_hi + alpha * logt
    b_first = rd[..., :1] - alpha * (torch.log(2 * wd) - logB)  # m == 0: b above all scores
    b_last = rd[..., -1:] + alpha * (torch.log(2 * (n - wd)) - logA)  # m == n: b below all
    return torch.where(m == 0, b_first, torch.where(m == n, b_last, b_mid))


def _laplace_cdf(z):
    return torch.where(z > 0, 1 - 0.5 * torch.exp(-z.clamp_min(0)), 0.5 * torch.exp(z.clamp_max(0)))


class LapSumLevels(torch.autograd.Function):
    """``(b (B, m), p (B, m, n))`` for levels w; written O(n m) backward."""

    @staticmethod
    def forward(ctx, r, w, alpha):
        b = solve_levels(r, w, alpha).to(r.dtype)
        z = (r.unsqueeze(-2) - b.unsqueeze(-1)) / alpha
        p = _laplace_cdf(z)
        ctx.save_for_backward(r, b)
        ctx.alpha = alpha
        return b, p

    @staticmethod
    def backward(ctx, gb, gp):
        r, b = ctx.saved_tensors
        alpha = ctx.alpha
        negabs = -((r.unsqueeze(-2) - b.unsqueeze(-1)) / alpha).abs()  # (B, m, n)
        q = torch.softmax(negabs, dim=-1)  # d b / d r
        coef = gb if gb is not None else torch.zeros_like(b)
        if gp is not None:
            gpf = gp * (0.5 / alpha) * negabs.exp()  # gp_i * f_i
            coef = coef - gpf.sum(-1)
            grad = gpf.sum(-2) + (coef.unsqueeze(-1) * q).sum(-2)
        else:
            grad = (coef.unsqueeze(-1) * q).sum(-2)
        return grad, None, None


def _flat(x):
    n = x.shape[-1]
    return x.reshape(-1, n), x.shape[:-1]


def lapsum_topk(x, k, alpha=1.0):
    """Soft top-k indicator ``(..., n)``; sums to k along the last axis."""
    n, _ = check_scores(x, k)
    alpha = check_positive(alpha, "alpha")
    if k == n:
        return torch.ones_like(x) + 0 * x
    r, lead = _flat(x)
    w = torch.tensor([float(k)], dtype=torch.float64)
    _, p = LapSumLevels.apply(r, w, alpha)
    return p[:, 0].reshape(*lead, n)


def lapsum_permutation(x, k, alpha=1.0):
    """Top k rows of the soft permutation: ``(values (..., k), P (..., k, n))``."""
    n, _ = check_scores(x, k)
    alpha = check_positive(alpha, "alpha")
    r, lead = _flat(x)
    parts = [torch.zeros_like(r).unsqueeze(-2)]
    levels = min(k, n - 1)
    if levels > 0:
        w = torch.arange(1, levels + 1, dtype=torch.float64)
        parts.append(LapSumLevels.apply(r, w, alpha)[1])
    if k == n:
        parts.append(torch.ones_like(r).unsqueeze(-2) + 0 * r.unsqueeze(-2))
    cum = torch.cat(parts, dim=-2)  # (B, k + 1, n): p(w = 0 .. k)
    P = (cum[:, 1:] - cum[:, :-1]).reshape(*lead, k, n)
    return apply_rows(P, x), P


def lapsum_sort(x, k=None, alpha=1.0):
    """Soft sorted values (descending) ``(..., k)`` (k = n by default)."""
    n = x.shape[-1] if isinstance(x, torch.Tensor) and x.dim() else 0
    k = n if k is None else k
    check_scores(x, k)
    alpha = check_positive(alpha, "alpha")
    r, lead = _flat(x)
    w = torch.arange(k, dtype=torch.float64) + 0.5
    b, _ = LapSumLevels.apply(r, w, alpha)
    return b.reshape(*lead, k)


class _LapSumRank(torch.autograd.Function):
    @staticmethod
    def forward(ctx, r, alpha):
        rs, idx = torch.sort(r.detach(), dim=-1, descending=True)
        rs = rs.double()
        n = r.shape[-1]
        LU, LV = _log_prefix_sums(-rs / alpha)
        rank_sorted = torch.arange(n, dtype=rs.dtype, device=rs.device) - 0.5 * LU.exp() + 0.5 * LV.exp()
        ctx.save_for_backward(rs, idx)
        ctx.alpha = alpha
        ctx.dtype = r.dtype
        return torch.empty_like(rank_sorted).scatter(-1, idx, rank_sorted).to(r.dtype)

    @staticmethod
    def backward(ctx, g):
        rs, idx = ctx.saved_tensors
        alpha = ctx.alpha
        c = -rs / alpha
        gs = g.double().gather(-1, idx)
        # sum_{i != j} e^{-|r_i - r_j| / alpha} and the same weighted by g_i,
        # the signed weights split into positive and negative parts
        LU, LV = _log_prefix_sums(c)
        ones = LU.exp() + LV.exp()
        weighted = torch.zeros_like(gs)
        for sign in (1.0, -1.0):
            logw = torch.log((sign * gs).clamp_min(0))
            lu, lv = _log_prefix_sums(c, logw)
            weighted = weighted + sign * (lu.exp() + lv.exp())
        grad_sorted = (weighted - gs * ones) * (0.5 / alpha)
        grad = torch.empty_like(grad_sorted).scatter(-1, idx, grad_sorted)
        return grad.to(ctx.dtype), None


def lapsum_rank(x, alpha=1.0):
    """Soft descending 0-based rank ``(..., n)`` (rank 0 = largest)."""
    check_scores(x)
    alpha = check_positive(alpha, "alpha")
    r, lead = _flat(x)
    return _LapSumRank.apply(r, alpha).reshape(x.shape)


class LapSum(torch.nn.Module):
    """LapSum permutation layer: ``forward(x)`` -> ``(values, P)`` (top k rows
    of the doubly stochastic soft permutation); ``alpha`` is the temperature."""

    kind = "permutation"

    def __init__(self, k, alpha=1.0):
        super().__init__()
        self.k = k
        self.alpha = check_positive(alpha, "alpha")

    def forward(self, x):
        return lapsum_permutation(x, self.k, self.alpha)


class LapSumTopK(torch.nn.Module):
    """LapSum soft top-k indicator layer: ``forward(x)`` -> ``(..., n)``."""

    kind = "indicator"

    def __init__(self, k, alpha=1.0):
        super().__init__()
        self.k = k
        self.alpha = check_positive(alpha, "alpha")

    def forward(self, x):
        return lapsum_topk(x, self.k, self.alpha)
