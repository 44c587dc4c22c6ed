"""Build the top-k selection record table (issue 22), resumably.

    nice -n 10 python tools/records/records.py --budget 3000 [--n-max 32] [--k-max 8]
        [--cell-budget 60] [--sat-n-max 16] [--solver cadical195] [--out netgen/data/records]
    python tools/records/records.py --render      # only rewrite docs/records.md from the data

Per cell (n, k), n ascending, k ascending (the depth lower bounds of smaller
cells carry over: depth(n, k) >= depth(n', k') for n' <= n, k' <= k, by
fixing inputs to -inf and dropping outputs):

1. today's portfolio (every candidate of netgen.construct.portfolio except
   the record itself), both objectives, each candidate proved;
2. the SAT depth search (netgen.search.select_depth, n <= --sat-n-max):
   from one below the best lower bound upward until SAT or the portfolio's
   depth, each question limited by what is left of --cell-budget: UNSAT at
   d proves depth >= d + 1, SAT gives a network of depth d;
3. the prefix search where the depth is not proved optimal and the 0-1
   inputs are few: keep the first layers of the best network, ask the SAT
   model for a finish one layer shallower;
4. every network runs prune, clean, schedule and must be proved by
   netgen's verifier; the shallowest (then smallest) and the smallest (then
   shallowest) are written with their provenance.

Each finished cell is written at once (network files, then index.json, both
atomically); a rerun skips finished cells. Progress goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from netgen.compiler import compile_network  # noqa: E402
from netgen import portfolio  # noqa: E402
from netgen.construct.record import FORMAT, INDEX  # noqa: E402
from netgen.io import atomic_write_text, dumps  # noqa: E402
from netgen.search import masks, select_depth  # noqa: E402

PASSES = ("prune", "clean", "schedule")
SEMANTICS = ("outputs[r] holds rank r (rank 0 = the largest) for r < k: the k largest inputs as a sorted list "
             "(netgen's outputs convention). The unsorted-set variant (the k largest on outputs 0..k-1 in any "
             "order) is recorded separately for small n (the `set` entry of a cell)")
PREFIX_MAX_INPUTS = 200_000  # the prefix search only where the 0-1 inputs with <= k ones are few


def load_index(out: Path) -> dict:
    f = out / INDEX
    if f.is_file():
        return json.loads(f.read_text(encoding="utf-8"))
    return {"format": FORMAT, "semantics": SEMANTICS, "symmetry_breaking": select_depth.SYMMETRY_BREAKING,
            "cells": {}}


def _ceil_lg(n: int) -> int:
    """ceil(log2(n)) for n >= 1."""
    return (n - 1).bit_length()


def proved(net, label):
    """(network after the passes, report) or None when not proved."""
    c = compile_network(net, passes=PASSES, verify=True)
    if c.report is None or c.report.status != "proved":
        print(f"    {label}: {c.report} -- dropped", flush=True)
        return None
    return c.network, c.report


def baseline(n: int, k: int, objective: str):
    """Today's portfolio (record candidates excluded): best proved network."""
    key = portfolio.objective_key(objective)
    best = None
    for c in portfolio.candidates(n, k, objective):
        if c.kind == "record":
            continue
        got = proved(c.make(), c.label)
        if got is None:
            continue
        net, rep = got
        if best is None or key(net) < key(best[0]):
            best = (net, rep, c.label)
    return best


def inherited_lb(cells: dict, n: int, k: int):
    """Best proved depth lower bound from the cells (n', k') <= (n, k)."""
    best = (_ceil_lg(n), "fan-in", f"the maximum of {n} inputs needs ceil(log2 {n}) = {_ceil_lg(n)} layers")
    for (m, j) in ((n - 1, k), (n, k - 1)):
        c = cells.get(f"{m},{j}")
        if c and c["depth_lb"]["value"] > best[0]:
            lb = c["depth_lb"]
            src = lb["from"] if lb["source"] == "sat-implied" else f"({m}, {j})"
            best = (lb["value"], "sat-implied", f"depth(n, k) >= depth{src} (fix inputs to -inf, drop outputs); "
                    f"{src} UNSAT at depth {lb['value'] - 1}", src)
    return best


