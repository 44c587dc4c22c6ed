"""steepness="auto": the blur it reaches against the target, and what the
estimate costs (issue 33; docs/relaxations.md section 8).

For every network (n in {16, 1024, 10450}, k in {1, 5, n}; the netgen
network ``netgen.compiler.build(n, k)``), every relaxation distribution
and score scale (scores ``scale * randn(B, n)``, float64), the estimator
(:func:`netgen.relax.steepness.estimate_steepness`, the settings a layer
uses) picks s for the target blur on the batch, and the blur of the batch
at that s is then measured by the definition, ``mean (1 - P[r, h_r])``,
from forward lanes (``sweep_columns``, bit-identical to the reference's
``fwd``; tests/relax/test_steepness.py): over all rows of the batch and
all ranks where k <= 1024, else over 1024 ranks drawn at random on the
first ``--sort-rows`` rows (a sample: its standard error is printed). A
cell passes when measured / target lies in [0.9, 1.1]. ``s/model``: the
chosen s over the uncalibrated model's (the correction the measurements
made: the calibration, per network, distribution and scores); ``est s``:
the CPU time of the estimate.

Overhead (``--overhead``): the CPU time of one estimate against one
forward + backward of the generated layer (``AutoLayer``, target torch)
on the same batch (float32, the sum of the values as the loss), medians
of ``--reps`` interleaved rounds; a layer estimates on the training calls
its schedule names (by default its first 4, then s is kept), so over a run
of N calls the overhead is the ratio x (estimates in N calls) / N, printed
for N = 1000 and 10000.

    python benchmarks/blur_grid.py                       # the whole grid, target 0.1
    python benchmarks/blur_grid.py --n 16 1024 --blur 0.05 0.2
    python benchmarks/blur_grid.py --overhead --n 1024 10450 --k 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from netgen.compiler import build
from netgen.relax.blur import HardPaths
from netgen.relax.distributions import DISTRIBUTIONS, default_relaxation
from netgen.relax.steepness import estimate_steepness, sweep_columns


def batch_size(n: int) -> int:
    return 256 if n <= 64 else (64 if n <= 2048 else 16)


def measured_blur(net, r, x, s, sort_rows: int, chunk: int = 128) -> tuple[float, int]:
    """(blur, rows read) of rows x at steepness s, by the definition: every
    rank of all rows (k <= 64), of 16 rows (k <= 256), else of the first
    ``sort_rows`` rows."""
    cols = sweep_columns(net, r)
    k = net.k
    xs = x if k <= 64 else (x[:16] if k <= 256 else x[:sort_rows])
    h = torch.from_numpy(HardPaths(net, xs.numpy()).indices)  # (R, k)
    total = 0.0
    for j in range(0, k, chunk):
        y = h[:, j:j + chunk]
        c = cols(xs, s, y)[:, j + torch.arange(y.shape[1]), torch.arange(y.shape[1])]  # (R, m): P[r, h_r]
        total += float((1.0 - c).sum())
    return total / (xs.shape[0] * k), xs.shape[0]


def networks(args):
    """(n, k, the netgen network) for every n of ``--n`` and k of ``--k``
    (default 1, 5, n; 0 or -1 means n; k > n skipped)."""
    for n in args.n:
        for k in (args.k or [1, 5, n]):
            k = n if k in (-1, 0) else k
            if k <= n:
                yield n, k, build(n, k).network


def grid(args) -> int:
    bad = 0
    print(f"{'n':>6} {'k':>6} {'distribution':>13} {'scale':>7} {'target':>6} {'s':>11} {'measured':>9} "
          f"{'ratio':>6} {'s/model':>7} {'est s':>6}  note")
    for n, k, net in networks(args):
        for dist in args.distributions:
            r = default_relaxation(net, dist)
            for scale in args.scales:
                g = torch.Generator().manual_seed(n * 7 + k)
                x = torch.randn(batch_size(n), n, generator=g, dtype=torch.float64) * scale
                for target in args.blur:
                    t0 = time.process_time()
                    est = estimate_steepness(net, r, x, target)
                    dt = time.process_time() - t0
                    b, read = measured_blur(net, r, x, est.steepness, args.sort_rows)
                    ratio = b / target
                    ok = 0.9 <= ratio <= 1.1
                    bad += not ok
                    note = ("" if ok else "OUT ") + (f"measured on {read} of {x.shape[0]} rows " if read < x.shape[0] else "") + est.note
                    print(f"{n:>6} {k:>6} {dist:>13} {scale:>7.0e} {target:>6.3f} {est.steepness:>11.4g} "
                          f"{b:>9.4f} {ratio:>6.3f} {est.steepness / est.model_steepness:>7.3f} {dt:>5.2f}s  "
                          f"{note}", flush=True)
    print(f"cells outside +-10%: {bad}")
    return bad


def overhead(args) -> None:
    from netgen.codegen.auto import AutoLayer

    from netgen.relax.steepness import AutoSteepness

    sched = AutoSteepness()
    frac = {N: sum(sched.due(c) for c in range(N)) / N for N in (1000, 10000)}
    print(f"{'n':>6} {'k':>6} {'B':>4} {'fwd+bwd':>9} {'estimate':>9} {'ratio':>7} {'N=1000':>8} {'N=10000':>8}")
    for n, k, net in networks(args):
        r = default_relaxation(net)
        layer = AutoLayer(net, r, "torch")
        B = batch_size(n)
        x = torch.randn(B, n, generator=torch.Generator().manual_seed(1))

        def step():
            xx = x.clone().requires_grad_(True)
            layer(xx)[0].sum().backward()

        def est():
            estimate_steepness(net, r, x, 0.1)

        step(), est()
        tf, te = [], []
        for _ in range(args.reps):
            t = time.process_time(); step(); tf.append(time.process_time() - t)
            t = time.process_time(); est(); te.append(time.process_time() - t)
        f, e = statistics.median(tf), statistics.median(te)
        print(f"{n:>6} {k:>6} {B:>4} {f:>8.4f}s {e:>8.4f}s {e / f:>7.1%} {e / f * frac[1000]:>8.2%} "
              f"{e / f * frac[10000]:>8.2%}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[16, 1024, 10450])
    ap.add_argument("--k", type=int, nargs="+", help="default 1 5 n (0 means n)")
    ap.add_argument("--distributions", nargs="+", default=list(DISTRIBUTIONS), choices=DISTRIBUTIONS)
    ap.add_argument("--scales", type=float, nargs="+", default=[1e-3, 1.0, 1e3])
    ap.add_argument("--blur", type=float, nargs="+", default=[0.1])
    ap.add_argument("--sort-rows", type=int, default=2)
    ap.add_argument("--overhead", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); CPU time (process_time)")
    if args.overhead:
        overhead(args)
        return 0
    return 1 if grid(args) else 0


if __name__ == "__main__":
    raise SystemExit(main())
