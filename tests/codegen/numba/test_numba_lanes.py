"""The numba target's lane sweeps (``Layer.back``: W P, ``Layer.fwd``: P V,
``Layer.values``: P x) against the reference executor's ``back``, ``fwd``
and ``soft_values`` (float64, 1e-12; float32, 1e-6 relative) and
gradcheck for x, the steepness and W / V (docs/operators.md, section 3).
Modules are compiled serially (NETGEN_NUMBA_PARALLEL=0); one test runs the
module as shipped (parallel, slow)."""

from __future__ import annotations

import os
from unittest import mock

import pytest
import torch

from netgen.codegen import write_module
from netgen.codegen.cache import load
from netgen.construct import build
from netgen.relax import reference as ref
from netgen.relax.distributions import Relaxation, default_relaxation

pytest.importorskip("numba")

TOL = 1e-12
# odd n with k = n, k = 1 and 1 < k < n in the fast run; one more sorter with --run-slow
NETS = [("oddeven", 7, 7), pytest.param("bitonic", 8, 8, marks=pytest.mark.slow), ("splitter", 9, 1),
        ("splitter", 9, 3)]


@pytest.fixture(scope="module")
def make(tmp_path_factory):
    made = {}
    root = tmp_path_factory.mktemp("numba_lanes")

    def _make(kind, n, k, parallel=False, r=None):
        key = (kind, n, k, parallel, r)
        if key not in made:
            net = build(kind, n, k)
            rr = default_relaxation(net) if r is None else r
            path = write_module("numba", net, rr, root / ("par" if parallel else "ser"))
            with mock.patch.dict(os.environ, {"NETGEN_NUMBA_PARALLEL": "1" if parallel else "0"}):  # read at import
                mod = load(path)
            assert mod._PARALLEL is parallel
            if parallel:  # the parallel kernels even for small batches
                mod._SERIAL_WORK = 0
            made[key] = (mod.Layer(), net, rr)
        return made[key]

    return _make


