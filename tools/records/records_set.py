"""The unsorted-set variant of the record table (issue 22), small n only:
the k largest inputs on outputs 0..k-1 in any order. Called by
``tools/records/records.py --set-n-max N`` after the sorted cells.

Per cell: the SAT depth search with ``unsorted=True`` (same symmetry
breaking: a standard network leaves a sorted input alone, so the set lands
on wires 0..k-1) upward from the best lower bound to the sorted record's
depth (a sorted selector is a set selector). Lower bounds carry over from
(n - 1, k) (fix an input to -inf) and (n - 1, k - 1) (fix one to +inf); not
from (n, k - 1): the top k as a set does not contain the top k - 1.

netgen's verifier proves *sorted* selectors only, so a set network is
proved here by evaluating every 0-1 input with exactly k ones (complete:
by monotonicity an input with fewer ones leaves zeros off the outputs, one
with more leaves ones on them), and again in the tests on all 2^n inputs.
"""

from __future__ import annotations

import time
from math import comb

import numpy as np

from netgen.io import atomic_write_text, dumps
from netgen.network import Network
from netgen.passes.prune import prune
from netgen.passes.schedule import asap
from netgen.search import masks, select_depth


def set_correct(net: Network, k: int) -> bool:
    """Every 0-1 input with exactly k ones ends with its ones on net.outputs."""
    masks = select_depth.masks_upto(net.n, k)
    counts = np.array([bin(int(v)).count("1") for v in masks])
    masks = masks[counts == k]
    out = select_depth.apply_layers(masks, [l.tolist() for l in net.layers])
    want = np.uint64(sum(1 << w for w in net.outputs))
    return bool(np.all(out == want))


def run_set_cell(n, k, cells, args, deadline, load_record):
    cell = cells[f"{n},{k}"]
    t_cell = time.perf_counter()
    end = min(deadline, time.monotonic() + args.set_cell_budget)
    best = load_record(cell["depth"]["file"])  # sorted record: a set selector too
    ub = best.depth
    lb = {"value": 1, "source": "trivial", "detail": "n >= 2 needs a comparator"}
    for (m, j), how in (((n - 1, k), "-inf"), ((n - 1, k - 1), "+inf")):
        e = cells.get(f"{m},{j}", {}).get("set")
        if j >= 1 and j < m and e and e["depth_lb"]["value"] > lb["value"]:
            lb = {"value": e["depth_lb"]["value"], "source": "sat-implied", "from": f"({m}, {j})",
                  "detail": f"fix an input to {how}: a set selector for ({n}, {k}) gives one for ({m}, {j})"}
    log = []
    source = "sorted record"

    def ask(d):
        left = end - time.monotonic()
        if left <= 1:
            return None
        r = select_depth.search(n, k, d, solver=args.solver, time_limit=left, unsorted=True,
                                construction={"kind": "record-set", "n": n, "k": k})
        log.append({"depth": d, "status": r.status, "seconds": round(r.seconds, 3), "solver": r.solver,
                    "prefixes": r.prefixes, "answered": r.solved, "time_limit": round(left, 1)})
        print(f"    SAT (set) {r.line()}", flush=True)
        return r

    def proved_bound(d, r):
        nonlocal lb
        if d + 1 >= lb["value"]:
            lb = {"value": d + 1, "source": "sat",
                  "detail": f"SAT model (unsorted) UNSAT at depth {d} ({r.solver}, {r.seconds:.2f} s)"}

    d = lb["value"]
    while d < ub:
        r = ask(d)
        if r is None or r.status == "UNKNOWN":
            break
        if r.status == "UNSAT":
            proved_bound(d, r)
            d += 1
        else:
            best, ub, source = r.network, d, "sat"
    if lb["source"] != "sat" and lb["value"] >= 2:
        r = ask(lb["value"] - 1)
        if r is not None and r.status == "UNSAT":
            proved_bound(lb["value"] - 1, r)
    net = asap(prune(best))
    small = masks.shrink(net, unsorted=True)
    if small.size < net.size:
        net, source = small, source + " + shrink"
    if not set_correct(net, k):
        raise RuntimeError(f"set network for ({n}, {k}) failed its check")  # never written
    fname = f"set_n{n:02d}_k{k}_d{net.depth}_s{net.size}.json"
    proof = f"exhaustive 0-1: all {comb(n, k)} inputs with {k} ones (tools/records/records_set.py)"
    con = {"kind": "record-set", "n": n, "k": k, "source": source, "proof": proof}
    atomic_write_text(args.out / fname, dumps(net.with_(construction=con)))
    cell["set"] = {"file": fname, "depth": net.depth, "size": net.size, "source": source, "proof": proof,
                   "depth_lb": lb, "optimal_depth": lb["value"] == net.depth, "sat": log,
                   "seconds": round(time.perf_counter() - t_cell, 2)}
    return cell["set"]
