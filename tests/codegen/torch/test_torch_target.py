"""The torch target: generated module == reference executor, written-out
backward, module contract, byte-stable emission, imports with torch alone."""

import json
import subprocess
import sys

import pytest
import torch

from netgen.codegen import emit, module_name, write_module
from netgen.codegen.cache import load
from netgen.io import to_dict
from netgen.network import Network
from netgen.relax import reference as ref
from netgen.relax.distributions import DISTRIBUTIONS, Relaxation

torch.set_num_threads(1)  # tiny tensors: intra-op threads only add contention (2-core CI)

from netgen.construct import build

NETS = [("splitter", 13, 4), ("bitonic", 8, 8), ("oddeven", 7, 7)]


@pytest.fixture(scope="module")
def gen_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("generated")


_cache = {}


def layer_for(net, r, gen_dir):
    key = (net.key(), tuple(r.to_dict().values()))
    if key not in _cache:
        _cache[key] = load(write_module("torch", net, r, gen_dir)).Layer()
    return _cache[key]


def all_outputs(fn_forward, fn_column, x, y, seed):
    """values, P, column and the gradients of random projections of them
    (projection weights drawn in float64, then cast: the same for any dtype)."""
    g = torch.Generator().manual_seed(seed)
    v, P = fn_forward(x)
    c = fn_column(x, y)
    wv, wP, wc = (torch.randn(t.shape, generator=g, dtype=torch.float64).to(t.dtype) for t in (v, P, c))
    (gx,) = torch.autograd.grad((v * wv).sum() + (P * wP).sum(), x, retain_graph=True)
    (gv,) = torch.autograd.grad((v * wv).sum(), x)  # values only (P path unused)
    (gc,) = torch.autograd.grad((c * wc).sum(), x)
    return [v, P, c, gx, gv, gc]


NAMES = ["values", "P", "column", "grad", "grad values", "grad column"]


