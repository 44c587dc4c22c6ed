"""LapSum against a direct dense implementation written here (dense Laplace
sums, bisection, the plain closed form with autograd), its limits, and the
small-scale pitfall (closed form underflow)."""

import pytest
import torch

from netgen.relax.baselines import LapSum, LapSumTopK, lapsum_permutation, lapsum_rank, lapsum_sort, lapsum_topk


def F(z):
    return torch.where(z > 0, 1 - 0.5 * torch.exp(-z), 0.5 * torch.exp(z))


def G(r, b, alpha):
    """sum_i F((r_i - b) / alpha), dense."""
    return F((r.unsqueeze(-1) - b.unsqueeze(-2)) / alpha).sum(-2)


def bisect_level(r, w, alpha, iters=200):
    lo = r.min(-1).values - 50 * alpha - 1
    hi = r.max(-1).values + 50 * alpha + 1
    for _ in range(iters):
        mid = (lo + hi) / 2
        big = G(r, mid.unsqueeze(-1), alpha).squeeze(-1) > w  # G decreasing: level is above mid
        lo, hi = torch.where(big, mid, lo), torch.where(big, hi, mid)
    return (lo + hi) / 2


def direct_level(r, w, alpha):
    """Plain (non-log) closed form of G(b) = w for one row, differentiable by autograd."""
    rs = torch.sort(r, descending=True).values
    n = rs.shape[0]
    knots = G(rs.detach(), rs.detach(), alpha)
    m = int((knots < w).sum())
    if m == 0:
        return alpha * torch.log(torch.exp(rs / alpha).sum() / (2 * w))
    if m == n:
        return -alpha * torch.log(2 * (n - w) / torch.exp(-rs / alpha).sum())
    A = torch.exp(-(rs[:m] - rs[m - 1]) / alpha).sum()
    Bv = torch.exp(-(rs[m] - rs[m:]) / alpha).sum()
    D = torch.exp(-(rs[m - 1] - rs[m]) / alpha)
    t = (-(w - m) + torch.sqrt((w - m) ** 2 + A * D * Bv)) / A
    return rs[m - 1] + alpha * torch.log(t)


def direct_p(x, levels, alpha):
    """(B, m, n) indicators for the levels, by the direct closed form."""
    rows = []
    for r in x:
        b = torch.stack([direct_level(r, w, alpha) for w in levels])
        rows.append(F((r.unsqueeze(0) - b.unsqueeze(1)) / alpha))
    return torch.stack(rows)


def test_topk_level_matches_bisection():
    torch.manual_seed(0)
    x = torch.randn(4, 9, dtype=torch.float64)
    for alpha in (0.05, 0.5, 3.0):
        for k in (1, 4, 8):
            b = bisect_level(x, float(k), alpha)
            ref = F((x - b.unsqueeze(-1)) / alpha)
            p = lapsum_topk(x, k, alpha)
            torch.testing.assert_close(p, ref, atol=1e-10, rtol=1e-10)
            torch.testing.assert_close(p.sum(-1), torch.full((4,), float(k), dtype=x.dtype))


def test_written_backward_equals_autograd_of_direct():
    torch.manual_seed(1)
    x = torch.randn(3, 7, dtype=torch.float64)
    alpha = 0.4
    xa = x.clone().requires_grad_(True)
    xb = x.clone().requires_grad_(True)
    # top-k indicator
    g = torch.randn(3, 7, dtype=torch.float64)
    p = lapsum_topk(xa, 3, alpha)
    pd = direct_p(xb, [3.0], alpha)[:, 0]
    torch.testing.assert_close(p, pd)
    (ga,) = torch.autograd.grad((p * g).sum(), xa)
    (gb,) = torch.autograd.grad((pd * g).sum(), xb)
    torch.testing.assert_close(ga, gb)
    # permutation rows and values
    _, P = lapsum_permutation(xa, 4, alpha)
    cum = torch.cat([torch.zeros(3, 1, 7, dtype=x.dtype), direct_p(xb, [1.0, 2.0, 3.0, 4.0], alpha)], 1)
    Pd = cum[:, 1:] - cum[:, :-1]
    torch.testing.assert_close(P, Pd)
    gP = torch.randn_like(P)
    (ga,) = torch.autograd.grad((P * gP).sum(), xa)
    (gb,) = torch.autograd.grad((Pd * gP).sum(), xb)
    torch.testing.assert_close(ga, gb)
    # soft sort (levels j + 1/2)
    s = lapsum_sort(xa, 5, alpha)
    sd = torch.stack([torch.stack([direct_level(r, j + 0.5, alpha) for j in range(5)]) for r in xb])
    torch.testing.assert_close(s, sd)
    gs = torch.randn_like(s)
    (ga,) = torch.autograd.grad((s * gs).sum(), xa)
    (gb,) = torch.autograd.grad((sd * gs).sum(), xb)
    torch.testing.assert_close(ga, gb)
    # soft rank: rho_i = sum_{j != i} F((r_j - r_i) / alpha)
    rho = lapsum_rank(xa, alpha)
    Z = F((xb.unsqueeze(-2) - xb.unsqueeze(-1)) / alpha)  # Z[i, j] = F((r_j - r_i)/alpha)
    rhod = Z.sum(-1) - 0.5
    torch.testing.assert_close(rho, rhod)
    gr = torch.randn_like(rho)
    (ga,) = torch.autograd.grad((rho * gr).sum(), xa)
    (gb,) = torch.autograd.grad((rhod * gr).sum(), xb)
    torch.testing.assert_close(ga, gb)


