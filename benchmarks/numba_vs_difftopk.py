"""Numba target vs difftopk's splitter_selection (and LapSum): forward+backward
time and working memory, side by side, in one run.

    python benchmarks/numba_vs_difftopk.py [--B 500] [--n 10450] [--k 5] [--reps 5] [--threads 2]

Every method runs in its own subprocess: it loads (builds the network and
the layer, makes the input, runs one warm-up pass, which also compiles or
loads the cached numba kernels), then times ``reps`` forward+backward passes
and reports the median.

* ``netgen-numba rows``: ``values, P = layer(x)``; ``loss = (P * W).sum()``.
* ``netgen-numba column``: ``c = layer.column(x, y)`` (P[:, y] by the forward
  sweep); ``loss = (c * w).sum()``.
* ``lapsum rows``: ``netgen.relax.baselines.lapsum.lapsum_permutation`` (the
  top-k rows of LapSum's soft permutation, O(n log n)); same loss.
* ``difftopk``: splitter_selection for (n, k), executed by its own
  ``execute_sparse_topk``; same loss on its (B, n, k) output. Its published
  constructor allocates dense (n x n) matrices per layer (~90 GB at
  n = 10450), so its network is built by its own construction code on
  sparse matrices, with the helper of benchmarks/torch_vs_difftopk.py (see
  there; also the stand-in for the optional torch_sparse.spmm).

Time: median wall time of one forward+backward (netgen and LapSum: pooled
over ``--rounds`` alternating subprocess runs, to spread the noise of a
shared machine). Working memory: peak RSS
during the timed passes minus RSS after loading (peak reset through
/proc/self/clear_refs). All methods: float32, distribution cauchy,
steepness 10 (difftopk's defaults), the same thread count for numba and
torch (``--threads``). If difftopk cannot finish B in ``--timeout`` seconds
(default 300), it and the numba rows path are compared per row at B = 64.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import measure  # benchmarks/measure.py: working-memory measurement

HERE = Path(__file__).resolve().parent


def _numba_layer(n, k):
    import netgen
    from netgen.codegen import write_module
    from netgen.construct import build
    from netgen.relax.distributions import Relaxation

    net = build("splitter", n, k)
    out = Path(tempfile.gettempdir()) / "netgen_bench_numba"  # stable path: numba's cache is reused
    path = write_module("numba", net, Relaxation("cauchy", 10.0), out)
    return netgen.load(path).Layer(), net


def _loader(method, B, n, k):
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, generator=gen)
    if method == "numba-rows":
        layer, _ = _numba_layer(n, k)
        W = torch.randn(B, k, n, generator=gen)
        return x, lambda x: (layer(x)[1] * W).sum()
    if method == "numba-column":
        layer, _ = _numba_layer(n, k)
        y = torch.randint(0, n, (B,), generator=gen)
        w = torch.randn(B, k, generator=gen)
        return x, lambda x: (layer.column(x, y) * w).sum()
    if method == "lapsum":
        from netgen.relax.baselines.lapsum import lapsum_permutation

        W = torch.randn(B, k, n, generator=gen)
        return x, lambda x: (lapsum_permutation(x, k)[1] * W).sum()
    if method == "difftopk":
        spec = importlib.util.spec_from_file_location("_torch_vs_difftopk", HERE / "torch_vs_difftopk.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        run = mod.difftopk_loader(n, k)
        W = torch.randn(B, n, k, generator=gen)
        return x, lambda x: (run(x) * W).sum()
    raise ValueError(f"unknown method {method!r}")


def worker(method: str, B: int, n: int, k: int, reps: int, threads: int) -> dict:
    import numba
    import torch

    torch.set_num_threads(threads)
    numba.set_num_threads(threads)
    t0 = time.perf_counter()
    x, loss_fn = _loader(method, B, n, k)
    x.requires_grad_(True)
    loss_fn(x).backward()  # warm-up (compiles or loads cached kernels)
    x.grad = None
    load_s = time.perf_counter() - t0

    def step():
        loss_fn(x).backward()
        x.grad = None

    times, working, peak_reset = measure.measure(step, reps)
    return {
        "method": method, "B": B, "n": n, "k": k, "times": times, "median_s": statistics.median(times),
        "working": working, "peak_reset": peak_reset, "load_s": load_s, "threads": threads,
    }


def _run(method, B, n, k, reps, threads, timeout=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", method, str(B), str(n), str(k),
           "--reps", str(reps), "--threads", str(threads)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"method": method, "B": B, "error": f"did not finish in {timeout} s"}
    if out.returncode != 0:
        if out.returncode < 0:
            why = f"killed by signal {-out.returncode}" + (" (out of memory?)" if out.returncode == -9 else "")
        else:
            errs = [ln for ln in out.stderr.strip().splitlines() if "Error" in ln or "error" in ln]
            why = f"exit status {out.returncode}: " + (errs or out.stderr.strip().splitlines() or ["?"])[-1]
        return {"method": method, "B": B, "error": why}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _row(r, label):
    if "error" in r:
        return f"{label:<22} {r['B']:>4}  FAILED: {r['error']}"
    note = "" if r["peak_reset"] else "  (peak not resettable: includes loading)"
    return (f"{label:<22} {r['B']:>4} {r['median_s']:>10.4f} {r['median_s'] / r['B'] * 1e3:>10.3f} "
            f"{r['working'] / 2**20:>12.1f} {r['load_s']:>8.1f}{note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--B", type=int, default=500)
    ap.add_argument("--n", type=int, default=10450)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds difftopk may take at B")
    ap.add_argument("--small-B", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3, help="subprocess runs per netgen/LapSum method")
    ap.add_argument("--worker", nargs=4, metavar=("METHOD", "B", "N", "K"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        m, B, n, k = args.worker
        print(json.dumps(worker(m, int(B), int(n), int(k), args.reps, args.threads)))
        return

    B, n, k, reps, th = args.B, args.n, args.k, args.reps, args.threads
    print(__doc__.split("\n\n")[0].replace("\n", " "))
    print(f"n = {n}, k = {k}, float32, cauchy s = 10; threads (numba and torch) = {th}; median of "
          f"{args.rounds} x {reps} passes (difftopk: {max(3, min(reps, 3))})")
    hdr = f"{'method':<22} {'B':>4} {'fwd+bwd s':>10} {'ms / row':>10} {'work MB':>12} {'load s':>8}"
    print(hdr)
    print("-" * len(hdr))
    res = {}
    labels = {"numba-rows": "netgen-numba rows", "numba-column": "netgen-numba column", "lapsum": "lapsum rows"}
    # the cheap methods run in `--rounds` alternating subprocesses each (the
    # machine may be shared: alternating spreads its noise over all of them);
    # times are pooled, the median taken over all passes
    for _ in range(args.rounds):
        for method in labels:
            r = _run(method, B, n, k, reps, th)
            if method not in res or "error" in r:
                res[method] = r
            elif "error" not in res[method]:
                res[method]["times"] += r["times"]
                res[method]["working"] = max(res[method]["working"], r["working"])
    for method, label in labels.items():
        if "error" not in res[method]:
            res[method]["median_s"] = statistics.median(res[method]["times"])
        print(_row(res[method], label), flush=True)
    dt_reps = max(3, min(reps, 3))
    res["difftopk"] = _run("difftopk", B, n, k, dt_reps, th, timeout=args.timeout)
    print(_row(res["difftopk"], "difftopk"), flush=True)
    small = None
    if "error" in res["difftopk"] and B != args.small_B:
        print(f"difftopk did not finish B = {B} ({res['difftopk']['error']}): comparing per row at "
              f"B = {args.small_B}")
        small = {m: _run(m, args.small_B, n, k, r, th) for m, r in (("numba-rows", reps), ("difftopk", dt_reps))}
        print(_row(small["numba-rows"], "netgen-numba rows"))
        print(_row(small["difftopk"], "difftopk"), flush=True)
    print()

    def per_row(r):
        return r["median_s"] / r["B"]

    ok = lambda *rs: all("error" not in r for r in rs)  # noqa: E731
    a, c, lap = res["numba-rows"], res["numba-column"], res["lapsum"]
    d, a_mem = (res["difftopk"], a) if small is None else (small["difftopk"], small["numba-rows"])
    if ok(a, d, a_mem):
        if a_mem is not a:
            print(f"numba rows vs difftopk at B = {d['B']}: {per_row(d) / per_row(a_mem):.1f}x faster per row "
                  f"(goal >= 50x); numba at B = {a['B']} vs difftopk at B = {d['B']}: "
                  f"{per_row(d) / per_row(a):.1f}x faster per row")
        else:
            print(f"numba rows vs difftopk at B = {d['B']}: {per_row(d) / per_row(a):.1f}x faster (goal >= 50x)")
        print(f"numba rows working memory: {a_mem['working'] / max(d['working'], 1):.4f} of difftopk's at "
              f"B = {d['B']} (goal <= 0.1)")
    if ok(a, c):
        print(f"numba column vs numba rows: {per_row(a) / per_row(c):.1f}x faster (goal >= 3x)")
    if ok(a, lap):
        print(f"numba rows vs LapSum rows: {per_row(lap) / per_row(a):.2f}x faster, working memory "
              f"{a['working'] / max(lap['working'], 1):.3f} of LapSum's (goal: no slower)")


if __name__ == "__main__":
    main()
