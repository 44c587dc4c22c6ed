"""The numba target's checkpointed sweeps (netgen/codegen/numba/checkpoint.py):
with segments forced tiny (``_CK_SEG``), ``Layer.back`` (W P) and
``Layer.values`` and their gradients (x, steepness, W) equal the
saved-state sweeps of lanes.py and the reference executor in float64
(1e-12), pass gradcheck, and the plan picks the checkpointed path only
above the memory budget."""

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


@pytest.fixture(scope="module")
def mods(tmp_path_factory):
    made = {}
    root = tmp_path_factory.mktemp("numba_ck")

    def _make(kind, n, k):
        if (kind, n, k) not in made:
            net = build(kind, n, k)
            r = default_relaxation(net)
            path = write_module("numba", net, r, root)
            with mock.patch.dict(os.environ, {"NETGEN_NUMBA_PARALLEL": "0"}):
                mod = load(path)
            made[kind, n, k] = (mod, net, r)
        return made[kind, n, k]

    return _make


def _x(B, n, seed=0):
    return torch.randn(B, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _run(mod, seg, f):
    old = mod._CK_SEG
    mod._CK_SEG = seg
    try:
        return f()
    finally:
        mod._CK_SEG = old


def _grads(layer, x, W, s, values_only=False):
    x = x.detach().requires_grad_(True)
    s = torch.tensor(s, dtype=torch.float64, requires_grad=True)
    W = W.detach().requires_grad_(True)
    g = torch.Generator().manual_seed(5)
    if values_only:
        out = layer.values(x, steepness=s)
    else:
        out = layer.back(x, W, steepness=s)
    (out * torch.randn(out.shape, generator=g, dtype=out.dtype)).sum().backward()
    return out.detach(), x.grad, s.grad, (None if values_only else W.grad)


@pytest.mark.parametrize("kind,n,k", [("oddeven", 7, 7), ("splitter", 9, 3)])
@pytest.mark.parametrize("seg", [1, 3, 5, 1000])  # one comparator per segment, partial last segments, one segment
def test_checkpointed_equals_saved_state_and_reference(mods, kind, n, k, seg):
    mod, net, r = mods(kind, n, k)
    layer = mod.Layer()
    x = _x(19, n)  # a full block of 16 rows and a partial one
    g = torch.Generator().manual_seed(1)
    for W in (torch.randn(2, k, generator=g, dtype=torch.float64),  # one W for every row, m = 2
              torch.randn(19, 1, k, generator=g, dtype=torch.float64)):  # one per row
        want = _grads(layer, x, W, 2.5)
        got = _run(mod, seg, lambda W=W: _grads(layer, x, W, 2.5))
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)
        torch.testing.assert_close(got[0], ref.back(net, x, W, r, 2.5), atol=TOL, rtol=0)
    # the values alone (soft_sort's sweep), with the values' own cotangent
    want = _grads(layer, x, W, 2.5, values_only=True)
    got = _run(mod, seg, lambda: _grads(layer, x, W, 2.5, values_only=True))
    for a, b in zip(got[:3], want[:3]):
        torch.testing.assert_close(a, b, atol=TOL, rtol=0)
    torch.testing.assert_close(got[0], ref.soft_values(net, x, r, 2.5), atol=TOL, rtol=0)


def test_checkpointed_gradcheck(mods):
    mod, _, _ = mods("oddeven", 7, 7)
    layer = mod.Layer()
    x = _x(3, 7, seed=2).requires_grad_(True)
    W = torch.randn(2, 7, generator=torch.Generator().manual_seed(3), dtype=torch.float64, requires_grad=True)
    s = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)

    def check():
        assert torch.autograd.gradcheck(lambda x, W, s: layer.back(x, W, steepness=s), (x, W, s))
        assert torch.autograd.gradcheck(lambda x, s: layer.values(x, steepness=s), (x, s))
        # only W asks for a gradient (the reverse pass is skipped)
        assert torch.autograd.gradcheck(lambda W: layer.back(x.detach(), W, steepness=1.7), (W,))
        return True

    assert _run(mod, 2, check)


