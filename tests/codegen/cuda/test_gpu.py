"""On a real GPU: the cuda target equals the reference (float64 1e-12,
float32 1e-5), values, P, values only, column and gradients, incl. n =
10450 with the float32 k x n back-sweep in shared memory (blocks of 1024
threads); dL/ds; the launch self-check passes; kernels run on torch's
current stream. Skipped without a CUDA device.

``NETGEN_GPU_MODULES`` names a folder of these tests' modules built
beforehand with their cubins (``python3 benchmarks/gpu_check.py --prepare``
on a CPU machine, :func:`prebuild`): a test loads its module from there
when the source there is what this tree emits, else builds it (ptxas: ~40
CPU seconds a module), so the GPU check runs these tests in its 4 minutes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from netgen.codegen import emit, module_name, write_module
from netgen.codegen.cache import load
from netgen.construct import build
from netgen.relax import reference
from netgen.relax.distributions import Relaxation, default_relaxation


def _has_gpu() -> bool:
    if not torch.cuda.is_available():
        return False
    from numba import cuda

    return cuda.is_available()


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU")]

FLOAT64_CASES = [("splitter", 16, 5), ("bitonic", 64, 64), ("oddeven", 100, 5)]


def modules():
    """(target, network, relaxation) of every module these tests build with
    cubins (what :func:`prebuild` writes)."""
    out = [("cuda", build(kind, n, k), Relaxation("logistic_phi", steepness=6.0)) for kind, n, k in FLOAT64_CASES]
    for n in (10450, 1000):
        net = build("splitter", n, 5)
        out.append(("cuda", net, default_relaxation(net)))
    for n in (64, 256):
        out.append(("cuda", build("splitter", n, 5), Relaxation("cauchy", 8.0)))
    return out


def prebuild(folder, log=print) -> list[Path]:
    """Build :func:`modules` into ``folder`` with their cubins (on any
    machine with ptxas; ``NETGEN_GPU_MODULES=folder`` then serves them)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    paths = []
    for target, net, r in modules():
        p = Path(folder) / f"{module_name(net, r, target)}.py"
        if not (p.exists() and p.read_text() == emit(target, net, r)):
            p = write_module(target, net, r, folder, required=True)
        log(f"prebuilt {p.name}")
        paths.append(p)
    return paths


def _module(target, net, r, tmp_path):
    """The module of (target, net, r): from ``NETGEN_GPU_MODULES`` where it
    is there with this tree's source, else built into ``tmp_path``."""
    folder = os.environ.get("NETGEN_GPU_MODULES")
    if folder:
        p = Path(folder) / f"{module_name(net, r, target)}.py"
        if p.exists() and p.read_text() == emit(target, net, r):
            return load(p)
    return load(write_module(target, net, r, tmp_path))


def _compare(mod, net, r, x, tol):
    layer = mod.Layer()
    x = x.detach().clone().requires_grad_(True)
    v, P = layer(x)
    xc = x.detach().cpu().double().requires_grad_(True)
    v0, P0 = reference.forward(net, xc, r)
    scale = lambda t: tol * max(1.0, float(t.abs().max()))  # noqa: E731
    torch.testing.assert_close(v.double().cpu(), v0, atol=scale(v0), rtol=0)
    torch.testing.assert_close(P.double().cpu(), P0, atol=scale(P0), rtol=0)
    gv, gP = torch.randn_like(v0), torch.randn_like(P0)
    (g,) = torch.autograd.grad((v * gv.to(v)).sum() + (P * gP.to(P)).sum(), x)
    (g0,) = torch.autograd.grad((v0 * gv).sum() + (P0 * gP).sum(), xc)
    torch.testing.assert_close(g.double().cpu(), g0, atol=scale(g0) * 10, rtol=0)
    vo = layer.values(x)
    torch.testing.assert_close(vo.double().cpu(), v0, atol=scale(v0), rtol=0)
    (g,) = torch.autograd.grad((vo * gv.to(vo)).sum(), x)
    (g0,) = torch.autograd.grad((v0 * gv).sum(), xc)
    torch.testing.assert_close(g.double().cpu(), g0, atol=scale(g0) * 10, rtol=0)
    y = torch.randint(0, net.n, x.shape[:-1], device=x.device)
    c = layer.column(x, y)
    c0 = reference.column(net, xc, y.cpu(), r)
    torch.testing.assert_close(c.double().cpu(), c0, atol=scale(c0), rtol=0)
    gc = torch.randn_like(c0)
    (g,) = torch.autograd.grad((c * gc.to(c)).sum(), x)
    (g0,) = torch.autograd.grad((c0 * gc).sum(), xc)
    torch.testing.assert_close(g.double().cpu(), g0, atol=scale(g0) * 10, rtol=0)


