"""The saved-state lane sweeps (netgen/codegen/numba/lanes.py) at small B:
the 16-row kernels against their 1-row copies (netgen/codegen/numba/narrow.py)
and torchsort, soft_rank and soft_sort forward + backward, float32, one
thread (``--threads``), in one process, rounds interleaved (medians).
``_LANES_NARROW`` picks the kernels (0: the 16-row ones; 10**9: the 1-row
copies for every call). Picks ``_LANES_NARROW``; torchsort is timed where
importable (``PYTHONPATH=$PWD:/tmp/netgen-baselines/site``).

    python benchmarks/lanes_narrow.py --n 1024 16384 --batch 1 2 4 8 16 --reps 7
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1024, 16384])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--ops", nargs="+", default=["soft_rank", "soft_sort"])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from netgen import ops
    from netgen.ops.backends import lanes_for
    from netgen.relax.distributions import default_relaxation

    try:
        import torchsort
    except ImportError:
        torchsort = None
    print(f"# fwd+bwd ms, float32, {a.threads} thread(s), medians of {a.reps}; {platform.processor() or 'CPU'}, "
          f"{os.cpu_count()} cores (shared machine)")
    print("| op | n | B | 16-row kernels | 1-row copies | 16-row / 1-row | torchsort | 1-row / torchsort |")
    print("|---|---|---|---|---|---|---|---|")
    for n in a.n:
        net = ops.network_for(n, n)
        lanes = lanes_for(net, default_relaxation(net), "numba", torch.device("cpu"))
        g = type(lanes._for(torch.zeros(1, n)))._values.__globals__
        chosen = g["_LANES_NARROW"]
        for op in a.ops:
            for B in a.batch:
                x = torch.randn(B, n, generator=torch.Generator().manual_seed(0))
                w = torch.randn(B, n, generator=torch.Generator().manual_seed(1))

                def step(few, x=x, w=w, op=op, g=g):
                    xr = x.clone().requires_grad_(True)
                    if few is None:
                        y = getattr(torchsort, op)(xr)
                    else:
                        g["_LANES_NARROW"] = few
                        y = getattr(ops, op)(xr, target="numba")
                        y = y.values if isinstance(y, tuple) else y  # soft_sort: (values, indices)
                    (y * w).sum().backward()

                kinds = [0, 10**9] + ([None] if torchsort is not None else [])
                times = {f: [] for f in kinds}
                for few in kinds:  # warm-up (compiles)
                    step(few)
                for _ in range(a.reps):
                    for few, got in times.items():
                        t0 = time.perf_counter()
                        step(few)
                        got.append(time.perf_counter() - t0)
                med = {f: statistics.median(t) * 1e3 for f, t in times.items()}
                ts = med.get(None)
                tcol = f"{ts:,.2f} | {med[10**9] / ts:.2f}x" if ts else "- | -"
                print(f"| {op} | {n:,} | {B} | {med[0]:,.2f} | {med[10**9]:,.2f} | {med[0] / med[10**9]:.2f}x | {tcol} |",
                      flush=True)
        g["_LANES_NARROW"] = chosen


if __name__ == "__main__":
    main()
