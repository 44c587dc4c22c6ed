"""The generated-module contract (docs/generated-modules.md), one test per
clause, run for every target in ``netgen.codegen.TARGETS`` through the
public API only (``write_module`` -> ``load`` -> ``Layer``): values, P,
column and gradients against the reference executor, gradcheck, hard,
dtypes, shapes, bad-input messages, the steepness attribute (PLAN
interface 2), second order and torch.func refused (3), inputs never written
(4), overflow named (5).

How a target runs here is its :class:`~netgen.codegen.target.TestMode`
(``TARGETS[name].test``): in this process (torch, numba), with its test
environment and emit options; or, for a target whose device this machine
lacks (``simulator``: cuda), in Numba's CUDA simulator, which must be
enabled before numba is imported: this file is then executed as a script in
a subprocess (``python test_contract.py NAME`` with NUMBA_ENABLE_CUDASIM=1)
and reports one result per check; gradcheck runs in its fast mode there
(~1 s per launch). With ``nan_rows`` (a GPU, and so the simulator) bad rows
come out NaN instead of raising, and overflow is not checked (it would
synchronise), so those two checks follow the device rule.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np
import pytest
import torch

from netgen.codegen import TARGETS, module_name
from netgen.codegen.cache import load
from netgen.construct import build
from netgen.relax import reference as ref
from netgen.relax.distributions import Relaxation

NET = ("splitter", 9, 3)
RELAX = Relaxation("logistic_phi", 3.0, art_lambda=0.25)


class Case:
    """One target's generated module for NET/RELAX, and the rules it runs by."""

    def __init__(self, target: str, out_dir: Path):
        self.target = TARGETS[target]
        self.net = build(*NET)
        self.r = RELAX
        self.mod = load(self._write(out_dir))
        self.device_rules = self.target.test.nan_rows  # bad rows -> NaN instead of ValueError
        self.fast_gradcheck = self.target.test.simulator  # ~1 s per simulated launch

    def _write(self, out_dir: Path) -> Path:
        # the target's test options (cuda: a small block, the same kernels);
        # emit() compiles the source before returning it
        from netgen.codegen import emit

        path = out_dir / f"{module_name(self.net, self.r, self.target.name)}.py"
        path.write_text(emit(self.target.name, self.net, self.r, dict(self.target.test.options)))
        return path

    def layer(self, **kw):
        return self.mod.Layer(**kw)

    def x(self, *batch, dtype=torch.float64, seed=0):
        g = torch.Generator().manual_seed(seed)
        return torch.randn(*batch, self.net.n, generator=g, dtype=torch.float64).to(dtype)

    def y(self, *batch, seed=1):
        return torch.randint(0, self.net.n, batch, generator=torch.Generator().manual_seed(seed))


def _close(a, b, tol, what):
    assert a.shape == b.shape, f"{what}: shape {tuple(a.shape)} != {tuple(b.shape)}"
    err = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
    assert err <= tol * max(1.0, b.abs().max().item() if b.numel() else 1.0), f"{what}: error {err:.3g}"


def _with(r, s):
    return Relaxation(r.distribution, float(s), r.art_lambda, r.art_epsilon)


# ------------------------------------------------------------------ the checks
def check_values_P_column(c: Case):
    layer = c.layer()
    for batch in ((4,), (2, 3)):
        x, y = c.x(*batch), c.y(*batch)
        v, P = layer(x)
        rv, rP = ref.forward(c.net, x, c.r)
        _close(v, rv, 1e-12, "values")
        _close(P, rP, 1e-12, "P")
        _close(layer.column(x, y), ref.column(c.net, x, y, c.r), 1e-12, "column")
        _close(v, (P @ x.unsqueeze(-1)).squeeze(-1), 1e-12, "values = P x")


