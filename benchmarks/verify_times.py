"""Verification times (docs/design.md section 5; issue 2 "must show").

    python benchmarks/verify_times.py [--repeat 3] [--skip-cold]

Prints, for the networks netgen writes (construction + passes), the time of
``netgen verify FILE`` as a subprocess (wall clock, Python start included)
and of ``verify(net)`` in-process (median of --repeat warm runs):

* the (5, 10450) splitter network, goal < 10 s (also cold: empty numba
  cache, so the kernels' compilation is included);
* the (5, 1024) bitonic / odd-even / pairwise Wah-Chen and splitter
  networks, goal < 10 s each;
* a 24-wire sorter (Dobbelaere's Sort_24_120_13), goal < 5 s, exhaustively:
  cold (empty numba cache: compile included), fresh process (cached
  kernels), warm (same process);
* all shipped best-known sorters (netgen/data/sorters-dobbelaere): total time and slowest.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from netgen import io  # noqa: E402
from netgen.compiled import verifier_fires  # noqa: E402
from netgen.construct import build  # noqa: E402
from netgen.construct.best import data_dir  # noqa: E402
from netgen.passes.pipeline import optimize  # noqa: E402
from netgen.verify import verify  # noqa: E402

DOB = Path(str(data_dir()))  # the shipped best-known sorters


def cli_time(path: str, env: dict | None = None) -> tuple[float, dict]:
    t = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "netgen.cli", "verify", path, "--json"],
        capture_output=True, text=True, env={**os.environ, **(env or {})},
    )
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"netgen verify {path} failed ({p.returncode}): {p.stdout} {p.stderr}")
    return wall, json.loads(p.stdout)


def warm_time(net, repeat: int) -> tuple[float, str]:
    verify(net)  # load kernels
    times, r = [], None
    for _ in range(repeat):
        r = verify(net)
        times.append(r.seconds)
    return statistics.median(times), str(r)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-cold", action="store_true", help="skip the empty-numba-cache run")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    print(f"{'network':34s} {'depth':>5s} {'size':>6s}  {'CLI wall s':>10s}  {'warm s':>8s}  result")
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("splitter", 10450, 5)] + [(kind, 1024, 5) for kind in ("bitonic", "oddeven", "pairwise", "splitter")]
        for kind, n, k in cases:
            net, _ = optimize(build(kind, n, k), fires=verifier_fires)
            path = os.path.join(tmp, f"{kind}_{n}_{k}.json")
            io.save(net, path)
            wall, d = cli_time(path)
            warm, text = warm_time(net, args.repeat)
            label = f"({k}, {n}) {kind}"
            print(f"{label:34s} {net.depth:5d} {net.size:6d}  {wall:10.2f}  {warm:8.3f}  {text}")
            if n == 10450 and not args.skip_cold:
                cold, d = cli_time(path, {"NUMBA_CACHE_DIR": os.path.join(tmp, "numba-cache-splitter")})
                label = f"({k}, {n}) {kind}, cold (compile)"
                print(f"{label:34s} {net.depth:5d} {net.size:6d}  {cold:10.2f}  {'':8s}  {d['summary']} "
                      f"(verify itself {d['seconds']:.2f} s)")

        src = DOB / "Sort_24_120_13.json"
        if src.exists():
            net = io.load(src)
            if not args.skip_cold:
                cache = os.path.join(tmp, "numba-cache")
                wall, d = cli_time(str(src), {"NUMBA_CACHE_DIR": cache})
                print(f"{'24-wire sorter, cold (compile)':34s} {net.depth:5d} {net.size:6d}  {wall:10.2f}  "
                      f"{'':8s}  {d['summary']} (verify itself {d['seconds']:.2f} s)")
            wall, d = cli_time(str(src))
            print(f"{'24-wire sorter, fresh process':34s} {net.depth:5d} {net.size:6d}  {wall:10.2f}  "
                  f"{'':8s}  {d['summary']} (verify itself {d['seconds']:.2f} s)")
            warm, text = warm_time(net, args.repeat)
            print(f"{'24-wire sorter, warm':34s} {net.depth:5d} {net.size:6d}  {'':10s}  {warm:8.3f}  {text}")

    files = sorted(glob.glob(str(DOB / "Sort_*.json")))
    if files:
        total, rows, methods = 0.0, [], {}
        for f in files:
            net = io.load(f)
            r = verify(net)
            if r.status != "proved":
                raise SystemExit(f"{f}: {r}")
            total += r.seconds
            methods[r.method] = methods.get(r.method, 0) + 1
            rows.append((r.seconds, os.path.basename(f), r.method))
        rows.sort(reverse=True)
        print(f"\nDobbelaere: {len(files)} files proved in {total:.2f} s total ({methods})")
        print("slowest: " + ", ".join(f"{name} {s:.2f} s ({m})" for s, name, m in rows[:5]))


if __name__ == "__main__":
    main()
