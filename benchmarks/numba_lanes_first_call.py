"""First call of the numba target's lane sweeps for a new (n, k): what an
operator call (``soft_rank`` / ``topk_mask`` through the numba layer's
``back``) costs in a fresh process, split into the network
(``netgen.ops.network_for``), the layer and the first forward + backward
(numba compiles the kernels it uses, or loads them from its disk cache),
and a second call for comparison.

Two ways to get the layer, side by side ("path"):

* ``module`` (before issue 31 item 3; still what ``netgen build`` and
  ``AutoLayer`` do): ``build_layer(net, r, "numba")``, a generated module
  per network (emit + import, or a cache read) with its own copy of the
  kernels, which numba caches per module file;
* ``shared`` (the operators now: ``netgen.ops.backends.LayerLanes``): the
  kernel module of the relaxation, shared by every network
  (``netgen/codegen/numba/shared.py``), and the host code run on the
  network's arrays.

For each case and path three fresh processes share one empty temporary
NETGEN_CACHE_DIR: "first on the machine" (nothing cached), "later process"
(the same (n, k): network, layer and kernels cached) and "new (n, k)"
((n - 2, k), k capped at n - 2: the kernels cached, the network and its
layer not). Each process also times a second network in the same process
((n - 1, k); (n - 3, k) in the third) ("+ new (n, k) here": network + layer + first call). float32,
B = 64, torch 1 thread (the serial kernel copies). Prints the CPU model
and load.

    python benchmarks/numba_lanes_first_call.py
    python benchmarks/numba_lanes_first_call.py --cases 1024:1024 10450:5 --paths shared
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def child(n: int, k: int, path: str, n2: int, k2: int) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    import netgen.ops as ops
    from netgen.relax.distributions import default_relaxation

    def build(net, r):
        if path == "module":
            from netgen.codegen.cache import build_layer

            return build_layer(net, r, "numba")
        from netgen.ops.backends import lanes_for

        return lanes_for(net, r, "numba", "cpu")._for(torch.empty(0))

    out, wall = {}, {}

    def timed(name, f):
        t, w = time.process_time(), time.perf_counter()
        r = f()
        out[name], wall[name] = time.process_time() - t, time.perf_counter() - w
        return r

    def call(layer, n, k):
        x = torch.randn(64, n, requires_grad=True)
        W = (n - torch.arange(k, dtype=torch.float32))[None] if k == n else torch.ones(1, k)
        layer.back(x, W).sum().backward()

    net = timed("network", lambda: ops.network_for(n, k))
    layer = timed("module", lambda: build(net, default_relaxation(net)))
    for name in ("first call", "second call"):
        timed(name, lambda: call(layer, n, k))

    def another():
        net2 = ops.network_for(n2, k2)
        call(build(net2, default_relaxation(net2)), n2, k2)

    timed("another", another)
    out["dynamo"] = "torch._dynamo" in sys.modules
    print(json.dumps({"cpu": out, "wall": wall}))


def main():
    from netgen.bench.networks import cpu_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["256:256", "1024:1024", "4096:4096", "10450:5"])
    ap.add_argument("--paths", nargs="+", default=["module", "shared"], choices=["module", "shared"])
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        n, k, path, n2, k2 = a.child
        return child(int(n), int(k), path, int(n2), int(k2))
    print(f"# {cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (shared machine); "
          "CPU seconds of the process (wall in parentheses); float32, B = 64, 1 thread; back (one lane) "
          "forward + backward; build = total - second call")
    print("| n | k | path | process | network | layer | first call | total | second call | build <= 1 s | "
          "+ new (n-1, k) here | torch._dynamo |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in a.cases:
        n, k = map(int, case.split(":"))
        n2, n3, n4 = n - 1, n - 2, n - 3  # n - 2 and n - 3: not seen by the processes before
        k2, k3, k4 = ((m if k == n else min(k, m)) for m in (n2, n3, n4))
        for path in a.paths:
            with tempfile.TemporaryDirectory(prefix="ng-lanes-first-") as tmp:
                env = dict(os.environ, NETGEN_CACHE_DIR=tmp)
                runs = (("first on the machine", n, k, n2, k2), ("later process", n, k, n2, k2),
                        ("new (n, k)", n3, k3, n4, k4))
                for proc, nn, kk, nn2, kk2 in runs:
                    p = subprocess.run([sys.executable, __file__, "--child", str(nn), str(kk), path, str(nn2), str(kk2)],
                                       env=env, capture_output=True, text=True)
                    if p.returncode:
                        print(f"| {nn} | {kk} | {path} | {proc} | failed: "
                              f"{(p.stderr.strip().splitlines() or ['?'])[-1][:80]} |")
                        continue
                    r = json.loads(p.stdout.strip().splitlines()[-1])
                    c, w = r["cpu"], r["wall"]
                    total = {x: d["network"] + d["module"] + d["first call"] for x, d in r.items()}
                    build = total["cpu"] - c["second call"]
                    cells = " | ".join(f"{c[f]:.2f} ({w[f]:.2f})" for f in ("network", "module", "first call"))
                    print(f"| {nn} | {kk} | {path} | {proc} | {cells} | {total['cpu']:.2f} ({total['wall']:.2f}) | "
                          f"{c['second call'] * 1e3:.0f} ms | {build:.2f} {'yes' if build <= 1 else '**no**'} | "
                          f"{c['another']:.2f} | {'imported' if c['dynamo'] else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