def _x(B, n, dtype=torch.float64, seed=0):
    return torch.randn(B, n, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("kind,n,k", NETS)
@pytest.mark.parametrize("B", [1, 19])  # one row; a full block of 16 and a partial one
def test_equals_reference_float64(make, kind, n, k, B):
    layer, net, r = make(kind, n, k)
    x = _x(B, n)
    g = torch.Generator().manual_seed(1)
    for W in (torch.randn(3, k, generator=g, dtype=torch.float64),  # one W for every row
              torch.randn(B, 2, k, generator=g, dtype=torch.float64),  # one per row
              torch.ones(1, k, dtype=torch.float64)):  # the top-k mask 1^T P
        torch.testing.assert_close(layer.back(x, W), ref.back(net, x, W, r), atol=TOL, rtol=0)
    for V in (torch.randn(n, 2, generator=g, dtype=torch.float64), torch.randn(B, n, 1, generator=g,
                                                                                 dtype=torch.float64)):
        torch.testing.assert_close(layer.fwd(x, V), ref.fwd(net, x, V, r), atol=TOL, rtol=0)
    torch.testing.assert_close(layer.values(x), ref.soft_values(net, x, r), atol=TOL, rtol=0)
    # a call's own steepness (a number or a tensor) and the layer's
    W = torch.randn(2, k, generator=g, dtype=torch.float64)
    torch.testing.assert_close(layer.back(x, W, steepness=3.5), ref.back(net, x, W, r, 3.5), atol=TOL, rtol=0)
    torch.testing.assert_close(layer.fwd(x, x[..., None], steepness=torch.tensor(0.5)),
                               ref.fwd(net, x, x[..., None], r, 0.5), atol=TOL, rtol=0)


def test_soft_ranks_and_mask_are_what_p_gives(make):
    """r^T P and 1^T P through one back lane equal the same products of the
    layer's own P, and P V its P @ V (leading dims kept)."""
    layer, net, r = make("oddeven", 7, 7)
    x = _x(6, 7).reshape(2, 3, 7)
    _, P = layer(x)
    rho = torch.arange(7, 0, -1, dtype=torch.float64)[None]
    torch.testing.assert_close(layer.back(x, rho)[..., 0, :], (rho @ P)[..., 0, :], atol=TOL, rtol=0)
    V = torch.randn(3, 7, 4, dtype=torch.float64)  # broadcast over the first batch dim
    torch.testing.assert_close(layer.fwd(x, V), P @ V, atol=TOL, rtol=0)
    layer5, net5, _ = make("splitter", 9, 3)
    m = layer5.back(_x(4, 9), torch.ones(1, 3, dtype=torch.float64))[:, 0]
    torch.testing.assert_close(m.sum(-1), torch.full((4,), 3.0, dtype=torch.float64), atol=1e-12, rtol=0)


@pytest.mark.parametrize("kind,n,k", NETS)
def test_gradcheck(make, kind, n, k):
    layer, net, r = make(kind, n, k)
    x = (_x(3, n) * 0.7).requires_grad_(True)
    s = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
    g = torch.Generator().manual_seed(2)
    W = torch.randn(2, k, generator=g, dtype=torch.float64, requires_grad=True)
    Wb = torch.randn(3, 2, k, generator=g, dtype=torch.float64, requires_grad=True)
    V = torch.randn(n, 2, generator=g, dtype=torch.float64, requires_grad=True)
    Vb = torch.randn(3, n, 1, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, w, t: layer.back(a, w, steepness=t), (x, W, s))
    assert torch.autograd.gradcheck(lambda a, w: layer.back(a, w), (x, Wb))
    assert torch.autograd.gradcheck(lambda a, v, t: layer.fwd(a, v, steepness=t), (x, V, s))
    assert torch.autograd.gradcheck(lambda a, v: layer.fwd(a, v), (x, Vb))
    layer.steepness = s
    try:
        # the layer's own steepness (a tensor: perturbed in place by gradcheck)
        assert torch.autograd.gradcheck(lambda a, t: layer.values(a), (x, s))
    finally:
        layer.steepness = None


def test_gradients_equal_the_reference_one_at_a_time(make):
    """Each gradient alone (only W, only x, only s) as autograd on the
    reference gives it; values and lanes used together in one loss."""
    layer, net, r = make("oddeven", 7, 7)
    x0 = _x(5, 7)
    W0 = torch.randn(2, 7, dtype=torch.float64)
    for need in ("x", "W", "s"):
        outs = []
        for f in (lambda a, w, t: layer.back(a, w, steepness=t), lambda a, w, t: ref.back(net, a, w, r, t)):
            x = x0.clone().requires_grad_(need == "x")
            W = W0.clone().requires_grad_(need == "W")
            s = torch.tensor(3.0, dtype=torch.float64, requires_grad=need == "s")
            ((f(x, W, s) ** 2).sum()).backward()
            outs.append({"x": x, "W": W, "s": s}[need].grad)
        torch.testing.assert_close(outs[0], outs[1], atol=1e-11, rtol=0)
    grads = []
    for v, f in ((layer.values, lambda a: layer.fwd(a, a[..., None])),
                 (lambda a: ref.soft_values(net, a, r), lambda a: ref.fwd(net, a, a[..., None], r))):
        x = x0.clone().requires_grad_(True)
        (v(x).sum() + (f(x) ** 2).sum()).backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-11, rtol=0)


def test_float32_half_and_empty_batches(make):
    """float32 kernels against the reference in float32 (the existing P
    path's tolerance: cauchy's inlined arctangent), gradients too."""
    layer, net, r = make("oddeven", 7, 7)
    x = _x(20, 7, torch.float32).requires_grad_(True)
    W = torch.randn(2, 7)
    got, want = layer.back(x, W), ref.back(net, x, W, r)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, atol=1e-5 * float(want.detach().abs().max()), rtol=0)
    G = torch.randn(want.shape)
    (g,) = torch.autograd.grad((got * G).sum(), x)
    (g0,) = torch.autograd.grad((want * G).sum(), x)
    torch.testing.assert_close(g, g0, atol=1e-4 * max(1.0, float(g0.abs().max())), rtol=0)
    got, want = layer.fwd(x, x[..., None]), ref.fwd(net, x, x[..., None], r)
    torch.testing.assert_close(got, want, atol=1e-5 * float(want.detach().abs().max()), rtol=0)
    x = x.detach()
    assert layer.values(x.half()).dtype == torch.float16
    for B in ((0,), (2, 0)):
        xe = torch.zeros(*B, 7, requires_grad=True)
        We = torch.randn(3, 7, requires_grad=True)
        Z = layer.back(xe, We)
        Y = layer.fwd(xe, torch.randn(7, 2))
        v = layer.values(xe)
        assert Z.shape == (*B, 3, 7) and Y.shape == (*B, 7, 2) and v.shape == (*B, 7)
        (Z.sum() + Y.sum() + v.sum()).backward()
        assert xe.grad.shape == xe.shape and torch.equal(We.grad, torch.zeros(3, 7))


