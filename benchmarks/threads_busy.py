"""Per-call time of a small numba layer, idle and beside CPU-busy processes
(issue 20: numba layers stalled 15-40 ms per call under load).

    python benchmarks/threads_busy.py [--n 16] [--B 32] [--calls 300] [--busy N]

The layer: the splitter top-5 network on n wires (a sorter when n <= 8),
float32, forward+backward of ``(P * W).sum()``. Three thread settings:

* ``numba default``: what the layers did before: every call parallel over
  all of numba's threads (``Layer(threads=NUMBA_NUM_THREADS)`` with the
  module's serial threshold off);
* ``follow torch``: ``Layer()`` as shipped: torch.get_num_threads()
  threads, on one thread below the module's work threshold (this case);
* ``torch 1 thread``: ``torch.set_num_threads(1)`` (what difftopk's
  scripts do), ``Layer()``.

Each setting is timed idle, then with ``--busy`` processes (default: one per
CPU) spinning in pure Python; medians of ``--calls`` calls (after 20 warm-up
calls) and the busy/idle ratio (target <= 2). The busy processes are
started and stopped by this script (by their own pids).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--B", type=int, default=32)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--busy", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    if args.n < 2 or args.B < 1 or args.calls < 1 or args.busy < 1:
        ap.error("need --n >= 2, --B >= 1, --calls >= 1, --busy >= 1")

    import numba
    import torch

    from netgen.codegen import emit
    from netgen.codegen.cache import load
    from netgen.construct import build
    from netgen.relax.distributions import Relaxation

    k = min(5, args.n)
    net = build("splitter", args.n, k)
    path = Path(tempfile.gettempdir()) / "netgen_bench_threads" / f"splitter_{args.n}_{k}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    src = emit("numba", net, Relaxation("cauchy", steepness=10.0))
    if not path.exists() or path.read_text() != src:
        path.write_text(src)
    mod = load(path)
    ncpu = torch.get_num_threads()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.B, args.n, generator=g).requires_grad_(True)
    W = torch.randn(args.B, k, args.n, generator=g)
    serial_work = mod._SERIAL_WORK

    def setting(name):
        if name == "numba default":
            mod._SERIAL_WORK = 0
            torch.set_num_threads(ncpu)
            return mod.Layer(threads=numba.config.NUMBA_NUM_THREADS)
        mod._SERIAL_WORK = serial_work
        torch.set_num_threads(1 if name == "torch 1 thread" else ncpu)
        return mod.Layer()

    def timed(layer):
        ts = []
        for i in range(args.calls + 20):
            x.grad = None
            t = time.perf_counter()
            (layer(x)[1] * W).sum().backward()
            if i >= 20:
                ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    names = ("numba default", "follow torch", "torch 1 thread")
    idle = {}
    for name in names:
        idle[name] = timed(setting(name))
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        time.sleep(1.0)
        busy = {name: timed(setting(name)) for name in names}
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
    mod._SERIAL_WORK = serial_work
    print(f"n = {args.n}, k = {k}, B = {args.B}, float32, fwd+bwd of (P * W).sum(); {os.cpu_count()} CPUs, "
          f"numba threading layer {numba.threading_layer()}, NUMBA_NUM_THREADS {numba.config.NUMBA_NUM_THREADS}; "
          f"median of {args.calls} calls; busy = {args.busy} spinning processes; "
          f"load average at end {os.getloadavg()[0]:.1f}")
    print(f"{'setting':<16} {'idle ms':>9} {'busy ms':>9} {'busy/idle':>10}")
    for name in names:
        print(f"{name:<16} {idle[name] * 1e3:>9.3f} {busy[name] * 1e3:>9.3f} {busy[name] / idle[name]:>9.2f}x")
    print("target: busy/idle <= 2 for the shipped settings (follow torch, torch 1 thread)")


if __name__ == "__main__":
    main()