def check_gradients(c: Case):
    layer = c.layer()
    x, y = c.x(3).requires_grad_(), c.y(3)
    g = torch.Generator().manual_seed(3)
    wv, wP, wc = (torch.randn(s, generator=g, dtype=torch.float64) for s in ((3, c.net.k), (3, c.net.k, c.net.n),
                                                                              (3, c.net.k)))
    for fn, rfn in (
        (lambda t: (layer(t)[0] * wv).sum() + (layer(t)[1] * wP).sum(),
         lambda t: (ref.forward(c.net, t, c.r)[0] * wv).sum() + (ref.forward(c.net, t, c.r)[1] * wP).sum()),
        (lambda t: (layer(t)[0] * wv).sum(), lambda t: (ref.forward(c.net, t, c.r)[0] * wv).sum()),
        (lambda t: (layer.column(t, y) * wc).sum(), lambda t: (ref.column(c.net, t, y, c.r) * wc).sum()),
    ):
        (gx,) = torch.autograd.grad(fn(x), x)
        (rx,) = torch.autograd.grad(rfn(x), x)
        _close(gx, rx, 1e-11, "gradient")
    xs = c.x(2).requires_grad_()
    # in the simulator, ~1 s per launch: gradcheck's fast mode (a random
    # projection: two forwards and one backward per function, not one
    # backward per output) there (cuda: 199 -> ~10 s); the gradients above
    # already match the reference to 1e-11 on every target
    fast = c.fast_gradcheck
    assert torch.autograd.gradcheck(lambda t: layer(t), (xs,), fast_mode=fast)
    assert torch.autograd.gradcheck(lambda t: layer.column(t, y[:2]), (xs,), fast_mode=fast)


def check_hard(c: Case):
    layer = c.layer()
    x = c.x(4, 2, dtype=torch.float32)
    x0 = x.clone()
    v, i = layer.hard(x)
    tv, ti = torch.topk(x, c.net.k, dim=-1)
    assert torch.equal(v, tv) and torch.equal(i, ti) and i.dtype == torch.int64
    rv, ri = ref.hard(c.net, x)
    assert torch.equal(v, rv) and torch.equal(i, ri)
    assert torch.equal(x, x0)


def check_dtypes(c: Case):
    layer = c.layer()
    x, y = c.x(3), c.y(3)
    for dt, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1e-2)):
        xd = x.to(dt)
        v, P = layer(xd)
        col = layer.column(xd, y)
        assert v.dtype == P.dtype == col.dtype == dt, dt
        compute = xd.double() if dt == torch.float64 else xd.float()
        rv, rP = ref.forward(c.net, compute, c.r)
        _close(v, rv, tol, f"values {dt}")
        _close(P, rP, tol, f"P {dt}")
        _close(col, ref.column(c.net, compute, y, c.r), tol, f"column {dt}")


def check_shapes(c: Case):
    layer = c.layer()
    n, k = c.net.n, c.net.k
    for batch in ((), (1,), (2, 1, 3)):
        x = c.x(*batch)
        v, P = layer(x)
        assert v.shape == batch + (k,) and P.shape == batch + (k, n), batch
        assert layer.column(x, c.y(*batch) if batch else torch.tensor(2)).shape == batch + (k,)
        hv, hi = layer.hard(x)
        assert hv.shape == hi.shape == batch + (k,)
        rv, _ = ref.forward(c.net, x, c.r)
        _close(v, rv, 1e-12, f"values {batch}")


def _raises(fn, pattern):
    import re

    try:
        fn()
    except ValueError as e:
        assert re.search(pattern, str(e)), f"message {str(e)!r} does not match {pattern!r}"
        assert "\n" not in str(e).strip(), "one line"
        return
    raise AssertionError(f"no ValueError (expected {pattern!r})")


def check_bad_input(c: Case):
    layer = c.layer()
    n = c.net.n
    x = c.x(2)
    _raises(lambda: layer([0.0] * n), "torch.Tensor|tensor")
    _raises(lambda: layer(torch.zeros(2, n + 1, dtype=torch.float64)), "shape")
    _raises(lambda: layer(torch.zeros(2, n, dtype=torch.int64)), "floating")
    _raises(lambda: layer.column(x, torch.tensor([0.5, 1.0])), "y must")
    _raises(lambda: layer.column(x, torch.tensor([0, 1, 2])), "y must")
    _raises(lambda: layer.hard(torch.zeros(2, n + 1)), "shape")
    bad = x.clone()
    bad[1, 2] = math.nan
    if c.device_rules:  # no sync: the bad row comes out NaN, the other one is exact
        v, P = layer(bad)
        assert torch.isnan(v[1]).all() and torch.isnan(P[1]).all() and torch.isfinite(v[0]).all()
    else:
        _raises(lambda: layer(bad), "NaN|inf")
        _raises(lambda: layer.column(bad, torch.tensor([0, 1])), "NaN|inf")
        _raises(lambda: layer.column(x, torch.tensor([0, n])), "y must")
    _raises(lambda: layer.hard(bad), "NaN")


