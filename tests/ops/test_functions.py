"""The operators (netgen.ops) against their definitions in terms of P
(docs/operators.md), with P formed by the reference executor in float64:
shapes, dims, dtypes, named tuples, gradients, odd n, k = 1, k = n, B = 1,
empty batches, and the errors."""

import pickle

import pytest
import torch

import netgen.ops as ops
from netgen.relax import reference as ref
from netgen.relax.distributions import default_relaxation

torch.set_num_threads(1)


def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def P_of(x, k, steepness=None, distribution=None, network="best"):
    """(net, values, P) of the operators' network on rows x (..., n), float64."""
    n = x.shape[-1]
    net = ops.network_for(n, k, network)
    r = default_relaxation(net, distribution)
    if steepness is not None:
        r = type(r)(r.distribution, steepness, r.art_lambda, r.art_epsilon)
    values, P = ref.forward(net, x, r)
    return net, values, P


@pytest.mark.parametrize("n", [1, 2, 7, 16])
@pytest.mark.parametrize("descending", [False, True])
def test_soft_rank_is_r_P(n, descending):
    x = rand(3, n)
    _, _, P = P_of(x, n)
    rank_of_row = torch.arange(n, dtype=x.dtype)  # output row r holds rank r (0 = the largest)
    r = rank_of_row + 1 if descending else n - rank_of_row
    want = (r.unsqueeze(-1) * P).sum(-2)
    got = ops.soft_rank(x, descending=descending)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    torch.testing.assert_close(got.sum(-1), torch.full((3,), n * (n + 1) / 2, dtype=x.dtype), atol=1e-9, rtol=0)
    assert float(got.min()) >= 1 - 1e-12 and float(got.max()) <= n + 1e-12
    # steep: the exact ranks (1-based, ascending like torchsort)
    hard = torch.argsort(torch.argsort(x, -1, descending=descending), -1) + 1
    torch.testing.assert_close(ops.soft_rank(x, descending=descending, steepness=1e6), hard.to(x.dtype),
                               atol=1e-3, rtol=0)


@pytest.mark.parametrize("n", [1, 5, 8])
@pytest.mark.parametrize("descending", [False, True])
def test_soft_sort_is_P_x(n, descending):
    x = rand(4, n, seed=1)
    _, values, _ = P_of(x, n)
    res = ops.soft_sort(x, descending=descending)
    assert isinstance(res, ops.SortResult) and res._fields == ("values", "indices")
    torch.testing.assert_close(res.values, values if descending else values.flip(-1), atol=1e-12, rtol=0)
    assert torch.equal(res.indices, torch.sort(x, descending=descending).indices)
    v, i = res  # unpacks like torch.sort
    assert v.shape == i.shape == x.shape and i.dtype == torch.int64


@pytest.mark.parametrize("n,k", [(9, 1), (9, 4), (9, 9), (16, 5)])
@pytest.mark.parametrize("largest", [True, False])
def test_soft_topk_and_mask_are_P_x_and_1_P(n, k, largest):
    x = rand(2, n, seed=2)
    _, values, P = P_of(x if largest else -x, k)
    res = ops.soft_topk(x, k, largest=largest, return_P=True)
    assert isinstance(res, ops.TopKWithP) and res._fields == ("values", "indices", "P")
    torch.testing.assert_close(res.values, values if largest else -values, atol=1e-12, rtol=0)
    torch.testing.assert_close(res.P, P, atol=1e-12, rtol=0)
    torch.testing.assert_close(res.P @ x.unsqueeze(-1), res.values.unsqueeze(-1), atol=1e-12, rtol=0)
    assert torch.equal(res.indices, torch.topk(x, k, largest=largest).indices)
    plain = ops.soft_topk(x, k, largest=largest)
    assert isinstance(plain, ops.TopKResult) and len(plain) == 2
    torch.testing.assert_close(plain.values, res.values, atol=0, rtol=0)
    mask = ops.topk_mask(x, k, largest=largest)
    torch.testing.assert_close(mask, P.sum(-2), atol=1e-12, rtol=0)
    torch.testing.assert_close(mask.sum(-1), torch.full((2,), float(k), dtype=x.dtype), atol=1e-12, rtol=0)
    assert float(mask.min()) >= -1e-12 and float(mask.max()) <= 1 + 1e-12


