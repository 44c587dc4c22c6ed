"""issue 34 item 2: a steepness of any shape that broadcasts over the batch
(a number, 0-d, ``(1,)``, ``nn.Parameter(torch.ones(1) * 10)``, one value
per row ``(B, 1)``), learnable, in the compat modules (against the
published packages) and the native layers (``(1,)``); dL/ds against finite
differences; s <= 0 and NaN computed as published does, with a warning, not
a crash mid-run (native layers keep their ValueError)."""

import math
import warnings

import pytest
import torch

import netgen.compat as C
import netgen.compat.run as run
from netgen.codegen.auto import AutoLayer, build_layer
from netgen.construct import build
from netgen.relax.distributions import Relaxation

from _published_oracle import run_topk, sort_net, topk_net

torch.set_num_threads(1)
TARGETS = ["numba", "torch"]
B = 4


def shapes():
    """(name, steepness factory) for every shape that broadcasts over a (B, n) batch."""
    return [
        ("float", lambda: 6.0),
        ("0-d", lambda: torch.tensor(6.0, dtype=torch.float64)),
        ("(1,)", lambda: torch.ones(1, dtype=torch.float64) * 6),
        ("Parameter (1,)", lambda: torch.nn.Parameter(torch.ones(1, dtype=torch.float64) * 6)),
        ("(1, 1)", lambda: torch.full((1, 1), 6.0, dtype=torch.float64)),
        ("(B, 1)", lambda: torch.tensor([[6.0], [2.0], [11.0], [0.5]], dtype=torch.float64)),
        ("Parameter (B, 1)", lambda: torch.nn.Parameter(torch.tensor([[6.0], [2.0], [11.0], [0.5]],
                                                                     dtype=torch.float64))),
    ]