def max_rel(a, b):
    return (a.double() - b.double()).abs().max().item() / max(1.0, b.abs().max().item())


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("kind,n,k", NETS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_generated_equals_reference(dist, kind, n, k, dtype, gen_dir):
    """Values, P, column and all gradients within 1e-12 (float64) / 1e-6
    (float32), relative to max(1, largest entry)."""
    net = build(kind, n, k)
    r = Relaxation(dist, steepness=4.0, art_lambda=0.3)
    layer = layer_for(net, r, gen_dir)
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    for seed in (5, 6):
        x = torch.randn(3, 2, n, generator=torch.Generator().manual_seed(seed), dtype=dtype).requires_grad_()
        y = torch.randint(0, n, (3, 2), generator=torch.Generator().manual_seed(seed + 10))
        got = all_outputs(layer, layer.column, x, y, 7)
        want = all_outputs(lambda t: ref.forward(net, t, r), lambda t, yy: ref.column(net, t, yy, r), x, y, 7)
        for name, a, b in zip(NAMES, got, want):
            assert a.dtype == dtype and a.shape == b.shape, name
            err = max_rel(a, b)
            assert err <= tol, f"{name}: relative error {err:.3g} > {tol:g}"


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("kind,n,k", [("splitter", 9, 3), ("bitonic", 8, 4), ("oddeven", 6, 6), ("transposition", 5, 3)])
def test_gradcheck_generated(dist, kind, n, k, gen_dir):
    net = build(kind, n, k)
    layer = layer_for(net, Relaxation(dist, steepness=2.0, art_lambda=0.25), gen_dir)
    x = torch.randn(2, n, generator=torch.Generator().manual_seed(1), dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(layer, (x,))
    assert torch.autograd.gradcheck(lambda t: layer.column(t, torch.tensor([1, n - 1])), (x,))


@pytest.mark.parametrize("kind,n,k", NETS + [("splitter", 40, 5)])
def test_hard_matches_topk(kind, n, k, gen_dir):
    net = build(kind, n, k)
    layer = layer_for(net, Relaxation(), gen_dir)
    x = torch.randn(4, 3, n, generator=torch.Generator().manual_seed(2))
    vals, idx = layer.hard(x)
    tv, ti = torch.topk(x, k, dim=-1)
    assert torch.equal(vals, tv) and torch.equal(idx, ti)
    rv, ri = ref.hard(net, x)
    assert torch.equal(vals, rv) and torch.equal(idx, ri)


def test_uses_written_backward_not_autograd_loop(gen_dir):
    net = build("splitter", 12, 3)
    layer = layer_for(net, Relaxation(), gen_dir)
    x = torch.randn(2, 12, requires_grad=True)
    v, P = layer(x)
    c = layer.column(x, torch.tensor([0, 5]))
    # the autograd graph is a few nodes around one custom Function, not a
    # graph of per-comparator ops
    for t, fn_name in ((v, "_TopKBackward"), (P, "_TopKBackward"), (c, "_ColumnBackward")):
        seen, todo = [], [t.grad_fn]
        while todo:
            fn = todo.pop()
            if fn is not None:
                seen.append(type(fn).__name__)
                todo.extend(f for f, _ in fn.next_functions)
        assert fn_name in seen and len(seen) < 12, seen
    src = emit("torch", net, Relaxation())
    assert "def backward(ctx, g_values, g_R)" in src and "def backward(ctx, g_col)" in src


def test_contract_and_network_dict(gen_dir):
    net = build("splitter", 20, 4)
    r = Relaxation("logistic_phi", 7.5, 0.4)
    mod = load(write_module("torch", net, r, gen_dir))
    assert mod.TARGET == "torch"
    assert mod.RELAXATION == {"distribution": "logistic_phi", "steepness": 7.5, "art_lambda": 0.4, "art_epsilon": 0.0}
    d = to_dict(net)
    assert json.loads(json.dumps(mod.NETWORK)) == json.loads(json.dumps(d))
    layer = mod.Layer()
    assert isinstance(layer, torch.nn.Module)
    assert layer.state_dict() == {}


def test_leading_dims_half_and_bfloat16(gen_dir):
    net = build("bitonic", 8, 3)
    r = Relaxation()
    layer = layer_for(net, r, gen_dir)
    x = torch.randn(2, 1, 3, 8)
    for dt in (torch.float16, torch.bfloat16):
        v, P = layer(x.to(dt))
        assert v.dtype == dt and P.dtype == dt and v.shape == (2, 1, 3, 3) and P.shape == (2, 1, 3, 3, 8)
        rv, rP = ref.forward(net, x.to(dt).float(), r)  # computed in float32
        torch.testing.assert_close(v, rv.to(dt))
        torch.testing.assert_close(P, rP.to(dt))
    v1, P1 = layer(x[0, 0, 0])
    assert v1.shape == (3,) and P1.shape == (3, 8)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_raises(bad, gen_dir):
    layer = layer_for(build("bitonic", 8, 3), Relaxation(), gen_dir)
    x = torch.zeros(2, 8)
    x[1, 4] = bad
    with pytest.raises(ValueError, match="NaN|inf"):
        layer(x)
    with pytest.raises(ValueError, match="NaN|inf"):
        layer.column(x, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="shape"):
        layer(torch.zeros(2, 7))
    with pytest.raises(ValueError, match="floating"):
        layer(torch.zeros(2, 8, dtype=torch.int64))


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_ties_extremes_steepness_finite(dist, gen_dir):
    net = build("splitter", 10, 3)
    cases = [
        (torch.full((10,), 0.7), 20.0),
        (torch.tensor([1.0, 1.0, 2.0, 2.0, -3.0, -3.0, 0.5, 0.5, 4.0, 4.0]), 20.0),
        (torch.tensor([1e30, -1e30, 1e30, 0.0, -1e30, 1.0, 1e30, 2.0, 3.0, -1e30]), 20.0),
        (torch.randn(10, generator=torch.Generator().manual_seed(0)), 1e4),
    ]
    for x0, s in cases:
        layer = layer_for(net, Relaxation(dist, steepness=s, art_lambda=0.5), gen_dir)
        for dtype in (torch.float32, torch.float64):
            x = x0.to(dtype).requires_grad_()
            v, P = layer(x)
            c = layer.column(x, torch.tensor(3))
            loss = v.sum() + (P * torch.arange(10.0, dtype=dtype)).sum() + c.sum()
            (g,) = torch.autograd.grad(loss, x)
            for t in (v, P, c, g):
                assert bool(torch.isfinite(t).all()), (dist, s, dtype)


def test_byte_identical_rebuild_and_atomic_write(tmp_path):
    net = build("splitter", 50, 5)
    r = Relaxation("gaussian", 12.0)
    p1 = write_module("torch", net, r, tmp_path / "a")
    p2 = write_module("torch", build("splitter", 50, 5), Relaxation("gaussian", 12.0), tmp_path / "b")
    assert p1.name == p2.name and p1.read_bytes() == p2.read_bytes()
    write_module("torch", net, r, tmp_path / "a")  # overwrite in place
    assert sorted(f.name for f in (tmp_path / "a").iterdir()) == [p1.name]  # no temp files left
    assert emit("torch", net, Relaxation("gaussian", 12.5)) != p1.read_text()
    name = module_name(net, r, "torch")
    assert name.isidentifier() and name.startswith("splitter_n50_k5_torch_")
    assert module_name(net, Relaxation("gaussian", 12.5), "torch") != name


def test_imports_with_torch_alone(tmp_path):
    net = build("splitter", 30, 5)
    p = write_module("torch", net, Relaxation(), tmp_path)
    code = (
        "import sys; sys.modules['netgen'] = None\n"  # any `import netgen` would now fail
        "import importlib.util as u\n"
        f"s = u.spec_from_file_location('m', {str(p)!r}); m = u.module_from_spec(s); s.loader.exec_module(m)\n"
        "import torch\n"
        "x = torch.randn(4, 30)\n"
        "v, P = m.Layer()(x)\n"
        "assert torch.allclose(v, (P @ x.unsqueeze(-1)).squeeze(-1), atol=1e-5)\n"
        "assert torch.equal(m.Layer().hard(x)[1], torch.topk(x, 5).indices)\n"
        "assert not any(k == 'netgen' or k.startswith('netgen.') for k in sys.modules if sys.modules[k] is not None)\n"
        "print(m.TARGET, len(m.NETWORK['layers']))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["torch", str(net.depth)]


def test_large_network_emits_compactly(tmp_path):
    # 10^5+ comparators: the index arrays must not become megabytes of literals
    net = build("bitonic", 4096, None)
    assert net.size > 10**5
    src = emit("torch", net, Relaxation())
    assert len(src) < 100_000
    mod = load(write_module("torch", net, Relaxation(), tmp_path))
    layer = mod.Layer()
    # distinct inputs (4096 float32 normals collide often, and ties may order either way)
    g = torch.Generator().manual_seed(0)
    x = torch.stack([torch.randperm(4096, generator=g) for _ in range(2)]).float()
    vals, idx = layer.hard(x)
    assert torch.equal(idx, torch.sort(x, descending=True).indices)


def test_bad_arguments():
    net = Network.from_layers(2, [[(0, 1)]])
    with pytest.raises(ValueError, match="target"):
        emit("fortran", net, Relaxation())
    with pytest.raises(ValueError, match="identifier"):
        write_module("torch", net, Relaxation(), "/tmp", name="not-a-name")
    with pytest.raises(ValueError, match="Relaxation"):
        emit("torch", net, "cauchy")
    # every target takes a Relaxation, its dict, or None (the network's default)
    assert emit("torch", net, {"distribution": "cauchy", "steepness": 4.0}) == emit("torch", net, Relaxation("cauchy", 4.0))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_device_matches_cpu(gen_dir):
    net = build("splitter", 300, 5)
    layer = layer_for(net, Relaxation("logistic_phi", 10.0), gen_dir)
    x = torch.randn(4, 300, dtype=torch.float64, requires_grad=True)
    v, P = layer(x)
    (g,) = torch.autograd.grad(v.sum() + P.square().sum(), x)
    xc = x.detach().cuda().requires_grad_()
    lc = layer.to("cuda")
    vc, Pc = lc(xc)
    (gc,) = torch.autograd.grad(vc.sum() + Pc.square().sum(), xc)
    lc.to("cpu")
    for a, b in ((v, vc), (P, Pc), (g, gc)):
        assert b.is_cuda and (a - b.cpu()).abs().max().item() < 1e-10
