"""Build times and peak memory of the constructions at (8, 65536) and of
large sorters.

    python benchmarks/table6_construct.py

Table 6 itself (depths and sizes beside the paper's) is `netgen table`
(`--no-clean` for construction + ASAP only, which is fast).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc

from netgen.construct import build
from netgen.passes import optimize
from netgen.passes.pipeline import STRUCTURAL_PASSES

def timing(repeats: int) -> None:
    print(f"build('kind', 65536, 8): median of {repeats} runs, peak traced memory of one run")
    for kind in ("splitter", "bitonic", "oddeven", "pairwise"):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            net = build(kind, 65536, 8)
            times.append(time.perf_counter() - t)
        tracemalloc.start()
        build(kind, 65536, 8)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"  {kind:<9} {statistics.median(times):6.3f} s  peak {peak / 2**20:7.1f} MiB  "
            f"depth {net.depth} size {net.size}"
        )
    for kind, n in (("bitonic", 65536), ("oddeven", 65536), ("pairwise", 65536), ("transposition", 4096)):
        t = time.perf_counter()
        net = build(kind, n)
        print(f"  sorter {kind:<13} n={n}: {time.perf_counter() - t:6.3f} s  depth {net.depth} size {net.size}")
    net = build("bitonic", 65536, 8)
    t = time.perf_counter()
    opt, recs = optimize(net, passes=STRUCTURAL_PASSES)
    print(f"  prune + schedule on bitonic (8, 65536): {time.perf_counter() - t:.3f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    build("splitter", 16, 5)  # warm up imports
    timing(args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
