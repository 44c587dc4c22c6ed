"""Best-known sorters and the portfolio default (issue 11 "must show").

    python benchmarks/best_and_portfolio.py [--part best|portfolio|headline|all] [--repeat 3]

* ``best``: for every n in the shipped data (2..64) and both objectives,
  ``netgen build --n n --network best --objective OBJ -o f.json`` as a
  subprocess (wall clock, Python start included): the written network's
  size and depth against the file the objective picks, its proof, the time.
* ``portfolio``: ``netgen build --n N --k K`` (in-process, default
  objective) for N in {8, 16, 32, 64} and K in 1..8: the chosen kind, depth
  and size beside the splitter's and the Wah-Chen selection's.
* ``headline``: ``netgen build --n 10450 --k 5 -o x.json`` (subprocess, the
  portfolio default) beside ``--network splitter`` (what the default built
  before the portfolio), alternated, medians of --repeat runs each.
"""

from __future__ import annotations

import argparse
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

from netgen.construct.best import index  # noqa: E402


def cli(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "netgen.cli", *args], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"netgen {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return wall, p


def part_best() -> None:
    print("netgen build --n N --network best --objective OBJ -o f.json (subprocess wall clock, Python start included)")
    print(f"{'n':>3s} {'objective':9s} {'file':18s} {'size':>5s} {'depth':>5s} {'wall s':>7s}  proof")
    worst = {}
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in sorted({e.n for e in index()}):
            for objective in ("size", "depth"):
                entries = [e for e in index() if e.n == n]
                key = (lambda e: (e.size, e.depth)) if objective == "size" else (lambda e: (e.depth, e.size))
                want = min(entries, key=key)
                out = os.path.join(tmp, f"{n}_{objective}.json")
                wall, _ = cli(["build", "--n", str(n), "--network", "best", "--objective", objective, "-o", out])
                d = json.loads(Path(out).read_text())
                got = (d["stats"]["size"], d["stats"]["depth"])
                proved = d["construction"]["verified"].startswith("proved")
                ok = got == (want.size, want.depth) and proved
                # the cleanup may remove a comparator that never swaps: smaller than the file is fine
                better = got[0] <= want.size and got[1] <= want.depth and proved and not ok
                bad += not (ok or better)
                band = "n <= 24" if n <= 24 else "n > 24"
                worst[band] = max(worst.get(band, 0.0), wall)
                print(f"{n:3d} {objective:9s} {want.name[:-5]:18s} {got[0]:5d} {got[1]:5d} {wall:7.2f}  "
                      f"{d['construction']['verified']}{'' if ok else '  SMALLER than the file (cleanup)' if better else '  MISMATCH'}")
    print("slowest: " + ", ".join(f"{b}: {w:.2f} s" for b, w in worst.items()) + f"; mismatches: {bad}")


def part_portfolio() -> None:
    from netgen.compiler import build, build_network, compile_network

    print("netgen build --n N --k K (portfolio, objective depth): chosen kind depth/size | splitter | oddeven selection")
    for n in (8, 16, 32, 64):
        for k in range(1, 9):
            t = time.perf_counter()
            c = build(n, k)
            wall = time.perf_counter() - t
            net = c.network
            others = []
            for kind in ("splitter", "oddeven"):
                o = compile_network(build_network(n, k, kind), verify=False).network
                others.append(f"{o.depth}/{o.size}")
            kind = net.construction["kind"] + ("-sorter" if net.construction.get("from") == "sorter" else "")
            print(f"n={n:3d} k={k}: {kind:15s} {net.depth:3d}/{net.size:<4d} | splitter {others[0]:>7s} "
                  f"| oddeven sel {others[1]:>7s} | {c.report.status} ({wall:.2f} s)")


def part_headline(repeat: int) -> None:
    print("netgen build --n 10450 --k 5 -o x.json: portfolio default vs --network splitter (subprocess, alternated)")
    times = {"portfolio": [], "splitter": []}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "x.json")
        cli(["build", "--n", "10450", "--k", "5", "-o", out])  # warm numba's cache
        for _ in range(repeat):
            for label, extra in (("portfolio", []), ("splitter", ["--network", "splitter"])):
                wall, _ = cli(["build", "--n", "10450", "--k", "5", *extra, "-o", out])
                times[label].append(wall)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"  {k:9s} median {med[k]:.2f} s  runs {' '.join(f'{x:.2f}' for x in v)}")
    print(f"  ratio portfolio / splitter: {med['portfolio'] / med['splitter']:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("best", "portfolio", "headline", "all"), default="all")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    if args.part in ("best", "all"):
        part_best()
    if args.part in ("portfolio", "all"):
        part_portfolio()
    if args.part in ("headline", "all"):
        part_headline(args.repeat)


if __name__ == "__main__":
    main()
