"""SoftSort against its dense defining formula (Prillo & Eisenschlos 2020)."""

import pytest
import torch

from netgen.relax.baselines import SoftSort, softsort


def dense_softsort(s, tau, power=1.0):
    srt = torch.sort(s, dim=-1, descending=True).values
    return torch.softmax(-(srt.unsqueeze(-1) - s.unsqueeze(-2)).abs().pow(power) / tau, dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("power", [1.0, 2.0])
def test_matches_dense_formula(dtype, power):
    torch.manual_seed(0)
    x = torch.randn(3, 2, 9, dtype=dtype)
    for k in (1, 4, 9):
        values, P = softsort(x, k, tau=0.2, power=power)
        ref = dense_softsort(x.double(), 0.2, power)[..., :k, :]
        tol = 1e-5 if dtype == torch.float32 else 1e-12
        assert P.shape == (3, 2, k, 9) and P.dtype == dtype
        torch.testing.assert_close(P.double(), ref, atol=tol, rtol=tol)
        torch.testing.assert_close(values.double(), (ref @ x.double().unsqueeze(-1)).squeeze(-1), atol=tol, rtol=tol)


def test_gradcheck():
    torch.manual_seed(1)
    x = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: softsort(x, 4, 0.5), (x,))
    assert torch.autograd.gradcheck(lambda x: softsort(x, 2, 0.5, power=2.0), (x,))


def test_low_temperature_is_hard_sort():
    torch.manual_seed(2)
    x = torch.randn(4, 10, dtype=torch.float64)
    values, P = SoftSort(3, tau=1e-4)(x)
    top = torch.topk(x, 3)
    assert torch.equal(P.argmax(-1), top.indices)
    torch.testing.assert_close(values, top.values)


@pytest.mark.parametrize("k", [1, 5, 16])
def test_hard_straight_through(k):
    """hard=True (the authors' option): forward = one-hot of each row's
    argmax of the soft P; gradient = the soft P's (straight-through)."""
    torch.manual_seed(3)
    x = torch.randn(3, 16, dtype=torch.float64, requires_grad=True)
    W = torch.randn(3, k, 16, dtype=torch.float64)
    wv = torch.randn(3, k, dtype=torch.float64)
    soft = dense_softsort(x, 0.5)[..., :k, :]
    onehot = torch.zeros_like(soft).scatter(-1, soft.argmax(-1, keepdim=True), 1.0)
    values, P = SoftSort(k, tau=0.5, hard=True)(x)
    torch.testing.assert_close(P, onehot, atol=0, rtol=0)
    torch.testing.assert_close(values, torch.topk(x, k).values)
    (g,) = torch.autograd.grad((P * W).sum() + (values * wv).sum(), x)
    (g_ref,) = torch.autograd.grad((soft * W).sum() + ((soft @ x.unsqueeze(-1)).squeeze(-1) * wv).sum(), x)
    # values = P_hard @ x: d/dx gets P_hard^T wv directly plus the soft P's gradient through P
    g_ref = g_ref - (soft.transpose(-1, -2) @ wv.unsqueeze(-1)).squeeze(-1) + \
        (onehot.transpose(-1, -2) @ wv.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(g, g_ref)