def check_steepness(c: Case):
    x, y = c.x(3), c.y(3)
    layer = c.layer()
    for s in (3.0, 7.5):
        layer.steepness = s  # read at every call
        _close(layer(x)[0], ref.forward(c.net, x, _with(c.r, s))[0], 1e-12, f"values at s={s}")
        _close(layer.column(x, y), ref.column(c.net, x, y, _with(c.r, s)), 1e-12, f"column at s={s}")
    for s in (np.float32(5.0), np.float64(5.0), torch.tensor(5.0), torch.tensor(5.0, dtype=torch.float64), 5):
        _close(c.layer(steepness=s)(x)[0], ref.forward(c.net, x, _with(c.r, 5.0))[0], 1e-6, f"steepness {s!r}")
    for s in (0.0, -1.0, math.nan, math.inf, "x"):
        _raises(lambda: c.layer(steepness=s)(x), "steepness")
    # a learned steepness gets dL/ds (central finite difference of the reference)
    g = torch.Generator().manual_seed(4)
    wv, wP, wc = torch.randn(3, c.net.k, generator=g, dtype=torch.float64), torch.randn(
        3, c.net.k, c.net.n, generator=g, dtype=torch.float64), torch.randn(3, c.net.k, generator=g, dtype=torch.float64)
    s0, h = 4.0, 1e-5

    def loss_ref(s):
        v, P = ref.forward(c.net, x, _with(c.r, s))
        return ((v * wv).sum() + (P * wP).sum() + (ref.column(c.net, x, y, _with(c.r, s)) * wc).sum()).item()

    fd = (loss_ref(s0 + h) - loss_ref(s0 - h)) / (2 * h)
    layer = c.layer(steepness=torch.nn.Parameter(torch.tensor(s0, dtype=torch.float64)))
    v, P = layer(x)
    loss = (v * wv).sum() + (P * wP).sum() + (layer.column(x, y) * wc).sum()
    loss.backward()
    gs = layer.steepness.grad.item()
    assert abs(gs - fd) <= 1e-6 * max(1.0, abs(fd)), f"dL/ds {gs} != finite difference {fd}"


def _views(x):
    """B = 1, unbatched, transposed, expanded and non-contiguous versions of
    a (B, n) input, each with a pristine copy."""
    n = x.shape[-1]
    base = x[:1].clone()
    yield "B=1", base
    yield "unbatched", x[0].clone()
    yield "transposed", x.t().clone().t()
    yield "expanded", x[0].clone().expand(3, n)
    yield "non-contiguous", torch.stack([x, x], -1)[..., 0]


def check_inputs_untouched(c: Case):
    layer = c.layer()
    for name, x in _views(c.x(2)):
        before = x.clone()
        batch = x.shape[:-1]
        y = torch.zeros(batch, dtype=torch.int64)
        layer(x)
        layer.column(x, y)
        layer.hard(x)
        xg = x.detach().clone().requires_grad_() if name != "expanded" else x.detach().requires_grad_()
        v, P = layer(xg)
        (v.sum() + P.square().sum() + layer.column(xg, y).sum()).backward()
        assert torch.equal(x, before), f"{name}: the layer wrote to its input"


def check_second_order_refused(c: Case):
    layer = c.layer()
    x = c.x(2).requires_grad_()
    for out in (lambda: layer(x)[0].sum() + layer(x)[1].square().sum(), lambda: layer.column(x, torch.tensor([0, 1])).sum()):
        (g,) = torch.autograd.grad(out(), x, create_graph=True)
        try:
            g.square().sum().backward()
        except RuntimeError as e:
            assert "second-order gradients through a generated layer are not supported" in str(e), str(e)
            assert "netgen.relax.reference" in str(e)
        else:
            raise AssertionError("a second backward through the layer did not raise")
        # a second derivative taken with respect to x (autograd.grad, as gradgradcheck and gradient
        # penalties do) must raise too, not come out as a silently missing (zero) term
        (g,) = torch.autograd.grad(out(), x, create_graph=True)
        try:
            torch.autograd.grad(g.square().sum(), x, allow_unused=True)
        except RuntimeError as e:
            assert "second-order gradients through a generated layer are not supported" in str(e), str(e)
        else:
            raise AssertionError("a second derivative with respect to x through the layer did not raise")
    for transform in (lambda f: torch.func.vmap(f), lambda f: torch.func.grad(lambda t: f(t).sum()),
                      lambda f: torch.func.jacrev(f)):
        try:
            transform(lambda t: layer(t)[0])(c.x(2))
        except ValueError as e:
            assert "torch.func transforms" in str(e), str(e)
        else:
            raise AssertionError("a torch.func transform was not refused")


