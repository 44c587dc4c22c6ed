"""The numba target's runtime pieces as importable code
(netgen/codegen/numba/*.py): the vector intrinsics against numpy,
the typed constant and the float-type dispatch, flush-to-zero, the serial
copies' cache names, the pool, the thread choice, the statement copier, and
a generated module running with netgen blocked."""

from __future__ import annotations

import gc
import platform
import subprocess
import sys

import numba
import numpy as np
import torch
import pytest

from netgen.codegen import write_module
from netgen.codegen.runtime import statements
from netgen.codegen.literals import GeneratedSourceError, Namespace
from netgen.codegen.numba import engine as numba_engine
from netgen.codegen.numba import host as numba_host
from netgen.codegen.numba import kernels as numba_kernels
from netgen.codegen.numba import vector as V
from netgen.construct import build
from netgen.relax.distributions import Relaxation

W = V._W


@numba.njit
def _run_vector_ops(a, c, p, d, acc, s0, s1, gp):
    q = np.empty_like(p)
    V._vq(p, q)
    a1, c1 = a.copy(), c.copy()
    V._vmix(a1, c1, q)
    a2, c2, d2 = a.copy(), c.copy(), d.copy()
    V._vmixd(a2, c2, q, d2)
    a3, c3, acc3 = a.copy(), c.copy(), acc.copy()
    V._vpush(a3, c3, q, d, acc3)
    a4, c4 = a.copy(), c.copy()
    V._vadj(a4, c4, q, s0, s1, gp)
    a5, c5, acc5 = a.copy(), c.copy(), acc.copy()
    V._vpush1(a5, c5, q, d, acc5)
    return q, a1, c1, a2, c2, d2, a3, c3, acc3, a4, c4, a5, c5, acc5


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_updates_match_numpy(dtype):
    rng = np.random.default_rng(1)
    a, c, d, acc, s0, s1, gp = (rng.standard_normal(W).astype(dtype) for _ in range(7))
    p = rng.uniform(0, 1, W).astype(dtype)
    got = _run_vector_ops(a, c, p, d, acc, s0, s1, gp)
    q = 1 - p
    t = q * (c - a)
    gd = (a - c) * s0 + gp * s1
    t4 = q * (c - a) + gd
    want = (q, a + t, c - t, a + t, c - t, a - c, a + t, c - t, acc + (a - c) * d, a + t4, c - t4, a + t, c - t,
            (a - c) * d)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@numba.njit
def _run_p_variants(a, c, p, d, acc, s0, s1, gp):
    # the variants that form q = 1 - p in a register, beside the q versions
    q = np.empty_like(p)
    V._vq(p, q)
    out = []
    for k in range(4):
        x1, y1, x2, y2 = a.copy(), c.copy(), a.copy(), c.copy()
        e1, e2 = acc.copy(), acc.copy()
        if k == 0:
            V._vmix(x1, y1, q)
            V._vmixp(x2, y2, p)
        elif k == 1:
            V._vmixd(x1, y1, q, e1)
            V._vmixdp(x2, y2, p, e2)
        elif k == 2:
            V._vpush1(x1, y1, q, d, e1)
            V._vpush1p(x2, y2, p, d, e2)
        else:
            V._vadj(x1, y1, q, s0, s1, gp)
            V._vadjp(x2, y2, p, s0, s1, gp)
        out.append((x1, y1, e1, x2, y2, e2))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_p_variants_equal_the_q_updates(dtype):
    rng = np.random.default_rng(2)
    a, c, d, acc, s0, s1, gp = (rng.standard_normal(W).astype(dtype) for _ in range(7))
    p = rng.uniform(0, 1, W).astype(dtype)
    for x1, y1, e1, x2, y2, e2 in _run_p_variants(a, c, p, d, acc, s0, s1, gp):
        for g, w in ((x2, x1), (y2, y1), (e2, e1)):
            np.testing.assert_array_equal(g, w)  # the same operations: the same bits
        assert not np.array_equal(x1, a)  # the update did something


@numba.njit
def _one_minus(x):
    return V._one_like(x) - x


@numba.njit
def _literal_one_minus(x):
    return 1.0 - x


def _return_type(dispatcher, arg):
    dispatcher(arg)
    (sig,) = [s for s in dispatcher.nopython_signatures if s.args[0] == numba.typeof(arg)]
    return sig.return_type


def test_typed_one_keeps_float32():
    assert _return_type(_one_minus, np.float32(0.25)) == numba.float32
    assert _return_type(_one_minus, np.float64(0.25)) == numba.float64
    assert _return_type(_literal_one_minus, np.float32(0.25)) == numba.float64  # what a literal would do
    assert _one_minus(np.float32(0.25)) == 0.75


