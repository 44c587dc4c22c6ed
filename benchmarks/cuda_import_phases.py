"""The host-side phases of a cuda layer's first call in a new process,
without a GPU (issue 29 item 6): ``import torch``, ``import netgen``, then
importing a generated cuda module (``netgen.load``), and whether that
import brought numba / numba-cuda in.

    python benchmarks/cuda_import_phases.py [--n 10450] [--k 5] [--reps 5] [--ref TREE] [--fake-first-call]

Builds the (k, n) splitter network's cuda module (``write_module``, no
cubins: none are needed to import it) with this tree's netgen and, with
``--ref TREE`` (a checkout of another commit, e.g. ``git archive 8c1708f |
tar -x -C /tmp/ref``), another with TREE's; then ``--reps`` rounds of one
fresh process per tree, alternating, and prints the medians side by side.
Wall seconds of a process on a shared machine count other processes'
turns too: compare the two columns of one run, not runs.

``--fake-first-call`` then runs this tree's module's first call under the
fake driver of the tests (``tests/codegen/cuda/_cuda_cubin_driver.py``,
mode ``nonumba``: stand-in cubins fabricated beside the module, the
driver's loads and launches faked, any numba import refused) and prints
its host seconds: the module import and the first rows fwd+bwd (float32,
B = 3), with the DEBUG phase lines of the netgen logger.

The GPU-side phases (context creation, the driver's load of the cubins,
the first launch) need a GPU: ``benchmarks/gpu_check.sh`` measures the
whole first call there; the DEBUG lines of the ``netgen`` logger name each
phase and its time (docs/cuda-round6.md, "First call").
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

BUILD = r"""
import sys
from netgen.codegen import write_module
from netgen.compiler import compile_network
from netgen.construct import build
from netgen.relax.distributions import default_relaxation
n, k, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
net = compile_network(build("splitter", n, k)).network
print(write_module("cuda", net, default_relaxation(net), out_dir=out, build=False))
"""

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import netgen
t2 = time.perf_counter()
mod = netgen.load(sys.argv[1])
t3 = time.perf_counter()
print(json.dumps({"import torch": t1 - t0, "import netgen": t2 - t1, "module import": t3 - t2,
                  "numba imported": "numba" in sys.modules or "numba_cuda" in sys.modules}))
"""


def run(code, tree, *args):
    env = dict(os.environ, PYTHONPATH=str(tree), NETGEN_CACHE_DIR=os.environ.get("NETGEN_CACHE_DIR", ""))
    if not env["NETGEN_CACHE_DIR"]:
        env.pop("NETGEN_CACHE_DIR")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env,
                          cwd=str(tree), timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"benchmarks/cuda_import_phases.py: a run with {tree} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10450)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ref", default=None, help="a checkout of another commit: before/after in one run")
    ap.add_argument("--fake-first-call", action="store_true", help="this tree's first call under the fake driver")
    args = ap.parse_args(argv)
    trees = {"this tree": ROOT}
    if args.ref:
        ref = Path(args.ref).resolve()
        if not (ref / "netgen").is_dir():
            raise SystemExit(f"benchmarks/cuda_import_phases.py: --ref {args.ref!r} has no netgen/")
        trees = {f"ref {args.ref}": ref, "this tree": ROOT}
    with tempfile.TemporaryDirectory(prefix="netgen_cuda_phases_") as tmp:
        modules = {}
        for i, (label, tree) in enumerate(trees.items()):
            out = Path(tmp) / str(i)
            out.mkdir()
            modules[label] = run(BUILD, tree, args.n, args.k, out)
        got = {label: [] for label in trees}
        for _ in range(max(1, args.reps)):
            for label, tree in trees.items():
                got[label].append(json.loads(run(CHILD, tree, modules[label])))
        fake = fake_first_call(Path(modules["this tree"]), Path(tmp)) if args.fake_first_call else None
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = "unknown CPU"
    print(f"new-process phases, splitter({args.n},{args.k}) cuda module, wall s, medians of {args.reps} "
          f"processes each; {cpu}, load average {os.getloadavg()[0]:.1f} (shared machine)")
    for label, rs in got.items():
        parts = ", ".join(f"{key} {statistics.median(r[key] for r in rs):.3f}"
                          for key in ("import torch", "import netgen", "module import"))
        print(f"  {label}: {parts}; numba imported: {sorted({r['numba imported'] for r in rs})}")
    if fake is not None:
        secs = ", ".join(f"{k} {v:.3f} s" for k, v in fake["seconds"].items())
        print(f"fake-driver first call (this tree, stand-in cubins, no numba): {secs}; numba imported: "
              f"{fake['numba_imported'] or 'none'}; errors: {fake['errors'] or 'none'}")
        for line in fake["log"]:
            if " ms" in line:
                print(f"  {line}")
    return 0


def fake_first_call(module: Path, tmp: Path) -> dict:
    """The tests' fake driver in mode nonumba on ``module`` (stand-in cubins first)."""
    import importlib.util

    sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location("netgen_cubin_helpers",
                                                  ROOT / "tests/codegen/cuda/_cuda_cubin_helpers.py")
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    tests.fabricate(module)
    out = tmp / "fake_first_call.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, str(tests.DRIVER), str(module), "9.0", str(out), "nonumba"],
                          capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"benchmarks/cuda_import_phases.py: the fake-driver run failed:\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


if __name__ == "__main__":
    sys.exit(main())
