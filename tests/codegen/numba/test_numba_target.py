"""The numba target against the reference executor (float64, 1e-12) and
gradcheck. Most modules are compiled serially (NETGEN_NUMBA_PARALLEL=0, the
same kernel source with prange running as range, ~3x faster to compile);
one module is compiled exactly as shipped (parallel, cached on disk)."""

from __future__ import annotations

import os
from unittest import mock

import numpy as np
import pytest
import torch

from netgen.codegen import emit, module_name, write_module

from netgen.codegen import TARGETS
from netgen.codegen.runtime.tables import plan
from netgen.codegen.cache import load
from netgen.construct import build
from netgen.network import Network
from netgen.relax import reference
from netgen.relax.distributions import DISTRIBUTIONS, Relaxation

TOL = 1e-12


@pytest.fixture(scope="module")
def make(tmp_path_factory):
    cache = {}
    root = tmp_path_factory.mktemp("numba_gen")

    def _make(net: Network, r: Relaxation, parallel: bool = False, mode=None, group=None):
        key = (net.key(), tuple(sorted(r.to_dict().items())), parallel, mode, group)
        if key not in cache:
            out = root / ("par" if parallel else "ser")
            if mode is None and group is None:
                path = write_module("numba", net, r, out)
            else:
                out.mkdir(parents=True, exist_ok=True)
                path = out / f"{module_name(net, r, 'numba')}_{mode}_{group}.py"
                path.write_text(TARGETS["numba"].emit(net, r, {"mode": mode, "group": group}))
            with mock.patch.dict(os.environ, {"NETGEN_NUMBA_PARALLEL": "1" if parallel else "0"}):  # read at import
                mod = load(path)
            assert mod._PARALLEL is parallel
            if parallel:  # the parallel kernels even for these small batches
                mod._SERIAL_WORK = 0
            cache[key] = (mod, mod.Layer(), net, r)
        return cache[key]

    return _make


def _check_rows(layer, net, r, x, gtol=TOL):
    x = x.clone().requires_grad_(True)
    v, P = layer(x)
    v0, P0 = reference.forward(net, x, r)
    assert v.shape == v0.shape and P.shape == P0.shape
    torch.testing.assert_close(v, v0, atol=TOL, rtol=0)
    torch.testing.assert_close(P, P0, atol=TOL, rtol=0)
    gen = torch.Generator().manual_seed(1)
    gv = torch.randn(v.shape, generator=gen, dtype=v.dtype)
    gP = torch.randn(P.shape, generator=gen, dtype=P.dtype)
    for cot in ((gv, gP), (gv, None), (None, gP)):
        loss = sum((o * c).sum() for o, c in zip((v, P), cot) if c is not None)
        loss0 = sum((o * c).sum() for o, c in zip((v0, P0), cot) if c is not None)
        (g,) = torch.autograd.grad(loss, x, retain_graph=True)
        (g0,) = torch.autograd.grad(loss0, x, retain_graph=True)
        assert torch.isfinite(g).all()
        torch.testing.assert_close(g, g0, atol=gtol * max(1.0, float(g0.abs().max())), rtol=0)


def _check_column(layer, net, r, x, y):
    x = x.clone().requires_grad_(True)
    c = layer.column(x, y)
    c0 = reference.column(net, x, y, r)
    torch.testing.assert_close(c, c0, atol=TOL, rtol=0)
    gc = torch.randn(c.shape, generator=torch.Generator().manual_seed(2), dtype=c.dtype)
    (g,) = torch.autograd.grad((c * gc).sum(), x)
    (g0,) = torch.autograd.grad((c0 * gc).sum(), x)
    torch.testing.assert_close(g, g0, atol=TOL * max(1.0, float(g0.abs().max())), rtol=0)


NETS = [("splitter", 16, 5), ("bitonic", 8, 8), ("oddeven", 12, 3)]


