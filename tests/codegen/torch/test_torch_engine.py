"""The torch target's P engine (issue 18): both backward modes (``save``:
the back-sweep's differences kept from the forward; ``recompute``: the
back-sweep run again per rank group in the backward) and several rank-group
sizes against the reference executor in float64 (1e-12), gradcheck
(steepness as a tensor included), float32, torch.compile, the build-time
choice and what the forward keeps for the backward.

The mode and group size are build-time constants of a module
(the emit options ``mode`` and ``group``); the runtime reads ``_MODE`` /
``_GROUP`` at call time, so one module is also run with other values here."""

from __future__ import annotations

import pytest
import torch

from netgen.codegen import TARGETS, module_name
from netgen.codegen.literals import check_source
from netgen.codegen.cache import import_source as load_source
from netgen.codegen.plan import choose
from netgen.codegen.torch import emit as torch_emit
from netgen.codegen.torch import engine as torch_engine
from netgen.construct import build
from netgen.network import Network
from netgen.relax import reference as ref
from netgen.relax.distributions import Relaxation

torch.set_num_threads(1)  # tiny tensors: intra-op threads only add contention (2-core CI)

TOL = 1e-12
_cache: dict = {}


def module(net: Network, r: Relaxation, mode=None, group=None):
    key = (net.key(), tuple(r.to_dict().values()), mode, group)
    if key not in _cache:
        src = TARGETS["torch"].emit(net, r, {"mode": mode, "group": group})
        check_source(src, "generated torch module")
        _cache[key] = load_source(src, f"{module_name(net, r, 'torch')}_{mode}_{group}")
    return _cache[key]


def _close(a, b, what):
    assert a.shape == b.shape and a.dtype == b.dtype, what
    err = (a - b).abs().max().item() if a.numel() else 0.0
    scale = max(1.0, b.abs().max().item() if b.numel() else 1.0)
    assert err <= TOL * scale, f"{what}: error {err:.3g} > {TOL:g} x {scale:.3g}"


def check(layer, net, r, x):
    """values and P, and the gradients of values + P, P only and values only
    (the P path unused), equal the reference's."""
    x = x.clone().requires_grad_(True)
    v, P = layer(x)
    v0, P0 = ref.forward(net, x, r)
    _close(v, v0, "values")
    _close(P, P0, "P")
    gen = torch.Generator().manual_seed(11)
    wv = torch.randn(v.shape, generator=gen, dtype=v.dtype)
    wP = torch.randn(P.shape, generator=gen, dtype=P.dtype)
    for name, loss in (("values + P", lambda v, P: (v * wv).sum() + (P * wP).sum()),
                       ("P only", lambda v, P: (P * wP).sum()),
                       ("values only", lambda v, P: (v * wv).sum())):
        (g,) = torch.autograd.grad(loss(v, P), x, retain_graph=True)
        (g0,) = torch.autograd.grad(loss(v0, P0), x, retain_graph=True)
        _close(g, g0, f"gradient of {name}")


def _plan(net, **force):
    p = choose(net, TARGETS["torch"].budget, **force)
    return p.mode, p.group


def test_build_time_choice():
    # top-5 of 10450 keeps its differences: size x k = 3.0 k n
    top5 = build("splitter", 10450, 5)
    assert top5.size * top5.k <= TARGETS["torch"].budget.save_per_kn * top5.k * top5.n
    assert _plan(top5) == ("save", None)
    # sorters: small ones save (D small in absolute terms), larger ones recompute
    assert _plan(build("oddeven", 32, 32))[0] == "save"
    assert _plan(build("oddeven", 64, 64))[0] == "save"
    assert _plan(build("oddeven", 128, 128))[0] == "recompute"
    assert _plan(build("oddeven", 1024, 1024)) == ("recompute", None)
    # overrides (tests), clipped to k; bad ones refused
    net = build("oddeven", 12, 12)
    assert _plan(net, mode="save", group=100) == ("save", 12)
    assert _plan(net, mode="recompute", group=5) == ("recompute", 5)
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="group"):
            _plan(net, group=bad)
        with pytest.raises(ValueError, match="group"):
            TARGETS["torch"].emit(net, Relaxation(), {"group": bad})
    with pytest.raises(ValueError, match="mode"):
        TARGETS["torch"].emit(net, Relaxation(), {"mode": "fast"})


def test_the_torch_engine_sweeps_back_only():
    """The plan never sweeps the torch target forward (its engine computes
    P's rows by rank groups), not even for the sorters the numba and cuda
    targets sweep forward; forcing it is refused."""
    net = build("oddeven", 64, 64)
    assert choose(net, TARGETS["numba"].budget).direction == "forward"
    p = choose(net, TARGETS["torch"].budget)
    assert p.direction == "back" and p.lanes == net.k and p.stored == net.size * net.k
    with pytest.raises(ValueError, match="sweeps back only"):
        TARGETS["torch"].emit(net, Relaxation(), {"direction": "forward"})
    assert "_MODE = " in TARGETS["torch"].emit(net, Relaxation(), {"direction": "back"})


