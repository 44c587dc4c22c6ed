"""ESTIMATES (no GPU): netgen's ``soft_rank`` on an H100 through the lane
kernels (docs/cuda-rounds7-8.md, Round 8), beside an estimate of torchsort's
CUDA ``soft_rank`` at the same shape. Nothing here is a measurement.

    python research/lane_sweep/lanes_estimate.py [--ptx FILE.json] [--n 4096] [--B 64]

netgen (sorting network oddeven n, one lane: ranks = r^T P), fwd + bwd =
four kernels, one block per row: ``fwd`` without P (the values sweep: d,
p), ``wp_fwd`` (the lane swept back, D saved), ``wp_bwd`` (the lane's
adjoint, dL/dp), ``vals_bwd`` (the values' adjoint). Each in estimate.py's
model (recalibrated issue scale c = 1.60, within 11% on the measured
table; busiest SM, the chain, DRAM / L2 bounds, start and drain) with the
SASS per comparator visit of the kernels as compiled for sm_90
(lanes_ptx.py: the comparator loop with its one lane; vals_bwd's
comparator loop; the values sweep: 30, as groups_estimate.py). Threads per
block as the launcher picks them today (n floats of shared memory: 13
blocks fit an SM, so 256 threads) and, for comparison, 1024 (what a
launcher that knew the grid is smaller than the SM count would pick; not
built).

torchsort 0.1.10 (its isotonic_cuda.cu, read, not run): soft_rank = a
segmented sort, ``isotonic_l2_kernel`` and, backward,
``isotonic_l2_backward_kernel``, each **one thread per row** in blocks of
1024 threads: B = 64 rows are 2 warps on one SM. Each thread walks its row
in global memory (row-major [b][i]: the 32 threads of a warp touch 32
different lines, so every warp-wide access costs ~32 L1 wavefronts).
Counted from the source, per element: the forward's init loop 1 load + 4
stores, the pool-adjacent-violators loop ~2 visits per element of a
dependent chain (target -> sol[k] -> compare, the float target converted to
an index) and the reconstruction 1 load + 1 store; the backward's
partition 2 loads + 1 read-modify-write, its two block passes 1 load + 1
store. Cost model (ASSUMED, stated per term): an uncoalesced warp access
32 cycles of the SM's load/store unit, the two warps sharing it; a PAV
visit ~130 cycles of dependent latency (three L1-hit loads ~35 cycles and
the conversion; the rows' current lines fit L1), warp divergence
multiplying it by DIVERGENCE (1 = lockstep, the low end; 4 printed as the
middle); torch glue (sort, gathers, arithmetic: ~12 small launches) 5 us
each. Every number printed is an ESTIMATE.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent / "gpu_model"))

from _gpu_cost import GHZ  # noqa: E402
from estimate import sweep_ms  # noqa: E402

# torchsort's cost terms (cycles; ASSUMED, see the module doc)
LSU_UNCOALESCED = 32  # one warp-wide access to 32 different lines
PAV_VISIT = 130  # one dependent step of the PAV loop (three L1-hit loads, the float -> int conversion)
PAV_VISITS = 2.0  # visits per element (the loop backtracks; O(n) amortised)
GLUE_LAUNCHES, GLUE_US = 12, 5.0
#: today's torch sweeps (netgen/codegen/runtime/lanes.py, mode "back"), counted from its source: torch ops
#: per layer of the forward (the values sweep ~15 with the swap code, the lane's back sweep 7) and of the
#: backward (the lane's adjoint 8, the values' adjoint 8); each a launch of ~5 us (ASSUMED): launch-bound
TORCH_OPS_PER_LAYER = 15 + 7 + 8 + 8


def netgen_ms(net, B, counts, threads):
    """fwd + bwd of soft_rank (one lane) in the lane kernels: (fwd ms, bwd ms, per kernel)."""
    S, n = net.size, net.n
    per = {
        "fwd (values)": sweep_ms(net, B, 1, 1, S, 0, 30, threads, dram=4 * (n + 2 * S)),
        "wp_fwd": sweep_ms(net, B, 1, 1, S, 0, counts["wp_fwd"], threads, dram=4 * (2 * n + S), l2=4 * S),
        "wp_bwd": sweep_ms(net, B, 1, 1, S, 0, counts["wp_bwd"], threads, dram=4 * (2 * n + 2 * S), l2=8 * S),
        "vals_bwd": sweep_ms(net, B, 1, 1, S, 0, counts["vals_bwd"], threads, dram=4 * (n + 3 * S)),
    }
    return per["fwd (values)"] + per["wp_fwd"], per["wp_bwd"] + per["vals_bwd"], per


def torchsort_ms(n, B, divergence):
    """torchsort's CUDA soft_rank fwd + bwd at (n, B), one thread per row: (fwd ms, bwd ms)."""
    warps = math.ceil(B / 32)  # all on one SM while B <= 1024
    cyc = 1.0 / (GHZ * 1e9) * 1e3
    init = n * 5 * LSU_UNCOALESCED * warps
    pav = n * PAV_VISITS * PAV_VISIT * divergence
    rebuild = n * 2 * LSU_UNCOALESCED * warps
    partition = n * 4 * LSU_UNCOALESCED * warps
    passes = n * 2 * LSU_UNCOALESCED * warps
    glue = GLUE_LAUNCHES * GLUE_US / 1e3
    return (init + pav + rebuild) * cyc + glue / 2, (partition + passes) * cyc + glue / 2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptx", default=None, help="lanes_ptx.py --json output (default: compile now, ~1 minute)")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--B", type=int, default=64)
    args = ap.parse_args(argv)
    if args.ptx:
        res = json.loads(Path(args.ptx).read_text())
    else:
        out = Path(tempfile.mkdtemp()) / "lanes_ptx.json"
        subprocess.run([sys.executable, str(HERE / "lanes_ptx.py"), "--n", str(args.n), "--json", str(out)],
                       check=True, capture_output=True)
        res = json.loads(out.read_text())
    from netgen.construct import build

    def comparator_loop(name):
        # m = 1: the two-lane loop never runs; a comparator visit is the comparator loop (its one lane in
        # the odd-lane tail inside it): the largest "outside" count of the kernel's loops
        return max(lp["per_comparator"] for lp in res[f"{name} float32"]["lane_loops"])

    counts = {"wp_fwd": comparator_loop("wp_fwd"), "wp_bwd": comparator_loop("wp_bwd"),
              # vals_bwd has no lane loop: its comparator loop is what lanes_ptx.py reports as one
              "vals_bwd": max(lp["per_lane"] for lp in res["vals_bwd float32"]["lane_loops"])}
    net = build("oddeven", args.n, args.n)
    print(f"ESTIMATES (model, not measurements; H100, c = 1.60): soft_rank n = {args.n}, B = {args.B}, float32, "
          f"fwd + bwd; oddeven network ({net.size} comparators, {len(net.layer_offsets) - 1} layers); SASS per "
          f"comparator visit (sm_90, lanes_ptx.py): wp_fwd {counts['wp_fwd']}, wp_bwd {counts['wp_bwd']}, "
          f"vals_bwd {counts['vals_bwd']}, values sweep 30")
    for threads in (256, 1024):
        f, b, per = netgen_ms(net, args.B, counts, threads)
        what = "as launched" if threads == 256 else "if the launcher picked 1024: not built"
        print(f"  netgen lane kernels, {threads:4d} threads ({what}): fwd {f:.3f} + bwd {b:.3f} = {f + b:.3f} ms "
              f"(estimate; " + ", ".join(f"{k} {v:.3f}" for k, v in per.items()) + ")")
    layers = len(net.layer_offsets) - 1
    print(f"  netgen before Round 8 (torch sweeps on the device): ~{TORCH_OPS_PER_LAYER * layers} launches x {GLUE_US:.0f} us "
          f"= {TORCH_OPS_PER_LAYER * layers * GLUE_US / 1e3:.1f} ms (estimate: launch-bound)")
    for div in (1, 4):
        f, b = torchsort_ms(args.n, args.B, div)
        print(f"  torchsort 0.1.10 CUDA soft_rank, one thread per row, divergence x{div}: fwd {f:.3f} + bwd "
              f"{b:.3f} = {f + b:.3f} ms (estimate from its source, not run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