def _f32(d, stp):
    return d * stp, d, stp


def _f64(d, stp):
    return -d * stp, d, stp


_pick = V._by_float(_f32, _f64)


@numba.njit
def _use_pick(d, stp):
    return _pick(d, stp)


def test_by_float_picks_the_renderer_of_the_argument_type():
    assert _use_pick(np.float32(2.0), np.float32(3.0))[0] == 6.0
    assert _use_pick(2.0, 3.0)[0] == -6.0


@numba.njit
def _ftz_product(x, y):
    mx = V._ftz_on()
    z = x * y
    V._ftz_off(mx)
    return z


@numba.njit
def _mxcsr_states():
    # (MXCSR before, while on, after off), each read by a further _ftz_on
    before = V._ftz_on()
    V._ftz_off(before)
    mx = V._ftz_on()
    inside = V._ftz_on()
    V._ftz_off(inside)
    V._ftz_off(mx)
    after = V._ftz_on()
    V._ftz_off(after)
    return before, inside, after


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="FTZ/DAZ are x86 MXCSR bits")
def test_flush_to_zero_is_scoped():
    tiny = np.float32(1e-39)  # subnormal in float32
    assert _ftz_product(tiny, np.float32(1.0)) == 0.0  # read as 0 while FTZ|DAZ are set
    before, inside, after = _mxcsr_states()
    assert before & 0x8040 == 0  # the default mode keeps subnormals
    assert inside & 0x8040 == 0x8040
    assert after == before  # restored


def test_serial_copies_get_their_own_cache_name():
    par, ser = numba_kernels._jit(numba_kernels._fwd_P_py, True), numba_kernels._jit(numba_kernels._fwd_P_py, False, "_s")
    assert par.py_func.__qualname__ == "_fwd_P_py"
    assert ser.py_func.__qualname__ == "_fwd_P_py_s"
    assert ser.py_func.__code__ is par.py_func.__code__  # same kernel, compiled twice
    assert par.targetoptions.get("parallel") and not ser.targetoptions.get("parallel")


def test_pool_reuses_and_bounds_its_buffers(monkeypatch):
    monkeypatch.setattr(numba_host, "_POOL", {})
    a = numba_host._take((3, 4), np.float32)
    numba_host._give(a)
    assert numba_host._take((3, 4), np.float32) is a  # given back, taken again
    assert numba_host._take((3, 4), np.float64) is not a  # another dtype: a fresh array
    for i in range(numba_host._POOL_SHAPES + 3):
        numba_host._give(*(np.empty((i + 1,)) for _ in range(3)))
    assert len(numba_host._POOL) == numba_host._POOL_SHAPES  # oldest shapes dropped
    assert all(len(free) <= numba_host._POOL_PER_SHAPE for free in numba_host._POOL.values())
    numba_host.free_buffers()
    assert not numba_host._POOL


def test_pool_is_bounded_in_bytes(monkeypatch):
    monkeypatch.setattr(numba_host, "_POOL", {})
    monkeypatch.setattr(numba_host, "_POOL_BYTES", 1000)
    numba_host._give(np.empty(100, np.float32), np.empty(100, np.float32), np.empty(60, np.float32))
    assert sum(b.nbytes for free in numba_host._POOL.values() for b in free) == 800  # the third would pass 1000
    numba_host.free_buffers()


def test_outputs_go_back_to_the_pool_only_when_dropped(monkeypatch):
    """P comes from the pool as a view of a pooled array; the array goes
    back when P, every numpy view of it and every tensor made from it are
    gone -- never while something still reads it."""
    monkeypatch.setattr(numba_host, "_POOL", {})
    key = ((2, 3), np.dtype(np.float32))

    def pooled():
        return numba_host._POOL.get(key, [])

    out = numba_host._take_out(*key)
    t = torch.from_numpy(out)
    del out
    gc.collect()
    assert not pooled()  # the tensor still holds it
    other = numba_host._take_out(*key)
    assert not np.shares_memory(other, t.numpy())
    view = t[1:]
    del t
    gc.collect()
    assert not pooled()  # a view of the tensor still holds it
    del view
    gc.collect()
    (base,) = pooled()
    again = numba_host._take_out(*key)
    assert np.shares_memory(again, base) and not pooled()  # reused
    row = again[1]  # a numpy view outlives the output it came from
    del again
    gc.collect()
    assert not pooled()
    row[:] = 7.0
    fresh = numba_host._take_out(*key)
    assert not np.shares_memory(fresh, row)
    del row
    gc.collect()
    assert len(pooled()) == 1
    numba_host.free_buffers()