def test_gradcheck():
    torch.manual_seed(2)
    x = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: lapsum_topk(x, 2, 0.3), (x,))
    assert torch.autograd.gradcheck(lambda x: lapsum_permutation(x, 6, 0.3), (x,))
    assert torch.autograd.gradcheck(lambda x: lapsum_sort(x, 3, 0.3), (x,))
    assert torch.autograd.gradcheck(lambda x: lapsum_rank(x, 0.3), (x,))


def test_doubly_stochastic_and_limits():
    torch.manual_seed(3)
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    values, P = LapSum(8, alpha=0.7)(x)
    assert P.shape == (2, 3, 8, 8) and (P >= -1e-12).all()
    torch.testing.assert_close(P.sum(-1), torch.ones(2, 3, 8, dtype=x.dtype))
    torch.testing.assert_close(P.sum(-2), torch.ones(2, 3, 8, dtype=x.dtype))
    # alpha -> 0: hard permutation, sorted values, hard ranks
    values, P = LapSum(3, alpha=1e-6)(x)
    top = torch.topk(x, 3)
    assert torch.equal(P.argmax(-1), top.indices)
    torch.testing.assert_close(values, top.values)
    torch.testing.assert_close(lapsum_sort(x, 8, 1e-6), torch.sort(x, descending=True).values, atol=1e-4, rtol=0)
    hard_rank = (x.unsqueeze(-2) > x.unsqueeze(-1)).sum(-1).double()
    torch.testing.assert_close(lapsum_rank(x, 1e-6), hard_rank)


def test_small_scale_float32_stays_finite():
    """The closed form underflows (exp(-gap/alpha) = 0) at alpha = 1e-3; the log-space solve must not."""
    torch.manual_seed(4)
    for n, B in ((50, 16), (10450, 2)):
        x = torch.randn(B, n, dtype=torch.float32, requires_grad=True)
        p = LapSumTopK(5, alpha=1e-3)(x)
        assert p.dtype == torch.float32 and bool(torch.isfinite(p).all())
        torch.testing.assert_close(p.sum(-1), torch.full((B,), 5.0), atol=5e-4 * (n / 50) ** 0.5, rtol=0)
        hard = torch.zeros_like(x).scatter(-1, torch.topk(x, 5).indices, 1.0)
        assert float((p.detach() - hard).abs().max()) < 0.5
        (g,) = torch.autograd.grad((p * torch.randn_like(p)).sum(), x)
        assert bool(torch.isfinite(g).all())
    # huge gaps relative to the scale: a naive exp(-gap/alpha) is exactly 0 here
    x = torch.tensor([[0.0, 10.0, 20.0, 30.0]], dtype=torch.float32)
    p = lapsum_topk(x, 2, 1e-3)
    torch.testing.assert_close(p, torch.tensor([[0.0, 0.0, 1.0, 1.0]]))
    torch.testing.assert_close(lapsum_sort(x, 4, 1e-3), torch.tensor([[30.0, 20.0, 10.0, 0.0]]))


@pytest.mark.parametrize("k", [1, 5])
def test_float32_agrees_with_float64(k):
    torch.manual_seed(5)
    x = torch.randn(3, 40, dtype=torch.float64)
    torch.testing.assert_close(lapsum_topk(x.float(), k, 0.05).double(), lapsum_topk(x, k, 0.05), atol=1e-5, rtol=0)


def test_bad_input():
    with pytest.raises(ValueError, match="alpha"):
        lapsum_topk(torch.randn(5), 2, alpha=-1)
    with pytest.raises(ValueError, match="k must"):
        lapsum_topk(torch.randn(5), 0)
