"""SOFT top-k (Xie et al. 2020) against the plain Sinkhorn of ot_oracle.py;
marginals, per-row normalisation, convergence reporting, implicit gradient."""

import warnings

import pytest
import torch

from netgen.relax.baselines import (
    OTConvergenceWarning, OTNotConverged, SoftTopK, SortedSoftTopK, soft_topk, sorted_soft_topk,
)
from ot_oracle import plain_sinkhorn


def reference_plan(x, anchors, nu, eps):
    n = x.shape[-1]
    C = (x.unsqueeze(-1) - anchors).square()
    C = C / C.amax(dim=(-2, -1), keepdim=True)
    a = torch.full(x.shape, 1 / n, dtype=x.dtype)
    return plain_sinkhorn(C, a, nu.expand(*x.shape[:-1], -1), eps)


def test_indicator_matches_plain_sinkhorn():
    torch.manual_seed(0)
    x = torch.randn(3, 7, dtype=torch.float64)
    A = soft_topk(x, 2, epsilon=0.05, tol=1e-12, max_iter=20000)
    nu = torch.tensor([2 / 7, 5 / 7], dtype=x.dtype)
    ref = 7 * reference_plan(x, torch.tensor([1.0, 0.0], dtype=x.dtype), nu, 0.05)[..., 0]
    torch.testing.assert_close(A, ref, atol=1e-9, rtol=1e-7)


def test_sorted_matches_plain_sinkhorn():
    torch.manual_seed(1)
    x = torch.randn(2, 6, dtype=torch.float64)
    values, P = sorted_soft_topk(x, 3, epsilon=0.05, tol=1e-12, max_iter=20000)
    nu = torch.tensor([1 / 6, 1 / 6, 1 / 6, 3 / 6], dtype=x.dtype)
    ref = 6 * reference_plan(x, torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=x.dtype), nu, 0.05)[..., :3].transpose(-1, -2)
    torch.testing.assert_close(P, ref, atol=1e-9, rtol=1e-7)
    torch.testing.assert_close(values, (ref @ x.unsqueeze(-1)).squeeze(-1), atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_marginals_within_tolerance(dtype):
    torch.manual_seed(2)
    n, k, tol = 40, 5, 1e-4
    x = torch.randn(2, 3, n, dtype=dtype)
    layer = SoftTopK(k, epsilon=1e-2, tol=tol)
    A = layer(x)
    assert A.shape == (2, 3, n) and A.dtype == dtype and bool(layer.converged.all())
    # sum_c A_c = n * (mass on the top anchor) = k exactly after the column update
    torch.testing.assert_close(A.sum(-1), torch.full((2, 3), float(k), dtype=dtype), atol=1e-4, rtol=0)
    assert float(((A / n) + 0).min()) >= 0 and float(A.max()) <= 1 + n * tol
    s = SortedSoftTopK(k, epsilon=1e-2, tol=tol)
    values, P = s(x)
    assert P.shape == (2, 3, k, n) and bool(s.converged.all())
    torch.testing.assert_close(P.sum(-1), torch.ones(2, 3, k, dtype=dtype), atol=1e-4, rtol=0)
    assert float(s.marginal_error.max()) <= tol


def test_rows_are_not_coupled():
    """The cost is normalised per row: scaling another row changes nothing."""
    torch.manual_seed(3)
    x = torch.randn(2, 9, dtype=torch.float64)
    y = x.clone()
    y[1] *= 100
    torch.testing.assert_close(soft_topk(x, 3, 0.05)[0], soft_topk(y, 3, 0.05)[0])
    torch.testing.assert_close(sorted_soft_topk(x, 3, 0.05)[1][0], sorted_soft_topk(y, 3, 0.05)[1][0])


def test_small_epsilon_is_hard_topk():
    torch.manual_seed(4)
    x = torch.randn(4, 10, dtype=torch.float64)
    A = soft_topk(x, 3, epsilon=1e-4, max_iter=20000)
    hard = torch.zeros_like(x).scatter(-1, torch.topk(x, 3).indices, 1.0)
    torch.testing.assert_close(A, hard, atol=1e-3, rtol=0)


def test_nonconvergence_is_reported():
    torch.manual_seed(11)
    x = torch.randn(2, 30, dtype=torch.float64)
    with pytest.raises(OTNotConverged):
        soft_topk(x, 5, epsilon=1e-5, max_iter=10, tol=1e-13)
    with pytest.raises(OTNotConverged):
        sorted_soft_topk(x, 5, epsilon=1e-5, max_iter=10, tol=1e-13)
    layer = SoftTopK(5, epsilon=1e-5, max_iter=10, tol=1e-13, on_nonconvergence="warn")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        layer(x)
    assert any(issubclass(w.category, OTConvergenceWarning) for w in rec)
    assert not bool(layer.converged.all())


def test_gradcheck_implicit_backward():
    torch.manual_seed(5)
    x = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    kw = dict(epsilon=0.1, tol=1e-13, max_iter=50000)
    assert torch.autograd.gradcheck(lambda x: soft_topk(x, 2, **kw), (x,))
    assert torch.autograd.gradcheck(lambda x: sorted_soft_topk(x, 3, **kw), (x,))
