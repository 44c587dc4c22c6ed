"""The checkpointed lane sweeps (netgen/codegen/numba/checkpoint.py) at
small B: the 16-row kernels against their 1-row copies
(netgen/codegen/numba/narrow.py), soft_rank forward + backward, float32,
one thread (``--threads``), in one process, rounds interleaved (medians). The sweeps are
forced checkpointed (``_CK_BYTES = 0``) as at n = 2^20; ``_CK_NARROW``
picks the kernels (-1: the 16-row ones for every row; 15: a last block of
up to 15 rows in the 1-row copies). Picks ``_CK_NARROW``.

    python benchmarks/ck_narrow.py --n 65536 --batch 1 2 3 4 --reps 5

``--first-calls`` (run with a fresh ``NETGEN_CACHE_DIR``): the kernel
module's first calls in this process instead, the network's build aside:
B = 16 (the 16-row kernels compiled), then B = 1 (the 1-row copies
compiled; nothing new before them), then B = 1 again.

    NETGEN_CACHE_DIR=$(mktemp -d) python benchmarks/ck_narrow.py --n 4096 --first-calls
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=65536)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--first-calls", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from netgen import ops
    from netgen.ops.backends import lanes_for
    from netgen.relax.distributions import default_relaxation

    net = ops.network_for(a.n, a.n)
    if a.first_calls:
        t0 = time.perf_counter()
        lanes_for(net, default_relaxation(net), "numba", torch.device("cpu"))._for(torch.zeros(1, a.n))
        print(f"kernel module and layer made: {time.perf_counter() - t0:.1f} s")
    lanes = lanes_for(net, default_relaxation(net), "numba", torch.device("cpu"))
    g = type(lanes._for(torch.zeros(1, a.n)))._values.__globals__
    g["_CK_BYTES"] = 0  # checkpointed, as at n = 2^20
    if a.first_calls:
        for B in (16, 1, 1):
            x = torch.randn(B, a.n, requires_grad=True)
            t0 = time.perf_counter()
            ops.soft_rank(x, target="numba").sum().backward()
            print(f"first fwd+bwd calls, checkpointed, B = {B}: {time.perf_counter() - t0:.1f} s", flush=True)
        return
    print(f"# soft_rank n={a.n:,} (size {net.size:,}), fwd+bwd ms, float32, {a.threads} thread(s), medians of {a.reps}; "
          f"CPU {os.cpu_count()} cores (shared machine)")
    print("| B | 16-row kernels | 1-row copies | ratio |")
    print("|---|---|---|---|")
    for B in a.batch:
        x = torch.randn(B, a.n, generator=torch.Generator().manual_seed(0))
        w = torch.randn(B, a.n, generator=torch.Generator().manual_seed(1))

        def step(x=x, w=w):
            xr = x.clone().requires_grad_(True)
            (ops.soft_rank(xr, target="numba") * w).sum().backward()

        times = {-1: [], 15: []}
        for few in times:  # warm-up (compiles)
            g["_CK_NARROW"] = few
            step()
        for _ in range(a.reps):
            for few, got in times.items():
                g["_CK_NARROW"] = few
                t0 = time.perf_counter()
                step()
                got.append(time.perf_counter() - t0)
        wide, narrow = (statistics.median(times[f]) * 1e3 for f in (-1, 15))
        print(f"| {B} | {wide:,.1f} | {narrow:,.1f} | {wide / narrow:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
