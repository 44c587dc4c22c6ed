"""Compile the lane-sweep prototype (kernels.py) for sm_90 without a GPU:
numba-cuda's ``compile_ptx``, then ``ptxas -v`` (registers, spills) and
``cuobjdump -sass`` (the comparator loop's instructions per (comparator,
lane) pair and per comparator), for the model's estimates (estimate.py).

    python research/lane_sweep/ptx.py [--json FILE]

A process either simulates or compiles (docs/design.md): run it without
NUMBA_ENABLE_CUDASIM.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "gpu_model"))
sys.path.insert(0, str(HERE.parents[1]))


def signatures(ft):
    from numba import types

    f = types.float32 if ft == "float32" else types.float64
    a1, a2, a3 = (types.Array(f, d, "C") for d in (1, 2, 3))
    u1 = types.Array(types.uint32, 1, "C")
    tabs = (a2, u1, u1, u1, u1, types.int64)  # p, wa, wb, offs, outs, G
    return {"back_fwd": (a3, *tabs, a3, a3, types.boolean), "back_bwd": (a3, *tabs, a3, a3, a3),
            "fwd_fwd": (a3, *tabs, a3, a3, types.boolean), "fwd_bwd": (a3, *tabs, a3, a3, a3)}


def inner_loop(ins):
    """The innermost loop holding two shared loads and two shared stores
    (the lane loop of a comparator): (instructions per lane, the enclosing
    comparator loop's instructions outside it)."""
    idx = {a: i for i, (a, _) in enumerate(ins)}
    loops = []
    for i, (a, text) in enumerate(ins):
        m = re.search(r"\bBRA\s+(?:`?\(?)(0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in idx:
            loops.append((idx[int(m.group(1), 16)], i))

    def count(lo, hi, pat):
        return sum(1 for j in range(lo, hi + 1) if re.search(pat, ins[j][1]))

    lane = [lp for lp in loops if count(*lp, r"\bLDS\b") >= 2 and count(*lp, r"\bSTS\b") >= 2
            and not any(o != lp and lp[0] <= o[0] and o[1] <= lp[1] for o in loops)]
    out = []
    for lo, hi in lane:
        per = (hi - lo + 1) / max(1, count(lo, hi, r"\bLDS\b") // 2)  # unrolled copies: two loads each
        around = [o for o in loops if o[0] <= lo and hi <= o[1] and o != (lo, hi)]
        comp = min(around, key=lambda o: o[1] - o[0]) if around else None
        inner = [o for o in loops if comp and comp[0] <= o[0] and o[1] <= comp[1] and o != comp]
        outside = (comp[1] - comp[0] + 1 - sum(o[1] - o[0] + 1 for o in inner)) if comp else 0
        out.append({"per_lane": per, "per_comparator": outside, "lds": count(lo, hi, r"\bLDS\b")})
    return out


def compile_sm90(py_func, sig, ft, tmp: Path, name: str, ptxas) -> dict:
    """Compile one kernel for sm_90 (compile_ptx -> ptxas -v -> cuobjdump
    -sass): registers, spill stores, SASS count and the lane loops
    (:func:`inner_loop`)."""
    from numba import cuda

    from _gpu_sass import sass

    ptx, _ = cuda.compile_ptx(py_func, sig, cc=(9, 0), fastmath=ft == "float32")
    p = tmp / f"{name}_{ft}.ptx"
    p.write_text(ptx)
    cub = tmp / f"{name}_{ft}.cubin"
    info = subprocess.run([ptxas, "-arch=sm_90", "-v", "-o", str(cub), str(p)], capture_output=True,
                          text=True, check=True).stderr
    spill = re.search(r"(\d+) bytes spill stores", info)
    ins = sass(cub) or []
    return {"registers": int(re.search(r"Used (\d+) registers", info).group(1)),
            "spill_stores": int(spill.group(1)) if spill else 0, "sass": len(ins),
            "lane_loops": inner_loop(ins) if ins else []}


def signature(kinds, ft, wide):
    """numba types of a netgen cuda kernel's arguments (kinds as in
    netgen.codegen.cuda.kernels: f1, f2, w1, u1, i1, b1, bool)."""
    from numba import types

    f = types.float32 if ft == "float32" else types.float64
    w = types.uint32 if wide else types.uint16
    table = {"f1": types.Array(f, 1, "C"), "f2": types.Array(f, 2, "C"), "w1": types.Array(w, 1, "C"),
             "u1": types.Array(types.uint32, 1, "C"), "i1": types.Array(types.int64, 1, "C"),
             "b1": types.Array(types.int32, 1, "C"), "bool": types.boolean}
    return tuple(table[k] for k in kinds)


def netgen_kernels_table(net, kinds: dict, flags: tuple, ptxas, prefix: str) -> dict:
    """Render netgen's cuda kernels for ``net`` (``kernels_source(...,
    *flags)``), compile each kernel of ``kinds`` ({name: argument kinds})
    for sm_90 in both float types (:func:`compile_sm90`, shared variants)
    and print one line per kernel; returns {"name ft": result}."""
    import math

    import numba
    import numpy as np
    from numba import cuda

    from netgen.codegen.cuda.kernels import kernels_source
    from netgen.codegen.swap_code import swap_code
    from netgen.relax.distributions import default_relaxation

    r = default_relaxation(net)
    fts = ("float32", "float64")
    # as emit renders them: with the swap code's tame copy (docs/cuda-round10.md)
    _, src, _ = kernels_source(net.n, net.k, 227 * 1024, {ft: swap_code(r, 0, ft, steepness="s") for ft in fts}, *flags,
                               tame_swaps={ft: swap_code(r, 0, ft, steepness="s", tame=True) for ft in fts})
    ns = {"cuda": cuda, "numba": numba, "np": np, "math": math}
    exec(compile(src, f"<{prefix} kernels>", "exec"), ns)
    tmp = Path(tempfile.mkdtemp(prefix=f"{prefix}_ptx_"))
    res = {}
    for ft in ("float32", "float64"):
        for name, kind in kinds.items():
            fn = ns[f"_{name}_f{32 if ft == 'float32' else 64}_s"]
            out = res[f"{name} {ft}"] = compile_sm90(fn.py_func, signature(kind, ft, net.n >= 65536), ft, tmp, name,
                                                     ptxas)
            loops = out["lane_loops"]
            print(f"  {name:8s} {ft}: {out['registers']:3d} registers, {out['spill_stores']} bytes spilled, "
                  f"{out['sass']} SASS; "
                  f"lane loops (per pair, per comparator outside): "
                  f"{[(lp['per_lane'], lp['per_comparator']) for lp in loops] or '-'}", flush=True)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        sys.exit("ptx.py compiles: run it without NUMBA_ENABLE_CUDASIM")
    from _gpu_sass import _tool
    from kernels import make

    ptxas = _tool("ptxas")
    res = {}
    tmp = Path(tempfile.mkdtemp(prefix="lane_sweep_ptx_"))
    print("lane-sweep prototype, sm_90 (compile_ptx -> ptxas -v -> cuobjdump -sass); per kernel: registers, spills, "
          "the lane loop's SASS per (comparator, lane) pair, the comparator loop's SASS outside the lane loop")
    for ft in ("float32", "float64"):
        kerns = make(ft)
        for name, sig in signatures(ft).items():
            c = compile_sm90(kerns[name].py_func, sig, ft, tmp, name, ptxas)
            best = max(c["lane_loops"], key=lambda lp: lp["per_comparator"]) if c["lane_loops"] else {}
            res[f"{name} {ft}"] = {"registers": c["registers"], "spill_stores": c["spill_stores"], "sass": c["sass"],
                                   "per_lane": best.get("per_lane"), "per_comparator": best.get("per_comparator")}
            r = res[f"{name} {ft}"]
            print(f"  {name:8s} {ft}: {r['registers']:3d} registers, {r['spill_stores']} bytes spilled, {r['sass']} "
                  f"SASS; lane loop {r['per_lane'] if r['per_lane'] is not None else '-'} per pair, comparator loop "
                  f"{r['per_comparator'] if r['per_comparator'] is not None else '-'} outside it", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