@pytest.mark.parametrize("kind,n,k", FLOAT64_CASES)
def test_gpu_float64_equals_reference(tmp_path, kind, n, k):
    net = build(kind, n, k)
    r = Relaxation("logistic_phi", steepness=6.0)
    mod = _module("cuda", net, r, tmp_path)
    x = torch.randn(7, n, dtype=torch.float64, device="cuda")
    _compare(mod, net, r, x, 1e-12)


def test_gpu_splitter_10450(tmp_path):
    net = build("splitter", 10450, 5)
    r = default_relaxation(net)
    mod = _module("cuda", net, r, tmp_path)
    x = torch.randn(4, 10450, device="cuda")
    _compare(mod, net, r, x, 1e-4)
    _compare(mod, net, r, x.double(), 1e-12)  # float64: wires in global scratch rows


def test_gpu_runs_on_current_stream(tmp_path):
    net = build("splitter", 64, 5)
    r = Relaxation("cauchy", 8.0)
    layer = _module("cuda", net, r, tmp_path).Layer()
    x = torch.randn(32, 64, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        v, P = layer(x)
        v2 = (P @ x.unsqueeze(-1)).squeeze(-1)  # same stream: ordered after the kernels
    s.synchronize()
    torch.testing.assert_close(v, v2, atol=1e-5, rtol=0)


def _rows_step(layer, x, W):
    v, P = layer(x)
    return (P * W).sum() + v.sum()


def test_gpu_numba_launch_path_equals_fast_path(tmp_path, monkeypatch):
    net = build("splitter", 256, 5)
    mod = _module("cuda", net, Relaxation("cauchy", 8.0), tmp_path)
    layer = mod.Layer()
    x = torch.randn(16, 256, device="cuda", requires_grad=True)
    W = torch.randn(16, 5, 256, device="cuda")
    (g1,) = torch.autograd.grad(_rows_step(layer, x, W), x)
    monkeypatch.setattr(mod, "VIA_NUMBA", True)
    (g2,) = torch.autograd.grad(_rows_step(layer, x, W), x)
    assert torch.equal(g1, g2)


@pytest.mark.parametrize("target", ["cuda", "torch"])
def test_gpu_no_host_sync_and_cuda_graph_replay(tmp_path, target):
    net = build("splitter", 10450, 5)
    layer = _module(target, net, default_relaxation(net), tmp_path).Layer().cuda()
    x = torch.randn(64, 10450, device="cuda", requires_grad=True)
    W = torch.randn(64, 5, 10450, device="cuda")
    y = torch.randint(0, 10450, (64,), device="cuda")
    (g_eager,) = torch.autograd.grad(_rows_step(layer, x, W), x)  # compiles and uploads the tables
    (gc_eager,) = torch.autograd.grad(layer.column(x, y).sum(), x)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        torch.autograd.grad(_rows_step(layer, x, W), x)
        torch.autograd.grad(layer.column(x, y).sum(), x)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up on a side stream, as torch.cuda.graph asks
        torch.autograd.grad(_rows_step(layer, x, W), x)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        (g_graph,) = torch.autograd.grad(_rows_step(layer, x, W), x)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(g_graph, g_eager)


@pytest.mark.parametrize("target,n", [("cuda", 1000), ("torch", 64)])
def test_gpu_torch_compile_fullgraph(tmp_path, target, n):
    net = build("splitter", n, 5)
    layer = _module(target, net, default_relaxation(net), tmp_path).Layer().cuda()
    x = torch.randn(8, n, device="cuda")
    W = torch.randn(8, 5, n, device="cuda")
    xe = x.clone().requires_grad_(True)
    (ge,) = torch.autograd.grad(_rows_step(layer, xe, W), xe)
    xc = x.clone().requires_grad_(True)
    step = torch.compile(lambda x: _rows_step(layer, x, W), fullgraph=True)
    (gc,) = torch.autograd.grad(step(xc), xc)
    torch.testing.assert_close(gc, ge, atol=1e-5, rtol=0)


@pytest.mark.parametrize("target", ["cuda", "torch"])
def test_gpu_bad_rows_are_nan(tmp_path, target):
    net = build("splitter", 64, 5)
    layer = _module(target, net, Relaxation("cauchy", 8.0), tmp_path).Layer().cuda()
    x = torch.randn(3, 64, device="cuda")
    x[1, 5] = float("inf")
    v, P = layer(x)
    assert v[1].isnan().all() and P[1].isnan().all()
    assert v[[0, 2]].isfinite().all() and P[[0, 2]].isfinite().all()
    c = layer.column(x, torch.tensor([0, 1, 64], device="cuda"))
    assert c[[1, 2]].isnan().all() and c[0].isfinite().all()


def test_gpu_shared_and_global_variants_agree(tmp_path):
    from netgen.codegen import emit

    net = build("splitter", 10450, 5)
    r = default_relaxation(net)
    mods = []
    for limit in (None, 0):
        p = tmp_path / f"m{limit}.py"
        p.write_text(emit("cuda", net, r) if limit is None else emit("cuda", net, r, {"shared_limit": limit}))
        mods.append(load(p))
    x = torch.randn(6, 10450, device="cuda", requires_grad=True)
    W = torch.randn(6, 5, 10450, device="cuda")
    y = torch.randint(0, 10450, (6,), device="cuda")
    out = []
    for mod in mods:
        layer = mod.Layer()
        (g,) = torch.autograd.grad(_rows_step(layer, x, W), x)
        (gc,) = torch.autograd.grad((layer.column(x, y) ** 2).sum(), x)
        out.append((g, gc))
    assert set(mods[0]._VARIANTS.values()) == {"shared"}
    assert set(mods[1]._VARIANTS.values()) == {"global"}
    for a, b in zip(*out):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_gpu_steepness_gradient_and_self_check(tmp_path, caplog):
    import logging

    net = build("splitter", 256, 5)
    r = Relaxation("cauchy", 8.0)
    # no cubins: numba-cuda compiles the kernels, and so the self-check runs (it is skipped for cubins)
    mod = load(write_module("cuda", net, r, tmp_path, build=False))
    with caplog.at_level(logging.INFO, logger="netgen"):
        sp = torch.nn.Parameter(torch.tensor(8.0, dtype=torch.float64, device="cuda"))
        layer = mod.Layer(steepness=sp)
        x = torch.randn(4, 256, dtype=torch.float64, device="cuda")
        v, P = layer(x)
        W = torch.randn_like(P)
        (gs,) = torch.autograd.grad((P * W).sum() + v.sum(), sp)
    assert any("self-check passed" in m for m in caplog.messages)
    xd = x.cpu()

    def loss(s):
        v0, P0 = reference.forward(net, xd, Relaxation("cauchy", s))
        return float((P0 * W.cpu()).sum() + v0.sum())

    fd = (loss(8.0 + 1e-5) - loss(8.0 - 1e-5)) / 2e-5
    assert abs(float(gs) - fd) <= 1e-6 * max(1.0, abs(fd))
