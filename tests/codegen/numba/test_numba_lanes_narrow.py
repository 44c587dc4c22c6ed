"""The 1-row copies of the saved-state lane sweeps (netgen/codegen/numba/lanes.py,
copies made by netgen/codegen/numba/narrow.py): a call of at most
``_LANES_NARROW`` rows runs wholly in them; W P, P V and the values alone,
with their gradients (x, W / V, steepness), equal the reference executor
and the 16-row kernels in float64 (1e-12) and pass gradcheck, and a spy
checks which kernels ran."""

from __future__ import annotations

import os
from unittest import mock

import pytest
import torch

from netgen.codegen import write_module
from netgen.codegen.cache import load
from netgen.construct import build
from netgen.relax import reference as ref
from netgen.relax.distributions import default_relaxation

pytest.importorskip("numba")

TOL = 1e-12
NAMES = ("_LANE_KERNELS_SERIAL", "_LANE_KERNELS_SERIAL_1")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    net = build("splitter", 9, 3)
    r = default_relaxation(net)
    path = write_module("numba", net, r, tmp_path_factory.mktemp("numba_lanes_narrow"))
    with mock.patch.dict(os.environ, {"NETGEN_NUMBA_PARALLEL": "0"}):
        mod = load(path)
    return mod, net, r


def _spy(mod, name, calls):
    # the kernels of mod.<name> wrapped to note which ran
    return tuple((lambda *a, f=f, i=i: calls.append((name, i)) or f(*a)) for i, f in enumerate(getattr(mod, name)))


def _grads(f, x, L, s):
    # f(x, L, s) with a random weighting; its value and the gradients for x, L (None: no lanes) and s
    x = x.detach().requires_grad_(True)
    s = torch.tensor(s, dtype=torch.float64, requires_grad=True)
    L = None if L is None else L.detach().requires_grad_(True)
    out = f(x, L, s)
    (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(5), dtype=out.dtype)).sum().backward()
    return out.detach(), x.grad, s.grad, (None if L is None else L.grad)


def _cases(mod, net, r, B):
    layer = mod.Layer()
    g = torch.Generator().manual_seed(B)
    return [  # (name, netgen, reference, lanes)
        ("W P, one W", layer.back, lambda x, W, s: ref.back(net, x, W, r, s), torch.randn(2, 3, generator=g,
                                                                                             dtype=torch.float64)),
        ("W P, W per row", layer.back, lambda x, W, s: ref.back(net, x, W, r, s),
         torch.randn(B, 1, 3, generator=g, dtype=torch.float64)),
        ("P V", layer.fwd, lambda x, V, s: ref.fwd(net, x, V, r, s), torch.randn(B, 9, 2, generator=g,
                                                                                   dtype=torch.float64)),
        ("values", lambda x, _, s: layer.values(x, steepness=s), lambda x, _, s: ref.soft_values(net, x, r, s), None),
    ]


def _call(f):
    return lambda x, L, s: f(x, L, steepness=s)


@pytest.mark.parametrize("B", [1, "threshold", "threshold + 1"])
def test_1_row_lanes_equal_the_reference(made, B):
    mod, net, r = made
    few = mod._LANES_NARROW
    assert mod._W == 16 and mod._W_1 == 1 and 1 <= few < 16
    B = {"threshold": few, "threshold + 1": few + 1}.get(B, B)
    x = torch.randn(B, 9, generator=torch.Generator().manual_seed(B), dtype=torch.float64)
    for name, f, want_f, L in _cases(mod, net, r, B):
        f = _call(f) if L is not None else f
        calls = []
        with mock.patch.multiple(mod, **{n: _spy(mod, n, calls) for n in NAMES}):
            got = _grads(f, x, L, 2.5)
        ran = {n for n, _ in calls}
        assert ran == {NAMES[1] if B <= few else NAMES[0]}, (name, B, calls)
        want = _grads(want_f, x, L, 2.5)
        for a, b in zip(got, want):
            if b is not None:
                torch.testing.assert_close(a, b, atol=TOL, rtol=0, msg=lambda m, name=name, B=B: f"{name}, B = {B}: {m}")
        old = mod._LANES_NARROW  # the 16-row kernels: the same numbers
        mod._LANES_NARROW = 0
        try:
            wide = _grads(f, x, L, 2.5)
        finally:
            mod._LANES_NARROW = old
        for a, b in zip(got, wide):
            if b is not None:
                torch.testing.assert_close(a, b, atol=TOL, rtol=0)


def test_1_row_lanes_gradcheck(made):
    mod, _, _ = made
    layer = mod.Layer()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 9, generator=g, dtype=torch.float64, requires_grad=True)
    W = torch.randn(1, 3, generator=g, dtype=torch.float64, requires_grad=True)
    V = torch.randn(1, 9, 2, generator=g, dtype=torch.float64, requires_grad=True)
    s = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)
    calls = []
    with mock.patch.multiple(mod, **{n: _spy(mod, n, calls) for n in NAMES}):
        assert torch.autograd.gradcheck(lambda x, W, s: layer.back(x, W, steepness=s), (x, W, s))
        assert torch.autograd.gradcheck(lambda x, V, s: layer.fwd(x, V, steepness=s), (x, V, s))
        assert torch.autograd.gradcheck(lambda x, s: layer.values(x, steepness=s), (x, s))
    assert calls and {n for n, _ in calls} == {NAMES[1]}


def test_1_row_lanes_are_renamed_source():
    """The lane kernels' copies come from narrow.renames (their own source
    renamed), the host functions are not copied."""
    from netgen.codegen.numba.narrow import renames

    names = renames()
    assert {"_LANE_KERNELS", "_lanes_vals_py", "_lanes_fwd_py", "_lanes_bwd_py", "_vals_adjoint",
            "_vals_adjoint_d", "_fwd_vals", "_fwd_vals_py", "_fwd_vals_s"} <= set(names)
    assert not {"lanes_numpy", "lanes_backward_numpy", "_swap", "_jit", "_fwd_P_py", "_bwd_rows_py"} & set(names)
