"""Compile netgen's lane-group kernels (netgen/codegen/cuda/groups.py) for
sm_90 without a GPU, as rendered for a sorter: numba-cuda's
``compile_ptx``, ``ptxas -v`` (registers, spills), ``cuobjdump -sass`` (the
lane loop's SASS per (comparator, lane) pair and the comparator loop's
outside it), for estimate.py's per-pair counts.

    python research/lane_sweep/groups_ptx.py [--n 1024] [--json FILE]

Run it without NUMBA_ENABLE_CUDASIM (a process either simulates or
compiles).
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        sys.exit("groups_ptx.py compiles: run it without NUMBA_ENABLE_CUDASIM")
    from _gpu_sass import _tool
    from ptx import netgen_kernels_table
    from netgen.codegen.cuda.kernels import GROUP_ARGS
    from netgen.construct import build

    net = build("oddeven", args.n, args.n)
    ptxas = _tool("ptxas")
    if not ptxas:
        print("no ptxas: nothing compiled", file=sys.stderr)
        return 2
    print(f"lane-group kernels, oddeven n = {net.n} (forward sweep), sm_90, shared variants: registers, spills, "
          "the lane loop's SASS per (comparator, lane) pair, the comparator loop's SASS outside it")
    res = netgen_kernels_table(net, GROUP_ARGS, (True,), ptxas, "groups")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
