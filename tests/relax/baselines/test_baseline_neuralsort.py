"""NeuralSort against its dense defining formula (Grover et al. 2019)."""

import pytest
import torch

from netgen.relax.baselines import GumbelNeuralSort, NeuralSort, gumbel_neuralsort, neuralsort
from netgen.relax.baselines.neuralsort import abs_diff_row_sums


def dense_neuralsort(s, tau):
    """P_hat[i, :] = softmax(((n + 1 - 2i) s - A_s 1) / tau), i = 1..n, with the full matrix A_s."""
    n = s.shape[-1]
    A = (s.unsqueeze(-1) - s.unsqueeze(-2)).abs()
    rowsum = A @ torch.ones(n, dtype=s.dtype)
    i = torch.arange(1, n + 1, dtype=s.dtype).unsqueeze(-1)
    return torch.softmax(((n + 1 - 2 * i) * s.unsqueeze(-2) - rowsum.unsqueeze(-2)) / tau, dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_dense_formula(dtype):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, dtype=dtype)
    for k in (1, 3, 7):
        values, P = neuralsort(x, k, tau=0.3)
        ref = dense_neuralsort(x.double(), 0.3)[..., :k, :]
        assert P.shape == (2, 3, k, 7) and values.shape == (2, 3, k) and P.dtype == dtype
        tol = 1e-5 if dtype == torch.float32 else 1e-12
        torch.testing.assert_close(P.double(), ref, atol=tol, rtol=tol)
        torch.testing.assert_close(values.double(), (ref @ x.double().unsqueeze(-1)).squeeze(-1), atol=tol, rtol=tol)


def test_row_sums_without_matrix_product():
    torch.manual_seed(1)
    s = torch.randn(4, 33, dtype=torch.float64)
    s[0, 5] = s[0, 7]  # a tie
    dense = (s.unsqueeze(-1) - s.unsqueeze(-2)).abs().sum(-1)
    torch.testing.assert_close(abs_diff_row_sums(s), dense)


def test_gradcheck():
    torch.manual_seed(2)
    x = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: neuralsort(x, 3, 0.5), (x,))
    # the Gumbel variant with the same noise on every call
    f = lambda x: gumbel_neuralsort(x, 3, 0.5, generator=torch.Generator().manual_seed(0))  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))


def test_low_temperature_is_hard_sort():
    torch.manual_seed(3)
    x = torch.randn(5, 9, dtype=torch.float64)
    values, P = NeuralSort(4, tau=1e-4)(x)
    top = torch.topk(x, 4)
    assert torch.equal(P.argmax(-1), top.indices)
    torch.testing.assert_close(values, top.values)


def test_gumbel_is_neuralsort_of_perturbed_scores():
    torch.manual_seed(4)
    x = torch.randn(3, 8, dtype=torch.float64)
    v1, P1 = gumbel_neuralsort(x, 3, 0.5, generator=torch.Generator().manual_seed(7))
    u = torch.rand(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(7))
    g = -torch.log(-torch.log(u))
    P2 = dense_neuralsort(x + g, 0.5)[..., :3, :]
    torch.testing.assert_close(P1, P2)
    torch.testing.assert_close(v1, (P2 @ x.unsqueeze(-1)).squeeze(-1))
    # different samples differ, rows stay stochastic
    _, P3 = GumbelNeuralSort(3, 0.5)(x)
    torch.testing.assert_close(P3.sum(-1), torch.ones(3, 3, dtype=x.dtype))


def test_bad_input():
    with pytest.raises(ValueError, match="k must"):
        neuralsort(torch.randn(4), 5)
    with pytest.raises(ValueError, match="tau"):
        neuralsort(torch.randn(4), 2, tau=0)
    with pytest.raises(ValueError, match="float32 or float64"):
        neuralsort(torch.arange(4), 2)


@pytest.mark.parametrize("k", [1, 5, 16])
def test_hard_straight_through(k):
    """hard=True (the authors' option): forward = one-hot of each row's
    argmax of the soft P; gradient = the soft P's (straight-through)."""
    torch.manual_seed(3)
    x = torch.randn(3, 16, dtype=torch.float64, requires_grad=True)
    W = torch.randn(3, k, 16, dtype=torch.float64)
    soft = dense_neuralsort(x, 0.5)[..., :k, :]
    onehot = torch.zeros_like(soft).scatter(-1, soft.argmax(-1, keepdim=True), 1.0)
    values, P = NeuralSort(k, tau=0.5, hard=True)(x)
    torch.testing.assert_close(P, onehot, atol=0, rtol=0)
    torch.testing.assert_close(values, (onehot @ x.unsqueeze(-1)).squeeze(-1))
    (g,) = torch.autograd.grad((P * W).sum(), x)
    (g_ref,) = torch.autograd.grad((soft * W).sum(), x)
    torch.testing.assert_close(g, g_ref)
