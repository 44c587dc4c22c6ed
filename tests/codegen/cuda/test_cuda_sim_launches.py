"""The generated CUDA layer in Numba's CUDA simulator, each case in a
subprocess of its own (the simulator must be enabled before numba is
imported): launches in chunks where a launch's rows reach the 32-bit index
limit or the global scratch's workspace (rows and column, D kept or the
back-sweep recomputed, each chunk's results equal to the reference), the
rank loop of networks past the unrolled ranks in either D layout, the
module running with ``import netgen`` made to fail, and the simulator's
switch interval. The layer's shared driver cases are in
``test_cuda_sim.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from netgen.codegen import TARGETS
from netgen.construct import build
from netgen.relax.distributions import Relaxation


def emit(net, r=None, **options):
    """The cuda module's source for these emit options (CudaOptions fields)."""
    return TARGETS["cuda"].emit(net, r, options)


CHUNKED = r'''
import json, torch
from netgen.codegen import emit
from netgen.codegen.cache import load
from netgen.construct import build
from netgen.relax import reference
from netgen.relax.distributions import Relaxation
import sys
net, r = build("bitonic", 8, 8), Relaxation("cauchy", 5.0)
open(sys.argv[1], "w").write(emit("cuda", net, r, {"threads": 32, "shared_limit": 0, "mode": "recompute"}))
m = load(sys.argv[1])
calls = []
orig = m._launch
m._launch = lambda name, like, blocks, args, rows, key=None: (calls.append([name, blocks]), orig(name, like, blocks, args, rows, key))[1]
x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
v, P = m.Layer()(x)
gv, gP = torch.randn_like(v), torch.randn_like(P)
(g,) = torch.autograd.grad((v * gv).sum() + (P * gP).sum(), x)
v0, P0 = reference.forward(net, x, r)
(g0,) = torch.autograd.grad((v0 * gv).sum() + (P0 * gP).sum(), x)
err = max(float((a - b).abs().max()) for a, b in ((v, v0), (P, P0), (g, g0)))
print(json.dumps({"calls": calls, "err": err, "save_d": bool(m.SAVE_D)}))
'''


