"""issue 34 item 5: double backward and torch.func through the compat
modules. A gradient taken with create_graph=True is the reference
executor's (differentiable again; gradgradcheck passes; one warning), first
order stays on the generated layer; torch.func transforms run the call on
the reference. Gradient penalties equal the published packages' (plain
autograd). Native layers keep refusing loudly (tests/codegen)."""

import warnings

import pytest
import torch

import netgen.compat as C
import netgen.compat.run as run

from _published_oracle import run_topk, topk_net

torch.set_num_threads(1)
TARGETS = ["numba", "torch"]


def x_for(n, B=3, seed=0):
    return torch.randn(B, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("target", TARGETS)
def test_gradgradcheck(target):
    m = C.DiffTopkNet("odd_even", 6, 3, steepness=4.0, distribution="logistic", target=target)
    s = C.DiffSortNet("bitonic", 4, steepness=3.0, target=target)

    def f(x, st):
        m.steepness = st
        v, X = m(x)
        return v, X

    x = x_for(6).requires_grad_()
    st = torch.tensor(4.0, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.autograd.gradcheck(f, (x, st))
        assert torch.autograd.gradgradcheck(f, (x, st))
        assert torch.autograd.gradgradcheck(lambda t: s(t)[1], (x_for(4).requires_grad_(),))


@pytest.mark.parametrize("target", TARGETS)
def test_gradient_penalty_equals_the_published_one(target):
    x = x_for(10, 4, 1)
    w = torch.randn(4, 10, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)

    def penalty(module, runner):
        xx = x.clone().requires_grad_()
        X = runner(module, xx)[1]
        (g,) = torch.autograd.grad((X * w).sum(), xx, create_graph=True)
        pen = g.square().sum()
        pen.backward()
        return pen.detach(), xx.grad

    run._WARNED.discard("second")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = penalty(C.DiffTopkNet("odd_even", 10, 3, steepness=5.0, target=target), lambda m, t: m(t))
        penalty(C.DiffTopkNet("odd_even", 10, 3, steepness=5.0, target=target), lambda m, t: m(t))
    theirs = penalty(topk_net("odd_even", 10, 3, 5.0), run_topk)
    torch.testing.assert_close(ours[0], theirs[0], atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(ours[1], theirs[1], atol=1e-10, rtol=1e-10)
    assert len([c for c in caught if "create_graph" in str(c.message)]) == 1  # warned once


@pytest.mark.parametrize("target", TARGETS)
def test_first_order_stays_on_the_generated_layer(target):
    """A plain backward never touches the reference (and does not warn)."""
    m = C.DiffSortNet("odd_even", 7, target=target)
    x = x_for(7).requires_grad_()
    calls = []
    saved = run.reference.forward
    run.reference.forward = lambda *a, **k: calls.append(1) or saved(*a, **k)
    try:
        m(x)[1].square().sum().backward()
    finally:
        run.reference.forward = saved
    assert not calls and x.grad is not None


@pytest.mark.parametrize("target", TARGETS)
def test_loss_double_backward(target):
    loss = C.TopKCrossEntropyLoss("odd_even", 5.0, [0.6, 0.4], 8)
    loss.top_k_net._target = target
    loss.top_k_net._build(loss.top_k_net.network)
    x = x_for(8, 4, 3).requires_grad_()
    y = torch.tensor([1, 7, 0, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.autograd.gradgradcheck(lambda t: loss(t, y), (x,))


@pytest.mark.parametrize("target", TARGETS)
def test_torch_func_runs_on_the_reference(target):
    x = x_for(8, 3, 4)
    ours = C.DiffTopkNet("bitonic", 8, 2, steepness=6.0, target=target)
    theirs = topk_net("bitonic", 8, 2, 6.0)

    def f(module, runner):
        return lambda t: runner(module, t)[1].square().sum()

    mine = lambda m, t: m(t)  # noqa: E731
    torch.testing.assert_close(torch.func.grad(f(ours, mine))(x), torch.func.grad(f(theirs, run_topk))(x))
    torch.testing.assert_close(torch.func.jacrev(lambda t: ours(t)[1])(x),
                               torch.func.jacrev(lambda t: run_topk(theirs, t)[1])(x))
    # vmap over single rows (the published modules take 2-D input only: rows as (1, n))
    got = torch.func.vmap(lambda r: ours(r.unsqueeze(0))[1].squeeze(0))(x)
    torch.testing.assert_close(got, run_topk(theirs, x)[1])
