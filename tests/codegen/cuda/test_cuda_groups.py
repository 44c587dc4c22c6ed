"""The lane-group kernels (netgen/codegen/cuda/groups.py: P's sweep spread
over blocks, G lanes per block; sorting's input-column groups and the rows'
rank groups) in Numba's CUDA simulator against the reference executor:
P, dL/dx and dL/ds (dL/dP and dL/dvalues both given) for sorters swept
forward in groups of 3, 5 and 16 columns (the last group short, layers
wider than the block), a selection network's ranks in groups of 2 (rank
groups, the kernels launched directly), float64 and float32, the backward
on a persistent grid smaller than the items (each block reusing its
scratch D); and through a generated Layer whose sorter's n x n floats do
not fit its shared limit: the launcher (group_ops.py) runs fwd + grp_fwd
forward and grp_bwd + vals_bwd backward. The simulator must be enabled
before numba is imported: the kernels run in a subprocess
(tests/codegen/cuda/_cuda_group_driver.py); a selection network built
with ``lane_groups=True`` whose k x n floats do not fit runs its rows in
rank groups the same way. Also, without the simulator: which modules hold
the group kernels, and the option's bad values refused."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netgen.codegen import TARGETS
from netgen.codegen.cuda.kernels import GROUP_ARGS, GROUP_KERNELS, KERNEL_ARGS, LANE_ARGS
from netgen.construct import build
from netgen.relax.distributions import default_relaxation

DRIVER = Path(__file__).with_name("_cuda_group_driver.py")
TOL = {"float64": 1e-12, "float32": 1e-5}


@pytest.fixture(scope="module")
def sim():
    # the launch self-check is test_cuda_sim.py's subject; run here it took 3/4 of the time
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NETGEN_CUDA_SELFCHECK="0")
    proc = subprocess.run([sys.executable, str(DRIVER)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_group_kernels_equal_the_reference_in_the_simulator(sim):
    rows = sim["rows"]
    cases = {r["case"] for r in rows}
    assert len(cases) == 8 and any("back" in c for c in cases) and sum(c.startswith("layer") for c in cases) == 3
    assert {r["quantity"] for r in rows} == {"values", "P", "dL/dx", "dL/ds"}
    for r in rows:
        tol = TOL[r["case"].split()[-1]]
        assert r["err"] <= tol * r["scale"], r
        assert r["norm"] > 0.05, r  # a zero result would pass trivially
        assert r.get("shape_ok", True), r


def test_the_layer_runs_sorters_and_rank_groups_in_lane_groups(sim):
    # oddeven 40, float64, 3840 bytes: 12 columns a block, 4 groups; B = 3 (12 items), the backward on the
    # simulator's persistent grid of 3 blocks; bitonic 16 float32, 320 bytes: 5 columns, 4 groups, B = 2
    # (rank groups) splitter (40, 5) swept back, built with lane_groups=True, 640 bytes: 2 ranks a block, 3
    # groups, B = 2 (6 items on 3 blocks)
    want = {"layer oddeven 40 40 shared_limit=3840 float64": (3, 12, 4),
            "layer bitonic 16 16 shared_limit=320 float32": (2, 5, 4),
            "layer splitter 40 5 shared_limit=640 float64": (2, 2, 3)}
    assert set(sim["launches"]) == set(want)
    for case, (B, G, groups) in want.items():
        got = sim["launches"][case]
        assert got["forward"] == [["fwd", B, 1], ["grp_fwd", B * groups, G]], case
        assert got["backward"] == [["grp_bwd", 3, G], ["vals_bwd", B, 1]], case


def _kernel_names(source):
    tree = ast.parse(source)
    table = [t.value for t in tree.body if isinstance(t, ast.Assign) and isinstance(t.targets[0], ast.Name)
             and t.targets[0].id == "KERNEL_ARGS"][0]
    return set(ast.literal_eval(table))


@pytest.mark.parametrize("kind,n,k,options,groups", [("oddeven", 16, 16, {"direction": "forward"}, True),
                                                     ("oddeven", 16, 16, {"direction": "forward",
                                                                          "lane_groups": False}, False),
                                                     ("splitter", 16, 5, {}, False),
                                                     ("splitter", 16, 5, {"lane_groups": True}, True),
                                                     # by default where k n float64 pass 63 KiB (rank
                                                     # groups on GPUs with less shared memory: A100, T4)
                                                     ("splitter", 1600, 5, {}, False),
                                                     ("splitter", 1700, 5, {}, True),
                                                     ("splitter", 1700, 5, {"lane_groups": False}, False)])
def test_which_modules_hold_the_group_kernels(kind, n, k, options, groups):
    net = build(kind, n, k)
    src = TARGETS["cuda"].emit(net, default_relaxation(net), options)
    # every module holds the lane kernels and vals_bwd (Round 8)
    assert _kernel_names(src) == set(KERNEL_ARGS) | set(LANE_ARGS) | {"vals_bwd"} | (set(GROUP_ARGS) if groups else set())
    funcs = {f.name: f for f in ast.parse(src).body if isinstance(f, ast.FunctionDef)}
    for kern in GROUP_KERNELS:
        for ft in ("float32", "float64"):
            name = kern.function_name(ft, "shared")
            assert (name in funcs) == (groups or kern.name == "vals_bwd")
            if groups:
                assert [a.arg for a in funcs[name].args.args] == [a for a, _ in kern.args]


@pytest.mark.parametrize("bad", [1, "yes", 0.0])
def test_lane_groups_option_refuses_non_booleans(bad):
    from netgen.codegen.cuda import CudaOptions

    with pytest.raises(ValueError, match="lane_groups"):
        CudaOptions(lane_groups=bad)


def _has_gpu() -> bool:
    import torch

    if not torch.cuda.is_available():
        return False
    from numba import cuda

    return cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind,n,k,options,dtype,tol", [
    ("oddeven", 256, 256, {}, "float32", 1e-5),  # 256 x 256 float32 = 256 KB: no GPU block holds it
    ("oddeven", 200, 200, {}, "float64", 1e-12),  # 312 KB
    # rank groups: 5 x 12,000 float32 = 240 KB, more than any GPU's block (H100: 227 KB)
    ("splitter", 12000, 5, {"lane_groups": True}, "float32", 1e-5),
])
def test_gpu_lane_groups_equal_the_reference(tmp_path, kind, n, k, options, dtype, tol):
    """On a GPU: the rows with P in lane groups (P's sweep larger than a
    block's shared memory) equal the float64 reference, values, P and
    dL/dx, and the group kernels ran."""
    import torch

    from netgen.codegen import write_module
    from netgen.codegen.cache import load
    from netgen.relax import reference
    from netgen.relax.distributions import Relaxation

    net = build(kind, n, k)
    r = Relaxation("cauchy", steepness=4.0)
    mod = load(write_module("cuda", net, r, tmp_path, options=options))
    x = torch.randn(3, n, dtype=getattr(torch, dtype), device="cuda", requires_grad=True)
    v, P = mod.Layer()(x)
    xc = x.detach().cpu().double().requires_grad_(True)
    v0, P0 = reference.forward(net, xc, r)
    gv, gP = torch.randn_like(v0), torch.randn_like(P0)
    (g,) = torch.autograd.grad((v * gv.to(v)).sum() + (P * gP.to(P)).sum(), x)
    (g0,) = torch.autograd.grad((v0 * gv).sum() + (P0 * gP).sum(), xc)
    for got, want, f in ((v, v0, 1), (P, P0, 1), (g, g0, 10)):
        torch.testing.assert_close(got.double().cpu(), want, atol=f * tol * max(1.0, float(want.abs().max())), rtol=0)
    assert any(name == "grp_fwd" for name, _ in mod._VARIANTS), mod._VARIANTS


@pytest.mark.parametrize("direction,n,k,refused", [("forward", 65536, 65536, True), ("forward", 65535, 65535, False),
                                                   ("back", 2**20, 2**12, True), ("back", 2**20, 2**11, False)])
def test_lane_groups_false_refused_where_the_rows_state_passes_32_bits(direction, n, k, refused):
    """The rows kernels index a row's P state (lanes x n floats: n lanes
    going forward, k going back) with 32-bit counters; without the lane
    groups a larger state would wrap, so emit refuses it (a stand-in
    network: the check comes before anything else reads it)."""
    from types import SimpleNamespace

    from netgen.codegen.cuda import CudaOptions
    from netgen.codegen.cuda.emit import emit

    net = SimpleNamespace(n=n, k=k, size=1)
    plan = SimpleNamespace(direction=direction, nnz=1)
    if refused:
        with pytest.raises(ValueError, match="lane_groups=False needs"):
            emit(net, None, plan, CudaOptions(lane_groups=False))
    else:  # passes the check, then fails on the stand-in (not a ValueError of this check)
        with pytest.raises(Exception) as got:
            emit(net, None, plan, CudaOptions(lane_groups=False))
        assert "lane_groups=False needs" not in str(got.value)