def test_float32_compiles_without_numba_warnings(tmp_path):
    """float32 inlines the rendered arctangent (conditional expressions):
    several inlined copies in one function made numba's SSA pass warn
    (NumbaIRAssumptionWarning); each helper calls the swap once."""
    import warnings

    net = build("oddeven", 5, 5)
    r = default_relaxation(net)
    with mock.patch.dict(os.environ, {"NETGEN_NUMBA_PARALLEL": "0"}):
        mod = load(write_module("numba", net, r, tmp_path))
    x = _x(3, 5).float().requires_grad_(True)
    W = torch.ones(1, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = _run(mod, 2, lambda: mod.Layer().back(x, W))
        (gx,) = torch.autograd.grad(out.square().sum(), x)
    xd = x.detach().double().requires_grad_(True)
    want = ref.back(net, xd, W.double(), r)
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gx.double(), torch.autograd.grad(want.square().sum(), xd)[0], atol=1e-4, rtol=1e-4)


def test_plan_uses_checkpoints_above_the_budget(mods):
    mod, net, r = mods("oddeven", 7, 7)
    assert mod._ck_plan(19, 1, 8) is None  # far below _CK_BYTES: the saved-state sweeps
    old = mod._CK_BYTES
    mod._CK_BYTES = 0
    try:
        nseg, seg = mod._ck_plan(19, 1, 8)
        assert nseg * seg >= net.size > (nseg - 1) * seg and nseg >= 1
        x = _x(4, 7)
        W = torch.ones(1, 7, dtype=torch.float64)
        torch.testing.assert_close(mod.Layer().back(x, W), ref.back(net, x, W, r), atol=TOL, rtol=0)
    finally:
        mod._CK_BYTES = old
    assert _run(mod, 3, lambda: mod._ck_plan(19, 1, 8)) == (-(-net.size // 3), 3)


@pytest.mark.slow
def test_parallel_module_checkpointed(tmp_path):
    """The kernels as shipped (parallel; the block bodies are functions of
    their own, so numba's parfor lowering sees a loop of calls: no IR
    warnings) equal the reference with tiny segments over several blocks,
    the last block's two rows in the 1-row copies."""
    import warnings

    net = build("oddeven", 7, 7)
    r = default_relaxation(net)
    path = write_module("numba", net, r, tmp_path)
    with mock.patch.dict(os.environ, {"NETGEN_NUMBA_PARALLEL": "1"}):
        mod = load(path)
    mod._SERIAL_WORK = 0
    layer = mod.Layer(threads=2)
    W = torch.randn(1, 7, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    for dt, tol in ((torch.float64, TOL), (torch.float32, 1e-4)):
        x = _x(34, 7).to(dt).requires_grad_(True)
        assert mod._ck_split(34) == 32
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = _run(mod, 3, lambda x=x: torch.autograd.grad(layer.back(x, W.to(x.dtype)).square().sum(), x)[0])
        xd = x.detach().double().requires_grad_(True)
        want = torch.autograd.grad(ref.back(net, xd, W, r).square().sum(), xd)[0]
        torch.testing.assert_close(got.double(), want, atol=tol, rtol=tol)


# ------------------------------------------------------------ the 1-row copies
def test_split_sends_a_last_block_of_few_rows_to_the_1_row_copies(mods):
    mod, _, _ = mods("oddeven", 7, 7)
    few = mod._CK_NARROW
    assert mod._W == 16 and mod._W_1 == 1 and 1 <= few < 16
    for B, wide in ((1, 0), (few, 0), (few + 1, few + 1), (16, 16), (17, 16), (16 + few, 16), (17 + few, 17 + few),
                    (32, 32)):
        assert mod._ck_split(B) == wide, B


def _spy(mod, name, rows):
    # the kernels of mod.<name> wrapped to note the rows of each call
    kernels = getattr(mod, name)
    return tuple((lambda *a, f=f, i=i: rows.append((name, i, a[0].shape[0])) or f(*a)) for i, f in enumerate(kernels))


@pytest.mark.parametrize("B", [1, 2, 3, 18])  # all 1-row; 3 (> _CK_NARROW): one 16-row block; 18: both
def test_1_row_copies_equal_the_reference(mods, B):
    """The 1-row copies (netgen/codegen/numba/narrow.py) with tiny segments:
    W P, its gradients (x, steepness, W) and the values alone with theirs
    equal the reference executor's and the saved-state sweeps' in float64,
    and the rows go where _ck_split says."""
    mod, net, r = mods("splitter", 9, 3)
    layer = mod.Layer()
    x = _x(B, 9, seed=B)
    g = torch.Generator().manual_seed(B)
    rows = []
    names = ("_CK_KERNELS_SERIAL", "_CK_KERNELS_SERIAL_1")
    with mock.patch.multiple(mod, **{n: _spy(mod, n, rows) for n in names}):
        for W in (torch.randn(2, 3, generator=g, dtype=torch.float64),  # one W for every row
                  torch.randn(B, 1, 3, generator=g, dtype=torch.float64)):  # one per row
            want = _grads(layer, x, W, 2.5)
            got = _run(mod, 2, lambda W=W: _grads(layer, x, W, 2.5))
            for a, b in zip(got, want):
                torch.testing.assert_close(a, b, atol=TOL, rtol=0)
            torch.testing.assert_close(got[0], ref.back(net, x, W, r, 2.5), atol=TOL, rtol=0)
            xr = x.detach().requires_grad_(True)
            s = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
            wr = W.detach().requires_grad_(True)
            (ref.back(net, xr, wr, r, s) * torch.randn(got[0].shape, generator=torch.Generator().manual_seed(5),
                                                       dtype=torch.float64)).sum().backward()
            for a, b in zip(got[1:], (xr.grad, s.grad, wr.grad)):
                torch.testing.assert_close(a, b, atol=TOL, rtol=0)
        want = _grads(layer, x, W, 2.5, values_only=True)
        got = _run(mod, 2, lambda: _grads(layer, x, W, 2.5, values_only=True))
        for a, b in zip(got[:3], want[:3]):
            torch.testing.assert_close(a, b, atol=TOL, rtol=0)
        torch.testing.assert_close(got[0], ref.soft_values(net, x, r, 2.5), atol=TOL, rtol=0)
    wide = mod._ck_split(B)
    want_rows = {(n, i, b) for i in (0, 1) for n, b in ((names[0], wide), (names[1], B - wide)) if b}
    assert set(rows) == want_rows


def test_1_row_copies_gradcheck(mods):
    mod, _, _ = mods("oddeven", 7, 7)
    layer = mod.Layer()
    x = _x(1, 7, seed=2).requires_grad_(True)
    W = torch.randn(1, 7, generator=torch.Generator().manual_seed(3), dtype=torch.float64, requires_grad=True)
    s = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)
    assert mod._ck_split(1) == 0

    def check():
        assert torch.autograd.gradcheck(lambda x, W, s: layer.back(x, W, steepness=s), (x, W, s))
        assert torch.autograd.gradcheck(lambda x, s: layer.values(x, steepness=s), (x, s))
        return True

    assert _run(mod, 2, check)


def test_1_row_copies_are_renamed_source():
    """The copies are the kernels' own source with _W and the names that
    read it suffixed (comments, strings and attributes untouched), and
    nothing that does not depend on the width is copied."""
    from netgen.codegen.numba.narrow import renames
    from netgen.codegen.runtime import renamed

    src = 'def f(a):  # _W rows\n    return numba.prange(_W) + g("_W") + a._W + _W\n'
    assert renamed(src, {"_W": "_W_1", "f": "f_1", "prange": "x"}) == (
        'def f_1(a):  # _W rows\n    return numba.prange(_W_1) + g("_W") + a._W + _W_1\n')
    names = renames()
    assert {"_W", "_vmixp", "_vptrs", "_ck_vals", "_ck_fwd_py", "_ck_bwd_block", "_CK_KERNELS"} <= set(names)
    assert not {"_swap", "_load_block", "_ck_load_lanes", "_jit", "_ftz_on", "ck_numpy", "_seed"} & set(names)
    assert all(v == k + "_1" for k, v in names.items())