def _pretend_two_numba_threads(monkeypatch):
    # the tests run with NUMBA_NUM_THREADS=1 (tests/conftest.py); only the choice is tested here
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 2)
    monkeypatch.setattr(numba, "set_num_threads", lambda n: None)
    monkeypatch.setattr(numba, "get_num_threads", lambda: 1)


def test_small_calls_take_the_serial_kernels(monkeypatch):
    monkeypatch.setattr(numba_host, "_SERIAL_WORK", 1000)
    monkeypatch.setattr(numba_host, "_PARALLEL", True)
    monkeypatch.setattr(numba_host, "_CHOICE", {})
    _pretend_two_numba_threads(monkeypatch)
    with numba_host._Threads(2, 999) as th:
        assert th.serial and th.kernels is numba_kernels._KERNELS_SERIAL
        assert th.workers() == 2  # the backward splits its work as a parallel call would: same result
    with numba_host._Threads(3, 1000) as th:
        assert not th.serial and th.kernels is numba_kernels._KERNELS and th.n == 2  # capped by numba
    with numba_host._Threads(1, 10**9) as th:
        assert th.serial and th.workers() == 1
    monkeypatch.setattr(numba_host, "_PARALLEL", False)  # NETGEN_NUMBA_PARALLEL=0: always the serial copies
    with numba_host._Threads(2, 10**9) as th:
        assert th.serial and th.kernels is numba_kernels._KERNELS_SERIAL and th.workers() == 1


def test_between_the_thresholds_the_faster_copy_runs(monkeypatch):
    monkeypatch.setattr(numba_host, "_SERIAL_WORK", 1000)
    monkeypatch.setattr(numba_host, "_PARALLEL", True)
    monkeypatch.setattr(numba_host, "_CHOICE", {})
    _pretend_two_numba_threads(monkeypatch)
    choose, note = numba_host._choose_serial, numba_host._note_time
    # parallel until it has a measurement (its first call is not counted), then serial likewise
    assert [choose("rows") for _ in range(2)] == [False, False]
    note("rows", False, 1.0)  # first parallel call: may have compiled, skipped
    assert choose("rows") is False
    note("rows", False, 2e-9)
    assert [choose("rows") for _ in range(2)] == [True, True]
    note("rows", True, 1.0)
    note("rows", True, 1e-9)  # serial twice as fast: chosen, parallel probed every 2 * _CHOOSE_PROBE-th call
    picks = [choose("rows") for _ in range(8 * numba_host._CHOOSE_PROBE)]
    assert picks.count(False) == 4 and picks.count(True) == 8 * numba_host._CHOOSE_PROBE - 4
    for _ in range(40):  # parallel gets faster (the machine went quiet): the average follows
        note("rows", False, 0.5e-9)
    picks = [choose("rows") for _ in range(8 * numba_host._CHOOSE_PROBE)]
    assert picks.count(True) == 4  # now serial is probed every 2 * _CHOOSE_PROBE-th call
    note("rows", True, 1e-6)  # a very slow serial call: probed at most every _CHOOSE_PROBE_MAX-th
    picks = [choose("rows") for _ in range(numba_host._CHOOSE_PROBE_MAX)]
    assert picks.count(True) == 1
    assert choose("column") is False  # each kind keeps its own averages
    # the context applies the choice only between the thresholds, and times what it ran
    st = numba_host._CHOICE["rows"]
    before = list(st[2:4])
    with numba_host._Threads(2, 10 * numba_host._CHOOSE_WORK) as th:
        assert not th.serial and not th.timed  # large calls: always parallel, not timed
    with numba_host._Threads(2, 999) as th:
        assert th.serial and not th.timed  # below _SERIAL_WORK: always serial
    with numba_host._Threads(2, 5000, "rows") as th:
        assert th.timed
    ran = 0 if th.serial else 1
    assert st[2 + ran] == before[ran] + 1 and st[3 - ran] == before[1 - ran]  # the copy that ran was timed


def test_statements_copies_by_name_with_comments():
    ns = Namespace()
    text = statements(numba_host, ("_POOL", "_POOL_LOCK"), ns)
    assert text.splitlines()[0].startswith("# What a forward saves")
    assert "_POOL: dict = {}" in text and "_POOL_LOCK = threading.Lock()" in text
    assert "_POOL_SHAPES = " not in text and "# ----" not in text
    assert "_POOL" in ns and "_POOL_LOCK" in ns
    with pytest.raises(GeneratedSourceError):
        statements(numba_host, ("_POOL",), ns)  # defined twice
    with pytest.raises(GeneratedSourceError, match="_NOPE"):
        statements(numba_host, ("_NOPE",), Namespace())


