"""What netgen.compat's call path costs over the generated layer it runs:
forward + backward of ``DiffTopkNet`` against the same network's
``AutoLayer`` (both numba on the CPU), CPU time per step, median.

The compat path adds the published orientation (a flip and a transpose),
the steepness and non-finite-row checks, and (issue 34) the node that sends
a create_graph=True gradient to the reference executor. Run it on two
checkouts to see what a change added::

    PYTHONPATH=OLD python benchmarks/compat_overhead.py
    PYTHONPATH=NEW python benchmarks/compat_overhead.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import netgen.compat as C
from netgen.codegen.auto import AutoLayer
from netgen.compat import original_network
from netgen.relax.distributions import Relaxation

CASES = [("splitter_selection", 100, 5, 64), ("bitonic", 16, 16, 32), ("splitter_selection", 1000, 5, 64)]


def step_time(f, x, reps):
    times = []
    for _ in range(reps):
        xx = x.clone().requires_grad_()
        t = time.process_time()
        v, P = f(xx)
        (P.sum() + v.sum()).backward()
        times.append(time.process_time() - t)
    return statistics.median(times[5:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=80)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"netgen at {C.__file__}")
    for kind, n, k, B in CASES:
        compat = C.DiffTopkNet(kind, n, k, sparse=True, target="numba")
        auto = AutoLayer(original_network(kind, n, k), Relaxation("cauchy", 10.0, 0.25, 1e-10), "numba")
        x = torch.randn(B, n, generator=torch.Generator().manual_seed(0))
        rounds = {"compat": [], "layer": []}
        for _ in range(3):  # interleaved
            rounds["compat"].append(step_time(compat, x, args.reps))
            rounds["layer"].append(step_time(auto, x, args.reps))
        c, l = statistics.median(rounds["compat"]), statistics.median(rounds["layer"])
        print(f"{kind:>18} n={n:<5} k={k:<3} B={B:<3} compat {1e3 * c:.3f} ms  layer {1e3 * l:.3f} ms  "
              f"compat - layer {1e6 * (c - l):.0f} us")


if __name__ == "__main__":
    main()
