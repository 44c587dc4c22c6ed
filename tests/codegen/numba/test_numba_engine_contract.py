"""The numba rows layer's contract (issues 19, 20) on engine modules:
refusals (second order, torch.func, overflow), inputs never written,
threads (the option, concurrent Python threads) and network
strings in the source. Modules come from the ``make_engine`` fixture
(tests/codegen/conftest.py: serial kernels)."""

from __future__ import annotations

import threading

import pytest
import torch

from netgen.codegen import TARGETS
from netgen.construct import build
from netgen.network import Network
from netgen.relax import reference
from netgen.relax.distributions import Relaxation

TOL = 1e-12


def test_second_order_and_torch_func_are_refused(make_engine):
    net = build("splitter", 12, 4)
    r = Relaxation("logistic", steepness=4.0)
    layer = make_engine(net, r, mode="recompute", group=2).Layer()
    x = torch.randn(3, 12, generator=torch.Generator().manual_seed(6), dtype=torch.float64, requires_grad=True)
    v, P = layer(x)
    (g,) = torch.autograd.grad((P * P).sum() + v.sum(), x, create_graph=True)  # first order: fine
    g0 = torch.autograd.grad(*(lambda vp: ((vp[1] * vp[1]).sum() + vp[0].sum(), x))(reference.forward(net, x, r)))[0]
    torch.testing.assert_close(g.detach(), g0, atol=1e-11, rtol=0)
    with pytest.raises(RuntimeError, match="second-order.*netgen.relax.reference"):
        g.pow(2).sum().backward()
    c = layer.column(x, torch.tensor([1, 2, 3]))
    (gc,) = torch.autograd.grad(c.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="second-order"):
        gc.sum().backward()
    with pytest.raises(RuntimeError, match="second-order"):
        torch.autograd.gradgradcheck(lambda t: layer(t)[1], (x,))
    with pytest.raises(ValueError, match="torch.func"):
        torch.func.vmap(lambda t: layer(t)[0])(x.detach())
    with pytest.raises(ValueError, match="torch.func"):
        torch.func.grad(lambda t: layer(t)[0].sum())(x.detach()[0])


def test_overflow_is_named(make_engine):
    net = build("splitter", 12, 4)
    layer = make_engine(net, Relaxation("logistic", steepness=4.0)).Layer()
    x = torch.zeros(2, 12)
    x[0, 0], x[0, 1] = 3e38, -3e38
    with pytest.raises(ValueError, match=r"overflows torch.float32.*4\.0"):
        layer(x)
    with pytest.raises(ValueError, match="overflows"):
        layer.column(x, torch.tensor([0, 1]))
    layer.steepness = 1e300
    with pytest.raises(ValueError, match="1e\\+300"):
        layer(torch.randn(2, 12))
    layer.steepness = 1e300
    layer(torch.randn(2, 12, dtype=torch.float64) * 1e-9)  # 1e300 * ~4e-9: fine in float64
    with pytest.raises(ValueError, match="overflows torch.float64"):
        layer(torch.randn(2, 12, dtype=torch.float64) * 1e10)


@pytest.mark.parametrize("shape", ["B1", "unbatched", "transposed", "expanded", "strided"])
def test_inputs_are_never_written(make_engine, shape):
    net = build("splitter", 12, 4)
    mod = make_engine(net, Relaxation("logistic", steepness=4.0), mode="recompute", group=2)
    layer = mod.Layer()
    gen = torch.Generator().manual_seed(7)
    base = torch.randn(12, 5, generator=gen, dtype=torch.float64)
    x = {
        "B1": base[:, 0].reshape(1, 12).clone(),
        "unbatched": base[:, 1].clone(),
        "transposed": base.t(),
        "expanded": base[:, 2].expand(3, 12),
        "strided": torch.randn(4, 24, generator=gen, dtype=torch.float64)[:, ::2],
    }[shape]
    before = x.clone()
    y = torch.zeros(x.shape[:-1], dtype=torch.long)
    for _ in range(2):
        xr = x.detach().requires_grad_(True)
        v, P = layer(xr)
        c = layer.column(xr, y)
        (P.sum() + v.sum() + c.sum()).backward()
        hv, hi = layer.hard(x)
        assert torch.equal(x, before)
    assert torch.equal(hi, reference.hard(net, before)[1])
    x32 = x.float()
    before32 = x32.clone()
    layer(x32)
    layer.hard(x32)
    assert torch.equal(x32, before32)


# ------------------------------------------------------------------ threads
def test_threads_option_and_concurrent_python_threads(make_engine):
    net = build("oddeven", 12, 12)
    r = Relaxation("logistic", steepness=4.0)
    mod = make_engine(net, r, mode="recompute", group=5)
    with pytest.raises(ValueError, match="threads"):
        mod.Layer(threads=0)
    layer = mod.Layer(threads=1)
    gen = torch.Generator().manual_seed(8)
    xs = [torch.randn(37, 12, generator=gen, dtype=torch.float64) for _ in range(4)]
    want = [reference.forward(net, x, r)[1] for x in xs]
    errors = []

    def work(i):
        try:
            for _ in range(5):
                x = xs[i].clone().requires_grad_(True)
                P = layer(x)[1]
                P.sum().backward()
                torch.testing.assert_close(P, want[i], atol=TOL, rtol=0)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


# numba's workqueue threading layer: tests/test_workqueue.py (with the lock, and
# with it switched off as the control that shows the test can fail)


# -------------------------------------------------------------- the source
def test_network_strings_never_reach_the_source_unescaped():
    net = build("splitter", 8, 2)
    evil = 'x"""; __import__("os").system("false"); """ \\x @@KERNELS@@ \\N{ \0 \n'
    net = Network.from_layers(net.n, [list(map(tuple, net.layer(l))) for l in range(net.depth)],
                              outputs=list(net.outputs), construction={"kind": evil, "note": "@@DOC@@"})
    src = TARGETS["numba"].emit(net, Relaxation("logistic", 4.0))
    compile(src, "<numba module>", "exec")
    assert src.count("def _fwd_P_py(") == 1 and src.count("def _bwd_rows_py(") == 1
    assert src.count("def _swap_f32(") == 1 and src.count("def _swap_f64(") == 1
    ns: dict = {}
    exec(compile(src.split("\n@numba.njit", 1)[0], "<gen>", "exec"), ns)
    assert evil in ns["__doc__"]
    assert ns["NETWORK"]["construction"]["kind"] == evil
