"""What the first call of a cuda layer spends getting its kernels, in a
fresh process, without a GPU (issue 20): numba-cuda compiling them (as a
module without cubins does) against the cubin loader
(netgen.codegen.cuda.cubin) reading them from ``<stem>.cubins/``.

    python benchmarks/cuda_first_call.py [--n 8 --k 3] [--reps 3] [--module PATH]

Builds the module with ``netgen build --target cuda`` (needs ptxas) unless
``--module`` names one built so. Per rep, interleaved, two fresh processes
import the module and get the float32 kernels a forward + backward uses
(rows, values only, column; shared variants: 4 kernels):

* ``numba``: ``numba.cuda.compile_ptx(kernel, signature, cc=(9, 0))``, the
  typing, lowering and NVVM work numba-cuda's dispatcher does at a first
  call (its link and driver load come on top: a lower bound);
* ``cubin``: the module's ``cubin_kernel`` for a (9, 0) device, with
  ``cuda.core.ObjectCode`` replaced by a stub that keeps the bytes: the
  module hash, metadata, file reads and ABI check, without the driver's
  load of the cubin (``cuLibraryLoadData``, not measurable here).

Prints medians, their ratio, each process's peak RSS and the CPU model.
Without a GPU both figures are host-side; the GPU-side load is an estimate.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time, types
mode, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
import importlib.util
import numpy as np
import torch
spec = importlib.util.spec_from_file_location("bench_cuda_module", path)
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
t_import = time.perf_counter() - t0
keys = [k for k in mod.KERNELS if k[0] == np.dtype(np.float32) and k[2] == "shared"]
t = time.perf_counter()
if mode == "numba":
    import numba.cuda
    from numba.cuda import dispatcher
    dispatcher.get_current_device = lambda: None
    for (dt, name, variant) in keys:
        numba.cuda.compile_ptx(mod.KERNELS[(dt, name, variant)].py_func, mod._numba_types(dt)[name], cc=(9, 0))
else:
    import cuda.core
    class Code:
        def __init__(self, data): self.data = data
        @staticmethod
        def from_cubin(data, name=""): return Code(data)
        def get_kernel(self, entry):
            a = types.SimpleNamespace(max_threads_per_block=1024, num_regs=32)
            return types.SimpleNamespace(handle=entry, attributes=a)
    cuda.core.ObjectCode = Code
    torch.cuda.get_device_capability = lambda i=None: (9, 0)
    mod._shared_limit = lambda device: 48 * 1024
    for (dt, name, variant) in keys:
        assert mod.cubin_kernel(0, dt, name, variant) is not None, name
seconds = time.perf_counter() - t
with open("/proc/self/status") as f:
    hwm = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))
print(json.dumps({"seconds": seconds, "import": t_import, "kernels": len(keys), "peak_rss": hwm}))
"""


def child(mode: str, module: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(module)], capture_output=True, text=True, env=env,
                          timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--module", type=Path, default=None)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from netgen.bench.networks import cpu_model

    with tempfile.TemporaryDirectory(prefix="netgen_first_call_") as tmp:
        module = args.module
        if module is None:
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            env.pop("NUMBA_ENABLE_CUDASIM", None)
            proc = subprocess.run([sys.executable, "-m", "netgen.cli", "build", "--n", str(args.n), "--k", str(args.k),
                                   "--target", "cuda", "--compile-check", "-o", tmp], capture_output=True, text=True,
                                  env=env)
            if proc.returncode != 0:
                raise SystemExit(f"netgen build failed (ptxas needed: pip install 'netgen[cuda]'):\n{proc.stderr}")
            (module,) = Path(tmp).glob("*.py")
        runs = {"numba": [], "cubin": []}
        for _ in range(args.reps):
            for mode in runs:
                runs[mode].append(child(mode, module))
    print(f"CPU: {cpu_model()}; load average {os.getloadavg()[0]:.1f}; module {module.name}")
    print("kernel acquisition of a first call (float32 forward+backward, 4 kernels), fresh processes, "
          f"median of {args.reps}, interleaved:")
    med = {}
    for mode, rs in runs.items():
        med[mode] = statistics.median(r["seconds"] for r in rs)
        each = ", ".join(f"{r['seconds']:.3f}" for r in rs)
        print(f"  {mode:6s} {med[mode]:8.3f} s   (runs {each}; module import "
              f"{statistics.median(r['import'] for r in rs):.2f} s; peak RSS "
              f"{max(r['peak_rss'] for r in rs) / 2**20:.0f} MiB)")
    print(f"  numba / cubin: {med['numba'] / med['cubin']:.0f}x  (host side only: the driver's load of the cubins "
          "on a GPU is not included, not measured here)")


if __name__ == "__main__":
    main()
