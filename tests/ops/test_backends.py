"""Every registered target backend's lane sweeps (values = P x, back = W P,
fwd = P V) against the reference executor's (the definition): float64 to
1e-12, float32 to 1e-6 relative, gradcheck for x, the steepness, W and V,
odd n, k = 1, k = n, B = 1, empty batches, one W / V for every row and one
per row; and the registration itself (every Target with ``lanes=True``,
``target="auto"`` by preference). A target joins these tests by setting
``lanes=True`` on its Target (docs/operators.md, section 3)."""

import pytest
import torch

import netgen.ops as ops
from netgen.codegen import TARGETS
from netgen.construct import build
from netgen.ops import backends
from netgen.relax import reference as ref
from netgen.relax.distributions import Relaxation

torch.set_num_threads(1)

#: the generated targets registered here (numba / cuda join when they set lanes=True and run on a CPU)
NAMES = [name for name in backends.BACKENDS if name != "reference" and backends.BACKENDS[name][0](torch.device("cpu"))]
NETS = [("splitter", 11, 3), ("oddeven", 7, 7), ("bitonic", 9, 1), ("oddeven", 5, 5)]


def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def lanes(name, net, r):
    return backends.BACKENDS[name][1](net, r)


def test_every_target_with_lanes_is_registered_and_auto_follows_preference():
    with_lanes = {t.name for t in TARGETS.values() if t.lanes}
    assert "torch" in with_lanes
    assert with_lanes <= set(backends.BACKENDS)
    assert {name for name in backends.BACKENDS if name in TARGETS} == with_lanes
    prefs = [TARGETS[name].preference for name in backends.AUTO_ORDER if name in TARGETS]
    assert prefs == sorted(prefs, reverse=True) and backends.AUTO_ORDER[-1] == "reference"
    cpu = torch.device("cpu")
    usable = [name for name in backends.AUTO_ORDER if name in backends.BACKENDS and backends.BACKENDS[name][0](cpu)]
    assert backends.backend_name("auto", cpu) == usable[0] != "reference"
    for t in TARGETS.values():
        if not t.lanes:
            with pytest.raises(ValueError, match="has no lane kernels yet"):
                backends.backend_name(t.name, cpu)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("kind,n,k", NETS)
def test_sweeps_equal_the_reference(name, kind, n, k):
    net = build(kind, n, k)
    r = Relaxation("cauchy", steepness=3.0)
    be = lanes(name, net, r)
    for B in (0, 1, 4):
        x = rand(B, n)
        for s in (3.0, 1.5, torch.tensor(2.0, dtype=torch.float64)):
            torch.testing.assert_close(be.values(x, s), ref.soft_values(net, x, r, s), atol=1e-12, rtol=0)
            for W in (rand(3, k, seed=1), rand(B, 2, k, seed=2)):
                got = be.back(x, s, W)
                assert got.shape == (B, W.shape[-2], n)
                torch.testing.assert_close(got, ref.back(net, x, W, r, s), atol=1e-12, rtol=0)
            for V in (rand(n, 2, seed=3), rand(B, n, 3, seed=4)):
                got = be.fwd(x, s, V)
                assert got.shape == (B, k, V.shape[-1])
                torch.testing.assert_close(got, ref.fwd(net, x, V, r, s), atol=1e-12, rtol=0)
    x32, W32, V32 = rand(5, n, dtype=torch.float32), rand(2, k, dtype=torch.float32), rand(n, 2, dtype=torch.float32)
    for got, want in ((be.values(x32, 3.0), ref.soft_values(net, x32.double(), r, 3.0)),
                      (be.back(x32, 3.0, W32), ref.back(net, x32.double(), W32.double(), r, 3.0)),
                      (be.fwd(x32, 3.0, V32), ref.fwd(net, x32.double(), V32.double(), r, 3.0))):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dist", ["cauchy", "logistic_phi", "optimal"])
