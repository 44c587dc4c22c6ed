"""Sinkhorn sort against the plain (non-log) Sinkhorn of ot_oracle.py; marginals,
convergence reporting, implicit gradient."""

import warnings

import pytest
import torch

from netgen.relax.baselines import OTConvergenceWarning, OTNotConverged, SinkhornSort, sinkhorn_sort
from ot_oracle import plain_sinkhorn


def reference(x, k, eps):
    n = x.shape[-1]
    z = torch.sigmoid((x - x.mean(-1, keepdim=True)) / x.std(-1, unbiased=False, keepdim=True))
    y = torch.linspace(1, 0, n, dtype=x.dtype)
    C = (z.unsqueeze(-1) - y).square()
    a = torch.full(x.shape, 1 / n, dtype=x.dtype)
    plan = plain_sinkhorn(C, a, a.clone(), eps)
    return n * plan[..., :k].transpose(-1, -2)


def test_matches_plain_sinkhorn():
    torch.manual_seed(0)
    x = torch.randn(3, 6, dtype=torch.float64)
    values, P = sinkhorn_sort(x, 4, epsilon=0.05, tol=1e-12, max_iter=20000)
    ref = reference(x, 4, 0.05)
    torch.testing.assert_close(P, ref, atol=1e-9, rtol=1e-7)
    torch.testing.assert_close(values, (ref @ x.unsqueeze(-1)).squeeze(-1), atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_marginals_within_tolerance(dtype):
    torch.manual_seed(1)
    n, tol = 12, 1e-4
    x = torch.randn(2, 3, n, dtype=dtype)
    layer = SinkhornSort(n, epsilon=1e-2, tol=tol, max_iter=5000)
    values, P = layer(x)
    assert P.shape == (2, 3, n, n) and P.dtype == dtype and bool(layer.converged.all())
    # columns of P are the plan's rows (mass 1/n each, scaled by n): L1 error <= n * tol
    assert float((P.sum(-2) - 1).abs().sum(-1).max()) <= n * tol * 1.01
    torch.testing.assert_close(P.sum(-1), torch.ones(2, 3, n, dtype=dtype), atol=1e-4, rtol=0)
    assert float(layer.marginal_error.max()) <= tol


def test_small_epsilon_sorts():
    torch.manual_seed(2)
    x = torch.randn(4, 8, dtype=torch.float64)
    values, P = sinkhorn_sort(x, 3, epsilon=1e-4, max_iter=20000)
    top = torch.topk(x, 3)
    assert torch.equal(P.argmax(-1), top.indices)
    torch.testing.assert_close(values, top.values, atol=1e-3, rtol=0)


def test_nonconvergence_is_reported():
    torch.manual_seed(11)
    x = torch.randn(2, 30, dtype=torch.float64)
    with pytest.raises(OTNotConverged, match="did not converge"):
        sinkhorn_sort(x, 5, epsilon=1e-4, max_iter=10, tol=1e-12)
    layer = SinkhornSort(5, epsilon=1e-4, max_iter=10, tol=1e-12, on_nonconvergence="warn")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        layer(x)
    assert any(issubclass(w.category, OTConvergenceWarning) for w in rec)
    assert not bool(layer.converged.all())
    assert float(layer.marginal_error.max()) > 1e-12


def test_gradcheck_implicit_backward():
    torch.manual_seed(3)
    x = torch.randn(2, 5, dtype=torch.float64, requires_grad=True)
    f = lambda x: sinkhorn_sort(x, 3, epsilon=0.05, tol=1e-13, max_iter=50000)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))