def check_overflow(c: Case):
    if c.device_rules:
        return  # on a GPU: NaN rows, no sync (not checked here)
    layer = c.layer(steepness=10.0)
    x = torch.zeros(2, c.net.n, dtype=torch.float32)
    x[1, 0], x[1, 1] = 1e38, -1e38
    _raises(lambda: layer(x), "")
    x64 = x.double()
    layer(x64)  # the same numbers fit float64


CHECKS = {name[len("check_"):]: fn for name, fn in globals().items() if name.startswith("check_")}


# ------------------------------------------------------------------ pytest side
def _available(target):
    """None, or why the target's modules cannot be built here."""
    try:
        TARGETS[target].require(f"the {target} target")
        return None
    except ImportError as e:  # pragma: no cover
        return str(e)
    except ValueError as e:  # MissingExtra
        return str(e)


_CASES: dict = {}


def _case(target, tmp_path_factory):
    if target not in _CASES:
        with pytest.MonkeyPatch.context() as mp:  # e.g. numba: serial kernels compile ~3x faster
            for key, value in TARGETS[target].test.env.items():
                mp.setenv(key, value)
            _CASES[target] = Case(target, tmp_path_factory.mktemp(f"contract_{target}"))
    return _CASES[target]


_SIM: dict = {}


def _simulated(target, check, shared_once):
    """Result of ``check`` for ``target`` in the CUDA simulator (all checks
    run in one subprocess per target, once per session, shared by the
    xdist workers; it reports each as it finishes)."""
    if target not in _SIM:
        _SIM[target] = shared_once(f"contract-{target}", lambda folder: _simulate(target))
    return _SIM[target][check]


def _simulate(target) -> dict:
    results = {}
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", **TARGETS[target].test.env)
    try:
        proc = subprocess.run([sys.executable, __file__, target], capture_output=True, text=True, env=env,
                              timeout=SIM_TIMEOUT)
        out, why = proc.stdout, f"the simulator process failed: {proc.stderr[-3000:]}"
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        why = f"not reached within {SIM_TIMEOUT} s"
    for line in out.splitlines():
        if line.startswith("{"):
            results.update(json.loads(line))
    for name in CHECKS:
        results.setdefault(name, why)
    return results


SIM_TIMEOUT = 1500


def pytest_generate_tests(metafunc):
    import pytest

    if "target" in metafunc.fixturenames:
        # the cuda target runs in the CUDA simulator (~25 s for all checks): slow
        metafunc.parametrize("target", [pytest.param(t, marks=pytest.mark.slow) if TARGETS[t].test.simulator else t
                                        for t in TARGETS])
    if "check" in metafunc.fixturenames:
        metafunc.parametrize("check", list(CHECKS))


def test_contract(target, check, tmp_path_factory, shared_once):
    missing = _available(target)
    if missing:
        pytest.skip(f"{target}: {missing}")
    if TARGETS[target].test.simulator:
        result = _simulated(target, check, shared_once)
        assert result == "ok", f"{target} (simulator): {result}"
        return
    CHECKS[check](_case(target, tmp_path_factory))


if __name__ == "__main__":  # a target in the simulator (see the module doc)
    assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            case = Case(sys.argv[1], Path(tmp))
        except Exception:  # noqa: BLE001 - reported per check
            err = traceback.format_exc(limit=3)
            results = {name: f"module failed to load: {err}" for name in CHECKS}
        else:
            for name, fn in CHECKS.items():
                try:
                    fn(case)
                    result = "ok"
                except Exception as e:  # noqa: BLE001 - reported to the parent test
                    result = f"{type(e).__name__}: {e}"[:2000]
                print(json.dumps({name: result}), flush=True)
    if results:
        print(json.dumps(results), flush=True)