def test_module_constants():
    net = build("oddeven", 12, 12)
    src = TARGETS["torch"].emit(net, Relaxation("logistic", 4.0), {"mode": "recompute", "group": 5})
    assert "\n_MODE = 'recompute'\n_GROUP = 5\n" in src
    assert f"\n_GROUP_BYTES = {torch_emit.GROUP_BYTES}\n" in src
    assert f"\n_D_ROW_MAX = {max(net.size, torch_emit.D_PER_KN * 12 * 12)}\n" in src
    assert "\n_MODE = 'save'\n_GROUP = None\n" in TARGETS["torch"].emit(build("splitter", 40, 5), Relaxation())
    # the default emission is what the public path writes
    from netgen.codegen import emit

    assert emit("torch", net, Relaxation()) == TARGETS["torch"].emit(net, Relaxation(), None)


def test_group_size_rule(monkeypatch):
    """_group_size on the runtime module itself: forced, save, the CPU byte
    budget, the backward's cap on the differences, at least 1, at most k."""
    for name, value in (("_N", 1024), ("_K", 1024), ("_SIZE", 24063), ("_GROUP", None), ("_MODE", "recompute"),
                        ("_GROUP_BYTES", 4 << 20), ("_D_ROW_MAX", 2 * 1024 * 1024)):
        monkeypatch.setattr(torch_engine, name, value)
    f32, f64 = torch.empty(3, 64), torch.empty(3, 64, dtype=torch.float64)
    assert torch_engine._group_size(f32, False) == 16  # 4 MB / (1024 x 64 x 4 bytes)
    assert torch_engine._group_size(f64, False) == 8
    assert torch_engine._group_size(torch.empty(3, 8192), False) == 1
    assert torch_engine._group_size(torch.empty(3, 2), False) == 512
    assert torch_engine._group_size(torch.empty(3, 2), True) == 87  # 2 k n // size
    monkeypatch.setattr(torch_engine, "_SIZE", 10**8)
    assert torch_engine._group_size(f32, True) == 1  # one rank: size floats per row
    monkeypatch.setattr(torch_engine, "_GROUP", 3)
    assert torch_engine._group_size(f32, True) == 3
    monkeypatch.setattr(torch_engine, "_GROUP", None)
    monkeypatch.setattr(torch_engine, "_MODE", "save")
    assert torch_engine._group_size(f32, False) == 1024
    assert torch_engine._groups(3)[-1] == (1023, 1024) and len(torch_engine._groups(3)) == 342


@pytest.mark.parametrize("mode", ["save", "recompute"])
@pytest.mark.parametrize("n", [5, 8, 11, 16])
def test_sorters(mode, n):
    """odd-even sorters (odd n too) in both modes, the module's group size
    and forced ones (1, 3: an uneven last group, k: one group), B = 1, 7."""
    net = build("oddeven", n, n)
    r = Relaxation("logistic", steepness=4.0)
    mod = module(net, r, mode=mode, group=3)
    assert (mod._MODE, mod._GROUP) == (mode, 3)
    layer = mod.Layer()
    gen = torch.Generator().manual_seed(n)
    try:
        for group in (3, 1, n, None):
            mod._GROUP = group
            for B in (1, 7):
                check(layer, net, r, torch.randn(B, n, generator=gen, dtype=torch.float64))
    finally:
        mod._GROUP = 3
    check(layer, net, r, torch.randn(n, generator=gen, dtype=torch.float64))  # unbatched


@pytest.mark.parametrize("mode", ["save", "recompute"])
@pytest.mark.parametrize("kind,n,k,dist", [("splitter", 16, 5, "cauchy"), ("splitter", 9, 1, "gaussian"),
                                           ("splitter", 13, 4, "logistic_phi"), ("bitonic", 8, 8, "reciprocal")])
def test_selection_networks(mode, kind, n, k, dist):
    net = build(kind, n, k)
    r = Relaxation(dist, steepness=3.0, art_lambda=0.25)
    mod = module(net, r, mode=mode, group=2)
    gen = torch.Generator().manual_seed(2)
    check(mod.Layer(), net, r, torch.randn(2, 3, n, generator=gen, dtype=torch.float64))
    check(mod.Layer(), net, r, torch.randn(1, n, generator=gen, dtype=torch.float64))


@pytest.mark.parametrize("mode", ["save", "recompute"])
@pytest.mark.parametrize("kind,n,k,group", [("oddeven", 7, 7, 2), ("splitter", 10, 3, 2), ("oddeven", 6, 6, None)])
def test_gradcheck(mode, kind, n, k, group):
    """gradcheck of values and P with respect to x and to the steepness (a
    0-d tensor that requires grad), and of the values alone."""
    net = build(kind, n, k)
    mod = module(net, Relaxation("cauchy", steepness=2.0), mode=mode, group=group)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, n, generator=gen, dtype=torch.float64, requires_grad=True)
    s = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t, s: mod.Layer(steepness=s)(t), (x, s))
    assert torch.autograd.gradcheck(lambda t: mod.Layer()(t)[0], (x,))
    x1 = torch.randn(1, n, generator=gen, dtype=torch.float64, requires_grad=True)  # B = 1
    assert torch.autograd.gradcheck(lambda t, s: mod.Layer(steepness=s)(t)[1], (x1, s))


