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
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "gpu_model"))
sys.path.insert(0, str(HERE.parents[1]))


def signature(kinds, ft, wide):
    from numba import types

    f = types.float32 if ft == "float32" else types.float64
    w = types.uint32 if wide else types.uint16
    table = {"f1": types.Array(f, 1, "C"), "f2": types.Array(f, 2, "C"), "w1": types.Array(w, 1, "C"),
             "u1": types.Array(types.uint32, 1, "C"), "i1": types.Array(types.int64, 1, "C"),
             "b1": types.Array(types.int32, 1, "C"), "bool": types.boolean}
    return tuple(table[k] for k in kinds)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        sys.exit("groups_ptx.py compiles: run it without NUMBA_ENABLE_CUDASIM")
    import math

    import numba
    import numpy as np
    from numba import cuda

    from _gpu_sass import _tool
    from ptx import compile_sm90
    from netgen.codegen.cuda.kernels import GROUP_ARGS, kernels_source
    from netgen.codegen.swap_code import swap_code
    from netgen.construct import build
    from netgen.relax.distributions import default_relaxation

    net = build("oddeven", args.n, args.n)
    r = default_relaxation(net)
    _, src, _ = kernels_source(net.n, net.k, 227 * 1024, {ft: swap_code(r, 0, ft, steepness="s")
                                                           for ft in ("float32", "float64")}, True)
    ns = {"cuda": cuda, "numba": numba, "np": np, "math": math}
    exec(compile(src, "<group kernels>", "exec"), ns)
    ptxas = _tool("ptxas")
    tmp = Path(tempfile.mkdtemp(prefix="groups_ptx_"))
    res = {}
    print(f"lane-group kernels, oddeven n = {net.n} (forward sweep), sm_90, shared variants: registers, spills, "
          "the lane loop's SASS per (comparator, lane) pair, the comparator loop's SASS outside it")
    for ft in ("float32", "float64"):
        for name, kinds in GROUP_ARGS.items():
            fn = ns[f"_{name}_f{32 if ft == 'float32' else 64}_s"]
            out = res[f"{name} {ft}"] = compile_sm90(fn.py_func, signature(kinds, ft, net.n >= 65536),
                                                     ft, tmp, name, ptxas)
            loops = out["lane_loops"]
            print(f"  {name:8s} {ft}: {out['registers']:3d} registers, {out['spill_stores']} bytes spilled, "
                  f"{out['sass']} SASS; "
                  f"lane loops (per pair, per comparator outside): "
                  f"{[(lp['per_lane'], lp['per_comparator']) for lp in loops] or '-'}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
