"""The numba target's P engine (issue 18): both sweep directions and both
backward modes (``save``: the sweep's differences kept from the forward;
``recompute``: re-run per lane group in the backward) and several group
sizes against the reference in float64 (1e-12) and gradcheck; the run-time
steepness (attribute, tensor, gradient). The layer's contract (refusals,
inputs, threads) is in test_numba_engine_contract.py.

Modules come from the ``make_engine`` fixture (tests/codegen/conftest.py),
compiled serially (NETGEN_NUMBA_PARALLEL=0). The mode and group size are
build-time constants of a module (``emit(..., mode=, group=)``); the
wrappers read ``_MODE`` / ``_GROUP`` at call time, so one compiled module
is also run with other values here (no recompilation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from netgen.codegen import TARGETS
from netgen.codegen.plan import choose
from netgen.construct import build
from netgen.relax import reference
from netgen.relax.distributions import Relaxation

TOL = 1e-12


def _grads(v, P, x, gv, gP):
    loss = (v * gv).sum() + (P * gP).sum()
    return torch.autograd.grad(loss, x, retain_graph=True)[0]


def _check(layer, net, r, x, steepness=None):
    x = x.clone().requires_grad_(True)
    v, P = layer(x)
    r0 = r if steepness is None else Relaxation(r.distribution, float(steepness), r.art_lambda, r.art_epsilon)
    v0, P0 = reference.forward(net, x, r0)
    torch.testing.assert_close(v, v0, atol=TOL, rtol=0)
    torch.testing.assert_close(P, P0, atol=TOL, rtol=0)
    gen = torch.Generator().manual_seed(11)
    gv = torch.randn(v.shape, generator=gen, dtype=v.dtype)
    gP = torch.randn(P.shape, generator=gen, dtype=P.dtype)
    for a, b in ((gv, gP), (gv * 0, gP), (gv, gP * 0)):
        g = _grads(v, P, x, a, b)
        g0 = _grads(v0, P0, x, a, b)
        torch.testing.assert_close(g, g0, atol=TOL * max(1.0, float(g0.abs().max())), rtol=0)
    # P only (dL/dvalues None) and values only (dL/dP None)
    g = torch.autograd.grad((P * gP).sum(), x, retain_graph=True)[0]
    g0 = torch.autograd.grad((P0 * gP).sum(), x, retain_graph=True)[0]
    torch.testing.assert_close(g, g0, atol=TOL * max(1.0, float(g0.abs().max())), rtol=0)
    g = torch.autograd.grad((v * gv).sum(), x)[0]
    g0 = torch.autograd.grad((v0 * gv).sum(), x)[0]
    torch.testing.assert_close(g, g0, atol=TOL * max(1.0, float(g0.abs().max())), rtol=0)


def _plan(net, **force):
    p = choose(net, TARGETS["numba"].budget, **force)
    return p.direction, p.mode, p.group


def test_emit_options_choose_the_engine():
    net = build("oddeven", 12, 12)
    src = TARGETS["numba"].emit(net, Relaxation("logistic", 4.0), {"mode": "recompute", "group": 5, "direction": "forward"})
    assert "_MODE = 'recompute'\n_GROUP = 5\n" in src
    assert "_DIRECTION = 'forward'\n" in src
    assert _plan(net, mode="save", group=100, direction="back") == ("back", "save", 12)  # clipped to k
    assert _plan(build("splitter", 16, 5), mode="save", group=100, direction="forward") == ("forward", "save", 16)  # to n
    with pytest.raises(ValueError, match="mode"):
        TARGETS["numba"].emit(net, Relaxation("logistic", 4.0), {"mode": "fast"})
    with pytest.raises(ValueError, match="direction"):
        TARGETS["numba"].emit(net, Relaxation("logistic", 4.0), {"direction": "sideways"})
    with pytest.raises(ValueError, match="group"):
        _plan(net, group=2.5)
    with pytest.raises(ValueError, match="no option 'threads'"):
        TARGETS["numba"].emit(net, Relaxation("logistic", 4.0), {"threads": 2})
    # the build-time choice: top-5 keeps the differences of the back-sweep,
    # large sorters sweep forward (fewer pairs) and recompute
    assert _plan(build("splitter", 200, 5))[:2] == ("back", "save")
    assert _plan(build("splitter", 10450, 5))[:2] == ("back", "save")
    assert _plan(build("oddeven", 256, 256))[:2] == ("forward", "recompute")
    assert _plan(build("oddeven", 1024, 1024)) == ("forward", "recompute", 16)


def test_forward_plan_is_the_input_cone():
    """The forward plan's range of a comparator holds exactly the inputs
    that can reach its wires (odd-even sorters: contiguous cones), so the
    forward sweep skips only structural zeros; checked against cones
    computed by sets, and the pair counts that make sorters sweep forward."""
    from netgen.codegen.runtime.tables import plan

    for n in (8, 13, 32):
        net = build("oddeven", n, n)
        clo, chi, doff = plan(n, net.comparators, net.layer_offsets, net.outputs, "forward")
        cone = [{w} for w in range(n)]
        for i, (a, b) in enumerate(net.comparators):
            u = cone[a] | cone[b]
            cone[a] = cone[b] = u
            assert set(range(clo[i], chi[i])) >= u
            if n != 13:  # powers of two: exact
                assert set(range(clo[i], chi[i])) == u
        back = plan(n, net.comparators, net.layer_offsets, net.outputs, "back")[2][-1]
        assert doff[-1] < back
    with pytest.raises(ValueError, match="direction"):
        plan(4, [(0, 1)], [0, 1], [0], "up")


@pytest.mark.parametrize("mode", ["save", "recompute"])
# the fast run (no --run-slow) keeps one sorter and one selection network
@pytest.mark.parametrize("kind,n,k", [pytest.param("oddeven", 12, 12, marks=pytest.mark.slow), ("oddeven", 7, 7),
                                      pytest.param("bitonic", 8, 8, marks=pytest.mark.slow), ("splitter", 16, 5),
                                      pytest.param("splitter", 9, 1, marks=pytest.mark.slow)])
def test_forward_direction(make_engine, mode, kind, n, k):
    """The forward sweep (lanes = input columns) against the reference in
    float64: sorters (odd n too) and selection networks (k < n: the sweep
    carries all columns, P keeps the output rows), both modes, column
    groups that split the plan's ranges (3), all columns in one group, and
    the module's own choice; B = 1 and 19 (a partial block); gradcheck."""
    net = build(kind, n, k)
    r = Relaxation("cauchy", steepness=3.0)
    mod = make_engine(net, r, mode=mode, group=3, direction="forward")
    assert (mod._DIRECTION, mod._MODE) == ("forward", mode)
    layer = mod.Layer()
    gen = torch.Generator().manual_seed(12)
    for group in (3, 1, n):
        mod._GROUP = group
        for B in (1, 19):
            _check(layer, net, r, torch.randn(B, n, generator=gen, dtype=torch.float64))
    mod._GROUP = 3
    xs = torch.randn(2, n, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: layer(t), (xs,), atol=1e-7)


