"""First call of a layer built through ``topk_loss(1000, ...)`` in a fresh
process: cold (empty netgen cache: numba compiles) and warm (a second
process: kernels loaded from netgen's on-disk cache).

Each measurement is a NEW Python process (``python benchmarks/first_call.py
--child``) that imports netgen, builds ``topk_loss(1000, [0.5, 0.3, 0.2])``
(target "auto": numba on CPU) and times its first ``loss(x, y).backward()``
(B = 64, float32; forward and backward each compile on first use when
nothing is cached), then a second call for comparison. The cache lives in a
temporary ``NETGEN_CACHE_DIR`` made for this run, so the first process is
truly cold.

    python benchmarks/first_call.py            # 1 cold + 3 warm processes
    python benchmarks/first_call.py --warm 5
    python benchmarks/first_call.py --baseline /path/to/other/checkout   # side by side
    python benchmarks/first_call.py --new-network --baseline OLD   # each warm process a network never built

``--new-network``: each warm process builds ``topk_loss(1000 + i, ...)``,
a network the cache has not seen (the kernels it needs may be cached: on
numba they depend on the relaxation alone), as a user who changes the
number of classes or a compat user with a new n meets it.

Prints per process: import, build, first call (wall and CPU seconds),
second call and peak RSS; then the warm median and the cold/warm ratio, and the CPU model.
Interleaved with the warm processes, "floor" processes time the first call
of a trivial cached ``@njit`` function: numba's own per-process cost
(runtime initialisation, registries, linking), which no cache removes; on a
busy machine it dominates the warm first call.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time


def child() -> None:
    t0 = time.perf_counter()
    import resource

    import torch

    import netgen  # noqa: F401
    from netgen import topk_loss

    t1 = time.perf_counter()
    n = int(os.environ.get("NETGEN_FIRST_CALL_N", "1000"))
    loss = topk_loss(n, [0.5, 0.3, 0.2])
    t2 = time.perf_counter()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, n, generator=g, requires_grad=True)
    y = torch.randint(0, n, (64,), generator=g)
    c2 = time.process_time()
    loss(x, y).backward()
    t3 = time.perf_counter()
    c3 = time.process_time()
    loss(x, y).backward()
    t4 = time.perf_counter()
    c4 = time.process_time()
    print(json.dumps({
        "import_s": t1 - t0, "build_s": t2 - t1, "first_call_s": t3 - t2, "second_call_s": t4 - t3,
        "first_call_cpu_s": c3 - c2, "second_call_cpu_s": c4 - c3, "target": loss.layer.targets, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


FLOOR_SRC = """
import numba, numpy as np


@numba.njit(cache=True)
def f(a):
    s = 0.0
    for v in a:
        s += v
    return s
