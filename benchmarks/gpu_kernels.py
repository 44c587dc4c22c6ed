"""The cuda target's kernels on a GPU: time, achieved bandwidth against the
memory floor, and the shared-memory kernels against the global-scratch
ones, side by side in one run.

    python benchmarks/gpu_kernels.py [--n 10450] [--k 5] [--B 64 500 4096] [--reps 20]

For the (k, n) splitter network (default relaxation, float32), two modules
are built: the default one (each launch's wire arrays -- k rows of n
floats for the rows with P, one for values only, two for the column -- in
dynamic shared memory where they fit the device) and one emitted with
``shared_limit=0`` (every wire array in a global scratch row). For each B:

* fwd+bwd of the rows (``loss = (P * W).sum()``), of the column
  (``loss = (layer.column(x, y) * w).sum()``) and of the values-only path
  (``loss = (layer.values(x) * w).sum()``): CUDA events, median of
  ``reps`` after a warm-up, and peak GPU memory above the inputs;
* per kernel: device time from the torch profiler (median over ``reps``
  calls), the bytes the kernel must move at least (its inputs and outputs,
  each once) and the bandwidth that makes, and the issue's floor for the
  whole step (x, P, dL/dP, dL/dx once each: ~250 MB at B = 500).

Prints one table; ``--json FILE`` also writes the rows. Exits with a clear
message (status 2) when no CUDA GPU is available.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' helpers
from measure import cuda_events  # noqa: E402


def _gpu_or_exit():
    import torch

    if not torch.cuda.is_available():
        print("benchmarks/gpu_kernels.py: no CUDA GPU here (torch.cuda.is_available() is False)", file=sys.stderr)
        sys.exit(2)
    try:
        from numba import cuda
    except ImportError:
        print('benchmarks/gpu_kernels.py: numba-cuda is missing: pip install "netgen[cuda]"', file=sys.stderr)
        sys.exit(2)
    if not cuda.is_available():
        print("benchmarks/gpu_kernels.py: numba-cuda sees no GPU", file=sys.stderr)
        sys.exit(2)


def _kernel_times(step, reps):
    """Median device time (ms) per netgen kernel over ``reps`` calls."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            step()
    per = {}
    for ev in prof.events():
        for name in ("fwd", "bwd", "fwd_col", "bwd_col"):
            if f"_{name}_f" in ev.name:
                per.setdefault(name, []).append(ev.device_time_total / 1000.0)
    return {name: statistics.median(ts) for name, ts in per.items()}


def _floor_bytes(name, B, n, k, S, nnz, isz=4, path="rows"):
    """Bytes a kernel reads and writes at least (each array once)."""
    if path == "values":
        return isz * B * {"fwd": n + 2 * S + k, "bwd": 2 * S + k + n}[name]
    return isz * B * {
        "fwd": n + 2 * S + k * n + nnz + k,  # x -> d, p, P, D, values
        "bwd": k * n + 2 * S + nnz + 2 * S + n,  # dL/dP, d, p, D, dL/dp (written, read) -> dL/dx
        "fwd_col": n + 3 * S + k,  # x -> d, du, p, column
        "bwd_col": 3 * S + k + n,  # d, du, p, dL/dcolumn -> dL/dx
    }[name]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10450)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--B", type=int, nargs="+", default=[64, 500, 4096])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    _gpu_or_exit()
    import torch

    from netgen.codegen import emit
    from netgen.codegen.cache import load
    from netgen.compiler import compile_network
    from netgen.construct import build
    from netgen.relax.distributions import default_relaxation

    net = compile_network(build("splitter", args.n, args.k)).network
    r = default_relaxation(net)
    tmp = tempfile.mkdtemp(prefix="netgen_gpu_kernels_")
    mods = {}
    for label, limit in (("shared", None), ("global", 0)):
        path = f"{tmp}/{label}.py"
        with open(path, "w") as f:
            f.write(emit("cuda", net, r) if limit is None else emit("cuda", net, r, {"shared_limit": limit}))
        mods[label] = load(path)
    S, nnz, n, k = net.size, mods["shared"]._NNZ, net.n, net.k
    print(f"{net!r}; {r.distribution} steepness {r.steepness}; float32; nnz = {nnz}; "
          f"{torch.cuda.get_device_name()}", flush=True)
    rows = []
    for B in args.B:
        x = torch.randn(B, n, device="cuda", requires_grad=True)
        W = torch.randn(B, k, n, device="cuda")
        y = torch.randint(0, n, (B,), device="cuda")
        w = torch.randn(B, k, device="cuda")
        floor = 4 * B * (2 * n + 2 * k * n)  # x, P, dL/dP, dL/dx
        for label, mod in mods.items():
            layer = mod.Layer()

            def rows_step():
                v, P = layer(x)
                torch.autograd.grad((P * W).sum(), x)

            def col_step():
                torch.autograd.grad((layer.column(x, y) * w).sum(), x)

            def values_step():
                torch.autograd.grad((layer.values(x) * w).sum(), x)

            for path, step in (("rows", rows_step), ("column", col_step), ("values", values_step)):
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                ms = cuda_events(step, args.reps)
                peak = (torch.cuda.max_memory_allocated() - base) / 2**20
                kt = _kernel_times(step, args.reps)
                row = {"B": B, "variant": label, "path": path, "fwd+bwd ms": ms, "peak MB": peak,
                       "floor GB/s": floor / ms / 1e6 if path == "rows" else None, "kernels": {}}
                for name, t in kt.items():
                    nb = _floor_bytes(name, B, n, k, S, nnz, path=path)
                    row["kernels"][name] = {"ms": t, "MB": nb / 1e6, "GB/s": nb / t / 1e6}
                rows.append(row)
                kern = "  ".join(f"{nm} {v['ms']:.3f} ms {v['GB/s']:.0f} GB/s" for nm, v in row["kernels"].items())
                eff = f"  (issue floor {row['floor GB/s']:.0f} GB/s)" if path == "rows" else ""
                print(f"B={B:5d} {label:6s} {path:6s} fwd+bwd {ms:8.3f} ms (measured)  peak {peak:7.0f} MB{eff}\n"
                      f"    {kern}",
                      flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
