"""Whether the cuda target can run here (``netgen.codegen.cuda._available``,
what ``target="auto"`` asks on a GPU) is decided without importing numba:
a first call loads its kernels from cubins without numba (issue 29 item
6), and numba's import (~0.3 s) would be most of it. Each case runs in a
fresh interpreter with torch told it sees a GPU, a stand-in for
``cuda.bindings.driver`` and any import of numba refused."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import importlib.abc, json, sys, types

    class NoNumba(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "numba" or name.startswith(("numba.", "numba_cuda")):
                raise ImportError("numba refused by the test")
            return None

    sys.meta_path.insert(0, NoNumba())
    import torch
    torch.cuda.is_available = lambda: True
    MODE = sys.argv[1]
    drv = types.ModuleType("cuda.bindings.driver")
    def cuInit(flags):
        if MODE == "no driver":
            raise RuntimeError("libcuda.so.1 not found")
        return (0,)
    drv.cuInit = cuInit
    drv.cuDeviceGetCount = lambda: (0, 0 if MODE == "no device" else 2)
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = drv
    cuda_pkg = types.ModuleType("cuda")
    cuda_pkg.bindings = bindings
    sys.modules.update({"cuda": cuda_pkg, "cuda.bindings": bindings, "cuda.bindings.driver": drv})
    from netgen.codegen import cuda as target
    from netgen.codegen.auto import pick_target
    target._target.has = lambda name: True  # numba-cuda "installed" (find_spec would not import it anyway)
    print(json.dumps({"why_not": target._available(), "auto": pick_target("cuda")[0],
                      "numba": sorted(m for m in sys.modules if m == "numba" or m.startswith("numba."))}))
''')


def _run(mode):
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_device_the_driver_sees_makes_cuda_the_choice_without_numba():
    got = _run("device")
    assert got == {"why_not": None, "auto": "cuda", "numba": []}, got


@pytest.mark.parametrize("mode,says", [("no device", "sees no usable device"), ("no driver", "does not load")])
def test_no_usable_device_falls_back_to_torch_and_says_why(mode, says):
    got = _run(mode)
    assert says in got["why_not"] and "cuda.bindings" in got["why_not"], got
    assert got["auto"] == "torch" and got["numba"] == [], got
