"""A performance model of the cuda target's kernels on an H100: ESTIMATES,
not measurements (no GPU needed; ``benchmarks/gpu_session.sh`` measures
when one is there).

    python research/gpu_model/gpu_model.py --B 64 500 4096 [--n 10450] [--k 5] [--old 3ad06ee] [--chain-c] [--json FILE]

For the (k, n) splitter network (default relaxation, float32) it builds the
module of this checkout and the module of commit ``--old`` (its
``netgen/`` from git into a temporary package), compiles both with netgen's
compile check (PTX for sm_90, ptxas -> cubins), disassembles the cubins
(``cuobjdump``/``nvdisasm`` from the pip wheels ``nvidia-cuda-cuobjdump``,
``nvidia-cuda-nvdisasm``; absent: fixed instruction counts, said so) and
prints, per kernel and B: grid, dynamic shared memory, registers,
occupancy, SASS instructions per comparator (and per (comparator, rank)
pair), DRAM and L2 bytes per row, and an estimated time:

    t       = max(compute, DRAM, L2)
    compute = waves * sum over the block's layers, in order, of
              max(c * issue of the layer on the SM, chain of the layer)
    issue   = warp-instructions / (1.9 per cycle per SM * 132 SMs * 1.98 GHz)
    chain   = per layer: the layer loop's own pass + ceil(w / threads)
              comparator iterations + a barrier (LAT_SYNC, or LAT_WARP for
              a narrow layer on one warp); a pass and an iteration cost
              the dependent path of that loop body in the SASS
              (_gpu_latency.py: in-order issue, a table of Hopper
              latencies, global loads classed L2 hit or DRAM by the array
              they read)
    DRAM    = compulsory bytes / 3 TB/s
    L2      = table and d gathers (32-byte sectors) / 4.4 TB/s (low) or 2.6 TB/s (high)

Warp-instructions come from the plan: threads stride over a layer's
comparators, so a warp runs 32 consecutive comparators; its cost is the
comparator body plus the largest rank count among its lanes times the pair
body (divergent lanes wait). ``c`` calibrates the model on the one H100
measurement of a kernel whose structure is unchanged since (e46262c's
``_fwd_vals``, 0.16 ms at B = 500, one block per row, values in shared
memory, issue-bound; the review's figures are in docs/cuda-kernels.md): it
is the factor by which that kernel's issue must be scaled for the model to
give the measurement, and it scales the issue term of every kernel. The
chain is **not** calibrated (no chain-bound kernel has been measured): its
latencies are published figures for an idle memory system, so where the
chain binds the estimate is optimistic; ``--chain-c`` scales it by c too, to
show how much rides on that. Each kernel's line also gives the earlier
model's chain (a fixed LAT_ITER = 900 cycles per comparator iteration, 60 per
round of a rank sweep's shared loads, scaled by c) beside the SASS chain.
Bandwidths are taken as they are. Not modelled: launch and host costs
(~20-130 us per launch on the VM that measured them), cache conflicts, L2
latency under load, tail effects inside a wave.

This file is the command and its report; ``_gpu_sass.py`` builds the
modules and reads their SASS, ``_gpu_latency.py`` the dependent path of a loop body,
``_gpu_cost.py`` the cost model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from _gpu_cost import CALIBRATION, FROM_DRAM, GHZ, ISSUE, SMS, Structure, calibrate, estimate, kernels
from _gpu_sass import ROOT, build, kernel_sass, old_package


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10450)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--B", type=int, nargs="+", default=[64, 500, 4096])
    ap.add_argument("--old", default="3ad06ee", help="commit of the kernels to compare with")
    ap.add_argument("--chain-c", action="store_true", help="scale the SASS chain by the calibration c too")
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
    sx = {w: {nm: kernel_sass(res[w], nm, res[w]["rcp_per_comparator"], FROM_DRAM.get(nm, ())) for nm in names[w]}
          for w in names}
    have_sass = all(v["sass"] for w in sx.values() for v in w.values())
    have_args = {w: bool(res[w]["kernel_args"]) for w in res}
    ks = {w: kernels(w, st, sx[w]) for w in names}
    # calibration: e46262c's _fwd_vals structure, modelled, against its measurement
    w, nm, Bc, ms = CALIBRATION
    c = calibrate(ks[w][nm], Bc, ms, args.chain_c)
    print(f"ESTIMATES (model, not measurements): {net!r}, {r.distribution} (ART {r.art_lambda}), float32, "
          f"nnz = {st.nnz} ({st.nnz / (st.k * st.n):.2f} k n), H100 SXM ({SMS} SMs, {GHZ} GHz, issue {ISSUE} "
          f"warp-instr/cycle/SM, DRAM 3 TB/s, L2 2.6-4.4 TB/s); SASS from cuobjdump: "
          f"{'yes' if have_sass else 'NO (fixed counts used)'}; calibration c = {c:.2f} "
          f"({nm} at B = {Bc}: {ms} ms measured at e46262c), scaling issue"
          f"{' and chain' if args.chain_c else '; chain from the SASS, not scaled'}; global loads classed by array: "
          + ", ".join(f"{args.old if w == 'old' else head} {'yes' if have_args[w] else 'no (all L2 hits)'}"
                      for w in ("old", "new")))
    print(f"{'kernels':8s} {'kernel':9s} {'grid/row':>8s} {'thr':>4s} {'smem KB':>7s} {'regs':>4s} {'blk/SM':>6s} "
          f"{'SASS/comp':>11s} {'/pair':>5s} {'cyc/iter':>9s} {'cyc/narrow':>10s} {'DRAM KB/row':>11s} "
          f"{'L2 KB/row':>9s} " +
          " ".join(f"{'B=' + str(B) + ' ms':>14s}" for B in args.B))
    rows, terms = [], []
    for which in ("old", "new"):
        label = f"{args.old}" if which == "old" else f"{head}"
        for nm, kern in ks[which].items():
            cells = []
            for B in args.B:
                e = estimate(kern, B, c, args.chain_c)
                lo = max(e["compute"], e["dram"], e["l2"][0])
                hi = max(e["compute"], e["dram"], e["l2"][1])
                bound = max((e["bound_by"], e["compute"]), ("DRAM", e["dram"]), ("L2", e["l2"][1]),
                            key=lambda t: t[1])[0]
                cells.append((B, lo, hi, bound))
                rows.append({"kernels": which, "commit": label, "kernel": nm, "B": B, "estimate_ms": [lo, hi],
                             "bound": bound, "issue_ms": c * e["issue"], "chain_ms": e["chain"],
                             "chain_fixed_ms": c * e["chain_fixed"], "compute_ms": e["compute"],
                             "dram_ms": e["dram"], "l2_ms": list(e["l2"]), "grid": e["grid"],
                             "blocks_per_sm": e["occ"], "threads": kern["threads"],
                             "shared_bytes": kern["shared"], "regs": kern["regs"],
                             "sass_per_comparator": kern["cpc"], "sass_per_pair": kern["ppc"],
                             "cycles_per_iteration": kern["lat"], "cycles_narrow_layer": kern["narrow"],
                             "dram_bytes_per_row": kern["dram"], "l2_bytes_per_row": kern["l2"]})
                if B == args.B[-1]:
                    terms.append((label, nm, e))
            e = estimate(kern, args.B[0], c, args.chain_c)
            cpc = "/".join(f"{v:.0f}" for v in kern["cpc"])
            lat = "/".join(f"{v:.0f}" for v in kern["lat"])
            narrow = "/".join(f"{v:.0f}" for v in kern["narrow"])
            ppc = f"{kern['ppc']:.0f}" if kern["ppc"] else "-"
            print(f"{label:8s} {nm:9s} {kern['blocks']:8d} {kern['threads']:4d} "
                  f"{kern['shared'] / 1024:7.1f} {kern['regs']:4d} "
                  f"{e['occ']:6d} {cpc:>11s} {ppc:>5s} {lat:>9s} {narrow:>10s} {kern['dram'] / 1024:11.0f} "
                  f"{kern['l2'] / 1024:9.0f} " + " ".join(f"{lo:6.3f}-{hi:<6.3f}{b[0]}" for _, lo, hi, b in cells))
    print("(bound: i issue, c dependent chain, D DRAM, L L2; cyc/iter: the SASS chain's cycles per comparator "
          "iteration, per sweep; cyc/narrow: a layer of one iteration, its barrier left out)")
    print(f"\nterms at B = {args.B[-1]}, ESTIMATES (ms): issue (c-scaled), the earlier model's fixed-latency chain "
          f"(c-scaled), the SASS chain{' (c-scaled)' if args.chain_c else ''}, compute (per layer the larger of "
          f"issue and SASS chain), DRAM, L2 (fast-slow)")
    print(f"{'kernels':8s} {'kernel':9s} {'issue':>7s} {'chain fixed':>11s} {'chain SASS':>10s} {'compute':>8s} "
          f"{'DRAM':>7s} {'L2':>13s}")
    for label, nm, e in terms:
        print(f"{label:8s} {nm:9s} {c * e['issue']:7.3f} {c * e['chain_fixed']:11.3f} {e['chain']:10.3f} "
              f"{e['compute']:8.3f} {e['dram']:7.3f} {e['l2'][0]:6.3f}-{e['l2'][1]:<6.3f}")
    print("\nfwd+bwd, ESTIMATES (ms):")
    paths = {"old": {"rows": ("fwd_vals", "fwd_P", "bwd_P", "bwd_vals"), "column": ("fwd_col", "bwd_col")},
             "new": {"rows": ("fwd", "bwd"), "column": ("fwd_col", "bwd_col")}}
    targets = {"rows": (0.5, 0.8, 4.0), "column": (0.1, 0.25, 1.5)}
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
            json.dump({"calibration": c, "chain_scaled": args.chain_c, "sass": have_sass, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
