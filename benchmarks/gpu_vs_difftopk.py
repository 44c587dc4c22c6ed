"""CUDA target vs difftopk's splitter_selection on a GPU: forward+backward
time and peak GPU memory, side by side, in one run.

    python benchmarks/gpu_vs_difftopk.py [--B 500] [--n 1000 10450] [--k 5] [--reps 10]

For each n: the generated CUDA layer (P rows: ``loss = (P * W).sum()``; and
the column path ``loss = (layer.column(x, y) * w).sum()``), and difftopk's
splitter_selection executed by its own code on the same GPU (difftopk
offers splitter_selection only as a sparse network; its network is built by
its own construction code on sparse matrices with the helper of
benchmarks/torch_vs_difftopk.py, which also stands in for the optional
torch_sparse.spmm, and run by its ``execute_sparse_topk``). float32, cauchy, steepness 10 (difftopk's
defaults). Time: median of ``reps`` passes after a warm-up, measured with
torch.cuda.synchronize(). Memory: torch.cuda.max_memory_allocated() during
the passes minus memory allocated before them (difftopk and netgen each in
their own subprocess).

Exits with a clear message (status 2) when no CUDA GPU is available.
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

HERE = Path(__file__).resolve().parent


def _gpu_or_exit() -> None:
    import torch

    ok = torch.cuda.is_available()
    if ok:
        from numba import cuda

        ok = cuda.is_available()
    if not ok:
        print("benchmarks/gpu_vs_difftopk.py needs a CUDA GPU (torch.cuda.is_available() and "
              "numba.cuda.is_available()); none here. Nothing was measured.", file=sys.stderr)
        sys.exit(2)


def _loader(method, B, n, k):
    import torch

    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, generator=gen).to(dev)
    if method in ("netgen-cuda-rows", "netgen-cuda-column"):
        import netgen
        from netgen.codegen import write_module
        from netgen.construct import build
        from netgen.relax.distributions import Relaxation

        net = build("splitter", n, k)
        path = write_module("cuda", net, Relaxation("cauchy", 10.0), Path(tempfile.gettempdir()) / "netgen_bench_cuda")
        layer = netgen.load(path).Layer()
        if method == "netgen-cuda-rows":
            W = torch.randn(B, k, n, generator=gen).to(dev)
            return x, lambda x: (layer(x)[1] * W).sum()
        y = torch.randint(0, n, (B,), generator=gen).to(dev)
        w = torch.randn(B, k, generator=gen).to(dev)
        return x, lambda x: (layer.column(x, y) * w).sum()
    if method == "difftopk":
        W = torch.randn(B, n, k, generator=gen).to(dev)
        return x, _difftopk_sparse_on(dev, n, k, W)
    raise ValueError(method)


def _difftopk_sparse_on(dev, n, k, W):
    """difftopk's sparse executor with its network (built on sparse
    matrices by its own construction code, see torch_vs_difftopk.py) on
    ``dev``."""
    import torch

    spec = importlib.util.spec_from_file_location("_torch_vs_difftopk", HERE / "torch_vs_difftopk.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import difftopk.functional as dtf

    captured = {}
    orig = dtf.execute_sparse_topk

    def capture(net, x, k_, *a):
        captured["net"] = [[t.to(dev) for t in layer] for layer in net]
        return orig(captured["net"], x, k_, *a)

    dtf.execute_sparse_topk = capture
    run = mod._difftopk_loader(n, k)
    run(torch.zeros(1, n))  # builds and captures the network, then moves it to the GPU
    dtf.execute_sparse_topk = orig
    net = captured["net"]
    return lambda x: (orig(net, x, k, 10.0, 0.25, "cauchy")[1] * W).sum()


def worker(method, B, n, k, reps):
    import torch

    t0 = time.perf_counter()
    x, loss_fn = _loader(method, B, n, k)
    x.requires_grad_(True)
    loss_fn(x).backward()
    torch.cuda.synchronize()
    x.grad = None
    load_s = time.perf_counter() - t0
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        loss_fn(x).backward()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
        x.grad = None
    peak = torch.cuda.max_memory_allocated() - base
    return {"method": method, "B": B, "n": n, "k": k, "median_s": statistics.median(times), "times": times,
            "gpu_mem": peak, "load_s": load_s, "device": torch.cuda.get_device_name()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--B", type=int, default=500)
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 10450])
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    _gpu_or_exit()
    if args.worker:
        m, B, n, k = args.worker
        print(json.dumps(worker(m, int(B), int(n), int(k), args.reps)))
        return
    print(__doc__.split("\n\n")[0].replace("\n", " "))
    hdr = f"{'method':<20} {'B':>4} {'n':>6} {'fwd+bwd ms':>11} {'GPU MB':>9} {'load s':>7}"
    print(hdr)
    print("-" * len(hdr))
    for n in args.n:
        res = {}
        for m in ("netgen-cuda-rows", "netgen-cuda-column", "difftopk"):
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", m, str(args.B), str(n), str(args.k),
                   "--reps", str(args.reps)]
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                if out.returncode != 0:
                    raise RuntimeError((out.stderr.strip().splitlines() or ["?"])[-1])
                r = json.loads(out.stdout.strip().splitlines()[-1])
            except Exception as e:  # report and go on with the others
                print(f"{m:<20} {args.B:>4} {n:>6}  FAILED: {e}")
                continue
            res[m] = r
            print(f"{m:<20} {args.B:>4} {n:>6} {r['median_s'] * 1e3:>11.2f} {r['gpu_mem'] / 2**20:>9.1f} "
                  f"{r['load_s']:>7.1f}", flush=True)
        if "netgen-cuda-rows" in res and "difftopk" in res:
            a, d = res["netgen-cuda-rows"], res["difftopk"]
            print(f"  n={n}: netgen cuda rows {d['median_s'] / a['median_s']:.1f}x faster than difftopk, "
                  f"{a['gpu_mem'] / max(d['gpu_mem'], 1):.3f} of its GPU memory ({a['device']})")
        if "netgen-cuda-rows" in res and "netgen-cuda-column" in res:
            print(f"  n={n}: column path {res['netgen-cuda-rows']['median_s'] / res['netgen-cuda-column']['median_s']:.1f}x "
                  f"faster than the rows path")


if __name__ == "__main__":
    main()
