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
(tests/codegen/cuda/_cuda_group_driver.py). Also, without the simulator:
which modules hold the group kernels."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netgen.codegen import TARGETS
from netgen.codegen.cuda.kernels import GROUP_ARGS, GROUP_KERNELS, KERNEL_ARGS
from netgen.construct import build
from netgen.relax.distributions import default_relaxation

DRIVER = Path(__file__).with_name("_cuda_group_driver.py")
TOL = {"float64": 1e-12, "float32": 1e-5}


@pytest.fixture(scope="module")
def sim():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, str(DRIVER)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_group_kernels_equal_the_reference_in_the_simulator(sim):
    rows = sim["rows"]
    cases = {r["case"] for r in rows}
    assert len(cases) == 6 and any("back" in c for c in cases) and sum(c.startswith("layer") for c in cases) == 2
    assert {r["quantity"] for r in rows} == {"values", "P", "dL/dx", "dL/ds"}
    for r in rows:
        tol = TOL[r["case"].split()[-1]]
        assert r["err"] <= tol * r["scale"], r
        assert r["norm"] > 0.05, r  # a zero result would pass trivially
        assert r.get("shape_ok", True), r


def test_the_layer_runs_a_sorter_in_lane_groups(sim):
    # oddeven 40, float64, 3840 bytes: 12 columns a block, 4 groups; B = 3 (12 items), the backward on the
    # simulator's persistent grid of 3 blocks; bitonic 16 float32, 320 bytes: 5 columns, 4 groups, B = 2
    want = {"layer oddeven 40 shared_limit=3840 float64": (3, 12, 4),
            "layer bitonic 16 shared_limit=320 float32": (2, 5, 4)}
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


@pytest.mark.parametrize("kind,n,k,direction,groups", [("oddeven", 16, 16, "forward", True),
                                                       ("splitter", 16, 5, None, False)])
def test_sorters_swept_forward_hold_the_group_kernels(kind, n, k, direction, groups):
    net = build(kind, n, k)
    src = TARGETS["cuda"].emit(net, default_relaxation(net), {"direction": direction})
    assert _kernel_names(src) == set(KERNEL_ARGS) | (set(GROUP_ARGS) if groups else set())
    funcs = {f.name: f for f in ast.parse(src).body if isinstance(f, ast.FunctionDef)}
    for kern in GROUP_KERNELS:
        for ft in ("float32", "float64"):
            name = kern.function_name(ft, "shared")
            assert (name in funcs) == groups
            if groups:
                assert [a.arg for a in funcs[name].args.args] == [a for a, _ in kern.args]
