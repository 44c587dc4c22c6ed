"""issue 31 item 3: the operators' numba layers share one kernel module per
relaxation (netgen/codegen/numba/shared.py, netgen/codegen/operator_layers.py),
so a new (n, k) compiles nothing; importing or calling a numba layer does not import torch._dynamo
(torch.compiler.disable applied lazily, runtime.common.compiler_disable)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

from netgen.codegen import operator_layers as ol
from netgen.codegen.cache import build_layer, using_root
from netgen.codegen.numba import shared
from netgen.construct import build
from netgen.relax.distributions import Relaxation

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def serial(tmp_path):
    """Serial kernels (fast to compile, as the numba tests use) in an empty
    cache; the kernel modules made here are forgotten afterwards."""
    with mock.patch.dict(os.environ, {"NETGEN_NUMBA_PARALLEL": "0"}), using_root(tmp_path):
        saved = dict(ol._KERNELS)
        ol._KERNELS.clear()
        for name in [m for m in sys.modules if m.startswith("_netgen_numba_kernels_")]:
            del sys.modules[name]  # so that this cache gets its own file (the module keeps its users)
        try:
            yield tmp_path
        finally:
            ol._KERNELS.clear()
            ol._KERNELS.update(saved)


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _paths(layer, x, W, V, y):
    """Every path (values, back, fwd, P, column) and the gradients to x, W
    and a learnable steepness, and hard."""
    xs, Ws = x.clone().requires_grad_(), W.clone().requires_grad_()
    s = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    outs = (layer.values(xs, steepness=s), layer.back(xs, Ws, steepness=s), layer.fwd(xs, V, steepness=s),
            layer(xs, steepness=s)[1], layer.column(xs, y, steepness=s))
    sum((o * _rand(*o.shape, seed=3 + i)).sum() for i, o in enumerate(outs)).backward()
    return [o.detach() for o in outs] + [xs.grad, Ws.grad, s.grad, layer.hard(x)[1]]


def test_shared_layer_equals_the_generated_module(serial):
    """The shared layer gives the generated module's numbers on every path,
    and its tables are the module's tables; a second network on the same
    kernels agrees with the reference executor."""
    from netgen.relax import reference as ref

    r = Relaxation("cauchy", 3.0)
    net = build("splitter", 9, 3)
    ours, gen = ol.operator_layer(net, r, "numba"), build_layer(net, r, "numba")
    mod = sys.modules[type(gen).__module__]
    for name, value in shared.network_tables(net, mod._DIRECTION).items():
        want = getattr(mod, name)
        assert (np.array_equal(value, want) if isinstance(value, np.ndarray) else
                bool(torch.equal(value, want)) if isinstance(value, torch.Tensor) else value == want), name
    args = (_rand(5, 9), _rand(2, 3, seed=1), _rand(9, 3, seed=2), torch.arange(5) % 9)
    for a, b in zip(_paths(ours, *args), _paths(gen, *args)):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    sorter = build("oddeven", 7, 7)
    x, W = _rand(5, 7, seed=4), _rand(2, 7, seed=5)
    torch.testing.assert_close(ol.operator_layer(sorter, r, "numba").back(x, W, steepness=2.0),
                               ref.back(sorter, x, W, r, 2.0), atol=1e-12, rtol=0)


def test_a_new_network_compiles_no_kernel(serial):
    """A second network (a new (n, k)) in the same process runs on the
    kernels the first one compiled: numba compiles nothing (counted by
    numba's compile events) and the kernel module is the same object."""
    from numba.core import event

    from netgen import ops

    compiles = []

    class Count(event.Listener):
        def on_start(self, ev):
            compiles.append(ev.data["dispatcher"].py_func.__name__)

        def on_end(self, ev):
            pass

    def rank(n, seed):
        x = _rand(4, n, seed=seed).requires_grad_()
        ops.soft_rank(x, network="oddeven", target="numba").sum().backward()
        return x.grad

    from netgen.ops import backends

    backends._MADE.clear()  # layers other tests made (their kernels compiled) are not reused
    with event.install_listener("numba:compile", Count()):
        rank(11, 0)
        first = len(compiles)
        rank(13, 1)
        ops.topk_mask(_rand(3, 12, seed=2), 3, network="splitter", target="numba")
    assert first > 0  # the counter sees compiles
    assert compiles[first:] == [], compiles[first:]
    assert len({id(m) for m in ol._KERNELS.values()}) == 1


def test_the_kernel_module_is_found_in_the_cache_and_checked(serial):
    """A later process finds the kernel module by key without generating its
    source; a damaged file is not run: it is generated and written again."""
    r = Relaxation("cauchy", 4.0)
    mod = ol.kernel_module(r)
    path = Path(mod.__file__)
    assert path.is_file() and path.parent.name == "modules" and path.name.startswith("_netgen_numba_kernels_cauchy_")
    assert ol.kernel_module(Relaxation("cauchy", 9.0)) is mod  # the steepness is a run-time argument

    def new_process():
        ol._KERNELS.clear()
        sys.modules.pop(mod.__name__, None)

    new_process()
    with mock.patch.object(shared, "kernel_source", side_effect=AssertionError("generated again")):
        again = ol.kernel_module(r)
    assert again is not mod and again.__name__ == mod.__name__
    new_process()
    good = path.read_bytes()
    path.write_bytes(good.replace(b"_W = 16", b"_W = 15"))
    third = ol.kernel_module(r)  # the hash in its name does not match: rebuilt, not run
    assert path.read_bytes() == good and third._W == 16


def test_the_layer_code_is_found_in_the_cache_and_checked(serial):
    """The layer code's source (~80 ms to generate, most of a warm first
    call) is kept in the cache: a later process compiles it without
    generating it; a damaged file is not run: it is generated again."""
    ol.layer_code.cache_clear()  # an earlier test's, from another cache
    for name in [m for m in sys.modules if m.startswith("_netgen_numba_layer_code_")]:
        del sys.modules[name]
    code = ol.layer_code()
    holders = list(serial.rglob("_netgen_numba_layer_code_*.py"))
    assert len(holders) == 1
    path = holders[0]

    def new_process():
        ol.layer_code.cache_clear()
        sys.modules.pop(path.stem, None)

    try:
        new_process()
        with mock.patch.object(shared, "layer_source", side_effect=AssertionError("generated again")):
            again = ol.layer_code()
        assert again.co_consts == code.co_consts  # the same source compiled
        new_process()
        good = path.read_bytes()
        path.write_bytes(good.replace(b"def ", b"def _", 1))
        calls = []
        real = shared.layer_source
        with mock.patch.object(shared, "layer_source", side_effect=lambda: calls.append(1) or real()):
            ol.layer_code()  # the hash in its name does not match: generated again and rewritten
        assert calls and path.read_bytes() == good
    finally:
        new_process()


def _script(tmp_path, code):
    env = dict(os.environ, PYTHONPATH=str(ROOT), NETGEN_CACHE_DIR=str(tmp_path), NETGEN_NUMBA_PARALLEL="0")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def test_numba_layers_do_not_import_dynamo_and_still_break_once_under_compile(tmp_path):
    """Importing and calling a generated numba module and the operators'
    numba layer leave torch._dynamo unimported (0.7 CPU s); once dynamo is
    loaded, torch.compile still breaks the graph once around the layer
    (the disable mark) and gives eager's numbers."""
    code = """
import sys, torch, netgen
from netgen.codegen.cache import build_layer
from netgen.construct import build
from netgen.ops.backends import lanes_for
from netgen.relax.distributions import Relaxation
net, r = build("splitter", 9, 3), Relaxation("cauchy", 3.0)
x, W = torch.randn(4, 9), torch.ones(1, 3)
layers = (build_layer(net, r, "numba"), lanes_for(net, r, "numba", "cpu")._for(x))
for layer in layers:
    layer.back(x, W)
netgen.topk_mask(x, 2, target="numba")
before = "torch._dynamo" in sys.modules
import torch._dynamo
for layer in layers:
    for f in (lambda t: layer.values(torch.sin(t)) * 2, lambda t: layer.back(torch.sin(t), W) * 2):
        torch._dynamo.reset()
        reasons = [str(r.reason) for r in torch._dynamo.explain(f)(x).break_reasons]
        assert len(reasons) == 1 and "disable" in reasons[0], reasons
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(f, backend="eager")(x), f(x))
print(before)
"""
    assert _script(tmp_path, code) == "False"
