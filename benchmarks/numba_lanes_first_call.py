"""First call of the numba target's lane sweeps for a new (n, k): what an
operator call (``soft_rank`` / ``topk_mask`` through the numba layer's
``back``) costs in a fresh process, split into the network
(``netgen.ops.network_for``), the module (``build_layer(net, r, "numba")``:
emit + import, or a cache read) and the first forward + backward (numba
compiles the kernels it uses, or loads them from its disk cache), and a
second call for comparison.

For each case two fresh processes share one empty temporary
NETGEN_CACHE_DIR: "cold" builds everything, "warm" (a later process) finds
the network, the module and numba's cached kernels. float32, B = 64,
torch 1 thread (the serial kernel copies). Prints the CPU model and load.

    python benchmarks/numba_lanes_first_call.py
    python benchmarks/numba_lanes_first_call.py --cases 1024:1024 10450:5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def child(n: int, k: int) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    import netgen.ops as ops
    from netgen.codegen.auto import build_layer
    from netgen.relax.distributions import default_relaxation

    out, wall = {}, {}

    def timed(name, f):
        t, w = time.process_time(), time.perf_counter()
        r = f()
        out[name], wall[name] = time.process_time() - t, time.perf_counter() - w
        return r

    net = timed("network", lambda: ops.network_for(n, k))
    layer = timed("module", lambda: build_layer(net, default_relaxation(net), "numba"))
    x = torch.randn(64, n)
    W = (n - torch.arange(k, dtype=torch.float32))[None] if k == n else torch.ones(1, k)

    def call():
        xr = x.detach().requires_grad_(True)
        layer.back(xr, W).sum().backward()

    for name in ("first call", "second call"):
        timed(name, call)
    print(json.dumps({"cpu": out, "wall": wall}))


def main():
    from netgen.bench.networks import cpu_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["256:256", "1024:1024", "4096:4096", "10450:5"])
    ap.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(*a.child)
    print(f"# {cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (shared machine); "
          "CPU seconds of the process (wall in parentheses); float32, B = 64, 1 thread; back (one lane) "
          "forward + backward")
    print("| n | k | process | network | module | first call | total | second call | <= 1 s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case in a.cases:
        n, k = map(int, case.split(":"))
        with tempfile.TemporaryDirectory(prefix="ng-lanes-first-") as tmp:
            env = dict(os.environ, NETGEN_CACHE_DIR=tmp)
            for proc in ("cold", "warm"):
                p = subprocess.run([sys.executable, __file__, "--child", str(n), str(k)], env=env,
                                   capture_output=True, text=True)
                if p.returncode:
                    print(f"| {n} | {k} | {proc} | failed: {(p.stderr.strip().splitlines() or ['?'])[-1][:80]} |")
                    continue
                r = json.loads(p.stdout.strip().splitlines()[-1])
                c, w = r["cpu"], r["wall"]
                total = {x: d["network"] + d["module"] + d["first call"] for x, d in r.items()}
                cells = " | ".join(f"{c[f]:.2f} ({w[f]:.2f})" for f in ("network", "module", "first call"))
                print(f"| {n} | {k} | {proc} | {cells} | {total['cpu']:.2f} ({total['wall']:.2f}) | "
                      f"{c['second call'] * 1e3:.1f} ms | {'yes' if total['cpu'] <= 1 else '**no**'} |", flush=True)


if __name__ == "__main__":
    main()
