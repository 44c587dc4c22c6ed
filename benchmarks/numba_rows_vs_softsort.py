"""Numba rows and column paths for every distribution vs SoftSort's rows,
and (logistic_phi) vs difftopk's splitter_selection: forward+backward
times measured side by side in one process.

    python benchmarks/numba_rows_vs_softsort.py [--B 64] [--n 10450] [--k 5] [--reps 7] [--threads 2]
        [--difftopk-reps 2] [--no-difftopk] [--distributions cauchy,gaussian,...]

Every distribution gets its own generated numba module (splitter network
(n, k), steepness 10, art_lambda 0.25, float32), built once into a stable
temporary folder so numba's on-disk cache is reused between runs. After a
warm-up pass of everything (compiling), ``--reps`` rounds time one
forward+backward of every method in turn (interleaved, so the noise of a
shared machine spreads over all of them); the table gives medians.

* numba rows: ``values, P = layer(x)``; ``loss = (P * W).sum()``.
* numba column: ``loss = (layer.column(x, y) * w).sum()``.
* SoftSort rows: ``netgen.relax.baselines.softsort`` (tau 1), same loss.
* difftopk: splitter_selection for (n, k) executed by its own
  ``execute_sparse_topk`` with logistic_phi (steepness 10, lambda 0.25; its
  network is built by netgen/bench/difftopk_sparse.py), same loss on its
  (B, n, k) output; ``--difftopk-reps`` passes after the others (~4 s each
  at B = 64).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import measure  # benchmarks/measure.py: interleaved timing



def _layers(n, k, dists):
    import netgen
    from netgen.codegen import write_module
    from netgen.construct import build
    from netgen.relax.distributions import Relaxation

    net = build("splitter", n, k)
    root = Path(tempfile.gettempdir()) / "netgen_bench_rows"
    out = {}
    for d in dists:
        path = write_module("numba", net, Relaxation(d, 10.0, art_lambda=0.25), root / d)
        out[d] = netgen.load(path).Layer()
    return out


def _difftopk(n, k):
    from netgen.bench.difftopk_sparse import splitter_selection

    return splitter_selection(n, k, "cpu", steepness=10.0, art_lambda=0.25, distribution="logistic_phi")


def main() -> None:
    from netgen.relax.distributions import DISTRIBUTIONS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--B", type=int, default=64)
    ap.add_argument("--n", type=int, default=10450)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--difftopk-reps", type=int, default=2)
    ap.add_argument("--no-difftopk", action="store_true")
    ap.add_argument("--distributions", default=",".join(DISTRIBUTIONS))
    args = ap.parse_args()
    dists = [d.strip() for d in args.distributions.split(",") if d.strip()]
    bad = [d for d in dists if d not in DISTRIBUTIONS]
    if bad:
        ap.error(f"unknown distribution(s) {', '.join(bad)}; choose from {', '.join(DISTRIBUTIONS)}")
    if args.B < 1 or args.reps < 1:
        ap.error("--B and --reps must be >= 1")

    import numba
    import torch

    from netgen.relax.baselines.softsort import softsort

    torch.set_num_threads(args.threads)
    numba.set_num_threads(args.threads)
    B, n, k = args.B, args.n, args.k
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, generator=gen).requires_grad_(True)
    W = torch.randn(B, k, n, generator=gen)
    y = torch.randint(0, n, (B,), generator=gen)
    w = torch.randn(B, k, generator=gen)
    t0 = time.perf_counter()
    layers = _layers(n, k, dists)

    steps = {"softsort": lambda: (softsort(x, k)[1] * W).sum().backward()}
    for d, layer in layers.items():
        steps[f"{d} rows"] = lambda layer=layer: (layer(x)[1] * W).sum().backward()
        steps[f"{d} column"] = lambda layer=layer: (layer.column(x, y) * w).sum().backward()
    for step in steps.values():  # warm-up: compiles or loads the cached kernels
        step()
    import netgen

    print(f"netgen from {Path(netgen.__file__).parent}; loaded and warmed up in {time.perf_counter() - t0:.1f} s")
    med = {name: s * 1e3 for name, s in measure.interleaved(steps, args.reps, lambda: setattr(x, "grad", None)).items()}

    dt = None
    if not args.no_difftopk:
        run = _difftopk(n, k)
        Wt = W.transpose(1, 2).contiguous()
        dts = []
        for _ in range(args.difftopk_reps):
            x.grad = None
            t = time.perf_counter()
            (run(x) * Wt).sum().backward()
            dts.append(time.perf_counter() - t)
        dt = statistics.median(dts) * 1e3

    print(f"B = {B}, n = {n}, k = {k}, float32, steepness 10 (art_lambda 0.25), {args.threads} threads "
          f"(numba and torch); fwd+bwd, median of {args.reps} interleaved passes")
    hdr = (f"{'distribution':<13} {'rows ms':>9} {'column ms':>10} {'softsort ms':>12} "
           f"{'softsort/rows':>14} {'rows/column':>12}")
    print(hdr)
    print("-" * len(hdr))
    ss = med["softsort"]
    for d in dists:
        ro, co = med[f"{d} rows"], med[f"{d} column"]
        print(f"{d:<13} {ro:>9.1f} {co:>10.1f} {ss:>12.1f} {ss / ro:>13.2f}x {ro / co:>11.2f}x")
    print()
    print("goals: softsort/rows >= 1 (rows no slower than SoftSort), rows/column >= 3")
    if dt is not None:
        line = f"difftopk splitter_selection, logistic_phi: {dt:.0f} ms (median of {args.difftopk_reps})"
        if "logistic_phi" in dists:
            line += f"; numba rows {dt / med['logistic_phi rows']:.1f}x faster (goal >= 50x)"
        print(line)


if __name__ == "__main__":
    main()
