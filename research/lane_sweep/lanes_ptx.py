"""Compile netgen's lane kernels (W P and P V from given lanes:
netgen/codegen/cuda/lane_bodies.py, docs/cuda-rounds7-8.md, Round 8) and
``vals_bwd`` for sm_90 without a GPU, as rendered for a network:
numba-cuda's ``compile_ptx``, ``ptxas -v`` (registers, spills),
``cuobjdump -sass`` (the lane loop's SASS per (comparator, lane) pair and
the comparator loop's outside it), for lanes_estimate.py.

    python research/lane_sweep/lanes_ptx.py [--kind oddeven --n 4096 --k 4096] [--json FILE]

Run it without NUMBA_ENABLE_CUDASIM (a process either simulates or
compiles). Exit status 2 where ptxas is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "gpu_model"))
sys.path.insert(0, str(HERE.parents[1]))

#: the kernels compiled (vals_bwd: the backward's second launch)
NAMES = ("wp_fwd", "wp_bwd", "pv_fwd", "pv_bwd", "vals_bwd")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", default="oddeven")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=None, help="outputs (default n)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        sys.exit("lanes_ptx.py compiles: run it without NUMBA_ENABLE_CUDASIM")
    from _gpu_sass import _tool
    from ptx import netgen_kernels_table
    from netgen.codegen.cuda.kernels import GROUP_ARGS, LANE_ARGS
    from netgen.construct import build

    ptxas = _tool("ptxas")
    if not ptxas:
        print("no ptxas: nothing compiled", file=sys.stderr)
        return 2
    net = build(args.kind, args.n, args.k or args.n)
    kinds = {**LANE_ARGS, "vals_bwd": GROUP_ARGS["vals_bwd"]}
    print(f"lane kernels, {args.kind} n = {net.n} k = {net.k} ({net.size} comparators), sm_90, shared variants: "
          "registers, spills, the lane loop's SASS per (comparator, lane) pair, the comparator loop's outside it")
    res = netgen_kernels_table(net, {name: kinds[name] for name in NAMES}, (False, False, True), ptxas, "lanes")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
