"""LapSum forward+backward time against n: O(n log n) means
time(10450) / time(1045) should be about 10 * log(10450)/log(1045) = 13.3,
(< 15), where a quadratic method would give ~100.

    python benchmarks/lapsum_scaling.py [--batch 64] [--k 5] [--alpha 0.1] [--repeats 30] [--threads 1]

Prints one line per (method, n) with the median time and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from netgen.relax.baselines import lapsum_permutation, lapsum_rank, lapsum_topk


def median_time(fn, x, repeats):
    for _ in range(3):  # warm-up
        fn(x)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1045, 10450])
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1: stable on a shared machine)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtype = getattr(torch, a.dtype)
    torch.manual_seed(0)

    def fwd_bwd(op):
        def run(x):
            xr = x.detach().requires_grad_(True)
            out = op(xr)
            out = out[1] if isinstance(out, tuple) else out
            out.backward(torch.ones_like(out))
        return run

    methods = {
        "topk": lambda x: lapsum_topk(x, a.k, a.alpha),
        "permutation": lambda x: lapsum_permutation(x, a.k, a.alpha),
        "rank": lambda x: lapsum_rank(x, a.alpha),
    }
    print(f"# LapSum forward+backward, B = {a.batch}, k = {a.k}, alpha = {a.alpha}, {a.dtype}, "
          f"torch threads = {torch.get_num_threads()}, median of {a.repeats}")
    print(f"{'method':<12} " + " ".join(f"{'n=' + str(n):>12}" for n in a.sizes) + f" {'ratio':>8}")
    for name, op in methods.items():
        ts = [median_time(fwd_bwd(op), torch.randn(a.batch, n, dtype=dtype), a.repeats) for n in a.sizes]
        print(f"{name:<12} " + " ".join(f"{t * 1e3:>10.3f}ms" for t in ts) + f" {ts[-1] / ts[0]:>8.2f}")


if __name__ == "__main__":
    main()