def test_generated_module_runs_with_netgen_blocked(tmp_path):
    net = build("oddeven", 8, 8)
    p = write_module("numba", net, Relaxation("logistic", 5.0), tmp_path)
    code = (
        "import sys; sys.modules['netgen'] = None\n"  # any `import netgen` would now fail
        "import importlib.util as u\n"
        f"s = u.spec_from_file_location('m', {str(p)!r}); m = u.module_from_spec(s); s.loader.exec_module(m)\n"
        "import torch\n"
        "x = torch.randn(5, 8, dtype=torch.float64)\n"
        "v, P = m.Layer()(x)\n"
        "assert torch.allclose(v, (P @ x.unsqueeze(-1)).squeeze(-1), atol=1e-12)\n"
        "assert torch.equal(m.Layer().hard(x)[1], torch.sort(x, descending=True).indices)\n"
        "assert not any(k == 'netgen' or k.startswith('netgen.') for k in sys.modules if sys.modules[k] is not None)\n"
        "print(m.TARGET, len(m.NETWORK['layers']))\n"
    )
    env = {"NETGEN_NUMBA_PARALLEL": "0", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["numba", str(net.depth)]


def test_runtime_modules_import_on_their_own():
    # what the emitter copies is defined in the real modules, with the right names
    for mod in (V, numba_engine, numba_kernels, numba_host):
        for part in mod.PARTS:
            assert getattr(mod, part.__name__) is part


def test_generated_module_imports_what_the_runtime_imports():
    """Every absolute import of the copied runtime modules is an import of
    the generated module (a missing one only fails when its line runs)."""
    import ast
    import inspect

    from netgen.codegen.numba import layer as numba_layer
    from netgen.codegen.runtime import common

    src = emit_small()
    have = {ast.unparse(n) for n in ast.parse(src).body if isinstance(n, (ast.Import, ast.ImportFrom))}
    for mod in (V, numba_engine, numba_kernels, numba_host, numba_layer, common):
        for node in ast.parse(inspect.getsource(mod)).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
                if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                    continue
                if isinstance(node, ast.ImportFrom):  # the names may come in one or several lines
                    for alias in node.names:
                        assert any(h.startswith(f"from {node.module} import") and alias.name in h for h in have), \
                            (mod.__name__, ast.unparse(node))
                else:
                    assert ast.unparse(node) in have, (mod.__name__, ast.unparse(node))


def emit_small():
    from netgen.codegen import emit

    return emit("numba", build("oddeven", 4, 4), Relaxation("logistic", 2.0))


_SAME = """
import sys, torch, numba
from netgen.codegen.cache import load
m = load(sys.argv[1])
assert m._PARALLEL and numba.config.NUMBA_NUM_THREADS == 2
L = m.Layer(threads=2)
for dt in (torch.float32, torch.float64):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(40, m._N, generator=g, dtype=dt)
    W = torch.randn(40, m._K, m._N, generator=g, dtype=dt)
    y = torch.randint(0, m._N, (40,), generator=g)
    out = []
    for work in (0, 1 << 60):  # every call parallel, then every call serial
        m._SERIAL_WORK = work
        xx = x.clone().requires_grad_(True)
        L.steepness = s = torch.tensor(3.0, dtype=dt, requires_grad=True)
        v, P = L(xx)
        ((P * W).sum() + v.sum() + L.column(xx, y).sum()).backward()
        out.append((v, P, xx.grad, s.grad))
    assert all(torch.equal(a, b) for a, b in zip(*out)), dt
print("same")
"""


@pytest.mark.slow
def test_serial_and_parallel_calls_give_the_same_bits(tmp_path):
    """The serial copies (small calls, or measured faster) and the parallel
    kernels give bit-identical values, P, column and gradients (x and
    steepness): the backward splits its work by the requested thread count
    either way."""
    p = write_module("numba", build("oddeven", 6, 6), Relaxation("cauchy", 3.0), tmp_path)
    env = {"NETGEN_NUMBA_PARALLEL": "1", "NUMBA_NUM_THREADS": "2", "OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin",
           "HOME": str(tmp_path), "PYTHONPATH": ":".join(sys.path)}
    out = subprocess.run([sys.executable, "-c", _SAME, str(p)], capture_output=True, text=True, timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["same"]
