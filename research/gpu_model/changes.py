"""ESTIMATES: the recalibrated model (c = 1.60) on the kernel changes of docs/cuda-kernels.md, Round 6 (b), one after another (python research/gpu_model/changes.py; needs gpu_model.py's compile cache)."""
import sys, tempfile, copy, math
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _gpu_cost import *
from _gpu_sass import ROOT, build, kernel_sass
from netgen.compiler import compile_network
from netgen.construct import build as bn
import numpy as np
net = compile_network(bn("splitter", 10450, 5)).network
st = Structure(net)
res = build("new", ROOT, Path(tempfile.gettempdir())/"netgen_gpu_model", 10450, 5)
sx = {nm: kernel_sass(res, nm, res["rcp_per_comparator"], FROM_DRAM.get(nm, ())) for nm in ("fwd","bwd","fwd_col","bwd_col")}
ks0 = kernels("new", st, sx)
c = 1.60
# dense rank-major D: sectors per warp and rank = distinct sectors of r*size + i over active lanes
sec = 0
for _, ix in st.groups():
    for r in range(st.k):
        on = (st.clo[ix] <= r) & (r < st.chi[ix])
        if on.any(): sec += len(np.unique((r * st.size + ix[on]) * 4 // 32))
print("rank-major D sectors per row", sec, "vs", st.scatter_sectors())
def show(label, ks):
    cells=[]
    for p in ("rows","column"):
        cells.append(p+" "+" / ".join("%.2f" % path_ms(ks, p, B, c) for B in (64,500,4096)))
    print("%-60s %s" % (label, "   ".join(cells)))
show("this checkout (model, c = 1.60; the rows loops outside on uint32 since 10b82b6)", ks0)
ks = copy.deepcopy(ks0)
for nm in ("fwd","bwd"): ks[nm]["scatter"] = sec*32
show("+ D rank-major (coalesced: %d sectors per row)" % sec, ks)
# outside loops vectorized: per element fill 1.0, load 3.0, store 3.0 (float4 + uint32 counters; the uint32 part is built)
vec = {"fill": 1.0, "load": 3.0, "store": 3.0}
for nm in ("fwd","bwd"):
    sxx = dict(sx[nm]); sxx["elements"] = vec
    spec = {"fwd": [("load", st.n, 4*st.n), ("fill", st.k*st.n, 0), ("store", st.k*st.n, 4*st.k*st.n)],
            "bwd": [("fill", st.k*st.n, 0), ("load", st.k*st.n, 4*st.k*st.n), ("fill", st.n, 0), ("store", st.n, 4*st.n)]}[nm]
    ks[nm]["outside"] = phases(st, sxx, spec, ks[nm]["threads"])
show("+ loops outside the sweeps: uint32, float4 (fill 1, load/store 3 per element)", ks)
# column: the same for its loops, and fwd_col without saving d (recompute in bwd? no) -> col per-element
for nm in ("fwd_col","bwd_col"):
    sxx = dict(sx[nm]); sxx["elements"] = {"fill": 1.0, "load": 4.0, "store": 3.0}
    spec = [("load", st.n, 4*st.n)] if nm=="fwd_col" else [("fill", 2*st.n, 0), ("store", st.n, 4*st.n)]
    ks[nm]["outside"] = phases(st, sxx, spec, ks[nm]["threads"])
show("+ column loops outside vectorized", ks)
# rows: split the 5 ranks into 5 lane blocks at B <= 132 (B=64): model as issue per SM /5 for the rank sweep layers
def split(ks, nm, parts):
    k2 = copy.deepcopy(ks[nm]); k2["blocks"] = parts
    # each block runs all layers' comparator bodies but 1/parts of the pair work: approximate: issue/parts*1.6
    k2["layers"] = [(i/parts*1.6, ch) for i, ch in k2["layers"]]
    k2["warp_instr"] = sum(i for i, _ in k2["layers"])
    k2["outside"] = [(i/parts, ch/parts, d/parts) for i, ch, d in k2["outside"]]
    return k2
for B in (64,):
    ks2 = copy.deepcopy(ks); ks2["fwd"] = split(ks, "fwd", 5); ks2["bwd"] = split(ks, "bwd", 5)
    print("  rows at B = 64 with the 5 ranks over 5 blocks (lane groups of 1):", "%.2f" % path_ms(ks2, "rows", 64, c))
# column: two blocks per SM -> the busiest SM at B = 64 has 1 row; fwd_col also at B=500: waves 2 ->
for B in (64,500,4096):
    e = [estimate(ks[nm], B, c) for nm in ("fwd_col","bwd_col")]
    print("  column terms B=%d:" % B, [("%.3f" % x["compute"], "%.3f" % x["dram"], "%.3f" % x["l2"][0]) for x in e])