def test_dim_and_leading_dims():
    x = rand(2, 7, 3, 4, seed=3)  # sort along dim 1 (n = 7)
    rows = x.movedim(1, -1)
    torch.testing.assert_close(ops.soft_rank(x, dim=1), ops.soft_rank(rows).movedim(-1, 1), atol=0, rtol=0)
    torch.testing.assert_close(ops.soft_rank(x, dim=-3), ops.soft_rank(x, dim=1), atol=0, rtol=0)
    s = ops.soft_sort(x, dim=1)
    assert s.values.shape == x.shape and torch.equal(s.indices, torch.sort(x, dim=1).indices)
    t = ops.soft_topk(x, 3, dim=1, return_P=True)
    assert t.values.shape == (2, 3, 3, 4) and t.indices.shape == (2, 3, 3, 4)
    assert t.P.shape == (2, 3, 4, 3, 7)  # x's shape without dim, then (k, n)
    torch.testing.assert_close(t.values, ops.soft_topk(rows, 3).values.movedim(-1, 1), atol=0, rtol=0)
    m = ops.topk_mask(x, 3, dim=1)
    assert m.shape == x.shape
    torch.testing.assert_close(m.sum(1), torch.full((2, 3, 4), 3.0, dtype=x.dtype), atol=1e-12, rtol=0)
    assert ops.soft_rank(rand(7)).shape == (7,)  # 1-D input, B = 1


def test_empty_batches_and_one_row():
    for x in (torch.zeros(0, 6), torch.zeros(3, 0, 6)):
        x.requires_grad_()
        assert ops.soft_rank(x).shape == x.shape
        assert ops.soft_sort(x).values.shape == x.shape
        assert ops.soft_topk(x, 2, return_P=True).P.shape == x.shape[:-1] + (2, 6)
        ops.topk_mask(x, 2).sum().backward()
        assert x.grad.shape == x.shape
    one = rand(1, 6, seed=4)
    torch.testing.assert_close(ops.soft_rank(one)[0], ops.soft_rank(one[0]), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_dtypes_compute_in_float32_return_input_dtype(dtype):
    x = rand(3, 8, seed=5).to(dtype)
    x32 = x.float()
    for f in (lambda t: ops.soft_rank(t), lambda t: ops.soft_sort(t).values, lambda t: ops.soft_topk(t, 3).values,
              lambda t: ops.topk_mask(t, 3), lambda t: ops.soft_topk(t, 3, return_P=True).P):
        out = f(x)
        assert out.dtype == dtype
        torch.testing.assert_close(out, f(x32).to(dtype), atol=0, rtol=0)
    g = x.clone().requires_grad_()
    ops.soft_rank(g).sum().backward()
    assert g.grad.dtype == dtype


def test_gradcheck_every_operator():
    x = rand(2, 7, seed=6).requires_grad_()
    s = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    fns = [
        lambda x, s: ops.soft_rank(x, steepness=s),
        lambda x, s: ops.soft_rank(x, descending=True, steepness=s, distribution="logistic"),
        lambda x, s: ops.soft_sort(x, steepness=s).values,
        lambda x, s: ops.soft_topk(x, 3, steepness=s).values,
        lambda x, s: ops.soft_topk(x, 3, largest=False, return_P=True, steepness=s).P,
        lambda x, s: ops.topk_mask(x, 1, steepness=s),
        lambda x, s: ops.topk_mask(x, 2, dim=0, steepness=s),  # k = n along dim 0
    ]
    for f in fns:
        assert torch.autograd.gradcheck(f, (x, s))
    W = rand(2, 3, seed=7).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, W: ops.topk_weights(x, 3, W, steepness=4.0), (x, W))


def test_steepness_and_distribution_and_network_arguments():
    x = rand(2, 8, seed=8)
    _, _, P = P_of(x, 3, steepness=5.0, distribution="logistic", network="bitonic")
    got = ops.topk_mask(x, 3, steepness=5.0, distribution="logistic", network="bitonic")
    torch.testing.assert_close(got, P.sum(-2), atol=1e-12, rtol=0)
    assert not torch.allclose(got, ops.topk_mask(x, 3, steepness=5.0))  # another network / distribution
    # default steepness: the network's 2 * depth
    net = ops.network_for(8, 8)
    torch.testing.assert_close(ops.soft_rank(x), ops.soft_rank(x, steepness=2.0 * net.depth), atol=0, rtol=0)


