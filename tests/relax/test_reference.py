"""The reference executor (the definition of the relaxed semantics)."""


import numpy as np
import pytest
import torch

from netgen.construct import build
from netgen.relax import reference as ref
from netgen.relax.distributions import DISTRIBUTIONS, Relaxation, swap_probability

torch.set_num_threads(1)  # tiny tensors: intra-op threads only add contention (2-core CI)


NETS = [("splitter", 11, 3), ("bitonic", 8, 8), ("oddeven", 6, 6), ("bitonic", 8, 3)]


def rand_distinct(*shape, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("kind,n,k", NETS)
def test_hard_matches_topk(kind, n, k):
    net = build(kind, n, k)
    x = rand_distinct(5, 3, n)
    vals, idx = ref.hard(net, x)
    tv, ti = torch.topk(x, k, dim=-1)
    assert torch.equal(vals, tv) and torch.equal(idx, ti)


def brute_force(net, x, r):
    """Comparator by comparator, scalar Python, P as full n x n products."""
    n = net.n
    v = x.tolist()
    M = np.eye(n)
    for a, b in net.comparators.tolist():
        d = v[a] - v[b]
        p = swap_probability(torch.tensor([d], dtype=torch.float64), r).item()
        v[a], v[b] = p * v[a] + (1 - p) * v[b], (1 - p) * v[a] + p * v[b]
        L = np.eye(n)
        L[a, a] = L[b, b] = p
        L[a, b] = L[b, a] = 1 - p
        M = L @ M
    outs = list(net.outputs)
    return np.array(v)[outs], M[outs]


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("kind,n,k", NETS[:3])
def test_forward_matches_brute_force(dist, kind, n, k):
    net = build(kind, n, k)
    r = Relaxation(dist, steepness=3.0)
    x = rand_distinct(n, seed=1)
    vals, P = ref.forward(net, x, r)
    bv, bP = brute_force(net, x, r)
    assert vals.shape == (k,) and P.shape == (k, n)
    np.testing.assert_allclose(vals.numpy(), bv, atol=1e-12)
    np.testing.assert_allclose(P.numpy(), bP, atol=1e-12)
    # P is doubly sub-stochastic and reproduces the values
    assert torch.allclose(P.sum(-1), torch.ones(k, dtype=torch.float64))
    assert torch.allclose(P @ x, vals)


@pytest.mark.parametrize("kind,n,k", NETS)
def test_column_is_a_column_of_P(kind, n, k):
    net = build(kind, n, k)
    r = Relaxation("logistic", 2.0)
    x = rand_distinct(2, 3, n, seed=2)
    y = torch.randint(0, n, (2, 3), generator=torch.Generator().manual_seed(0))
    _, P = ref.forward(net, x, r)
    c = ref.column(net, x, y, r)
    want = torch.gather(P, -1, y[..., None, None].expand(2, 3, k, 1)).squeeze(-1)
    assert torch.allclose(c, want, atol=1e-14)


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("kind,n,k", [("splitter", 9, 3), ("bitonic", 8, 4), ("oddeven", 5, 5), ("transposition", 5, 3)])
def test_gradcheck(dist, kind, n, k):
    net = build(kind, n, k)
    r = Relaxation(dist, steepness=2.0, art_lambda=0.25)
    x = rand_distinct(2, n, seed=3).requires_grad_()
    y = torch.tensor([0, n - 1])
    assert torch.autograd.gradcheck(lambda t: ref.forward(net, t, r), (x,))
    assert torch.autograd.gradcheck(lambda t: ref.column(net, t, y, r), (x,))


def test_any_leading_shape_and_half():
    net = build("bitonic", 8, 3)
    r = Relaxation()
    x = rand_distinct(2, 1, 3, 8, dtype=torch.float32)
    v, P = ref.forward(net, x, r)
    assert v.shape == (2, 1, 3, 3) and P.shape == (2, 1, 3, 3, 8)
    vh, Ph = ref.forward(net, x.half(), r)
    assert vh.dtype == torch.float16 and Ph.dtype == torch.float16
    assert torch.allclose(vh.float(), v, atol=1e-2)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_input_raises(bad):
    net = build("bitonic", 8, 3)
    x = torch.zeros(8)
    x[3] = bad
    with pytest.raises(ValueError, match="NaN|inf"):
        ref.forward(net, x, Relaxation())
    with pytest.raises(ValueError, match="NaN|inf"):
        ref.column(net, x, torch.tensor(0), Relaxation())


def test_bad_shapes_raise():
    net = build("bitonic", 8, 3)
    with pytest.raises(ValueError, match="shape"):
        ref.forward(net, torch.zeros(7), Relaxation())
    with pytest.raises(ValueError, match="y must"):
        ref.column(net, torch.zeros(2, 8), torch.tensor([0, 8]), Relaxation())
    with pytest.raises(ValueError, match="y must"):
        ref.column(net, torch.zeros(2, 8), torch.tensor([0.0, 1.0]), Relaxation())


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("case", ["all_equal", "pairs_equal", "huge", "steep"])
def test_ties_and_extremes_finite(dist, case):
    net = build("splitter", 10, 3)
    s = 1e4 if case == "steep" else 20.0
    r = Relaxation(dist, steepness=s, art_lambda=0.5)
    if case == "all_equal":
        x = torch.full((10,), 0.7, dtype=torch.float64)
    elif case == "pairs_equal":
        x = torch.tensor([1.0, 1.0, 2.0, 2.0, -3.0, -3.0, 0.5, 0.5, 4.0, 4.0], dtype=torch.float64)
    elif case == "huge":
        x = torch.tensor([1e30, -1e30, 1e30, 0.0, -1e30, 1.0, 1e30, 2.0, 3.0, -1e30], dtype=torch.float64)
    else:
        x = rand_distinct(10, seed=4)
    for dtype in (torch.float64, torch.float32):
        xt = x.to(dtype).requires_grad_()
        vals, P = ref.forward(net, xt, r)
        y = torch.tensor(2)
        c = ref.column(net, xt, y, r)
        assert bool(torch.isfinite(vals).all() and torch.isfinite(P).all() and torch.isfinite(c).all())
        (gx,) = torch.autograd.grad(vals.sum() + (P * torch.arange(10.0, dtype=dtype)).sum() + c.sum(), xt)
        assert bool(torch.isfinite(gx).all()), (dist, case, dtype, gx)


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_steepness_tensor_per_row_and_its_gradients(dist):
    """steepness= a (B, 1) tensor equals each row run with its own
    Relaxation steepness; gradcheck and gradgradcheck in x and s."""
    net = build("splitter", 9, 3)
    r = Relaxation(dist, 1.0, 0.25, 1e-10 if dist == "logistic_phi" else 0.0)
    x = rand_distinct(4, 9, seed=8)
    s = torch.tensor([[3.0], [0.5], [7.0], [2.0]], dtype=torch.float64)
    v, P = ref.forward(net, x, r, steepness=s)
    for i in range(4):
        vi, Pi = ref.forward(net, x[i], Relaxation(dist, float(s[i]), r.art_lambda, r.art_epsilon))
        torch.testing.assert_close(P[i], Pi, atol=1e-13, rtol=0)
    xs, ss = x[:2].clone().requires_grad_(), s[:2].clone().requires_grad_()
    f = lambda a, b: ref.forward(net, a, r, steepness=b)[1]  # noqa: E731
    assert torch.autograd.gradcheck(f, (xs, ss))
    assert torch.autograd.gradgradcheck(f, (xs, ss))


def test_steepness_taken_as_given_and_unchecked_rows():
    net = build("oddeven", 4, 4)
    x = rand_distinct(2, 4, seed=9)
    _, P = ref.forward(net, x, Relaxation(), steepness=0.0)
    assert torch.equal(P, torch.full_like(P, 0.25))  # every comparator 1/2: P uniform
    with pytest.raises(ValueError, match="broadcast"):
        ref.forward(net, x, Relaxation(), steepness=torch.ones(3, 1))
    x[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        ref.forward(net, x, Relaxation())
    _, P = ref.forward(net, x, Relaxation(), check=False)
    assert P[1].isnan().all() and not P[0].isnan().any()


def test_torch_func_through_the_reference():
    net = build("splitter", 8, 2)
    r = Relaxation("cauchy", 4.0)
    x = rand_distinct(3, 8, seed=10)

    def f(t):
        return ref.forward(net, t, r, check=False)[1].square().sum()

    xx = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(f(xx), xx)
    torch.testing.assert_close(torch.func.grad(f)(x), want)
    rows = torch.func.vmap(lambda t: ref.forward(net, t, r, check=False)[1])(x)
    torch.testing.assert_close(rows, ref.forward(net, x, r)[1])
    jac = torch.func.jacrev(lambda t: ref.forward(net, t, r, steepness=torch.tensor(4.0, dtype=t.dtype),
                                                  check=False)[0])(x[0])
    assert jac.shape == (2, 8) and jac.abs().sum() > 0
