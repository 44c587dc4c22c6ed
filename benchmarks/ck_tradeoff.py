"""Time against memory for soft_rank on the numba target: the saved-state
lane sweeps (what a call under 256 MiB of saved state runs) against the
checkpointed ones (``_CK_BYTES = 0``: what larger calls run), forward +
backward, float32, one thread, in a fresh process per (mode, round),
alternated; time: medians of ``--reps`` calls (thread CPU time); working
memory: as benchmarks/operators.py measures it (benchmarks/measure.py: the
peak RSS of one call after a warm-up, the numba modules' pooled buffers
freed and ``malloc_trim``, minus the RSS before it; Linux only).
Prints torchsort's figures beside them where it is importable
(``PYTHONPATH=$PWD:/tmp/netgen-baselines/site``, tools/build_baselines.sh).

    python benchmarks/ck_tradeoff.py --n 1024 --batch 64 --rounds 2

(issue 31: at n = 1,024, B = 64 the saved state meets the time goal and
the checkpointed sweeps the memory goal; neither meets both.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import ctypes, gc, json, sys, time
import numpy as np, torch
torch.set_num_threads(1)
mode, n, B, reps, here = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
x = torch.randn(B, n, generator=torch.Generator().manual_seed(0))
w = torch.randn(B, n, generator=torch.Generator().manual_seed(1))
if mode == "torchsort":
    import torchsort
    def rank(t):
        return torchsort.soft_rank(t)
else:
    from netgen import ops
    from netgen.ops.backends import lanes_for
    from netgen.relax.distributions import default_relaxation
    net = ops.network_for(n, n)
    lanes = lanes_for(net, default_relaxation(net), "numba", torch.device("cpu"))
    g = type(lanes._for(torch.zeros(1, n)))._values.__globals__
    if mode == "checkpointed":
        g["_CK_BYTES"] = 0
    def rank(t):
        return ops.soft_rank(t, target="numba")
def step():
    xr = x.clone().requires_grad_(True)
    (rank(xr) * w).sum().backward()
for _ in range(3):
    step()
ts = []
for _ in range(reps):
    t0 = time.thread_time(); step(); ts.append(time.thread_time() - t0)
# as benchmarks/operators.py: the numba modules' pooled buffers freed, so one call counts what it needs
for mod in list(sys.modules.values()):
    names = getattr(mod, "__dict__", {})
    if names.get("TARGET") == "numba" and callable(names.get("free_buffers")):
        names["free_buffers"]()
gc.collect()
ctypes.CDLL("libc.so.6").malloc_trim(0)
sys.path.insert(0, here)
from measure import measure
_, mem, reset = measure(step, 1)
print(json.dumps({"mode": mode, "ms": float(np.median(ts)) * 1e3, "mib": mem / 2**20, "reset": reset}))
"""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv)
    modes = ["saved-state", "checkpointed"]
    try:
        import torchsort  # noqa: F401
        modes.append("torchsort")
    except ImportError:
        print("# torchsort not importable: netgen's two modes only")
    print(f"# soft_rank n = {a.n:,}, B = {a.batch}, fwd+bwd, float32, 1 thread; CPU {os.cpu_count()} cores "
          "(shared machine); a fresh process per row")
    print("| mode | fwd+bwd ms | working memory MiB |")
    print("|---|---|---|")
    for _ in range(a.rounds):
        for mode in modes:
            r = subprocess.run([sys.executable, "-c", CHILD, mode, str(a.n), str(a.batch), str(a.reps), HERE], check=False,
                               capture_output=True, text=True, env=dict(os.environ))
            if r.returncode != 0:
                print(f"| {mode} | failed: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode} | |")
                continue
            got = json.loads(r.stdout.strip().splitlines()[-1])
            print(f"| {mode} | {got['ms']:.2f} | {got['mib']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