def test_a_given_network_with_more_outputs_uses_its_first_k():
    x = rand(3, 9, seed=9)
    sorter = ops.network_for(9, 9)
    res = ops.soft_topk(x, 2, network=sorter, return_P=True)
    _, values, P = P_of(x, 9)
    torch.testing.assert_close(res.values, values[..., :2], atol=1e-12, rtol=0)
    torch.testing.assert_close(res.P, P[..., :2, :], atol=1e-12, rtol=0)
    torch.testing.assert_close(ops.topk_mask(x, 2, network=sorter), P[..., :2, :].sum(-2), atol=1e-12, rtol=0)


@pytest.mark.parametrize("call,match", [
    (lambda: ops.soft_rank([1.0, 2.0]), "expected a torch.Tensor"),
    (lambda: ops.soft_rank(torch.arange(4)), "floating point"),
    (lambda: ops.soft_rank(torch.tensor(1.0)), "at least one dimension"),
    (lambda: ops.soft_rank(torch.randn(3, 4), dim=2), "dim must be an integer in -2..1"),
    (lambda: ops.soft_rank(torch.randn(3, 0)), "has size 0"),
    (lambda: ops.soft_rank(torch.randn(3, 4), descending=1), "descending must be True or False"),
    (lambda: ops.soft_rank(torch.tensor([[1.0, float("nan")]])), "NaN"),
    (lambda: ops.soft_sort(torch.randn(3, 4), steepness=-1.0), "steepness must be finite and > 0"),
    (lambda: ops.soft_sort(torch.randn(3, 4), distribution="gumbel"), "unknown distribution"),
    (lambda: ops.soft_topk(torch.randn(3, 4), 5), r"k = 5 must lie in 1\.\.4"),
    (lambda: ops.soft_topk(torch.randn(3, 4), 0), r"k = 0 must lie in 1\.\.4"),
    (lambda: ops.soft_topk(torch.randn(3, 4), 2.0), "k must be an integer"),
    (lambda: ops.topk_mask(torch.randn(3, 4), 2, target="tpu"), "unknown target 'tpu'"),
    (lambda: ops.soft_rank(torch.randn(3, 6), network="nonesuch"), "neither 'best', a construction kind"),
    (lambda: ops.soft_rank(torch.randn(3, 6), network=ops.network_for(6, 2)), "needs a sorting network"),
    (lambda: ops.soft_rank(torch.randn(3, 6), network=ops.network_for(5, 5)), "has n = 5 wires"),
    (lambda: ops.topk_weights(torch.randn(3, 6), 2, torch.ones(1, 3)), r"W must be a tensor of shape \(m, k = 2\)"),
])
def test_bad_input_is_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_modules():
    x = rand(2, 6, seed=10)
    torch.testing.assert_close(ops.SoftRank(descending=True)(x), ops.soft_rank(x, descending=True), atol=0, rtol=0)
    torch.testing.assert_close(ops.SoftSort(dim=0)(x).values, ops.soft_sort(x, dim=0).values, atol=0, rtol=0)
    v, i = ops.SoftTopK(2, largest=False)(x)
    torch.testing.assert_close(v, ops.soft_topk(x, 2, largest=False).values, atol=0, rtol=0)
    torch.testing.assert_close(ops.TopKMask(3)(x), ops.topk_mask(x, 3), atol=0, rtol=0)
    # a learnable steepness is a parameter and gets a gradient
    m = ops.SoftRank(steepness=torch.nn.Parameter(torch.tensor(4.0, dtype=torch.float64)))
    assert [n for n, _ in m.named_parameters()] == ["steepness"]
    m(x).pow(2).sum().backward()
    assert m.steepness.grad is not None and float(m.steepness.grad) != 0.0
    assert list(ops.TopKMask(3).state_dict()) == []
    back = pickle.loads(pickle.dumps(ops.TopKMask(3, steepness=2.0)))
    torch.testing.assert_close(back(x), ops.topk_mask(x, 3, steepness=2.0), atol=0, rtol=0)
    assert "dim=-1" in repr(ops.TopKMask(3))
    with pytest.raises(ValueError, match="steepness must be finite and > 0"):
        ops.SoftRank(steepness=0.0)
    with pytest.raises(ValueError, match="unknown distribution"):
        ops.SoftSort(distribution="gumbel")
