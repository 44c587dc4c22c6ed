"""The written backward of the lane sweeps, as docs/operators.md section 3
states it for the target implementers, run comparator by comparator in
plain Python on one row and held to autograd on the reference executor:
the documented formulas are the ones a target must implement."""

import pytest
import torch

from netgen.construct import build
from netgen.relax import reference as ref
from netgen.relax.distributions import (Relaxation, swap_probability, swap_probability_grad,
                                        swap_probability_grad_steepness)

torch.set_num_threads(1)


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def value_sweep(net, x, r):
    """Forward values; per comparator (a, b, d, p, g, h), in execution order."""
    v = x.clone()
    saved = []
    for l in range(net.depth):
        for a, b in net.layer(l).tolist():
            d = v[a] - v[b]
            t = d.reshape(1)
            p, g, h = (float(f(t, r)[0]) for f in (swap_probability, swap_probability_grad,
                                                    swap_probability_grad_steepness))
            v[a], v[b] = v[b] + p * d, v[a] - p * d
            saved.append((a, b, float(d), p, g, h))
    return v, saved


def values_adjoint(n, saved, q, u=None):
    """dL/dx and dL/ds from the lanes' dL/dp (q) and dL/dvalues (u)."""
    u = torch.zeros(n, dtype=torch.float64) if u is None else u.clone()
    ds = 0.0
    for c in range(len(saved) - 1, -1, -1):
        a, b, d, p, g, h = saved[c]
        w = u[a] - u[b]
        tot = q[c] + w * d
        t = tot * g
        ds += tot * h
        u[a], u[b] = u[b] + p * w + t, u[a] - p * w - t
    return u, ds


def written_back(net, x, W, r, G):
    """Z = W P and its backward for dL/dZ = G (docs/operators.md)."""
    _, saved = value_sweep(net, x, r)
    outs = list(net.outputs)
    R = torch.zeros(W.shape[0], net.n, dtype=torch.float64)
    R[:, outs] = W
    D = [None] * len(saved)
    for c in range(len(saved) - 1, -1, -1):  # last layer first
        a, b, _, p, _, _ = saved[c]
        D[c] = R[:, a] - R[:, b]
        R[:, a], R[:, b] = R[:, b] + p * D[c], R[:, a] - p * D[c]
    Z = R
    Gb = G.clone()
    q = [0.0] * len(saved)
    for c in range(len(saved)):  # the adjoint lanes run forward
        a, b, _, p, _, _ = saved[c]
        diff = Gb[:, a] - Gb[:, b]
        q[c] = float((diff * D[c]).sum())
        Gb[:, a], Gb[:, b] = Gb[:, b] + p * diff, Gb[:, a] - p * diff
    dW = Gb[:, outs]
    dx, ds = values_adjoint(net.n, saved, q)
    return Z, dx, ds, dW


def written_fwd(net, x, V, r, dY):
    """Y = P V and its backward for dL/dY = dY."""
    _, saved = value_sweep(net, x, r)
    U = V.clone()
    delta = []
    for a, b, _, p, _, _ in saved:
        delta.append(U[a] - U[b])
        U[a], U[b] = U[b] + p * delta[-1], U[a] - p * delta[-1]
    outs = list(net.outputs)
    Y = U[outs]
    Ub = torch.zeros_like(V)
    Ub[outs] = dY
    q = [0.0] * len(saved)
    for c in range(len(saved) - 1, -1, -1):  # the lanes' adjoint runs backward
        a, b, _, p, _, _ = saved[c]
        omega = Ub[a] - Ub[b]
        q[c] = float((omega * delta[c]).sum())
        Ub[a], Ub[b] = Ub[b] + p * omega, Ub[a] - p * omega
    dx, ds = values_adjoint(net.n, saved, q)
    return Y, dx, ds, Ub


@pytest.mark.parametrize("kind,n,k,dist", [("splitter", 9, 3, "cauchy"), ("oddeven", 6, 6, "logistic_phi"),
                                           ("bitonic", 8, 2, "optimal")])
def test_documented_backward_equals_autograd(kind, n, k, dist):
    net = build(kind, n, k)
    r = Relaxation(dist, steepness=2.5)
    x = rand(n, seed=1).requires_grad_()
    s = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
    W = rand(3, k, seed=2).requires_grad_()
    G = rand(3, n, seed=3)
    Z = ref.back(net, x, W, r, s)
    (Z * G).sum().backward()
    Zw, dx, ds, dW = written_back(net, x.detach(), W.detach(), r, G)
    torch.testing.assert_close(Zw, Z.detach(), atol=1e-12, rtol=0)
    torch.testing.assert_close(dx, x.grad, atol=1e-10, rtol=0)
    torch.testing.assert_close(dW, W.grad, atol=1e-12, rtol=0)
    assert ds == pytest.approx(float(s.grad), abs=1e-10)

    x.grad = s.grad = None
    V = rand(n, 2, seed=4).requires_grad_()
    dY = rand(k, 2, seed=5)
    Y = ref.fwd(net, x, V, r, s)
    (Y * dY).sum().backward()
    Yw, dx, ds, dV = written_fwd(net, x.detach(), V.detach(), r, dY)
    torch.testing.assert_close(Yw, Y.detach(), atol=1e-12, rtol=0)
    torch.testing.assert_close(dx, x.grad, atol=1e-10, rtol=0)
    torch.testing.assert_close(dV, V.grad, atol=1e-12, rtol=0)
    assert ds == pytest.approx(float(s.grad), abs=1e-10)
