"""A performance model of the cuda target's kernels on an H100: ESTIMATES,
not measurements (no GPU needed; ``benchmarks/gpu_session.sh`` measures
when one is there).

    python benchmarks/gpu_model.py --B 64 500 4096 [--n 10450] [--k 5] [--old 3ad06ee] [--json FILE]

For the (k, n) splitter network (default relaxation, float32) it builds the
module of this checkout and the module of commit ``--old`` (its
``netgen/`` from git into a temporary package), compiles both with netgen's
compile check (PTX for sm_90, ptxas -> cubins), disassembles the cubins
(``cuobjdump``/``nvdisasm`` from the pip wheels ``nvidia-cuda-cuobjdump``,
``nvidia-cuda-nvdisasm``; absent: fixed instruction counts, said so) and
prints, per kernel and B: grid, dynamic shared memory, registers,
occupancy, SASS instructions per comparator (and per (comparator, rank)
pair), DRAM and L2 bytes per row, and an estimated time:

    t = max(c * issue, c * chain, DRAM, L2)
    issue = warp-instructions / (1.9 per cycle per SM * 132 SMs * 1.98 GHz)
    chain = waves * per-block dependent latency (layers in order; a layer
            of w comparators costs ceil(w / threads) iterations of
            LAT_ITER cycles, plus LAT_PAIR per round of a rank sweep's
            shared loads (one per rank unless the SASS loads the ranks'
            pairs together; LAT_RANK_ISSUE per further rank), plus a
            barrier: LAT_SYNC, or LAT_WARP for a narrow layer on one warp)
    DRAM  = compulsory bytes / 3 TB/s
    L2    = table and d gathers (32-byte sectors) / 4.4 TB/s (low) or 2.6 TB/s (high)

Warp-instructions come from the plan: threads stride over a layer's
comparators, so a warp runs 32 consecutive comparators; its cost is the
comparator body plus the largest rank count among its lanes times the pair
body (divergent lanes wait). ``c`` calibrates the model on the one H100
measurement of a kernel whose structure is unchanged since (e46262c's
``_fwd_vals``, 0.16 ms at B = 500, one block per row, values in shared
memory, issue-bound; the review's figures are in docs/cuda-kernels.md) and
scales the issue and chain terms of every kernel (bandwidths are taken as
they are). Not modelled: launch and host costs (~20-130 us per launch
on the VM that measured them), cache conflicts, tail effects inside a wave.

This file is the command and its report; ``_gpu_sass.py`` builds the
modules and reads their SASS, ``_gpu_cost.py`` holds the cost model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from _gpu_cost import CALIBRATION, GHZ, ISSUE, SMS, Structure, estimate, kernels
from _gpu_sass import ROOT, build, kernel_sass, old_package


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10450)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--B", type=int, nargs="+", default=[64, 500, 4096])
    ap.add_argument("--old", default="3ad06ee", help="commit of the kernels to compare with")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "netgen_gpu_model"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from netgen.compiler import compile_network
    from netgen.construct import build as build_net
    from netgen.relax.distributions import default_relaxation

    net = compile_network(build_net("splitter", args.n, args.k)).network
    r = default_relaxation(net)
    st = Structure(net)
    cache = Path(args.cache)
    head = "new"
    res = {"new": build("new", ROOT, cache, args.n, args.k),
           "old": build("old", old_package(args.old, cache), cache, args.n, args.k)}
    names = {"new": ("fwd", "bwd", "fwd_col", "bwd_col"),
             "old": ("fwd_vals", "fwd_P", "bwd_P", "bwd_vals", "fwd_col", "bwd_col")}
    # each tree's own swap code: its divisions per comparator
    sx = {w: {nm: kernel_sass(res[w], nm, res[w]["rcp_per_comparator"]) for nm in names[w]} for w in names}
    have_sass = all(v["sass"] for w in sx.values() for v in w.values())
    ks = {w: kernels(w, st, sx[w]) for w in names}
    # calibration: the model's raw time for e46262c's _fwd_vals structure vs its measurement
    w, nm, Bc, ms = CALIBRATION
    e = estimate(ks[w][nm], Bc)
    c = ms / max(e["issue"], e["chain"], e["dram"], e["l2"][0])
    print(f"ESTIMATES (model, not measurements): {net!r}, {r.distribution} (ART {r.art_lambda}), float32, "
          f"nnz = {st.nnz} ({st.nnz / (st.k * st.n):.2f} k n), H100 SXM ({SMS} SMs, {GHZ} GHz, issue {ISSUE} "
          f"warp-instr/cycle/SM, DRAM 3 TB/s, L2 2.6-4.4 TB/s); SASS from cuobjdump: "
          f"{'yes' if have_sass else 'NO (fixed counts used)'}; calibration c = {c:.2f} "
          f"({nm} at B = {Bc}: {ms} ms measured at e46262c)")
    print(f"{'kernels':8s} {'kernel':9s} {'grid/row':>8s} {'thr':>4s} {'smem KB':>7s} {'regs':>4s} {'blk/SM':>6s} "
          f"{'SASS/comp':>11s} {'/pair':>5s} {'DRAM KB/row':>11s} {'L2 KB/row':>9s} " +
          " ".join(f"{'B=' + str(B) + ' ms':>14s}" for B in args.B))
    rows = []
    for which in ("old", "new"):
        label = f"{args.old}" if which == "old" else f"{head}"
        for nm, kern in ks[which].items():
            cells = []
            for B in args.B:
                e = estimate(kern, B)
                lo = max(c * e["issue"], c * e["chain"], e["dram"], e["l2"][0])
                hi = max(c * e["issue"], c * e["chain"], e["dram"], e["l2"][1])
                bound = max(("issue", c * e["issue"]), ("chain", c * e["chain"]), ("DRAM", e["dram"]),
                            ("L2", e["l2"][1]), key=lambda t: t[1])[0]
                cells.append((B, lo, hi, bound))
                rows.append({"kernels": which, "commit": label, "kernel": nm, "B": B, "estimate_ms": [lo, hi],
                             "bound": bound, "issue_ms": c * e["issue"], "chain_ms": c * e["chain"],
                             "dram_ms": e["dram"], "grid": e["grid"], "blocks_per_sm": e["occ"],
                             "shared_bytes": kern["shared"], "regs": kern["regs"],
                             "sass_per_comparator": kern["cpc"], "sass_per_pair": kern["ppc"],
                             "dram_bytes_per_row": kern["dram"], "l2_bytes_per_row": kern["l2"]})
            e = estimate(kern, args.B[0])
            cpc = "/".join(f"{v:.0f}" for v in kern["cpc"])
            ppc = f"{kern['ppc']:.0f}" if kern["ppc"] else "-"
            print(f"{label:8s} {nm:9s} {kern['blocks']:8d} {kern.get('threads', 256):4d} "
                  f"{kern['shared'] / 1024:7.1f} {kern['regs']:4d} "
                  f"{e['occ']:6d} {cpc:>11s} {ppc:>5s} {kern['dram'] / 1024:11.0f} {kern['l2'] / 1024:9.0f} " +
                  " ".join(f"{lo:6.3f}-{hi:<6.3f}{b[0]}" for _, lo, hi, b in cells))
    print("(bound: i issue, c dependent chain, D DRAM, L L2; issue and chain scaled by the calibration c)")
    print("\nfwd+bwd, ESTIMATES (ms):")
    paths = {"old": {"rows": ("fwd_vals", "fwd_P", "bwd_P", "bwd_vals"), "column": ("fwd_col", "bwd_col")},
             "new": {"rows": ("fwd", "bwd"), "column": ("fwd_col", "bwd_col")}}
    targets = {"rows": (0.5, 0.8, 4.0), "column": (0.1, 0.25, 1.5)}
    summary = {}
    for path in ("rows", "column"):
        for which in ("old", "new"):
            label = args.old if which == "old" else head
            cells = []
            for B in args.B:
                lo = sum(x["estimate_ms"][0] for x in rows if x["kernels"] == which and x["B"] == B
                         and x["kernel"] in paths[which][path])
                hi = sum(x["estimate_ms"][1] for x in rows if x["kernels"] == which and x["B"] == B
                         and x["kernel"] in paths[which][path])
                cells.append(f"B={B}: {lo:.2f}-{hi:.2f}")
                summary[(path, which, B)] = (lo, hi)
            dram = sum(ks[which][nm]["dram"] for nm in paths[which][path])
            print(f"  {path:6s} {label:8s} " + "  ".join(cells) + f"   DRAM {dram / 1e6:.2f} MB/row (estimate)")
        tg = targets[path]
        print(f"  {path:6s} target   " + "  ".join(f"B={B}: {t}" for B, t in zip(args.B, tg * 2)))
    kept_new = 4 * (2 * st.size + (st.nnz if st.nnz <= 4 * st.k * st.n else 0)) + 4
    kept_old = 4 * (st.size + st.nnz) + 4
    print(f"\nkept for the rows backward per row (float32): {args.old} {kept_old / 1e6:.2f} MB (d, D; C of "
          f"{4 * st.nnz / 1e6:.2f} MB more allocated in the backward), {head} {kept_new / 1e6:.2f} MB (d, p, D; "
          f"dL/dp of {4 * st.size / 1e6:.2f} MB in the backward)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"calibration": c, "sass": have_sass, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
