"""Where each way of running netgen.schedule's scans wins: one numpy step per
layer, the loop in the interpreter, the same loop compiled by numba (warm,
and the one-time cost of importing numba and loading the cached loop in a
fresh process). Sets MIN_COMPILED and MAX_NUMPY_CHUNKS in
netgen/schedule.py.

    python research/schedule/schedule_paths.py [--repeats 5]

Also times, side by side in this process, the per-comparator loop that
netgen.network.asap_layers ran before it became netgen.schedule.asap_levels
(the "before" column: numpy scalars in an interpreted loop).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

from netgen import schedule
from netgen.bench.networks import cpu_model  # noqa: E402


def old_asap_layers(n, comps):
    """netgen.network.asap_layers before this change (kept here to compare)."""
    ready = np.zeros(n, dtype=np.int64)
    out = np.empty(len(comps), dtype=np.int64)
    for i, (a, b) in enumerate(comps.tolist()):
        level = max(ready[a], ready[b])
        out[i] = level
        ready[a] = ready[b] = level + 1
    return out


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def cold_compile_seconds() -> float:
    """A fresh process: import numba and load the cached compiled loop."""
    code = (
        "import time, numpy as np\n"
        "from netgen import schedule\n"
        "schedule.MIN_COMPILED = 0\n"
        "t = time.perf_counter()\n"
        "schedule.asap_levels(3, np.array([[0, 1]]))\n"
        "print(time.perf_counter() - t)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)  # fills the cache
    runs = [float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
            for _ in range(3)]
    return statistics.median(runs)



def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"CPU: {cpu_model()}; medians of {args.repeats} runs (1 for the slowest cells)")
    cold = cold_compile_seconds()
    print(f"cold start of the compiled loop (fresh process: import numba, load the cached loop): {cold:.3f} s")
    print("\nchunk-less sequences (m comparators on m/4 wires), asap_levels:")
    print(f"{'m':>9} {'before s':>9} {'interp s':>9} {'compiled s':>10} {'interp/compiled':>15} "
          f"{'interp/(compiled+cold)':>22}")
    rng = np.random.default_rng(0)
    crossover = None
    for m in (1_000, 10_000, 100_000, 1_000_000, 3_000_000):
        n = max(8, m // 4)
        comps = rng.integers(0, n, (m, 2))
        comps = comps[comps[:, 0] != comps[:, 1]]
        reps = args.repeats if m <= 100_000 else 1
        before = median_time(lambda: old_asap_layers(n, comps), reps)
        interp = median_time(lambda: schedule._interpreted(schedule._asap_loop, comps, np.zeros(n, np.int64),
                                                           np.zeros(len(comps), np.int64)), reps)
        fn = schedule._COMPILED.get(schedule._asap_loop)
        if fn is None:
            import numba

            fn = schedule._COMPILED[schedule._asap_loop] = numba.njit(cache=True)(schedule._asap_loop)
        compiled = median_time(lambda: fn(comps, np.zeros(n, np.int64), np.zeros(len(comps), np.int64)),
                               args.repeats)
        if crossover is None and interp > compiled + cold:
            crossover = m
        print(f"{m:>9} {before:9.4f} {interp:9.4f} {compiled:10.5f} {interp / compiled:15.0f} "
              f"{interp / (compiled + cold):22.2f}")
    print(f"\ninterpreted beats compiling from cold below ~{crossover or '>3e6'} comparators "
          f"(MIN_COMPILED = {schedule.MIN_COMPILED:,})")

    print("\nlayered sequences (a network's layers known), asap_levels; compiled: warm")
    print(f"{'layers':>7} {'m':>9} {'numpy s':>9} {'interp s':>9} {'compiled s':>10} {'numpy/interp':>12}")
    fn = schedule._COMPILED[schedule._asap_loop]
    limit, schedule.MAX_NUMPY_CHUNKS = schedule.MAX_NUMPY_CHUNKS, 10**9  # force the numpy path
    for depth, width in ((20, 5000), (200, 500), (2000, 50), (20000, 5)):
        perm = np.stack([rng.permutation(2 * width) for _ in range(depth)])
        comps = perm.reshape(depth, width, 2).reshape(-1, 2)
        chunks = np.arange(depth + 1) * width
        numpy_s = median_time(lambda: schedule.asap_levels(2 * width, comps, chunks), args.repeats)
        interp = median_time(lambda: schedule._interpreted(schedule._asap_loop, comps, np.zeros(2 * width, np.int64),
                                                           np.zeros(len(comps), np.int64)), args.repeats)
        compiled = median_time(lambda: fn(comps, np.zeros(2 * width, np.int64), np.zeros(len(comps), np.int64)),
                               args.repeats)
        print(f"{depth:>7} {len(comps):>9} {numpy_s:9.4f} {interp:9.4f} {compiled:10.5f} {numpy_s / interp:12.2f}")
    schedule.MAX_NUMPY_CHUNKS = limit
    print(f"(numpy per layer is used up to MAX_NUMPY_CHUNKS = {limit} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
