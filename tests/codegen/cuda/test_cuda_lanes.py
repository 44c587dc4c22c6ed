"""The cuda Layer's lane sweeps ``back`` (W P) and ``fwd`` (P V) -- the
lane kernels (lane_ops.py, docs/cuda-rounds7-8.md, Round 8), and the torch
sweeps past LANE_KERNEL_MAX lanes -- in Numba's CUDA simulator against the reference executor, float64: results and
dL/dx, dL/ds, dL/dW (dL/dV) to 1e-12 at odd n, k = n, k = 1, a selection
network, B = 0, 1, 3 and a 2-d batch, one W / V for all rows and one per
row; gradcheck at n = 5; NaN rows. The sweeps run in a subprocess
(tests/codegen/cuda/_cuda_lanes_driver.py: the simulator must be enabled
before numba is imported). Also, without the simulator: the cuda target
says ``lanes=True`` and the operators register it (for CUDA devices)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from netgen.codegen import TARGETS

DRIVER = Path(__file__).with_name("_cuda_lanes_driver.py")


def run_driver(*args):
    # the launch self-check is test_cuda_sim.py's subject (run per module here, it took most of the time)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NETGEN_CUDA_SELFCHECK="0")
    proc = subprocess.run([sys.executable, str(DRIVER), *args], capture_output=True, text=True, env=env,
                          timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def sim():
    return run_driver()


def test_lane_sweeps_equal_the_reference_in_the_simulator(sim):
    # nets x (batch, steepness) pairs x (back, back per row, fwd, fwd per row)
    check_rows(sim["rows"], 3 * 2 * 4)


@pytest.mark.slow
def test_lane_sweeps_equal_the_reference_in_the_simulator_every_batch():
    sim = run_driver("--full")
    check_rows(sim["rows"], 3 * 4, quick=False)  # nets x (B = 3: back, fwd; (2, 2): back per row, fwd per row)
    assert any("batch=(2, 2)" in r["case"] for r in sim["rows"]) and any("batch=(3,)" in r["case"] for r in sim["rows"])


def check_rows(rows, count, quick=True):
    cases = {r["case"] for r in rows}
    assert len(cases) == count
    assert {r["quantity"] for r in rows} == {"result", "dL/dx", "dL/dW", "dL/dV", "dL/ds"}
    assert any("k=1 " in c for c in cases) and any("n=7 k=7" in c for c in cases)
    if quick:
        assert any("batch=(0,)" in c for c in cases) and any("batch=(1,)" in c for c in cases)
    for r in rows:
        assert r["shape_ok"], r
        assert r["err"] <= 1e-12 * max(1.0, r["norm"]), r
        if r["numel"] and "batch=(0,)" not in r["case"] and r["quantity"] in ("result", "dL/dx", "dL/dW", "dL/dV"):
            assert r["norm"] > 1e-3, r  # a zero result would pass trivially
    # dL/ds was compared where the steepness is a tensor, and is not zero there
    assert any(r["quantity"] == "dL/ds" and r["norm"] > 1e-3 for r in rows)


def test_lane_sweeps_pass_gradcheck_in_the_simulator(sim):
    want = [f"{what} {case}" for case in ("oddeven 5 5 B=1", "bitonic 5 1 B=1", "oddeven 5 5 B=0")
            for what in ("back", "fwd")]
    assert sim["gradcheck"] == dict.fromkeys(want, True), sim["gradcheck"]


def test_the_lane_kernels_ran_and_past_their_lanes_the_torch_sweeps(sim):
    # (besides the self-check's kernels)
    lanes = {"fwd", "pv_bwd", "pv_fwd", "vals_bwd", "wp_bwd", "wp_fwd"}
    assert set(sim["launched"]) == {"oddeven", "bitonic", "splitter"}
    assert all(lanes <= set(got) for got in sim["launched"].values()), sim["launched"]
    assert sim["groups"]["oddeven"] == [1] and sim["groups"]["splitter"] == [1, 2], sim["groups"]
    # 2 lanes past LANE_KERNEL_MAX = 1: no lane kernel launched (the torch sweeps), the reference's results
    assert not {"wp_fwd", "pv_fwd"} & set(sim["fallback"]["launched"]), sim["fallback"]
    assert sim["fallback"]["err"] <= 1e-12, sim["fallback"]


def test_a_nan_row_gives_a_nan_row_only(sim):
    assert len(sim["nan"]) == 6 and all(sim["nan"].values()), sim["nan"]


def test_the_cuda_target_has_lanes_and_serves_cuda_devices_only():
    from netgen.ops import backends

    assert TARGETS["cuda"].lanes
    serves = backends.BACKENDS["cuda"][0]
    assert not serves(torch.device("cpu"))


def _has_gpu() -> bool:
    if not torch.cuda.is_available():
        return False
    from numba import cuda

    return cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU")
def test_gpu_lane_sweeps_equal_the_reference(tmp_path):
    """On a GPU: back and fwd of a generated cuda Layer (and soft_rank with
    target="cuda") equal the float64 reference, with dL/dx."""
    import netgen
    from netgen.codegen import write_module
    from netgen.codegen.cache import load
    from netgen.construct import build
    from netgen.relax import reference
    from netgen.relax.distributions import Relaxation

    net = build("oddeven", 33, 33)
    r = Relaxation("cauchy", steepness=3.0)
    mod = load(write_module("cuda", net, r, tmp_path))
    x = torch.randn(4, 33, dtype=torch.float64)
    W, V = torch.randn(4, 2, 33, dtype=torch.float64), torch.randn(33, 3, dtype=torch.float64)
    for fn, ref, T in ((mod.Layer().back, reference.back, W), (mod.Layer().fwd, reference.fwd, V)):
        xg = x.cuda().requires_grad_(True)
        got = fn(xg, T.cuda())
        xr = x.clone().requires_grad_(True)
        want = ref(net, xr, T, r)
        torch.testing.assert_close(got.cpu(), want, atol=1e-12, rtol=0)
        (g,) = torch.autograd.grad(got.sum(), xg)
        (g0,) = torch.autograd.grad(want.sum(), xr)
        torch.testing.assert_close(g.cpu(), g0, atol=1e-11, rtol=0)
    ranks = netgen.soft_rank(x.cuda(), target="cuda")
    torch.testing.assert_close(ranks.cpu(), netgen.soft_rank(x, target="reference"), atol=1e-10, rtol=0)


LANE_CHUNKS = r'''
import json, sys, torch
from netgen.codegen import emit
from netgen.codegen.cache import load
from netgen.construct import build
from netgen.relax import reference
from netgen.relax.distributions import Relaxation
net, r = build("oddeven", 7, 7), Relaxation("cauchy", 3.0)
open(sys.argv[1], "w").write(emit("cuda", net, r, {"threads": 32}))
m = load(sys.argv[1])
gen = torch.Generator().manual_seed(0)
x = torch.randn(5, 7, generator=gen, dtype=torch.float64)
W = torch.randn(5, 2, 7, generator=gen, dtype=torch.float64)
gR = torch.randn(5, 2, 7, generator=gen, dtype=torch.float64)
def run(back):
    xg, Wg = x.clone().requires_grad_(True), W.clone().requires_grad_(True)
    R = back(xg, Wg)
    return [R] + list(torch.autograd.grad((R * gR).sum(), (xg, Wg)))
whole = run(lambda a, b: m.Layer().back(a, b))
calls = []
orig = m._launch
def counted(name, like, blocks, args, rows, key=None):
    calls.append(name)
    return orig(name, like, blocks, args, rows, key)
m._launch = counted
m.INDEX_LIMIT = 2 * 2 * net.size + net.size  # two rows of 2 lanes per launch (2.5 rows)
chunked = run(lambda a, b: m.Layer().back(a, b))
want = run(lambda a, b: reference.back(net, a, b, r))
err = max(float((a - b).abs().max()) for a, b in zip(chunked, want))
same = all(bool(torch.equal(a, b)) for a, b in zip(chunked, whole))
print(json.dumps({"calls": calls, "err": err, "same": same, "rows": m._lane_rows(2)}))
'''


@pytest.mark.slow
def test_lane_kernels_launch_in_chunks_at_the_index_limit(tmp_path):
    """The lane kernels index with 32 bits: a batch past INDEX_LIMIT // (m
    max(size, n, k)) rows runs in launches of that many rows (it fell back to
    the torch sweeps before). With the limit lowered to 2.5 rows of 2 lanes,
    B = 5 runs the lane kernels in 3 launches each way and equals both the
    reference and the unchunked run."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NETGEN_CUDA_SELFCHECK="0")
    proc = subprocess.run([sys.executable, "-c", LANE_CHUNKS, str(tmp_path / "m.py")], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["rows"] == 2
    assert out["calls"].count("wp_fwd") == 3 and out["calls"].count("wp_bwd") == 3, out["calls"]
    assert out["err"] <= 1e-12 and out["same"]
