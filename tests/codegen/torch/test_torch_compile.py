"""The torch target under torch.compile (fullgraph: no graph break, forward
and backward) and its sync-free rule for bad rows: where a value check would
synchronise the host (a GPU, torch.compile), a row with a NaN/inf input or a
y out of range comes out NaN, in exactly that row."""

import math

import pytest
import torch

from netgen.codegen import emit, module_name
from netgen.codegen.cache import import_source as load_source
from netgen.construct import build
from netgen.relax.distributions import Relaxation

torch.set_num_threads(1)


def torch_layer(n, k, dist="cauchy"):
    net, r = build("splitter", n, k), Relaxation(dist, 10.0)
    return load_source(emit("torch", net, r), module_name(net, r, "torch"))


def step(layer, W, w, y):
    """values, P, column and d(loss)/dx of one fwd+bwd step."""

    def f(x):
        v, P = layer(x)
        col = layer.column(x, y)
        return v, P, col, (P * W).sum() + v.square().sum() + (col * w).sum()

    return f


def run(f, x):
    x = x.detach().clone().requires_grad_()
    v, P, col, loss = f(x)
    (g,) = torch.autograd.grad(loss, x)
    return [t.detach() for t in (v, P, col, g)]


def inputs(n, k, B=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, n, generator=g)
    W, w = torch.randn(B, k, n, generator=g), torch.randn(B, k, generator=g)
    y = torch.randint(0, n, (B,), generator=g)
    return x, W, w, y


def close(a, b, tol):
    scale = max(1.0, b.abs().max().item())
    return (a - b).abs().max().item() <= tol * scale


@pytest.mark.parametrize("backend,n,k", [("aot_eager", 16, 3),
                                         pytest.param("inductor", 8, 2, marks=pytest.mark.slow)])  # ~20 s: C++ compile
def test_fullgraph_equals_eager(backend, n, k):
    layer = torch_layer(n, k).Layer()
    x, W, w, y = inputs(n, k)
    f = step(layer, W, w, y)
    eager = run(f, x)
    torch._dynamo.reset()
    compiled = run(torch.compile(f, fullgraph=True, backend=backend), x)  # raises on a graph break
    for name, a, b in zip(("values", "P", "column", "grad"), compiled, eager):
        assert close(a, b, 1e-5), name


def check_bad_rows(outs, clean, bad):
    """Rows in ``bad`` are all NaN in every output; the others equal ``clean``."""
    for name, got, want in zip(("values", "P", "column", "grad"), outs, clean):
        rows_nan = torch.isnan(got.reshape(got.shape[0], -1))
        assert rows_nan[bad].all(), f"{name}: a bad row is not all NaN"
        ok = [i for i in range(got.shape[0]) if i not in bad]
        assert not rows_nan[ok].any(), f"{name}: NaN leaked into a good row"
        assert close(got[ok], want[ok], 1e-6), name


@pytest.fixture
def unchecked():
    """The generated module with its value checks off, as on a GPU."""
    mod = torch_layer(12, 3)
    saved = mod._checked
    mod._checked = lambda: False
    yield mod
    mod._checked = saved


@pytest.mark.parametrize("bad_value", [math.nan, math.inf, -math.inf])
def test_bad_rows_come_out_nan_where_checks_would_sync(unchecked, bad_value):
    layer = unchecked.Layer()
    x, W, w, y = inputs(12, 3)
    f = step(layer, W, w, y)
    clean = run(f, x)
    x[2, 5] = bad_value
    y = y.clone()
    y[4] = 12  # out of range: only the column (and its gradient share) of row 4 is NaN
    out = run(step(layer, W, w, y), x)
    check_bad_rows(out[:2], clean[:2], [2])
    check_bad_rows(out[2:3], clean[2:3], [2, 4])
    # the gradient of a loss over all outputs is NaN in rows 2 and 4
    check_bad_rows(out[3:], clean[3:], [2, 4])


def test_bad_rows_under_compile():
    layer = torch_layer(12, 3).Layer()  # checks on: eager CPU raises, compiled gives NaN rows
    x, W, w, y = inputs(12, 3)
    f = step(layer, W, w, y)
    clean = run(f, x)
    x[1, 0] = math.nan
    with pytest.raises(ValueError, match="NaN"):
        run(f, x)
    torch._dynamo.reset()
    out = run(torch.compile(f, fullgraph=True, backend="aot_eager"), x)
    check_bad_rows(out, clean, [1])


def test_learned_steepness_under_compile():
    """A steepness nn.Parameter: fullgraph compile gives the same loss and
    the same gradients for x and s as eager."""
    mod = torch_layer(12, 3)
    layer = mod.Layer(steepness=torch.nn.Parameter(torch.tensor(4.0)))
    x, W, w, y = inputs(12, 3)

    def f(t):
        v, P = layer(t)
        return (P * W).sum() + v.square().sum() + (layer.column(t, y) * w).sum()

    grads = []
    for fn in (f, torch.compile(f, fullgraph=True, backend="aot_eager")):
        torch._dynamo.reset()
        xx = x.clone().requires_grad_()
        layer.steepness.grad = None
        fn(xx).backward()
        grads.append((xx.grad, layer.steepness.grad.clone()))
    assert close(grads[1][0], grads[0][0], 1e-5) and close(grads[1][1], grads[0][1], 1e-5)
    assert grads[0][1].abs().item() > 0
