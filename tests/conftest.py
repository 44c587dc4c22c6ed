"""Suite-wide settings.

* CI runs the README's test command, ``pytest -n 2 --dist worksteal
  --run-slow`` on 2 cores: each worker uses one thread, so workers do not
  fight over cores (a tiny torch op took ~23 ms with 2 threads per worker on
  a loaded machine, ~3 us with 1).
* Tests marked ``slow`` (the CUDA simulator, the CUDA compile, inductor,
  subprocess round trips: seconds to minutes each) run only with
  ``--run-slow`` (or a ``-m`` expression that names ``slow``): a plain
  ``python -m pytest`` is the fast developer loop; CI and the README's
  command run everything.
* :func:`shared_once`: a result computed once per test session and shared
  by every xdist worker (the CUDA compile and the simulator's cases are
  each run once, whichever worker asks first; the others wait for it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(var, "1")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is a test dependency
    pass


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the tests marked slow (the README's and CI's command passes it)")


def _slow_selected(config) -> bool:
    return config.getoption("--run-slow") or "slow" in (config.getoption("markexpr") or "")


def pytest_collection_modifyitems(config, items):
    if _slow_selected(config):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        keep = [item for item in items if item.get_closest_marker("slow") is None]
        config.hook.pytest_deselected(items=slow)
        items[:] = keep
        config._netgen_slow_deselected = len(slow)


def pytest_terminal_summary(terminalreporter, config):
    n = getattr(config, "_netgen_slow_deselected", 0)
    if n:
        terminalreporter.write_line(f"netgen: {n} slow tests deselected; run them with --run-slow "
                                    "(the README's test command and CI do)")


def _shared_root(tmp_path_factory) -> Path:
    """A folder every xdist worker of this session sees (the parent of the
    workers' own base temp folders), or the base temp without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def shared_once(tmp_path_factory):
    """``shared_once(name, compute)``: ``compute(folder)``'s JSON-able
    result, computed once per session: the first worker to ask runs it
    (``folder``: a fresh folder every worker sees, for its files) while
    holding a lock; the others wait and read it. A failure is not stored
    (the next caller tries again and fails the same way, with its own
    message)."""
    return lambda name, compute: _shared_once(tmp_path_factory, name, compute)


def _shared_once(tmp_path_factory, name: str, compute):
    from filelock import FileLock

    root = _shared_root(tmp_path_factory)
    done = root / f"netgen-shared-{name}.json"
    with FileLock(str(done) + ".lock"):
        if done.is_file():
            return json.loads(done.read_text())
        folder = root / f"netgen-shared-{name}"
        folder.mkdir(exist_ok=True)
        result = compute(folder)
        done.write_text(json.dumps(result))
        return result


# ------------------------------------------------------------------ numpy 2.5
#: Makes every process started with :func:`numpy25_env`'s PYTHONPATH look
#: like numpy 2.5 to numba and numba-cuda: the package index here serves
#: numpy <= 2.4, and numpy 2.5 removed ``np.row_stack``, which numba-cuda
#: 0.30.4 overloads when it first compiles a kernel (no ``np.row_stack``,
#: not in ``np.__all__``, numba's numpy version check says 2.5).
NUMPY25_SITECUSTOMIZE = '''
import numpy
if hasattr(numpy, "row_stack"):
    del numpy.row_stack
    numpy.__all__ = [name for name in numpy.__all__ if name != "row_stack"]
import numba.np.numpy_support
numba.np.numpy_support.numpy_version = (2, 5)
'''

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def numpy25_env(tmp_path_factory) -> dict:
    """An environment whose Python processes see "numpy 2.5" (a
    ``sitecustomize`` first on PYTHONPATH; see NUMPY25_SITECUSTOMIZE)."""
    site = tmp_path_factory.mktemp("numpy25")
    (site / "sitecustomize.py").write_text(NUMPY25_SITECUSTOMIZE)
    path = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    return env


# ------------------------------------------------------- the one CUDA build
#: the README's cuda command; its kernels compile once per test session
CUDA_BUILD = ["build", "--n", "10450", "--k", "5", "--target", "cuda"]


WORLD = """
import json, os, numpy
from netgen.codegen.cuda.compile import _ptxas
print(json.dumps({"row_stack": hasattr(numpy, "row_stack"), "ptxas": _ptxas(), "path": os.environ["PATH"],
                  "cuda_home": os.environ.get("CUDA_HOME")}))
"""


@pytest.fixture(scope="session")
def cuda_cli_build(shared_once, numpy25_env) -> dict:
    """``netgen build --n 10450 --k 5 --target cuda`` (PTX for compute 7.5 and
    cubins for every arch, ~40 CPU-seconds) run once per test session, in the
    least friendly place a user runs it: no system CUDA toolkit in reach
    (PATH holds only the interpreter's folder, no CUDA_HOME / CUDA_PATH /
    NETGEN_PTXAS: ptxas must come from the ``cuda`` extra's wheel) and
    numpy 2.5 (:func:`numpy25_env`). tests/codegen/cuda/test_cuda_no_toolkit.py,
    test_numpy25.py, test_cuda_cubin_build.py and test_cuda_ptx.py check what it
    printed and wrote. Returns ``{"returncode", "stdout", "stderr",
    "module"}`` (module: the path written, or None) and ``"world"``: what a
    process in that environment sees (``row_stack``, ``ptxas``, ``path``)."""
    import subprocess
    import sys

    def build(folder):
        env = {k: v for k, v in numpy25_env.items() if k not in ("CUDA_HOME", "CUDA_PATH", "NETGEN_PTXAS")}
        env["PATH"] = os.path.dirname(sys.executable)
        out = folder / "out"
        r = subprocess.run([sys.executable, "-m", "netgen.cli", *CUDA_BUILD, "-o", str(out)], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=1200)
        modules = sorted(out.glob("*.py")) if out.is_dir() else []
        # what the build's processes saw (checked by the tests that rely on it)
        probe = subprocess.run([sys.executable, "-c", WORLD], env=env, capture_output=True, text=True, timeout=300)
        world = json.loads(probe.stdout.strip().splitlines()[-1]) if probe.returncode == 0 else {"error": probe.stderr}
        return {"returncode": r.returncode, "stdout": r.stdout, "stderr": r.stderr, "world": world,
                "module": str(modules[0]) if len(modules) == 1 else None}

    return shared_once("cuda-build", build)