@pytest.mark.parametrize("mode", ["save", "recompute"])
def test_steepness_gradient_equals_reference(mode):
    """dL/ds of values + P equals the reference's (autograd through the
    reference with a tensor steepness), groups of 3 over 8 ranks."""
    net = build("oddeven", 8, 8)
    r = Relaxation("logistic_phi", steepness=3.0, art_lambda=0.3)
    mod = module(net, r, mode=mode, group=3)
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(4, 8, generator=gen, dtype=torch.float64)
    wv, wP = torch.randn(4, 8, generator=gen, dtype=torch.float64), torch.randn(4, 8, 8, generator=gen,
                                                                                  dtype=torch.float64)
    s = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    v, P = mod.Layer(steepness=s)(x)
    (gs,) = torch.autograd.grad((v * wv).sum() + (P * wP).sum(), s)

    def loss_ref(sv):
        v0, P0 = ref.forward(net, x, Relaxation(r.distribution, sv, r.art_lambda, r.art_epsilon))
        return ((v0 * wv).sum() + (P0 * wP).sum()).item()

    h = 1e-5
    fd = (loss_ref(3.0 + h) - loss_ref(3.0 - h)) / (2 * h)
    assert abs(gs.item() - fd) <= 1e-7 * max(1.0, abs(fd)), (gs.item(), fd)


def test_float32_recompute():
    net = build("oddeven", 12, 12)
    r = Relaxation("cauchy", steepness=5.0)
    mod = module(net, r, mode="recompute", group=5)
    x = torch.randn(21, 12, generator=torch.Generator().manual_seed(3)).requires_grad_(True)
    v, P = mod.Layer()(x)
    v0, P0 = ref.forward(net, x, r)
    W = torch.randn(P.shape, generator=torch.Generator().manual_seed(4))
    (g,) = torch.autograd.grad((P * W).sum() + v.sum(), x)
    (g0,) = torch.autograd.grad((P0 * W).sum() + v0.sum(), x)
    for a, b in ((v, v0), (P, P0), (g, g0)):
        assert a.dtype == torch.float32 and (a - b).abs().max().item() <= 1e-5 * max(1.0, b.abs().max().item())


def _saved_floats(t):
    """Floats the layer's autograd node (behind t's views) keeps for its backward."""
    todo = [t.grad_fn]
    while todo:
        fn = todo.pop()
        if type(fn).__name__ == "_TopKBackward":
            return sum(s.numel() for s in fn.saved_tensors if s is not None and s.is_floating_point())
        todo.extend(f for f, _ in fn.next_functions if f is not None)
    raise AssertionError("no _TopKBackward node")


def test_what_the_forward_keeps():
    """mode save keeps size x k differences per row; mode recompute keeps
    O(size) per row (p, d, dp/dd and x), whatever k."""
    net = build("oddeven", 16, 16)
    B = 5
    x = torch.randn(B, 16, dtype=torch.float64, requires_grad=True)
    saved = {mode: _saved_floats(module(net, Relaxation(), mode=mode).Layer()(x)[1]) for mode in ("save", "recompute")}
    assert saved["recompute"] == 3 * net.size * B + 16 * B
    assert saved["save"] == saved["recompute"] + net.size * 16 * B


def test_P_does_not_depend_on_the_grouping():
    """P does not depend on the grouping (ranks never interact): the same
    bits for groups of 1, 3 and all k."""
    net = build("oddeven", 9, 9)
    mod = module(net, Relaxation("cauchy", 6.0), mode="recompute", group=1)
    x = torch.randn(4, 9, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    outs = []
    try:
        for group in (1, 3, 9):
            mod._GROUP = group
            outs.append(mod.Layer()(x)[1])
    finally:
        mod._GROUP = 1
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


@pytest.mark.parametrize("mode,group", [("recompute", 3), ("save", 2)])
def test_torch_compile_fullgraph(mode, group):
    """The grouped sweeps trace without a graph break (aot_eager: forward and
    backward), and give the eager results."""
    net = build("oddeven", 8, 8)
    mod = module(net, Relaxation("cauchy", 10.0), mode=mode, group=group)
    layer = mod.Layer()
    gen = torch.Generator().manual_seed(9)
    x0 = torch.randn(6, 8, generator=gen)
    W = torch.randn(6, 8, 8, generator=gen)

    def f(x):
        v, P = layer(x)
        return (P * W).sum() + v.square().sum()

    results = []
    for fn in (f, torch.compile(f, backend="aot_eager", fullgraph=True)):
        x = x0.clone().requires_grad_()
        loss = fn(x)
        (g,) = torch.autograd.grad(loss, x)
        results.append((loss.detach(), g))
    torch._dynamo.reset()
    (l0, g0), (l1, g1) = results
    assert torch.allclose(l0, l1, rtol=1e-6, atol=1e-5) and torch.allclose(g0, g1, rtol=1e-5, atol=1e-6)
