"""Generated torch layer vs difftopk's splitter_selection: forward+backward
time and working memory, side by side, in one run.

    python benchmarks/torch_vs_difftopk.py [--reps 5] [--threads 1]

For each configuration (B=64, n=10450, k=5) and (B=500, n=1000, k=5), each
method runs in its own subprocess: it loads (builds the network, the layer
and the input), then runs ``reps`` timed forward+backward passes of
``loss = (P * W).sum()`` (P: the k x n relaxed permutation matrix; both
methods compute it and backpropagate through it) after one warm-up pass.

* time: median wall time of one forward+backward.
* working memory: peak RSS during the passes minus RSS after loading (the
  kernel's peak-RSS counter is reset after loading via /proc/self/clear_refs).

difftopk 0.2.0's constructor allocates dense (n x n) float64 matrices per
layer, ~90 GB at n = 10450, so it cannot be built on a 24 GB machine as
published. Here its own construction code (difftopk.networks.
sparse_splitter_selection_network) runs with a recording stand-in for
``np.zeros`` that keeps the assigned entries in a dict; the matrices are then
turned into the same torch sparse tensors its ``get_sparse_net`` makes.
Its sparse executor needs the optional ``torch_sparse`` package (not
installed); a stand-in ``spmm`` (scatter-add of value * matrix[col], what
torch_sparse computes, differentiable w.r.t. value by autograd) is used. Both methods
get the same torch thread count (``--threads``, default 1: the machine is
shared and small tensors lose more to thread contention than they gain).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import measure  # benchmarks/measure.py: working-memory measurement

CONFIGS = [(64, 10450, 5), (500, 1000, 5)]
METHODS = ("netgen-torch", "difftopk")


# ---------------------------------------------------------- difftopk loading
def difftopk_loader(n, k, device="cpu"):
    """difftopk's own splitter_selection network and sparse executor (see
    netgen/bench/difftopk_sparse.py); run(x) -> X (B, n, k)."""
    from netgen.bench.difftopk_sparse import splitter_selection

    return splitter_selection(n, k, device)


def _netgen_loader(n, k):
    import netgen
    from netgen.codegen import write_module
    from netgen.construct import build
    from netgen.relax.distributions import Relaxation

    net = build("splitter", n, k)
    path = write_module("torch", net, Relaxation("cauchy", 10.0), tempfile.mkdtemp())
    layer = netgen.load(path).Layer()

    def run(x):
        return layer(x)[1]  # (B, k, n)

    return run


# ----------------------------------------------------------------- worker
def worker(method: str, B: int, n: int, k: int, reps: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    run = (_netgen_loader if method == "netgen-torch" else difftopk_loader)(n, k)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, generator=gen).requires_grad_()
    P = run(x)
    W = torch.randn(P.shape, generator=gen)
    P.mul(W).sum().backward()  # warm-up
    del P
    x.grad = None
    load_s = time.perf_counter() - t0

    def step():
        run(x).mul(W).sum().backward()
        x.grad = None

    times, working, peak_reset = measure.measure(step, reps)
    return {
        "method": method, "B": B, "n": n, "k": k, "times": times, "median_s": statistics.median(times),
        "working": working, "peak_reset": peak_reset, "load_s": load_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--worker", nargs=4, metavar=("METHOD", "B", "N", "K"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        m, B, n, k = args.worker
        print(json.dumps(worker(m, int(B), int(n), int(k), args.reps, args.threads)))
        return

    print(__doc__.split("\n\n")[0].replace("\n", " "))
    print(f"torch threads per method: {args.threads}; reps: {args.reps} (median); float32; distribution cauchy, s = 10")
    print("difftopk: network built by its own construction code (sparse_splitter_selection_network) on a")
    print("  recording stand-in for np.zeros (its dense constructor needs ~90 GB at n=10450); executor")
    print("  execute_sparse_topk with a scatter-add stand-in for torch_sparse.spmm (not installed).")
    print()
    hdr = f"{'B':>4} {'n':>6} {'k':>2}  {'method':<13} {'fwd+bwd (s)':>12} {'working mem (MB)':>17} {'load (s)':>9}"
    print(hdr)
    print("-" * len(hdr))
    for B, n, k in CONFIGS:
        res = {}
        for method in METHODS:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", method, str(B), str(n), str(k),
                   "--reps", str(args.reps), "--threads", str(args.threads)]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{B:>4} {n:>6} {k:>2}  {method:<13} FAILED: {out.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            res[method] = r
            note = "" if r["peak_reset"] else "  (peak not resettable: includes loading)"
            print(f"{B:>4} {n:>6} {k:>2}  {method:<13} {r['median_s']:>12.4f} {r['working'] / 2**20:>17.1f} {r['load_s']:>9.1f}{note}")
        if len(res) == 2:
            a, b = res["netgen-torch"], res["difftopk"]
            speed = b["median_s"] / a["median_s"]
            mem = a["working"] / max(b["working"], 1)
            print(f"{'':>15}netgen is {speed:.1f}x faster, uses {mem:.3f} of difftopk's working memory "
                  f"(goal: >= 10x, <= 0.2)")
        print()


if __name__ == "__main__":
    main()
