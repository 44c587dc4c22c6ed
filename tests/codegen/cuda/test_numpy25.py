"""The cuda target on numpy 2.5, simulated: the package index here serves
numpy <= 2.4, and numpy 2.5 removed ``np.row_stack``, which numba-cuda
0.30.4 overloads when it first compiles a kernel. A ``sitecustomize`` on
PYTHONPATH (``numpy25_env``, tests/conftest.py) makes every process of these
tests look like numpy 2.5 to numba and numba-cuda (no ``np.row_stack``, not
in ``np.__all__``, numba's numpy version check says 2.5). In that world a
bare numba-cuda compile fails (the control: the simulation is real), while
netgen's compile step and generated modules, which put the alias back first,
build the (5, 10450) cuda module (compile check to PTX and cubin included:
the session's one CUDA build, ``cuda_cli_build``, runs in that world) and
pass a simulator case."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


def test_bare_numba_cuda_fails_there(numpy25_env):
    proc = subprocess.run([sys.executable, "-c", BARE_COMPILE], capture_output=True, text=True, env=numpy25_env,
                          timeout=300)
    assert proc.returncode != 0
    assert "has no attribute 'row_stack'" in proc.stderr


@pytest.mark.slow
def test_netgen_build_cuda_10450_works_there(cuda_cli_build):
    assert cuda_cli_build["world"]["row_stack"] is False  # the build ran in the numpy 2.5 world
    assert cuda_cli_build["returncode"] == 0, cuda_cli_build["stderr"][-3000:]
    assert "compile check passed" in cuda_cli_build["stderr"]
    assert cuda_cli_build["module"] and Path(cuda_cli_build["module"]).name.startswith("splitter_n10450_k5_cuda_")


@pytest.mark.slow
def test_simulator_case_passes_there(numpy25_env):
    from test_cuda_sim import check_rows, run_driver

    env = dict(numpy25_env, NETGEN_SIM_CASES="5")  # the float32 case
    env_path = env.pop("PYTHONPATH")
    out = run_driver(dict(env, PYTHONPATH=env_path))
    assert len(out["rows"]) == 9
    check_rows(out["rows"])
