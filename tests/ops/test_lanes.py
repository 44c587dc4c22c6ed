"""The reference executor's lane sweeps (the definition of the P-free
operators): back(W) = W P, fwd(V) = P V, soft_values = P x, against P
formed by the back-sweep of the identity and by brute force, with
gradients to x, the steepness and the lanes."""

import pytest
import torch

from netgen.construct import build
from netgen.relax import reference as ref
from netgen.relax.distributions import DISTRIBUTIONS, Relaxation

torch.set_num_threads(1)

NETS = [("splitter", 11, 3), ("oddeven", 7, 7), ("bitonic", 8, 8), ("bitonic", 9, 2)]


def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def brute_P(net, x, r):
    """P of one row by multiplying n x n mixing matrices (comparator order)."""
    n = net.n
    v = x.clone()
    M = torch.eye(n, dtype=x.dtype)
    for a, b in net.comparators.tolist():
        p = ref.swap_prob(v[a:a + 1] - v[b:b + 1], r)[0]
        v[a], v[b] = p * v[a] + (1 - p) * v[b], (1 - p) * v[a] + p * v[b]
        L = torch.eye(n, dtype=x.dtype)
        L[a, a] = L[b, b] = p
        L[a, b] = L[b, a] = 1 - p
        M = L @ M
    return M[list(net.outputs)]


@pytest.mark.parametrize("kind,n,k", NETS)
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_lanes_equal_P(kind, n, k, dist):
    net = build(kind, n, k)
    r = Relaxation(dist, steepness=3.0)
    x = rand(2, 3, n)
    values, P = ref.forward(net, x, r)
    torch.testing.assert_close(P[1, 2], brute_P(net, x[1, 2], r), atol=1e-12, rtol=0)
    W = rand(2, 3, 4, k, seed=1)
    torch.testing.assert_close(ref.back(net, x, W, r), W @ P, atol=1e-12, rtol=0)
    V = rand(n, 5, seed=2)  # one V for every row
    torch.testing.assert_close(ref.fwd(net, x, V, r), P @ V, atol=1e-12, rtol=0)
    torch.testing.assert_close(ref.soft_values(net, x, r), values, atol=0, rtol=0)
    # the documented special lanes: ranks, mask, values, column
    ones = torch.ones(1, k, dtype=x.dtype)
    torch.testing.assert_close(ref.back(net, x, ones, r)[..., 0, :], P.sum(-2), atol=1e-12, rtol=0)
    torch.testing.assert_close(ref.fwd(net, x, x.unsqueeze(-1), r)[..., 0], values, atol=1e-12, rtol=0)


def test_steepness_argument_overrides_the_relaxation():
    net = build("oddeven", 6, 6)
    x = rand(4, 6)
    W = rand(2, 6, seed=3)
    a = ref.back(net, x, W, Relaxation("cauchy", 10.0), steepness=2.5)
    b = ref.back(net, x, W, Relaxation("cauchy", 2.5))
    c = ref.back(net, x, W, Relaxation("cauchy", 10.0), steepness=torch.tensor(2.5, dtype=torch.float64))
    torch.testing.assert_close(a, b, atol=0, rtol=0)
    torch.testing.assert_close(c, b, atol=0, rtol=0)


@pytest.mark.parametrize("dist", ["cauchy", "logistic_phi", "optimal"])
def test_gradcheck_x_s_W_V(dist):
    net = build("splitter", 9, 3)
    r = Relaxation(dist, steepness=2.0)
    x = rand(2, 9, seed=4).requires_grad_()
    s = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    W = rand(2, 2, 3, seed=5).requires_grad_()
    V = rand(9, 2, seed=6).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, s, W: ref.back(net, x, W, r, s), (x, s, W))
    assert torch.autograd.gradcheck(lambda x, s, V: ref.fwd(net, x, V, r, s), (x, s, V))
    assert torch.autograd.gradcheck(lambda x, s: ref.soft_values(net, x, r, s), (x, s))


def test_half_inputs_computed_in_float32():
    net = build("bitonic", 8, 8)
    r = Relaxation("cauchy", 4.0)
    x = rand(3, 8)
    W = rand(2, 8, seed=7)
    for dt in (torch.float16, torch.bfloat16):
        out = ref.back(net, x.to(dt), W.to(dt), r)
        assert out.dtype == dt
        want = ref.back(net, x.to(dt).float(), W.to(dt).float(), r)
        torch.testing.assert_close(out, want.to(dt), atol=0, rtol=0)


def test_empty_batch_and_one_wire():
    net = build("bitonic", 8, 8)
    r = Relaxation()
    x = torch.zeros(0, 8, dtype=torch.float64, requires_grad=True)
    out = ref.back(net, x, torch.ones(1, 8, dtype=torch.float64), r)
    assert out.shape == (0, 1, 8)
    out.sum().backward()
    assert x.grad.shape == (0, 8)
    one = build("bitonic", 1, 1)
    assert ref.back(one, rand(3, 1), torch.ones(1, 1, dtype=torch.float64), r).tolist() == [[[1.0]]] * 3


@pytest.mark.parametrize("bad,match", [
    (lambda x: ref.back(NET, x, torch.ones(1, 4), R), r"W must have shape \(\.\.\., m, 3\)"),
    (lambda x: ref.back(NET, x, torch.ones(5, 1, 3), R), "do not broadcast"),
    (lambda x: ref.back(NET, x, torch.ones(1, 3, dtype=torch.int64), R), "floating point"),
    (lambda x: ref.back(NET, x, torch.full((1, 3), float("nan")), R), "NaN or inf"),
    (lambda x: ref.fwd(NET, x, torch.ones(4, 2), R), r"V must have shape \(\.\.\., 9, d\)"),
    (lambda x: ref.fwd(NET, x, torch.ones(9, 2), R, steepness=0.0), "steepness must be finite and > 0"),
    (lambda x: ref.fwd(NET, x, torch.ones(9, 2), R, steepness=torch.ones(2)), "0-d floating tensor"),
    (lambda x: ref.soft_values(NET, x * float("inf"), R), "inf"),
])
def test_bad_lanes_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        bad(torch.randn(2, 9))


NET = build("splitter", 9, 3)
R = Relaxation()