def test_forward_and_back_agree_in_float32(make_engine):
    """One sorter, both directions, float32: the same P and dL/dx up to
    rounding (the sweeps add in different orders)."""
    net = build("oddeven", 32, 32)
    r = Relaxation("logistic", steepness=2.0)
    x = torch.randn(37, 32, generator=torch.Generator().manual_seed(13)).requires_grad_(True)
    W = torch.randn(37, 32, 32, generator=torch.Generator().manual_seed(14))
    out = []
    for direction in ("back", "forward"):
        layer = make_engine(net, r, mode="recompute", group=16, direction=direction).Layer()
        v, P = layer(x)
        out.append((P, torch.autograd.grad((P * W).sum() + v.sum(), x)[0]))
    torch.testing.assert_close(out[0][0], out[1][0], atol=1e-5, rtol=0)
    torch.testing.assert_close(out[0][1], out[1][1], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", ["save", "recompute"])
def test_sorting_modes_and_group_sizes(make_engine, mode):
    """k = n sorting (odd-even, 12 wires) in both modes, the module's own
    group size and others set at run time (1, 5: a group that splits the
    plan's row ranges, 12 = all ranks), B = 1, 19 (odd, a partial block) and 33."""
    net = build("oddeven", 12, 12)
    r = Relaxation("logistic", steepness=4.0)
    mod = make_engine(net, r, mode=mode, group=3)
    assert (mod._MODE, mod._GROUP) == (mode, 3)
    layer = mod.Layer()
    gen = torch.Generator().manual_seed(1)
    for group in (3, 1, 5, 12):
        mod._GROUP = group
        for B in (1, 19, 33):
            _check(layer, net, r, torch.randn(B, 12, generator=gen, dtype=torch.float64))
    mod._GROUP = 3
    xs = torch.randn(3, 12, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: layer(t), (xs,), atol=1e-7)


@pytest.mark.parametrize("mode", ["save", "recompute"])
@pytest.mark.parametrize("kind,n,k", [("splitter", 16, 5), pytest.param("splitter", 9, 1, marks=pytest.mark.slow),
                                      pytest.param("bitonic", 8, 8, marks=pytest.mark.slow)])  # fast run: one
def test_topk_modes(make_engine, mode, kind, n, k):
    """Selection networks (ranges of rows that groups of 2 split; k = 1) in
    both modes; unbatched input; gradcheck."""
    net = build(kind, n, k)
    r = Relaxation("cauchy", steepness=3.0)
    mod = make_engine(net, r, mode=mode, group=2)
    layer = mod.Layer()
    gen = torch.Generator().manual_seed(2)
    _check(layer, net, r, torch.randn(2, 3, n, generator=gen, dtype=torch.float64))
    _check(layer, net, r, torch.randn(n, generator=gen, dtype=torch.float64))
    xs = torch.randn(2, n, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: layer(t), (xs,), atol=1e-7)


def test_float32_recompute(make_engine):
    net = build("oddeven", 12, 12)
    r = Relaxation("cauchy", steepness=5.0)
    mod = make_engine(net, r, mode="recompute", group=5)
    x = torch.randn(21, 12, generator=torch.Generator().manual_seed(3)).requires_grad_(True)
    v, P = mod.Layer()(x)
    v0, P0 = reference.forward(net, x, r)
    torch.testing.assert_close(P, P0, atol=1e-5, rtol=0)
    W = torch.randn(P.shape)
    g = torch.autograd.grad((P * W).sum() + v.sum(), x)[0]
    g0 = torch.autograd.grad((P0 * W).sum() + v0.sum(), x)[0]
    torch.testing.assert_close(g, g0, atol=1e-4 * max(1.0, float(g0.abs().max())), rtol=0)


# ---------------------------------------------------------------- steepness
def test_steepness_is_live_and_never_recompiles(make_engine):
    net = build("splitter", 16, 5)
    r = Relaxation("logistic", steepness=4.0)
    mod = make_engine(net, r, mode="recompute", group=2)
    layer = mod.Layer()
    assert layer.steepness == 4.0
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    y = torch.tensor([0, 5, 9])
    _check(layer, net, r, x)
    P4 = layer(x)[1]
    c4 = layer.column(x, y)
    nsig = [len(k.signatures) for d in (mod._KERNELS, mod._KERNELS_SERIAL) for k in d]
    assert sum(nsig) >= 4  # compiled kernels are counted
    for s in (10.0, np.float32(2.5), torch.tensor(7.0), torch.nn.Parameter(torch.tensor(1.5, dtype=torch.float64))):
        layer.steepness = s
        P = layer(x)[1]
        assert (P - P4).abs().max() > 1e-3  # the output changed
        _check(layer, net, r, x, steepness=float(s.detach()) if isinstance(s, torch.Tensor) else float(s))
        r1 = Relaxation("logistic", float(s))
        torch.testing.assert_close(layer.column(x, y), reference.column(net, x, y, r1), atol=TOL, rtol=0)
    assert (layer.column(x, y) - c4).abs().max() > 1e-3
    assert [len(k.signatures) for d in (mod._KERNELS, mod._KERNELS_SERIAL) for k in d] == nsig  # nothing recompiled
    assert isinstance(layer.steepness, torch.nn.Parameter) and "steepness" in dict(layer.named_parameters())
    layer.steepness = 4.0  # back from a Parameter to a number
    assert "steepness" not in dict(layer.named_parameters())
    torch.testing.assert_close(layer(x)[1], P4, atol=0, rtol=0)
    assert mod.Layer(steepness=10.0).steepness == 10.0
    for bad in (0.0, -1.0, float("nan"), float("inf"), "3", True, torch.ones(2)):
        with pytest.raises(ValueError, match="steepness"):
            mod.Layer(steepness=bad)
    layer.steepness = torch.nn.Parameter(torch.tensor(2.0, dtype=torch.float64))
    with torch.no_grad():
        layer.steepness.fill_(-1.0)  # checked at every call too
    with pytest.raises(ValueError, match="steepness"):
        layer(x)


@pytest.mark.parametrize("mode", ["save", "recompute"])
def test_steepness_gradient(make_engine, mode):
    """dL/ds of a tensor steepness (rows: values and P; column) against
    finite differences (gradcheck in float64) and against the reference's
    autograd (the reference with a steepness tensor is differentiable
    through the swap code: compared with central differences of it)."""
    net = build("splitter", 12, 4)
    r = Relaxation("cauchy", steepness=3.0)
    mod = make_engine(net, r, mode=mode, group=2)
    layer = mod.Layer()
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(19, 12, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 12, (19,), generator=gen)
    W = torch.randn(19, 4, 12, generator=gen, dtype=torch.float64)
    w = torch.randn(19, 4, generator=gen, dtype=torch.float64)

    def rows(s):
        layer.steepness = s
        v, P = layer(x)
        return (P * W).sum() + (v * w).sum()

    def col(s):
        layer.steepness = s
        return (layer.column(x, y) * w).sum()

    s = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(rows, (s,), atol=1e-7)
    assert torch.autograd.gradcheck(col, (s,), atol=1e-7)
    # against central differences of the reference
    (gs,) = torch.autograd.grad(rows(s), s)
    h = 1e-6

    def ref(sv):
        v0, P0 = reference.forward(net, x, Relaxation("cauchy", sv))
        return float((P0 * W).sum() + (v0 * w).sum())

    fd = (ref(3.0 + h) - ref(3.0 - h)) / (2 * h)
    assert abs(float(gs) - fd) < 1e-6 * max(1.0, abs(fd))
    # x and s together
    xs = x[:3].clone().requires_grad_(True)
    s2 = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)

    def both(t, sv):
        layer.steepness = sv
        return layer(t)

    assert torch.autograd.gradcheck(both, (xs, s2), atol=1e-7)
    layer.steepness = torch.nn.Parameter(torch.tensor(3.0, dtype=torch.float64))
    (layer(x)[1] * W).sum().backward()
    assert layer.steepness.grad is not None and torch.isfinite(layer.steepness.grad)


# ----------------------------------------------------------------- refusals