def test_bad_inputs(make):
    layer, net, r = make("splitter", 9, 3)
    x = _x(2, 9)
    W = torch.ones(1, 3, dtype=torch.float64)
    for bad in (float("nan"), float("inf")):
        xb = x.clone()
        xb[1, 4] = bad
        with pytest.raises(ValueError, match="NaN|inf"):
            layer.back(xb, W)
        with pytest.raises(ValueError, match="NaN|inf"):
            layer.fwd(xb, torch.ones(9, 1, dtype=torch.float64))
        with pytest.raises(ValueError, match="NaN|inf"):
            layer.back(x, W * bad)
    for Wbad, match in ((torch.ones(1, 9), "shape"), (torch.ones(3), "shape"), (torch.ones(5, 1, 3), "broadcast"),
                        (torch.ones(1, 3, dtype=torch.int64), "floating"), ([[1.0, 1.0, 1.0]], "Tensor")):
        with pytest.raises(ValueError, match=match):
            layer.back(x, Wbad)
    with pytest.raises(ValueError, match="shape"):
        layer.fwd(x, torch.ones(3, 1))
    with pytest.raises(ValueError, match="steepness"):
        layer.back(x, W, steepness=-1.0)


@pytest.mark.slow
def test_parallel_module_as_shipped(make):
    """The parallel kernels (prange over row blocks) agree with the
    reference, with gradients, on several blocks."""
    layer, net, r = make("oddeven", 7, 7, parallel=True)
    x = _x(40, 7).requires_grad_(True)
    W = torch.randn(40, 2, 7, dtype=torch.float64, requires_grad=True)
    outs = []
    for f in (lambda: layer.back(x, W).pow(2).sum() + layer.fwd(x, x[..., None]).pow(2).sum() + layer.values(x).sum(),
              lambda: ref.back(net, x, W, r).pow(2).sum() + ref.fwd(net, x, x[..., None], r).pow(2).sum()
              + ref.soft_values(net, x, r).sum()):
        x.grad = W.grad = None
        loss = f()
        loss.backward()
        outs.append((loss.detach(), x.grad, W.grad))
    for a, b in zip(*outs):
        torch.testing.assert_close(a, b, atol=1e-11, rtol=0)


@pytest.mark.slow
def test_other_relaxation(make):
    r = Relaxation("logistic", steepness=4.0)
    layer, net, _ = make("oddeven", 7, 7, r=r)
    x = _x(3, 7)
    W = torch.randn(2, 7, dtype=torch.float64)
    torch.testing.assert_close(layer.back(x, W), ref.back(net, x, W, r), atol=TOL, rtol=0)


def test_second_order_refused_and_a_retained_graph_reused(make):
    """create_graph=True: the first-order gradient is right and
    differentiating it again is refused; a graph kept with retain_graph
    gives the same gradients twice; torch.func transforms are refused."""
    layer, net, r = make("splitter", 9, 3)
    x = _x(4, 9).requires_grad_(True)
    W = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    Z = layer.back(x, W)
    (g,) = torch.autograd.grad((Z ** 2).sum(), x, create_graph=True, retain_graph=True)
    (g0,) = torch.autograd.grad((ref.back(net, x, W, r) ** 2).sum(), x)
    torch.testing.assert_close(g.detach(), g0, atol=1e-11, rtol=0)
    with pytest.raises(RuntimeError, match="second-order"):
        g.pow(2).sum().backward()
    (g2,) = torch.autograd.grad((Z ** 2).sum(), x)  # the same saved state, a second time
    torch.testing.assert_close(g2, g0, atol=1e-11, rtol=0)
    with pytest.raises(ValueError, match="torch.func"):
        torch.func.vmap(lambda t: layer.back(t, W.detach()))(x.detach())