def x_for(n, seed=0):
    return torch.randn(B, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name,make", shapes(), ids=[s[0] for s in shapes()])
def test_every_shape_equals_the_published_packages(target, name, make):
    x = x_for(10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the one-time note that a per-row steepness runs on the reference
        v, X = C.DiffTopkNet("odd_even", 10, 3, steepness=make(), target=target)(x)
        sv, sX = C.DiffSortNet("bitonic", 10, steepness=make(), target=target)(x)
    _, tX = run_topk(topk_net("odd_even", 10, 3, make()), x)
    tv, tsX = sort_net("bitonic", 10, make())(x)
    assert (X - tX).abs().max().item() < 1e-10 and (sX - tsX).abs().max().item() < 1e-10
    assert (sv - tv).abs().max().item() < 1e-10
    assert v.shape == (B, 3)


def _fd(f, s, h=1e-6):
    """Central finite differences of the scalar f at every entry of tensor s."""
    g = torch.zeros_like(s)
    flat = g.view(-1)
    for i in range(s.numel()):
        e = torch.zeros_like(s).view(-1)
        e[i] = h
        e = e.view(s.shape)
        flat[i] = (f(s + e) - f(s - e)) / (2 * h)
    return g


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(), (1,), (B, 1)], ids=["0-d", "(1,)", "(B, 1)"])
def test_learnable_steepness_gradient_equals_finite_differences(target, shape):
    n, k = 9, 4
    x = x_for(n, 3)
    w = torch.randn(B, n, k, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    base = torch.tensor([3.0, 1.5, 6.0, 0.7], dtype=torch.float64)[: (B if shape == (B, 1) else 1)]
    s0 = base.reshape(shape) if shape else base.reshape(())
    m = C.DiffTopkNet("odd_even", n, k, steepness=torch.nn.Parameter(s0.clone()), distribution="logistic",
                      target=target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (m(x)[1] * w).sum().backward()
    assert m.steepness.grad.shape == s0.shape

    def f(s):
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (C.DiffTopkNet("odd_even", n, k, steepness=s, distribution="logistic", target="torch")(x)[1]
                    * w).sum()

    fd = _fd(f, s0)
    torch.testing.assert_close(m.steepness.grad, fd, atol=1e-6, rtol=1e-6)
    assert fd.abs().min() > 1e-4  # the check can fail


@pytest.mark.parametrize("target", TARGETS)
def test_native_layers_take_a_1_element_steepness(target):
    """AutoLayer and the generated layer: (1,) and nn.Parameter(torch.ones(1) * s), with dL/ds."""
    net, r = build("splitter", 9, 3), Relaxation("cauchy", 10.0)
    x = x_for(9, 5)
    w = torch.randn(B, 3, 9, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    want = AutoLayer(net, Relaxation("cauchy", 4.0), target)(x)[1]
    for holder in (AutoLayer(net, r, target), build_layer(net, r, target)):
        holder.steepness = torch.nn.Parameter(torch.ones(1, dtype=torch.float64) * 4)
        P = holder(x)[1]
        torch.testing.assert_close(P, want, atol=1e-12, rtol=0)
        (P * w).sum().backward()
        g = holder.steepness.grad
        assert g.shape == (1,)

        def f(s):
            with torch.no_grad():
                return (AutoLayer(net, Relaxation("cauchy", float(s)), "torch")(x)[1] * w).sum()

        torch.testing.assert_close(g, _fd(f, torch.ones(1, dtype=torch.float64) * 4), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_non_positive_and_nan_steepness_computed_as_published(target):
    x = x_for(8, 7)
    run._WARNED.discard("steepness")
    for s in (0.0, -2.0, torch.tensor(-0.5, dtype=torch.float64), math.nan):
        m = C.DiffTopkNet("bitonic", 8, 3, steepness=s, target=target)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _, X = m(x)
        _, tX = run_topk(topk_net("bitonic", 8, 3, s), x)
        if isinstance(s, float) and math.isnan(s):
            assert X.isnan().all() and tX.isnan().all()
        else:
            assert (X - tX).abs().max().item() < 1e-10, s
        assert len([w for w in caught if "not finite and > 0" in str(w.message)]) <= 1
    assert "steepness" in run._WARNED  # warned (once)
    # s = 0: every comparator 1/2
    _, X = C.DiffSortNet("odd_even", 2, steepness=0.0, target=target)(torch.tensor([[1.0, 5.0]]))
    assert torch.equal(X, torch.full((1, 2, 2), 0.5))


def _train_steepness(m, x):
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(6):
            opt.zero_grad()
            loss = m(x)[1][..., -1].square().sum()  # pushes s down: a softer top-1 spreads the weight
            loss.backward()
            opt.step()
            seen.append((float(m.steepness), float(loss)))
    return seen


@pytest.mark.parametrize("target", TARGETS)
def test_learnable_steepness_pushed_through_zero_keeps_training(target):
    """An optimizer that drives a learnable steepness through 0 does not stop
    the run: the same steepness and loss sequence as the published package."""
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(0))
    ours = _train_steepness(C.DiffTopkNet("odd_even", 6, 2, steepness=torch.nn.Parameter(torch.ones(1) * 0.3),
                                          target=target), x)
    theirs = topk_net("odd_even", 6, 2, torch.nn.Parameter(torch.ones(1) * 0.3))
    theirs.sorting_network = [[t.float() for t in layer] for layer in theirs.sorting_network]
    theirs = _train_steepness(theirs, x)
    assert ours[0][0] > 0 > ours[-1][0], ours  # it crossed 0 and the run went on
    for (s, l), (ts, tl) in zip(ours, theirs):
        assert abs(s - ts) < 1e-5 and abs(l - tl) < 1e-5 and math.isfinite(l), (ours, theirs)


def test_native_layer_keeps_its_documented_check():
    layer = AutoLayer(build("splitter", 6, 2), Relaxation(), "torch")
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="steepness"):
            layer.steepness = bad
            layer(torch.randn(2, 6))


def test_steepness_that_does_not_broadcast_is_refused():
    m = C.DiffTopkNet("bitonic", 8, 3, target="torch")
    x = x_for(8)
    for bad in (torch.ones(B + 1, 1), torch.ones(2, B, 1), torch.ones(B)):
        m.steepness = bad
        with pytest.raises(ValueError, match="steepness"):
            m(x)
