"""The lane-group kernels (netgen/codegen/cuda/groups.py: P's sweep spread
over blocks, G lanes per block; sorting's input-column groups and the rows'
rank groups) in Numba's CUDA simulator against the reference executor:
P, dL/dx and dL/ds (dL/dP and dL/dvalues both given) for sorters swept
forward in groups of 3, 5 and 16 columns (the last group short, layers
wider than the block), a selection network's ranks in groups of 2 (rank
groups), float64 and float32, the backward on a persistent grid smaller
than the items (each block reusing its scratch D). The simulator must be
enabled before numba is imported: the kernels run in a subprocess
(tests/codegen/cuda/_cuda_group_driver.py). Also, without the simulator:
the rendered kernels' arguments come from the objects."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netgen.codegen.cuda.groups import GROUP_ARGS, GROUP_KERNELS, group_kernels_source
from netgen.codegen.swap_code import swap_code
from netgen.construct import build
from netgen.relax.distributions import default_relaxation

DRIVER = Path(__file__).with_name("_cuda_group_driver.py")
TOL = {"float64": 1e-12, "float32": 1e-5}


@pytest.fixture(scope="module")
def sim_rows():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, str(DRIVER)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_group_kernels_equal_the_reference_in_the_simulator(sim_rows):
    cases = {r["case"] for r in sim_rows}
    assert len(cases) == 4 and any("back" in c for c in cases) and any("forward" in c for c in cases)
    assert {r["quantity"] for r in sim_rows} == {"values", "P", "dL/dx", "dL/ds"}
    for r in sim_rows:
        tol = TOL[r["case"].split()[-1]]
        assert r["err"] <= tol * r["scale"], r
        assert r["norm"] > 0.05, r  # a zero result would pass trivially


def test_group_kernels_rendered_from_the_objects():
    net = build("oddeven", 16, 16)
    r = default_relaxation(net)
    args, src, table = group_kernels_source(16, 16, 48 * 1024, {ft: swap_code(r, 0, ft, steepness="s")
                                                                for ft in ("float32", "float64")}, True)
    assert ast.literal_eval(args.split("=", 1)[1].strip()) == GROUP_ARGS
    funcs = {f.name: f for f in ast.parse(src).body if isinstance(f, ast.FunctionDef)}
    assert len(funcs) == 12  # 3 kernels x 2 float types x 2 variants
    for kern in GROUP_KERNELS:
        for ft in ("float32", "float64"):
            for variant in ("global", "shared"):
                f = funcs[kern.function_name(ft, variant)]
                assert [a.arg for a in f.args.args] == [a for a, _ in kern.args]
    # one lane row (64 bytes) does not fit 60: no shared variant
    _, src, _ = group_kernels_source(16, 16, 60, {"float32": swap_code(r, 0, "float32", steepness="s")}, True)
    assert all(f.name.endswith("_g") for f in ast.parse(src).body if isinstance(f, ast.FunctionDef))