@pytest.mark.parametrize("kind,n,k", NETS)
def test_equals_reference_and_gradcheck(make, kind, n, k):
    net = build(kind, n, k)
    r = Relaxation("logistic", steepness=4.0)
    _, layer, net, r = make(net, r)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, n, generator=gen, dtype=torch.float64)
    _check_rows(layer, net, r, x)
    y = torch.randint(0, n, (2, 3), generator=gen)
    _check_column(layer, net, r, x, y)
    # gradcheck on the written backward (finite differences vs adjoint)
    xs = torch.randn(2, n, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: layer(t), (xs,), atol=1e-7)
    ys = torch.randint(0, n, (2,), generator=gen)
    assert torch.autograd.gradcheck(lambda t: layer.column(t, ys), (xs,), atol=1e-7)
    # hard mode is the exact network
    hv, hi = layer.hard(x)
    rv, ri = reference.hard(net, x)
    assert torch.equal(hv, rv) and torch.equal(hi, ri)
    assert torch.equal(hv, torch.sort(x, -1, descending=True).values[..., :k])


# each distribution compiles its own module (~7 s): the fast run (no --run-slow) keeps the default, cauchy
@pytest.mark.parametrize("dist", [d if d == "cauchy" else pytest.param(d, marks=pytest.mark.slow) for d in DISTRIBUTIONS])
def test_every_distribution_incl_ties_and_extremes(make, dist):
    net = build("splitter", 12, 4)
    r = Relaxation(dist, steepness=6.0, art_lambda=0.25)
    _, layer, net, r = make(net, r)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, 12, generator=gen, dtype=torch.float64) * 0.2
    x[1] = 0.5  # all tied
    x[2, ::2] = x[2, 1::2]  # tied pairs
    x[3] = torch.tensor([1e30, -1e30] * 6, dtype=torch.float64) * torch.linspace(1, 2, 12, dtype=torch.float64)
    _check_rows(layer, net, r, x)
    # float32 kernels (inlined exp / CDF approximations) vs the float32 reference
    x32 = x.float().requires_grad_(True)
    v, P = layer(x32)
    v0, P0 = reference.forward(net, x32, r)
    torch.testing.assert_close(P, P0, atol=1e-6, rtol=0)
    torch.testing.assert_close(v, v0, atol=1e-6 * max(1.0, float(v0.detach().abs().max())), rtol=0)
    gP = torch.randn(P.shape, generator=gen)
    (g,) = torch.autograd.grad((P * gP).sum(), x32)
    (g0,) = torch.autograd.grad((P0 * gP).sum(), x32)
    torch.testing.assert_close(g, g0, atol=1e-5 * max(1.0, float(g0.abs().max())), rtol=0)
    if dist in ("logistic_phi", "optimal"):
        _check_column(layer, net, r, x, torch.tensor([0, 5, 11, 3]))
    if dist != "optimal":  # piecewise: finite differences straddle the knots
        xs = torch.randn(2, 12, generator=gen, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t: layer(t), (xs,), atol=1e-6)


