"""The build-time estimate (``netgen.estimate``) against measured builds.

Each case is a fresh process running ``netgen build --n N --k K`` (the
portfolio, passes and proof; ``--max-seconds inf`` so nothing is refused),
timed in CPU seconds (user + system of the child: a loaded machine stretches
wall time, not CPU time much) and wall seconds; beside it the estimate the
budget would use, and estimate / measured CPU. A case over ``--timeout``
wall seconds is killed and reported as such (the estimate then should be
large). Prints the CPU model and the load average.

    python benchmarks/build_times.py
    python benchmarks/build_times.py --cases 65536:64 1024:16 --timeout 300
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

DEFAULT_CASES = ["40:3", "64:32", "64:64", "1024:8", "4096:8", "10450:5", "16384:4", "16384:8", "65536:4",
                 "65536:64", "1024:1024", "256:12", "1024:12", "1024:16", "65536:16", "1000000:1"]


def run_case(n: int, k: int, timeout: float) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        cmd = [sys.executable, "-m", "netgen.cli", "build", "--n", str(n), "--k", str(k), "--max-seconds", "inf",
               "-o", os.path.join(d, "net.json")]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            status = "ok" if p.returncode == 0 else f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}"
        except subprocess.TimeoutExpired:
            status = f"killed after {timeout:.0f} s wall"
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, status


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", default=DEFAULT_CASES, help="n:k pairs")
    ap.add_argument("--timeout", type=float, default=240.0, help="wall seconds per case before it is killed")
    a = ap.parse_args()
    from netgen.bench.networks import cpu_model
    from netgen.estimate import build_seconds

    print(f"CPU: {cpu_model()} ({os.cpu_count()} logical cores), load {os.getloadavg()[0]:.2f}")
    print(f"{'n':>8} {'k':>6} {'estimate':>9} {'CPU s':>8} {'wall s':>8} {'est/CPU':>8}  status / largest parts")
    for case in a.cases:
        n, k = (int(v) for v in case.split(":"))
        est = build_seconds(n, k)
        cpu, wall, status = run_case(n, k, a.timeout)
        ratio = est.seconds / cpu if cpu > 0 else float("nan")
        print(f"{n:>8} {k:>6} {est.seconds:9.1f} {cpu:8.1f} {wall:8.1f} {ratio:8.2f}  {status}; {est.top()}",
              flush=True)
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