"""


def floor_child(cache_dir: str) -> None:
    """numba's own fixed cost: the first call of a trivial cached @njit
    function, loaded from its cache (runtime init, registries, linking)."""
    t0 = time.perf_counter()
    import resource

    import numpy as np

    sys.path.insert(0, cache_dir)
    import netgen_floor_probe as probe  # written by the parent

    t1 = time.perf_counter()
    c1 = time.process_time()
    probe.f(np.ones(4))
    t2 = time.perf_counter()
    c2 = time.process_time()
    print(json.dumps({"import_s": t1 - t0, "build_s": 0.0, "first_call_s": t2 - t1, "second_call_s": 0.0,
                      "second_call_cpu_s": 0.0,
                      "first_call_cpu_s": c2 - c1,
                      "hits": sum(probe.f.stats.cache_hits.values()),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))



def run(cache_dir: str, which: str = "--child", tree: str | None = None, n: int = 1000) -> dict:
    env = {**os.environ, "NETGEN_CACHE_DIR": cache_dir, "NETGEN_FIRST_CALL_N": str(n)}
    if tree is not None:  # another netgen checkout (--baseline): its code runs in the child
        env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")])
    env.pop("NETGEN_NUMBA_PARALLEL", None)  # the parallel kernels: the ones users get (and the cached ones)
    out = subprocess.run([sys.executable, __file__, which, cache_dir], env=env, capture_output=True, text=True,
                         timeout=1800)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm", type=int, default=3, help="warm processes after the cold one (default 3)")
    ap.add_argument("--child", nargs="?", const="", help=argparse.SUPPRESS)
    ap.add_argument("--floor", help=argparse.SUPPRESS)
    ap.add_argument("--baseline", metavar="TREE",
                    help="also run another netgen checkout (e.g. the main branch's worktree), interleaved with "
                         "this one, each with its own cache, and print both medians side by side")
    ap.add_argument("--new-network", action="store_true",
                    help="each warm process builds a network not built before (n = 1000 + i)")
    a = ap.parse_args()
    if a.child is not None:
        child()
        return
    if a.floor:
        floor_child(a.floor)
        return
    if a.baseline:
        side_by_side(a.baseline, a.warm, a.new_network)
        return
    from netgen.bench.networks import cpu_model

    print(f"CPU: {cpu_model()} ({os.cpu_count()} logical cores), load {os.getloadavg()[0]:.2f}; "
          f"python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="netgen-cache-") as d:
        with open(os.path.join(d, "netgen_floor_probe.py"), "w") as f:
            f.write(FLOOR_SRC)
        rows = [("cold", run(d))]
        run(d, "--floor")  # compiles and caches the probe
        floors = []
        for i in range(a.warm):  # interleaved: a warm netgen process, then a numba-floor process
            rows.append((f"warm {i + 1}", run(d, n=1001 + i if a.new_network else 1000)))
            floors.append(run(d, "--floor"))
    print(f"{'process':8} {'import':>8} {'build':>8} {'1st call':>9} {'(CPU s)':>8} {'2nd call':>9} {'(CPU s)':>8} "
          f"{'peak RSS':>9}")
    for name, r in rows:
        print(f"{name:8} {r['import_s']:8.3f} {r['build_s']:8.3f} {r['first_call_s']:9.3f} "
              f"{r['first_call_cpu_s']:8.3f} {r['second_call_s']:9.4f} {r['second_call_cpu_s']:8.3f} "
              f"{r['peak_rss_mb']:7.0f}MB")
    for i, r in enumerate(floors):
        print(f"{'floor ' + str(i + 1):8} {r['import_s']:8.3f} {'':>8} {r['first_call_s']:9.3f} "
              f"{r['first_call_cpu_s']:8.3f} {'':>9} "
              f"{r['peak_rss_mb']:7.0f}MB  (numba alone: a trivial cached @njit function, cache hits {r['hits']})")
    warm = statistics.median(r["first_call_s"] for _, r in rows[1:])
    floor = statistics.median(r["first_call_s"] for r in floors)
    cold = rows[0][1]["first_call_s"]
    print(f"target: {rows[0][1]['target']}")
    print(f"first call, cold process: {cold:.3f} s; warm processes (median of {a.warm}): {warm:.3f} s; "
          f"cold/warm = {cold / warm:.1f}x; warm < 1 s: {warm < 1.0}")
    print(f"numba's own first-call floor (median of {a.warm}): {floor:.3f} s; warm netgen / floor = {warm / floor:.2f}x")
    wc = statistics.median(r["first_call_cpu_s"] for _, r in rows[1:])
    print(f"first call CPU time (all threads; less sensitive to a loaded machine): cold "
          f"{rows[0][1]['first_call_cpu_s']:.3f} s, warm median {wc:.3f} s, numba floor "
          f"{statistics.median(r['first_call_cpu_s'] for r in floors):.3f} s")


def side_by_side(baseline: str, warm: int, new_network: bool = False) -> None:
    """Warm first calls of ``baseline`` and of this checkout, interleaved in
    fresh processes (each tree with its own cache, filled by one cold
    process first): medians and the ratio, wall and CPU."""
    from netgen.bench.networks import cpu_model

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"baseline": os.path.abspath(baseline), "this": here}
    print(f"CPU: {cpu_model()} ({os.cpu_count()} logical cores), load {os.getloadavg()[0]:.2f}; "
          f"baseline {trees['baseline']}, this {here}; "
          + ("each warm process a new network (n = 1001, 1002, ...)" if new_network else "the same network"))
    with tempfile.TemporaryDirectory(prefix="netgen-cache-") as d:
        caches = {k: os.path.join(d, k) for k in trees}
        for k in trees:
            run(caches[k], tree=trees[k])  # cold: compiles and fills this tree's cache
        rows = {k: [] for k in trees}
        for i in range(warm):
            for k in trees:
                r = run(caches[k], tree=trees[k], n=1001 + i if new_network else 1000)
                rows[k].append(r)
                print(f"warm {i + 1} {k:8}: first call {r['first_call_s']:.3f} s wall, {r['first_call_cpu_s']:.3f} s CPU"
                      f" (load {os.getloadavg()[0]:.1f})", flush=True)
    med = {k: (statistics.median(r["first_call_s"] for r in v), statistics.median(r["first_call_cpu_s"] for r in v))
           for k, v in rows.items()}
    for k, (w, c) in med.items():
        print(f"{k:8} median of {warm}: first call {w:.3f} s wall, {c:.3f} s CPU")
    print(f"baseline / this: {med['baseline'][0] / med['this'][0]:.1f}x wall, "
          f"{med['baseline'][1] / med['this'][1]:.1f}x CPU")


if __name__ == "__main__":
    main()