@pytest.mark.slow
def test_global_scratch_in_chunks_and_recomputed_back_sweep(tmp_path):
    """NETGEN_CUDA_WORKSPACE_MB=0: every global-scratch launch takes one row
    at a time; with D not kept the backward recomputes the back-sweep per
    chunk; results equal the reference."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NETGEN_CUDA_WORKSPACE_MB="0", NETGEN_CUDA_SELFCHECK="0")
    proc = subprocess.run([sys.executable, "-c", CHUNKED, str(tmp_path / "m.py")], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["save_d"] is False
    assert out["calls"] == [["fwd", 1]] * 3 + [["bwd", 1]] * 3
    assert out["err"] <= 1e-12


#: the chunked runs' launch counter: m._launch recording [kernel, blocks] in calls
COUNT_LAUNCHES = '''
calls = []
orig = m._launch
def counted(name, like, blocks, args, rows, key=None):
    calls.append([name, blocks])
    return orig(name, like, blocks, args, rows, key)
m._launch = counted
'''

COLUMN_CHUNKS = r'''
import json, sys, torch
from netgen.codegen import emit
from netgen.codegen.cache import load
from netgen.construct import build
from netgen.relax import reference
from netgen.relax.distributions import Relaxation
kind, n, k = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
net, r = build(kind, n, k), Relaxation("cauchy", 5.0)
open(sys.argv[1], "w").write(emit("cuda", net, r, {"threads": 32, "shared_limit": int(sys.argv[2])}))
m = load(sys.argv[1])
gen = torch.Generator().manual_seed(0)
x = torch.randn(5, n, generator=gen, dtype=torch.float64)
y = torch.randint(0, n, (5,), generator=gen)
gc = torch.randn(5, k, generator=gen, dtype=torch.float64)
def run():
    xg = x.clone().requires_grad_(True)
    col = m.Layer().column(xg, y)
    (g,) = torch.autograd.grad((col * gc).sum(), xg)
    return col, g
whole = run()
''' + COUNT_LAUNCHES + r'''m.INDEX_LIMIT = 2 * 3 * net.size + 3 * net.size // 2  # two rows of cs (d, du, p) per launch
chunked = run()
xt = x.clone().requires_grad_(True)
c0 = reference.column(net, xt, y, r)
(g0,) = torch.autograd.grad((c0 * gc).sum(), xt)
err = max(float((a - b).abs().max()) for a, b in zip(chunked, (c0, g0)))
same = all(bool(torch.equal(a, b)) for a, b in zip(chunked, whole))
print(json.dumps({"calls": calls, "err": err, "same": same, "variant": m._VARIANTS[("fwd_col", 2)]}))
'''


@pytest.mark.slow
@pytest.mark.parametrize("shared_limit, net", [(48 * 1024, ("splitter", 21, 4)), (0, ("splitter", 21, 4)),
                                                (48 * 1024, ("oddeven", 40, 40))])
def test_column_launches_in_chunks_at_the_index_limit(tmp_path, shared_limit, net):
    """The column kernels index a launch's saved d, du and p (cs, 3 size per
    row) with a 32-bit flat index: the launcher takes at most INDEX_LIMIT //
    (3 size) rows per launch. With the limit lowered to 2.5 rows of cs, B =
    5 runs in launches of 2, 2 and 1 rows each way, shared and
    global variants, and equals both the reference and the unchunked run.
    The sorting case has k = 40 > 32 outputs (the column kernels' strided
    loop over outputs instead of one output per thread)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NETGEN_CUDA_SELFCHECK="0")
    proc = subprocess.run([sys.executable, "-c", COLUMN_CHUNKS, str(tmp_path / "m.py"), str(shared_limit),
                           *map(str, net)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["variant"] == ("shared" if shared_limit else "global")
    assert out["calls"] == [["fwd_col", 2], ["fwd_col", 2], ["fwd_col", 1], ["bwd_col", 2], ["bwd_col", 2],
                            ["bwd_col", 1]]
    assert out["err"] <= 1e-12 and out["same"]


ROWS_CHUNKS = r'''
import json, sys
import torch
from netgen.codegen import emit
from netgen.codegen.cache import load
from netgen.construct import build
from netgen.relax import reference
from netgen.relax.distributions import Relaxation
net, r = build("splitter", 21, 4), Relaxation("cauchy", 5.0)
opts = json.loads(sys.argv[3])
open(sys.argv[1], "w").write(emit("cuda", net, r, {"threads": 32, "shared_limit": int(sys.argv[2]), **opts}))
m = load(sys.argv[1])
gen = torch.Generator().manual_seed(1)
x = torch.randn(5, 21, generator=gen, dtype=torch.float64)
gv, gP = torch.randn(5, 4, generator=gen, dtype=torch.float64), torch.randn(5, 4, 21, generator=gen, dtype=torch.float64)
def run(layer, xs):
    xg = xs.clone().requires_grad_(True)
    v, P = layer(xg)
    (g,) = torch.autograd.grad((v * gv).sum() + (P * gP).sum(), xg)
    return v, P, g
whole = run(m.Layer(), x)
''' + COUNT_LAUNCHES + r'''per = max(net.size, int(m._DLEN))
m.INDEX_LIMIT = 2 * per + per // 2  # two rows of D (or d, p) per launch
chunked = run(m.Layer(), x)
got = list(calls)  # the chunked run's launches (the refused run below launches a forward first)
ref = run(lambda xs: reference.forward(net, xs, r), x)
err = max(float((a - b).abs().max()) for a, b in zip(chunked, ref))
same = all(bool(torch.equal(a, b)) for a, b in zip(chunked, whole))
m.INDEX_LIMIT = per - 1  # one row alone passes the kernels' 32-bit indices: refused
try:
    run(m.Layer(), x)
    refused = ""
except ValueError as e:
    refused = str(e)
# P (k n a row) is indexed flat too: a forward that keeps no D launches two rows of P at a time
kn = 4 * 21
m.INDEX_LIMIT = 2 * kn + kn // 2
p_calls, p_same = [], False
if not m.SAVE_D and kn > net.size:
    calls.clear()
    with torch.no_grad():
        v, P = m.Layer()(x)
    p_calls, p_same = list(calls), bool(torch.equal(v, whole[0]) and torch.equal(P, whole[1]))
print(json.dumps({"calls": got, "err": err, "same": same, "refused": refused, "save": bool(m.SAVE_D),
                  "stride": m.D_STRIDE, "variant": m._VARIANTS[("fwd", 4)], "p_calls": p_calls, "p_same": p_same}))
'''


@pytest.mark.slow
@pytest.mark.parametrize("shared_limit, opts", [(48 * 1024, {}), (0, {}), (48 * 1024, {"d_layout": "windows"}),
                                                (0, {"d_layout": "windows", "mode": "recompute"})])
def test_rows_launch_in_chunks_at_the_index_limit(tmp_path, shared_limit, opts):
    """The rows kernels index a launch's d, p, dL/dp (size per row) and D
    (nnz per row) with 32-bit flat indices: the launcher takes at most
    INDEX_LIMIT // max(size, nnz) rows per launch. With the limit lowered
    to 2.5 rows, B = 5 runs values and P in launches of 2, 2 and 1 rows
    each way (a forward that keeps no D: one), shared and global variants, equal to the reference (values,
    P and dL/dx) and to the unchunked run; a limit under one row is
    refused with a ValueError, not indexed wrong. D in either layout
    (layout.d_slots: the CSR, or warp windows), kept or recomputed. P
    (k n per row, in a flat view) bounds them too: where the forward keeps
    no D, a limit of 2.5 rows of P runs it in launches of 2, 2 and 1 rows
    with the same values and P."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NETGEN_CUDA_SELFCHECK="0")
    proc = subprocess.run([sys.executable, "-c", ROWS_CHUNKS, str(tmp_path / "m.py"), str(shared_limit), json.dumps(opts)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["variant"] == ("shared" if shared_limit else "global")
    assert out["save"] == (opts.get("mode") != "recompute") and out["stride"] == (32 if opts else 1)
    # recomputing, the forward keeps no D: its launches are bounded by d and p only (size < 2.5 rows of D)
    fwd = [["fwd", 5]] if opts.get("mode") == "recompute" else [["fwd", 2], ["fwd", 2], ["fwd", 1]]
    assert out["calls"] == fwd + [["bwd", 2], ["bwd", 2], ["bwd", 1]]
    assert out["err"] <= 1e-12 and out["same"]
    assert "32-bit indices" in out["refused"]
    if opts.get("mode") == "recompute":  # P's k n entries a row bound the forward's launches (the flat P index)
        assert out["p_calls"] == [["fwd", 2], ["fwd", 2], ["fwd", 1]] and out["p_same"]


RANK_LOOP = r'''
import json, sys, torch
from netgen.codegen import emit
from netgen.codegen.cache import load
from netgen.construct import build
from netgen.relax import reference
from netgen.relax.distributions import Relaxation
out = []
for kind, n, k, opts in (("splitter", 30, 10, {"d_layout": "windows"}),
                         ("splitter", 30, 10, {"d_layout": "windows", "mode": "recompute"}),
                         ("oddeven", 12, 12, {"d_layout": "windows"}), ("oddeven", 12, 12, {"d_layout": "csr"})):
    net, r = build(kind, n, k), Relaxation("cauchy", 5.0)
    p = f"{sys.argv[1]}/m_{kind}_{len(opts)}_{opts['d_layout']}.py"
    open(p, "w").write(emit("cuda", net, r, {"threads": 32, **opts}))
    m = load(p)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(3, n, generator=gen, dtype=torch.float64)
    gv, gP = torch.randn(3, k, generator=gen, dtype=torch.float64), torch.randn(3, k, n, generator=gen, dtype=torch.float64)
    def run(f):
        xg = x.clone().requires_grad_(True)
        v, P = f(xg)
        (g,) = torch.autograd.grad((v * gv).sum() + (P * gP).sum(), xg)
        return v, P, g
    got, want = run(m.Layer()), run(lambda xs: reference.forward(net, xs, r))
    out.append({"case": [kind, n, k, opts], "stride": m.D_STRIDE, "save": bool(m.SAVE_D),
                "err": max(float((a - b).abs().max()) for a, b in zip(got, want)),
                "norm": min(float(b.abs().max()) for b in want)})
print(json.dumps(out))
'''


@pytest.mark.slow
def test_rows_with_the_rank_loop_in_either_d_layout(tmp_path):
    """More lanes than UNROLL_RANKS (k = 10 going back, a sorter of 12
    going forward): the rank loop steps D's index by the layout's stride
    (32 in the warp windows, 1 in the CSR), D kept or recomputed; values,
    P and dL/dx equal the float64 reference."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NETGEN_CUDA_SELFCHECK="0")
    proc = subprocess.run([sys.executable, "-c", RANK_LOOP, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [(r["stride"], r["save"]) for r in rows] == [(32, True), (32, False), (32, True), (1, True)]
    for r in rows:
        assert r["err"] <= 1e-12 and r["norm"] > 0.05, r


@pytest.mark.slow
def test_runs_in_the_simulator_without_netgen(tmp_path):
    """The generated module carries its whole runtime (launcher, ops,
    self-check, Layer, the shared checks): with ``import netgen`` made to
    fail it imports and runs forward, values only, column and backward in
    the simulator, self-check included."""
    net = build("splitter", 9, 3)
    p = tmp_path / "m.py"
    p.write_text(emit(net, Relaxation("cauchy", 5.0), threads=32))
    code = (
        "import sys; sys.modules['netgen'] = None\n"  # any `import netgen` would now fail
        "import importlib.util as u\n"
        f"s = u.spec_from_file_location('m', {str(p)!r}); m = u.module_from_spec(s); s.loader.exec_module(m)\n"
        "import torch\n"
        "x = torch.randn(2, 9, dtype=torch.float64, requires_grad=True)\n"
        "layer = m.Layer()\n"
        "v, P = layer(x)\n"
        "assert torch.allclose(v, (P @ x.unsqueeze(-1)).squeeze(-1), atol=1e-12)\n"
        "assert torch.allclose(layer.values(x), v, atol=1e-12)\n"
        "col = layer.column(x, torch.tensor([0, 8]))\n"
        "assert torch.allclose(col, torch.stack([P[0, :, 0], P[1, :, 8]]), atol=1e-12)\n"
        "(g,) = torch.autograd.grad(v.sum() + P.square().sum() + col.sum(), x)\n"
        "assert g.shape == x.shape and bool(torch.isfinite(g).all())\n"
        "assert m._SELF_CHECKED, 'the self-check ran'\n"
        "assert not any(k == 'netgen' or k.startswith('netgen.') for k in sys.modules if sys.modules[k] is not None)\n"
        "print(m.TARGET, m.OPS_NAMESPACE.startswith('netgen_cuda_'))\n"
    )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["cuda", "True"]


@pytest.mark.slow
@pytest.mark.parametrize("before,after", [(None, 1e-4), (0.002, 0.002)])
def test_the_simulator_switch_interval_is_lowered_unless_set(tmp_path, before, after):
    """Under the simulator a generated module lowers the interpreter's
    switch interval from Python's default to SIM_SWITCH_INTERVAL (its
    threads wait for the GIL at every barrier); an interval the user set is
    kept."""
    p = tmp_path / "m.py"
    p.write_text(emit(build("splitter", 9, 3), Relaxation("cauchy", 5.0), threads=32))
    code = (
        "import sys\n"
        + ("" if before is None else f"sys.setswitchinterval({before!r})\n")
        + "import importlib.util as u\n"
        f"s = u.spec_from_file_location('m', {str(p)!r}); m = u.module_from_spec(s); s.loader.exec_module(m)\n"
        "print(sys.getswitchinterval(), m.SIM_SWITCH_INTERVAL)\n"
    )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got, sim = map(float, out.stdout.split()[-2:])
    assert sim == 1e-4 and abs(got - after) < 1e-9, out.stdout
