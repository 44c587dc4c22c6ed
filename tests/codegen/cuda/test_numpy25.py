"""The cuda target on numpy 2.5, simulated: the package index here serves
numpy <= 2.4, and numpy 2.5 removed ``np.row_stack``, which numba-cuda
0.30.4 overloads when it first compiles a kernel. A ``sitecustomize`` on
PYTHONPATH makes every process of these tests look like numpy 2.5 to numba
and numba-cuda (no ``np.row_stack``, not in ``np.__all__``, numba's numpy
version check says 2.5). In that world a bare numba-cuda compile fails (the
control: the simulation is real), while netgen's compile step and generated
modules, which put the alias back first, build the (5, 10450) cuda module
(compile check to PTX and cubin included) and pass a simulator case."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SITECUSTOMIZE = '''
import numpy
if hasattr(numpy, "row_stack"):
    del numpy.row_stack
    numpy.__all__ = [name for name in numpy.__all__ if name != "row_stack"]
import numba.np.numpy_support
numba.np.numpy_support.numpy_version = (2, 5)
'''

BARE_COMPILE = '''
import numpy as np
assert not hasattr(np, "row_stack")
from numba import cuda, types
from numba.cuda import dispatcher
dispatcher.get_current_device = lambda: None

@cuda.jit
def kernel(a):
    a[0] = 1.0

cuda.compile_ptx(kernel.py_func, (types.Array(types.float32, 1, "C"),), cc=(9, 0))
'''


@pytest.fixture(scope="module")
def numpy25_env(tmp_path_factory):
    site = tmp_path_factory.mktemp("numpy25")
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join([str(site), str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    return env


def test_bare_numba_cuda_fails_there(numpy25_env):
    proc = subprocess.run([sys.executable, "-c", BARE_COMPILE], capture_output=True, text=True, env=numpy25_env,
                          timeout=300)
    assert proc.returncode != 0
    assert "has no attribute 'row_stack'" in proc.stderr


def test_netgen_build_cuda_10450_works_there(numpy25_env, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "netgen.cli", "build", "--n", "10450", "--k", "5", "--target", "cuda", "-o", str(tmp_path)],
        capture_output=True, text=True, env=numpy25_env, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "compile check passed" in proc.stderr
    assert len(list(tmp_path.glob("splitter_n10450_k5_cuda_*.py"))) == 1


def test_simulator_case_passes_there(numpy25_env):
    from test_cuda_sim import check_rows, run_driver

    env = dict(numpy25_env, NETGEN_SIM_CASES="5")  # the float32 case
    env_path = env.pop("PYTHONPATH")
    out = run_driver(dict(env, PYTHONPATH=env_path))
    assert len(out["rows"]) == 9
    check_rows(out["rows"])
