"""Table 6 of the DiffTopK paper rebuilt from netgen's constructions, and
build times/memory at (8, 65536).

    python benchmarks/table6_construct.py            # depths/sizes, with never-firing cleanup
    python benchmarks/table6_construct.py --no-clean # construction + ASAP only (fast)
    python benchmarks/table6_construct.py --timing   # build times and peak memory, (8, 65536)

Columns: n, k, kind, the paper's depth for that column, our depth and size as
built (cone-pruned, ASAP-packed), and after the full pass pipeline (prune,
never-firing cleanup from the verifier, ASAP) when --clean.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc

from netgen.construct import build
from netgen.passes import optimize

PAPER = {
    16: {"sort": 10, "sel": [4, 7, 9, 9, 10, 10, 10, 10], "splitter": [4, 6, 7, 8, 10, 11, 12, 13]},
    1024: {"sort": 55, "sel": [10, 19, 27, 27, 34, 34, 34, 34], "splitter": [10, 14, 16, 18, 22, 25, 27, 29]},
    10450: {"sort": 105, "sel": [14, 27, 39, 39, 50, 50, 50, 50], "splitter": [14, 18, 20, 23, 27, 30, 32, 34]},
    65536: {"sort": 136, "sel": [16, 31, 45, 45, 58, 58, 58, 58], "splitter": [16, 20, 22, 25, 29, 32, 34, 36]},
}
SEL = ("bitonic", "oddeven", "pairwise")


def cells():
    for n in PAPER:
        for kind in SEL:
            yield n, None, kind, PAPER[n]["sort"]
        for k in range(1, 9):
            for kind in SEL:
                yield n, k, kind, PAPER[n]["sel"][k - 1]
            yield n, k, "splitter", PAPER[n]["splitter"][k - 1]


def table(clean: bool) -> int:
    bad = 0
    head = f"{'n':>6} {'k':>3} {'kind':<9} {'paper':>5} {'depth':>5} {'size':>9} {'build_s':>7}"
    if clean:
        head += f" {'depth*':>6} {'size*':>9} {'passes_s':>8}  clean"
    print(head)
    for n, k, kind, paper in cells():
        t = time.perf_counter()
        net = build(kind, n, k)
        tb = time.perf_counter() - t
        line = f"{n:>6} {k or n:>3} {kind:<9} {paper:>5} {net.depth:>5} {net.size:>9} {tb:>7.2f}"
        depth = net.depth
        if clean:
            t = time.perf_counter()
            opt, recs = optimize(net)
            tp = time.perf_counter() - t
            note = recs[1].note if recs[1].applied else recs[1].note
            line += f" {opt.depth:>6} {opt.size:>9} {tp:>8.2f}  {note}"
            depth = opt.depth
        if depth > paper:
            line += "   <-- deeper than the paper"
            bad += 1
        print(line, flush=True)
    return bad


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
    opt, recs = optimize(net, passes=("prune", "schedule"))
    print(f"  prune + schedule on bitonic (8, 65536): {time.perf_counter() - t:.3f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-clean", action="store_true", help="skip the verifier-driven cleanup")
    ap.add_argument("--timing", action="store_true", help="only the (8, 65536) build timings")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    build("splitter", 16, 5)  # warm up numba
    if args.timing:
        timing(args.repeats)
        return 0
    bad = table(clean=not args.no_clean)
    print(f"{bad} cell(s) deeper than the paper", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