def test_gradcheck_x_s_W_V(name, dist):
    net = build("splitter", 9, 3)
    be = lanes(name, net, Relaxation(dist, steepness=2.0))
    x = rand(2, 9, seed=4).requires_grad_()
    s = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    W = rand(2, 2, 3, seed=5).requires_grad_()
    V = rand(9, 2, seed=6).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, s, W: be.back(x, s, W), (x, s, W))
    assert torch.autograd.gradcheck(lambda x, s, V: be.fwd(x, s, V), (x, s, V))
    assert torch.autograd.gradcheck(lambda x, s: be.values(x, s), (x, s))
    # and against the reference's gradients, to 1e-10
    Wg = rand(2, 3, seed=7)
    for f, g in ((lambda x, s: be.back(x, s, Wg), lambda x, s: ref.back(net, x, Wg, be.relaxation, s)),
                 (lambda x, s: be.fwd(x, s, x.detach().unsqueeze(-1)),
                  lambda x, s: ref.fwd(net, x, x.detach().unsqueeze(-1), be.relaxation, s))):
        out = f(x, s)
        w = rand(*out.shape, seed=8)
        got = torch.autograd.grad((out * w).sum(), (x, s))
        want = torch.autograd.grad((g(x, s) * w).sum(), (x, s))
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, atol=1e-10, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_empty_batch_gradients_and_bad_input(name):
    net = build("oddeven", 7, 7)
    be = lanes(name, net, Relaxation())
    x = torch.zeros(0, 7, dtype=torch.float64, requires_grad=True)
    be.back(x, 2.0, torch.ones(1, 7, dtype=torch.float64)).sum().backward()
    assert x.grad.shape == (0, 7)
    bad = rand(2, 7)
    bad[1, 3] = float("nan")
    for call in (lambda: be.values(bad, 2.0), lambda: be.back(bad, 2.0, torch.ones(1, 7, dtype=torch.float64)),
                 lambda: be.fwd(bad, 2.0, torch.ones(7, 1, dtype=torch.float64))):
        with pytest.raises(ValueError, match="NaN"):
            call()
    with pytest.raises(ValueError, match="W must have shape"):
        be.back(rand(2, 7), 2.0, torch.ones(1, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="do not broadcast"):
        be.back(rand(2, 7), 2.0, torch.ones(5, 1, 7, dtype=torch.float64))
    with pytest.raises(ValueError, match="V must have shape"):
        be.fwd(rand(2, 7), 2.0, torch.ones(4, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="NaN or inf"):
        be.back(rand(2, 7), 2.0, torch.full((1, 7), float("nan"), dtype=torch.float64))


@pytest.mark.parametrize("name", NAMES)
def test_operators_run_on_the_target(name):
    x = rand(3, 2, 10)
    for f in (lambda t: ops.soft_rank(x, dim=1, target=t), lambda t: ops.soft_sort(x, target=t).values,
              lambda t: ops.topk_mask(x, 3, target=t), lambda t: ops.soft_topk(x, 3, return_P=True, target=t).P):
        torch.testing.assert_close(f(name), f("reference"), atol=1e-12, rtol=0)


@pytest.mark.parametrize("target", ["torch", "numba"])
def test_a_call_steepness_reaches_every_layer_method(target):
    """LayerBase.forward/values/column take this call's steepness (the
    operators' backends hand theirs over); AutoLayer passes it on."""
    from netgen.codegen.auto import AutoLayer, build_layer

    if target == "numba":
        pytest.importorskip("numba")
    net = build("oddeven", 5, 5)
    r = Relaxation("cauchy", steepness=4.0)
    x = rand(3, 5)
    want_v, want_P = ref.forward(net, x, r, steepness=2.5)
    for layer in (build_layer(net, r, target), AutoLayer(net, r, target=target)):
        torch.testing.assert_close(layer.values(x, steepness=2.5), want_v, atol=1e-12, rtol=0)
        _, P = layer(x, steepness=2.5)
        torch.testing.assert_close(P, want_P, atol=1e-12, rtol=0)
        y = torch.tensor([0, 4, 2])
        torch.testing.assert_close(layer.column(x, y, steepness=2.5), want_P[torch.arange(3), :, y], atol=1e-12,
                                   rtol=0)
        torch.testing.assert_close(layer.values(x), ref.soft_values(net, x, r), atol=1e-12, rtol=0)  # its own again
        if target == "torch":
            W = rand(2, 5, seed=9)
            torch.testing.assert_close(layer.back(x, W, steepness=2.5), W @ want_P, atol=1e-12, rtol=0)
            torch.testing.assert_close(layer.fwd(x, x.unsqueeze(-1), steepness=2.5)[..., 0], want_v, atol=1e-12,
                                       rtol=0)


def test_torch_lanes_mark_bad_rows_nan_without_a_check():
    """Where a check would synchronise (a GPU, torch.compile) the torch
    target runs bad rows on zeros and marks them NaN (results and
    gradients); the other rows are exact. Driven here on the CPU through
    the generated module's sweeps with a bad-row mask."""
    import sys

    from netgen.codegen.auto import build_layer

    net = build("splitter", 9, 3)
    r = Relaxation("cauchy", steepness=2.0)
    layer = build_layer(net, r, "torch")
    mod = sys.modules[type(layer).__module__]
    x = rand(3, 9)
    x[1, 4] = float("inf")
    bad = torch.tensor([False, True, False])
    xt = x.t().contiguous().requires_grad_()
    W = rand(2, 3, seed=3)
    Wt = W.t().unsqueeze(-1).expand(3, 2, 3)
    s = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    out = mod._back_lanes(xt, s, bad, layer.a, layer.b, layer.outs, Wt)  # (n, m, B)
    assert bool(out[..., 1].isnan().all())
    good = x[[0, 2]]
    torch.testing.assert_close(out[..., [0, 2]].permute(2, 1, 0), ref.back(net, good, W, r, 2.0), atol=1e-12, rtol=0)
    out[..., [0, 2]].sum().backward()
    assert bool(xt.grad[:, 1].isnan().all()) and bool(torch.isfinite(xt.grad[:, [0, 2]]).all())
    assert bool(s.grad.isnan())  # dL/ds sums over the rows: NaN when one is bad
    v = mod._values_lanes(xt.detach(), 2.0, bad, layer.a, layer.b, layer.outs)
    assert bool(v[:, 1].isnan().all()) and bool(torch.isfinite(v[:, [0, 2]]).all())


def test_a_first_call_imports_neither_dynamo_nor_sympy(tmp_path):
    """The first operator call of a process stays light: the backends build
    layers without netgen.codegen.auto (whose AutoLayer imports
    torch._dynamo, 0.74 s CPU) and the torch lanes check shapes without
    torch.broadcast_shapes (which imports sympy, 0.7 s)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, torch, netgen; x = torch.randn(3, 12); netgen.soft_rank(x, target='torch'); "
            "netgen.topk_mask(x, 2, target='torch'); print(sorted(m for m in ('torch._dynamo', 'sympy') "
            "if m in sys.modules))")
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), NETGEN_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"