def test_art_difftopk_epsilon(make):
    net = build("splitter", 12, 4)
    r = Relaxation("logistic_phi", steepness=10.0, art_lambda=0.4, art_epsilon=1e-10)
    _, layer, net, r = make(net, r)
    x = torch.randn(3, 12, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    _check_rows(layer, net, r, x)
    # at a tie difftopk's form has slope s * F'(0) * eps^-lambda ~ 1.6e4: the
    # gradients are that large and agree to ~1e-12 relative (rounding of
    # the adjoint vs autograd's order of operations is amplified)
    x[0] = 1.0
    _check_rows(layer, net, r, x, gtol=1e-10)


def test_parallel_module_as_shipped(make):
    """The kernels as shipped (parallel=True, prange over rows, cached)."""
    net = build("splitter", 40, 5)
    r = Relaxation("cauchy", steepness=9.0)
    mod, layer, net, r = make(net, r, parallel=True)
    x = torch.randn(5, 2, 40, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    _check_rows(layer, net, r, x)
    _check_column(layer, net, r, x, torch.randint(0, 40, (5, 2), generator=torch.Generator().manual_seed(6)))
    # the cache is next to the generated file
    assert mod._CACHE
    cached = os.listdir(os.path.join(os.path.dirname(mod.__file__), "__pycache__"))
    assert any(f.endswith(".nbi") and "_fwd_P" in f for f in cached)



@pytest.mark.parametrize("parallel", [False, True])
def test_subnormals_flush_to_zero_and_the_mode_is_restored(make, parallel):
    """A gaussian tail below the smallest normal float32: the swap code run
    by plain numpy gives a subnormal p; on x86 the kernels run with FTZ|DAZ,
    so p reads as exactly 0 (P = [1, 0]), nothing subnormal comes out, the
    rest matches the reference, and the calling thread's float mode is
    restored afterwards (numpy here still makes subnormals)."""
    import math
    import platform

    from netgen.codegen.swap_code import swap_code

    tiny = np.finfo(np.float32).tiny
    r = Relaxation("gaussian", steepness=1.0)
    ns = {"math": math, "np": np, "d": np.float32(-13.5)}
    exec(swap_code(r, 0, "float32", inline_exp=True), ns)
    assert 0 < ns["p"] < tiny  # without flush-to-zero: a subnormal
    net = Network.from_layers(2, [[(0, 1)]])
    mod, layer, net, r = make(net, r, parallel=parallel)
    x = torch.tensor([[0.0, 13.5]] * 37, requires_grad=True)  # 3 blocks of rows
    v, P = layer(x)
    c = layer.column(x, torch.ones(37, dtype=torch.long))
    v0, P0 = reference.forward(net, x, r)
    torch.testing.assert_close(P, P0, atol=1e-6, rtol=0)
    torch.testing.assert_close(v, v0, atol=1e-6, rtol=0)
    (g,) = torch.autograd.grad((P * torch.randn(P.shape)).sum() + c.sum(), x)
    assert torch.isfinite(g).all()
    if platform.machine().lower() in ("x86_64", "amd64"):
        for t in (P, c, g):
            assert not ((t != 0) & (t.abs() < tiny)).any()
        assert (P.flatten(1).sort(dim=1).values[:, 0] == 0).all()  # the swapped-out weight is exactly 0
    assert np.float32(1e-38) * np.float32(1e-3) != 0  # this thread's float mode is untouched



def test_saved_state_buffers_are_pooled_and_never_shared(make):
    """Saved-state buffers go back to the module's pool when autograd frees a
    graph and the next forward takes them; two graphs alive at once never
    share one (both gradients match the reference)."""
    net = build("splitter", 40, 5)
    r = Relaxation("cauchy", steepness=9.0)
    mod, layer, net, r = make(net, r)
    mod.free_buffers()
    gen = torch.Generator().manual_seed(12)
    x1, x2 = (torch.randn(20, 40, generator=gen, dtype=torch.float64).requires_grad_(True) for _ in range(2))
    y = torch.randint(0, 40, (20,), generator=gen)
    outs = [(layer(x)[1], layer.column(x, y)) for x in (x1, x2)]  # two graphs alive
    assert not mod._POOL
    for x, (P, c) in zip((x1, x2), outs):
        (g,) = torch.autograd.grad((P * P.detach()).sum() + c.sum(), x)
        P0 = reference.forward(net, x, r)[1]
        (g0,) = torch.autograd.grad((P0 * P0.detach()).sum() + reference.column(net, x, y, r).sum(), x)
        torch.testing.assert_close(g, g0, atol=TOL * max(1.0, float(g0.abs().max())), rtol=0)
    del outs, P, c
    pooled = {id(a) for free in mod._POOL.values() for a in free}
    assert len(pooled) == 10  # P, ps, sv, D of two rows graphs and cs of two column graphs
    v, P = layer(x1)
    assert sum(len(free) for free in mod._POOL.values()) == 6  # P, ps, sv, D taken from the pool
    P.sum().backward()
    del v, P
    assert {id(a) for free in mod._POOL.values() for a in free} == pooled  # and given back
    mod.free_buffers()
    assert not mod._POOL

@pytest.mark.parametrize("B", [1, 16, 37])
def test_column_row_blocks(make, B):
    """The column kernels work on blocks of _W batch rows (a partial last
    block is padded): every batch size matches the reference, in float64
    (1e-12) and float32 (values 1e-6, gradients 1e-5 of their scale), with
    and without the saved state."""
    net = build("splitter", 40, 5)
    r = Relaxation("cauchy", steepness=9.0)
    mod, layer, net, r = make(net, r, parallel=True)
    gen = torch.Generator().manual_seed(B)
    x = torch.randn(B, 40, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 40, (B,), generator=gen)
    _check_column(layer, net, r, x, y)
    torch.testing.assert_close(layer.column(x, y), reference.column(net, x, y, r), atol=TOL, rtol=0)  # no grad
    x32 = x.float().requires_grad_(True)
    c = layer.column(x32, y)
    c0 = reference.column(net, x32, y, r)
    torch.testing.assert_close(c, c0, atol=1e-6, rtol=0)
    gc = torch.randn(c.shape, generator=gen)
    (g,) = torch.autograd.grad((c * gc).sum(), x32)
    (g0,) = torch.autograd.grad((c0 * gc).sum(), x32)
    torch.testing.assert_close(g, g0, atol=1e-5 * max(1.0, float(g0.abs().max())), rtol=0)


def test_float32_and_half(make):
    """float32 kernels (float32 arithmetic like the reference; cauchy's
    inlined arctangent) and half inputs computed in float32."""
    net = build("splitter", 40, 5)
    r = Relaxation("cauchy", steepness=9.0)
    _, layer, net, r = make(net, r)
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(6, 40, generator=gen).requires_grad_(True)
    v, P = layer(x)
    v0, P0 = reference.forward(net, x, r)
    assert v.dtype == torch.float32 and P.dtype == torch.float32
    torch.testing.assert_close(v, v0, atol=1e-5, rtol=0)
    torch.testing.assert_close(P, P0, atol=1e-5, rtol=0)
    gP = torch.randn(P.shape, generator=gen)
    (g,) = torch.autograd.grad((P * gP).sum() + v.sum(), x)
    (g0,) = torch.autograd.grad((P0 * gP).sum() + v0.sum(), x)
    torch.testing.assert_close(g, g0, atol=1e-4 * max(1.0, float(g0.abs().max())), rtol=0)
    y = torch.randint(0, 40, (6,), generator=gen)
    torch.testing.assert_close(layer.column(x, y), reference.column(net, x, y, r), atol=1e-5, rtol=0)
    vh, Ph = layer(x.detach().half())
    assert vh.dtype == torch.float16 and Ph.shape == (6, 5, 40)
    torch.testing.assert_close(Ph.float(), P0.detach(), atol=2e-3, rtol=0)


def test_bad_inputs(make):
    net = build("splitter", 16, 5)
    _, layer, _, _ = make(net, Relaxation("logistic", steepness=4.0))
    with pytest.raises(ValueError, match="shape"):
        layer(torch.zeros(3, 15, dtype=torch.float64))
    with pytest.raises(ValueError, match="NaN"):
        layer(torch.full((2, 16), float("nan"), dtype=torch.float64))
    with pytest.raises(ValueError, match="inf"):
        layer(torch.full((2, 16), float("inf"), dtype=torch.float64))
    with pytest.raises(ValueError, match="0..15"):
        layer.column(torch.zeros(2, 16, dtype=torch.float64), torch.tensor([0, 16]))
    with pytest.raises(ValueError, match="integer"):
        layer.column(torch.zeros(2, 16, dtype=torch.float64), torch.tensor([0.0, 1.0]))


def test_plan_is_the_exact_structural_support():
    """clo/chi equal the ranks whose rows of R are structurally non-zero on
    a comparator's wires (brute force with boolean matrices)."""
    net = build("splitter", 64, 5)
    clo, chi, doff = plan(net.n, net.comparators, net.layer_offsets, net.outputs)
    R = np.zeros((net.k, net.n), dtype=bool)
    R[np.arange(net.k), list(net.outputs)] = True
    for i in range(net.size - 1, -1, -1):
        a, b = net.comparators[i]
        rows = np.flatnonzero(R[:, a] | R[:, b])
        if rows.size:
            assert (clo[i], chi[i]) == (rows.min(), rows.max() + 1)
        else:
            assert clo[i] >= chi[i]
        R[:, a] = R[:, b] = R[:, a] | R[:, b]
    assert doff[-1] == np.maximum(chi - clo, 0).sum()
    # the late cascades touch few rows: less than k * size work
    assert doff[-1] < 0.9 * net.k * net.size


def test_emit_is_deterministic_and_standalone():
    net = build("splitter", 16, 5)
    r = Relaxation("gaussian", steepness=3.0)
    a, b = emit("numba", net, r), emit("numba", net, r)
    assert a == b
    assert "import netgen" not in a and "from netgen" not in a
    ns: dict = {}
    exec(compile(a.split("\n@numba.njit", 1)[0], "<gen>", "exec"), ns)
    assert ns["TARGET"] == "numba"
    assert ns["RELAXATION"]["distribution"] == "gaussian"
    assert ns["NETWORK"]["n"] == 16 and ns["NETWORK"]["outputs"] == list(net.outputs)
    with pytest.raises(ValueError, match="Network"):
        emit("numba", "not a network", r)