def run_cell(n, k, cells, args, deadline):
    t_cell = time.perf_counter()
    budget = (args.small_cell_budget if n <= args.small_n else
              args.cell_budget if n <= args.sat_n_max else args.large_cell_budget)
    cell_end = min(deadline, time.monotonic() + budget)
    pool = []  # (net, report, source, method)
    base = {}
    for obj in ("depth", "size"):
        b = baseline(n, k, obj)
        if b is not None:
            pool.append((b[0], b[1], f"portfolio: {b[2]}", f"netgen portfolio candidate, objective {obj}"))
            base[obj] = [b[0].depth, b[0].size] if obj == "depth" else [b[0].size, b[0].depth]
    prev = cells.get(f"{n},{k}")  # --redo: start from what an earlier run found and proved
    if prev:
        from netgen.io import loads

        for obj in ("depth", "size"):
            e = prev[obj]
            net = loads((args.out / e["file"]).read_text(encoding="utf-8"), source=e["file"])
            pool.append((net.with_(construction={"kind": "record", "n": n, "k": k}), None, e["source"], e["method"]))
    ub = min(p[0].depth for p in pool)
    inh = inherited_lb(cells, n, k)
    lb = {"value": inh[0], "source": inh[1], "detail": inh[2]}
    if inh[1] == "sat-implied":
        lb["from"] = inh[3]
    sat_log = list(prev.get("sat", [])) if prev else []
    if prev and prev["depth_lb"]["value"] > lb["value"] or (prev and prev["depth_lb"]["source"] == "sat"
                                                           and prev["depth_lb"]["value"] == lb["value"]):
        lb = dict(prev["depth_lb"])

    def ask(d):
        left = cell_end - time.monotonic()
        if left <= 1:
            return None
        r = select_depth.search(n, k, d, solver=args.solver, time_limit=left)
        sat_log.append({"depth": d, "status": r.status, "seconds": round(r.seconds, 3), "solver": r.solver,
                        "prefixes": r.prefixes, "answered": r.solved, "variables": r.variables,
                        "clauses": r.clauses, "time_limit": round(left, 1)})
        print(f"    SAT {r.line()}", flush=True)
        return r

    def proved_bound(d, r):
        nonlocal lb
        if d + 1 >= lb["value"]:
            lb = {"value": d + 1, "source": "sat",
                  "detail": f"SAT model UNSAT at depth {d} ({r.solver}, {r.seconds:.2f} s, "
                            f"{r.prefixes} prefixes)"}

    if n <= args.sat_n_max:
        d = lb["value"]
        while d < ub:  # upward from the lower bound: the first SAT depth is optimal
            r = ask(d)
            if r is None or r.status == "UNKNOWN":
                break
            if r.status == "UNSAT":
                proved_bound(d, r)
                d += 1
            else:
                pool.append((r.network, None, "sat", f"SAT depth search ({r.solver}), depth {d}, "
                             f"found in {r.seconds:.1f} s, deterministic"))
                ub = d
        if lb["source"] != "sat" and lb["value"] >= 2:  # this cell's own certificate for the bound
            r = ask(lb["value"] - 1)
            if r is not None and r.status == "UNSAT":
                proved_bound(lb["value"] - 1, r)
    # prefix search: one layer shallower than the best so far
    if lb["value"] < ub:
        count = sum(math.comb(n, c) for c in range(1, k + 1))
        if count <= PREFIX_MAX_INPUTS:
            improved = True
            while improved and lb["value"] < ub:
                improved = False
                net = min((p[0] for p in pool), key=lambda x: (x.depth, x.size))
                for keep in range(max(1, ub - 2), max(0, ub - 6), -1):
                    left = min(cell_end - time.monotonic(), args.prefix_budget)
                    if left <= 1:
                        break
                    t0 = time.perf_counter()
                    status, found = select_depth.improve(net, keep, ub - 1 - keep, solver=args.solver, time_limit=left)
                    print(f"    prefix keep {keep}/{ub} -> depth {ub - 1}: {status} in {time.perf_counter() - t0:.1f} s",
                          flush=True)
                    if status == "SAT":
                        pool.append((found, None, "prefix-sat", f"prefix search: first {keep} layers of a depth-{ub} "
                                     f"network kept, SAT finish ({args.solver}), time limit {left:.0f} s"))
                        ub -= 1
                        improved = True
                        break
    # prove everything, pick the winners
    final = []
    for net, rep, source, method in list(pool):  # greedy shrink: a size heuristic on top of each
        small = masks.shrink(net)
        if small.size < net.size:
            pool.append((small, None, source + " + shrink", method + "; then comparators dropped greedily "
                         "while correct on all 0-1 inputs with <= k ones (netgen.search.masks.shrink)"))
    for net, rep, source, method in pool:
        if rep is None:
            got = proved(net, source)
            if got is None:
                continue
            net, rep = got
        final.append((net, rep, source, method))
    size_lb = max((n - k) * _ceil_lg(k + 1), n - 1)
    entry = {"n": n, "k": k, "depth_lb": lb,
             "size_lb": {"value": size_lb, "source": "counting",
                         "detail": "(n - k) ceil(log2(k + 1)) (Alekseev) and n - 1 (every input but the maximum loses once)"},
             "portfolio": base, "sat": sat_log}
    for obj, keyf in (("depth", lambda p: (p[0].depth, p[0].size)), ("size", lambda p: (p[0].size, p[0].depth))):
        net, rep, source, method = min(final, key=keyf)
        fname = f"n{n:02d}_k{k}_d{net.depth}_s{net.size}.json"
        con = {"kind": "record", "n": n, "k": k, "objective": obj, "source": source, "method": method,
               "proof": str(rep)}
        atomic_write_text(args.out / fname, dumps(net.with_(construction=con)))
        entry[obj] = {"file": fname, "depth": net.depth, "size": net.size, "source": source, "method": method,
                      "proof": str(rep)}
    entry["optimal_depth"] = entry["depth"]["depth"] == lb["value"]
    entry["seconds"] = round(time.perf_counter() - t_cell, 2)
    return entry


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, help="seconds for the whole run (stops starting cells after it)")
    p.add_argument("--n-min", type=int, default=2)
    p.add_argument("--n-max", type=int, default=32)
    p.add_argument("--k-max", type=int, default=8)
    p.add_argument("--cell-budget", type=float, default=60.0, help="seconds of search per cell")
    p.add_argument("--small-n", type=int, default=10, help="cells with n <= this get --small-cell-budget")
    p.add_argument("--small-cell-budget", type=float, default=300.0)
    p.add_argument("--large-cell-budget", type=float, default=15.0, help="seconds per cell above --sat-n-max")
    p.add_argument("--prefix-budget", type=float, default=10.0, help="seconds per prefix-search question")
    p.add_argument("--sat-n-max", type=int, default=16)
    p.add_argument("--set-n-max", type=int, default=0, help="also the unsorted-set variant for n <= this")
    p.add_argument("--set-cell-budget", type=float, default=60.0)
    p.add_argument("--solver", default=select_depth.DEFAULT_SOLVER)
    p.add_argument("--out", type=Path, default=ROOT / "netgen" / "data" / "records")
    p.add_argument("--docs", type=Path, default=ROOT / "docs" / "records.md", help="where --render writes")
    p.add_argument("--cells", nargs="*", help="only these cells, as N,K (e.g. --cells 11,3 12,4)")
    p.add_argument("--redo", action="store_true", help="recompute finished cells too")
    p.add_argument("--render", action="store_true", help="only render docs/records.md from the data")
    args = p.parse_args(argv)
    if args.render:
        return render(args.out, args.docs)
    if args.budget is None or args.budget <= 0:
        p.error("--budget SECONDS is required (> 0)")
    deadline = time.monotonic() + args.budget
    idx = load_index(args.out)
    idx.setdefault("machine", machine())
    idx["semantics"], idx["symmetry_breaking"] = SEMANTICS, select_depth.SYMMETRY_BREAKING
    cells = idx["cells"]
    print(f"records: n = {args.n_min}..{args.n_max}, k <= {args.k_max}, budget {args.budget:.0f} s, "
          f"{len(cells)} cells done before", flush=True)
    for n in range(max(2, args.n_min), args.n_max + 1):
        for k in range(1, min(args.k_max, n - 1) + 1):
            key = f"{n},{k}"
            if args.cells and key not in args.cells:
                continue
            if key in cells and not args.redo:
                continue
            if time.monotonic() >= deadline:
                print("budget spent; rerun to go on", flush=True)
                idx["cells"] = dict(sorted(cells.items(), key=lambda kv: tuple(map(int, kv[0].split(",")))))
                atomic_write_text(args.out / INDEX, json.dumps(idx, indent=1) + "\n")
                return render(args.out, args.docs)
            print(f"cell n={n} k={k}", flush=True)
            e = run_cell(n, k, cells, args, deadline)
            if key in cells and "set" in cells[key]:  # --redo keeps the unsorted-set entry
                e["set"] = cells[key]["set"]
            cells[key] = e
            idx["cells"] = dict(sorted(cells.items(), key=lambda kv: tuple(map(int, kv[0].split(",")))))
            atomic_write_text(args.out / INDEX, json.dumps(idx, indent=1) + "\n")
            d, s = e["depth"], e["size"]
            print(f"  done in {e['seconds']:.1f} s: depth {d['depth']} (size {d['size']}), size {s['size']} "
                  f"(depth {s['depth']}); depth >= {e['depth_lb']['value']} ({e['depth_lb']['source']}); "
                  f"portfolio {e['portfolio']}", flush=True)
    if args.set_n_max:
        set_pass(idx, cells, args, deadline)
    drop_orphans(args.out, idx)
    return render(args.out, args.docs)


