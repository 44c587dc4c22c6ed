"""What the operators' "no build step" costs: the first call of a new
(n, k) in a process builds the portfolio's network (netgen.ops.networks);
a later process reads it from netgen's cache.

For each case, two fresh processes share one empty temporary
NETGEN_CACHE_DIR: the first ("cold") builds and writes the network, the
second ("warm") reads it. Each times only ``network_for(n, k)`` after
``import netgen.ops`` (CPU seconds of the process, and wall), and the cold
one prints which construction won, its depth, size and proof. numba's
compiled verifier kernels are cached in netgen's ``__pycache__`` (not in
NETGEN_CACHE_DIR), so they are warm in both; their per-process start-up is
in the cold time. Prints the CPU model and the load average; the target
is <= 1 s of CPU for n <= 4,096.

    python benchmarks/operator_networks.py
    python benchmarks/operator_networks.py --cases 1024:1024 10450:5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

DEFAULT_CASES = [f"{n}:{n}" for n in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)] + ["10450:5"]

CHILD = r"""
import json, sys, time
import netgen.ops.networks as nw
n, k = int(sys.argv[1]), int(sys.argv[2])
c0, w0 = time.process_time(), time.perf_counter()
net = nw.network_for(n, k)
cpu, wall = time.process_time() - c0, time.perf_counter() - w0
d = json.loads((nw.cache_dir() / f"best_n{n}_k{k}.json").read_text())
print(json.dumps({"cpu": cpu, "wall": wall, "kind": net.construction.get("kind"), "depth": net.depth,
                  "size": net.size, "proof": d["proof"]}))
"""


def run(n: int, k: int, cache: str, timeout: float) -> dict:
    env = dict(os.environ, NETGEN_CACHE_DIR=cache)
    p = subprocess.run([sys.executable, "-c", CHILD, str(n), str(k)], capture_output=True, text=True, env=env,
                       timeout=timeout)
    if p.returncode:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    from netgen.bench.networks import cpu_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=DEFAULT_CASES, help="n:k pairs")
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    print(f"# CPU: {cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (shared machine)")
    print("| n | k | network (portfolio winner) | depth | size | check | cold build CPU s (wall) | warm read CPU s (wall) | <= 1 s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case in a.cases:
        n, k = (int(v) for v in case.split(":"))
        with tempfile.TemporaryDirectory() as cache:
            cold = run(n, k, cache, a.timeout)
            warm = run(n, k, cache, a.timeout) if "error" not in cold else cold
        if "error" in cold:
            print(f"| {n} | {k} | error: {cold['error']} | | | | | | |")
            continue
        ok = "yes" if cold["cpu"] <= 1.0 else "**no**"
        print(f"| {n} | {k} | {cold['kind']} | {cold['depth']} | {cold['size']} | {cold['proof']} | "
              f"{cold['cpu']:.2f} ({cold['wall']:.2f}) | {warm['cpu']:.3f} ({warm['wall']:.3f}) | {ok} |", flush=True)


if __name__ == "__main__":
    main()
