"""issue 34 item 3: NaN or inf scores. The compat modules behave as the
published packages (no raise; a row holding one comes out NaN, and so does
its gradient; the other rows are unchanged); ``check_finite=True`` gives
netgen's ValueError; the native layers keep their documented check."""

import math

import pytest
import torch

import netgen.compat as C
from netgen.codegen.auto import AutoLayer
from netgen.construct import build
from netgen.relax.distributions import Relaxation

from _published_oracle import run_topk, sort_net, topk_net

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
TARGETS = ["numba", "torch"]
BAD = [math.nan, math.inf, -math.inf]


def scores(n, bad_value, seed=0):
    x = torch.randn(5, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    dirty = x.clone()
    dirty[1, 3] = bad_value
    dirty[3, 0] = bad_value
    return x, dirty, [1, 3]


def grads(f, x):
    x = x.clone().requires_grad_()
    outs = f(x)
    sum(o.sum() for o in outs if o is not None).backward()
    return [o.detach() for o in outs if o is not None], x.grad


def check_rows(got, clean, bad):
    good = [i for i in range(got.shape[0]) if i not in bad]
    assert got[bad].isnan().all(), "a bad row is not NaN"
    assert torch.allclose(got[good], clean[good], atol=1e-12, rtol=0), "a good row changed"


@pytest.mark.parametrize("bad_value", BAD, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("target", TARGETS)
def test_modules_return_nan_rows_like_the_published_packages(target, bad_value):
    x, dirty, bad = scores(10, bad_value)
    for ours, theirs in ((C.DiffTopkNet("odd_even", 10, 3, steepness=5.0, target=target),
                          lambda t: run_topk(topk_net("odd_even", 10, 3, 5.0), t)),
                         (C.DiffSortNet("bitonic", 10, steepness=5.0, target=target),
                          sort_net("bitonic", 10, 5.0))):
        (cv, cX), cg = grads(ours, x)[0], grads(ours, x)[1]
        (v, X), g = grads(ours, dirty)
        for got, clean in ((v, cv), (X, cX), (g, cg)):
            check_rows(got, clean, bad)
        _, tX = theirs(dirty)
        assert torch.equal(tX.isnan().flatten(1).all(1), X.isnan().flatten(1).all(1))  # the same rows NaN


@pytest.mark.parametrize("target", TARGETS)
def test_functional_and_loss(target):
    x, dirty, bad = scores(12, math.nan, 1)
    net = C.get_sorting_network("odd_even", 12, "cpu")
    _, X = C.topk(net, dirty, 3, 5.0)
    check_rows(X, C.topk(net, x, 3, 5.0)[1], bad)
    y = torch.tensor([0, 4, 2, 11, 7])
    loss = C.TopKCrossEntropyLoss("splitter_selection", 5.0, [0.5, 0.5], 12)
    loss.top_k_net._target = target
    loss.top_k_net._build(loss.top_k_net.network)
    assert torch.isnan(loss(dirty.float(), y)) and torch.isfinite(loss(x.float(), y))


@pytest.mark.parametrize("target", TARGETS)
def test_check_finite_gives_netgens_error(target):
    _, dirty, _ = scores(8, math.nan)
    for m in (C.DiffTopkNet("bitonic", 8, 2, target=target, check_finite=True),
              C.DiffSortNet("bitonic", 8, target=target, check_finite=True)):
        with pytest.raises(ValueError, match="NaN"):
            m(dirty)
    with pytest.raises(ValueError, match="NaN"):
        C.topk(C.get_sorting_network("bitonic", 8, "cpu"), dirty, 2, check_finite=True)
    # per-row steepness (the reference) checks too
    m = C.DiffTopkNet("bitonic", 8, 2, target=target, check_finite=True, steepness=torch.ones(5, 1))
    with pytest.raises(ValueError, match="NaN"):
        m(dirty)


@pytest.mark.parametrize("target", TARGETS)
def test_native_layers_keep_their_check(target):
    _, dirty, _ = scores(8, math.nan)
    with pytest.raises(ValueError, match="NaN"):
        AutoLayer(build("splitter", 8, 2), Relaxation(), target)(dirty)


@pytest.mark.parametrize("target", TARGETS)
def test_training_loop_that_skips_non_finite_losses(target):
    """The common pattern: a bad batch gives a NaN loss, the loop skips it
    and goes on (with netgen before: ValueError at the first bad batch)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 10), C.DiffTopkNet("odd_even", 10, 2, target=target))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    skipped = 0
    for step in range(4):
        f = torch.randn(6, 4)
        if step == 1:
            f[2, 0] = math.nan
        loss = model(f)[1][..., -1].square().mean()
        if not torch.isfinite(loss):
            skipped += 1
            continue
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert skipped == 1 and all(torch.isfinite(p).all() for p in model.parameters())


def test_nan_rows_under_compile_numba():
    m = C.DiffTopkNet("odd_even", 8, 2, target="numba")
    x, dirty, bad = scores(8, math.nan, 2)
    clean = m(x)[1]
    torch._dynamo.reset()
    got = torch.compile(m, backend="eager")(dirty)[1]
    check_rows(got, clean, bad)