def drop_orphans(out: Path, idx: dict) -> None:
    """Delete network files no cell refers to any more (left by --redo)."""
    used = {c[obj]["file"] for c in idx["cells"].values() for obj in ("depth", "size", "set") if obj in c}
    for f in out.glob("*.json"):
        if f.name != INDEX and f.name not in used:
            f.unlink()
            print(f"removed {f.name} (no cell refers to it)", flush=True)


def set_pass(idx, cells, args, deadline):
    sys.path.insert(0, str(HERE))
    from records_set import run_set_cell

    from netgen.io import loads

    def load_record(name):
        return loads((args.out / name).read_text(encoding="utf-8"), source=name)

    for key in list(cells):
        n, k = map(int, key.split(","))
        if n > args.set_n_max or ("set" in cells[key] and not args.redo):
            continue
        if time.monotonic() >= deadline:
            print("budget spent; rerun to go on", flush=True)
            break
        print(f"set cell n={n} k={k}", flush=True)
        e = run_set_cell(n, k, cells, args, deadline, load_record)
        atomic_write_text(args.out / INDEX, json.dumps(idx, indent=1) + "\n")
        print(f"  done in {e['seconds']:.1f} s: depth {e['depth']} (size {e['size']}); depth >= "
              f"{e['depth_lb']['value']} ({e['depth_lb']['source']})", flush=True)


def machine() -> str:
    import os
    import platform

    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import pysat

    return f"{model}, {os.cpu_count()} cores, python-sat {pysat.__version__}"


def render(out: Path, docs: Path) -> int:
    sys.path.insert(0, str(HERE))
    from records_render import write_docs

    write_docs(out, docs)
    print(f"wrote {docs}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
