"""ESTIMATES (no GPU): the lane-sweep kernels (docs/cuda-round6.md) on an
H100, with the recalibrated model's figures (research/gpu_model:
issue rate, c = 1.60, DRAM 3 TB/s, L2 4.4 TB/s, busiest SM, start and
drain).

    python research/lane_sweep/estimate.py [--ptx FILE.json]

Per case the lanes of each row are split into groups of G lanes, one block
per (row, group) with G n floats of shared memory; every block walks all
comparators (its per-comparator SASS) and runs the planned (comparator,
lane) pairs of its lanes (the per-pair SASS). Two instruction counts are
used and printed: the prototype's as compiled (research/lane_sweep/ptx.py,
int64 indices: ~50 SASS per pair) and the design's (today's rows kernels'
uint32 rank sweeps, ~14 per pair and ~40 per comparator visit, read from
their SASS by the calibrated model). Per kernel: max(compute, DRAM, L2) +
start, compute = waves x (c x issue of the busiest SM's blocks, or the
chain: per layer ceil(width / threads) x (an L2 table load + G dependent
shared round trips) + a barrier). Sorting's backward recomputes the
forward sweep of its lanes (D is not kept: it is 8x P at n = 1024), so
memory stays P-sized; the scratch D of the recompute is per resident block
(a persistent grid), through DRAM.

Every number printed is an ESTIMATE.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parent / "gpu_model"))

from _gpu_cost import DRAM_BW, GHZ, ISSUE, L2_FAST, LAT_LAUNCH, LAT_SYNC, SMEM_RESERVED, SMEM_SM, SMS  # noqa: E402

C = 1.60  # the recalibrated issue scale (research/gpu_model, Round 6)
DESIGN = {"per_pair": 14.0, "per_comparator": 40.0}  # uint32 rank sweeps, from today's kernels' SASS
LAT_TABLE, LAT_LANE = 300, 45  # cycles: a comparator's table and p loads (L2), one lane's LDS -> FFMA -> STS


def planned(net, direction):
    """(pairs per row, per-comparator lane counts) of the plan in ``direction``."""
    import numpy as np

    from netgen.codegen.runtime.tables import plan

    clo, chi, _ = plan(net.n, net.comparators, net.layer_offsets, list(net.outputs), direction=direction)
    m = np.maximum(np.asarray(chi) - np.asarray(clo), 0)
    return int(m.sum()), m


def sweep_ms(net, B, lanes, G, pairs, per_pair, per_comp, threads=1024, dram=0.0, l2=0.0, visits=None):
    """One lane-sweep kernel: B x ceil(lanes / G) blocks of G lanes;
    ``visits``: the comparators a block visits (default: all of them;
    the lane-group kernels visit their group's spans only)."""
    groups = math.ceil(lanes / G)
    blocks = B * groups
    shared = G * net.n * 4
    occ = max(1, min(SMEM_SM // (shared + SMEM_RESERVED), 2048 // threads))
    per_sm = math.ceil(blocks / SMS)
    waves = math.ceil(per_sm / occ)
    # warp-instructions of one block: every comparator visited once, its lanes' planned pairs
    comps = net.size if visits is None else visits
    warp = math.ceil(comps / 32) * per_comp + pairs / groups / 32 * per_pair
    issue = C * (per_sm / waves) * warp / ISSUE  # cycles per wave on the busiest SM
    widths = [e - s for s, e in zip(net.layer_offsets[:-1], net.layer_offsets[1:])]
    chain = sum(math.ceil(w / threads) * (LAT_TABLE + min(G, lanes) * LAT_LANE) + LAT_SYNC for w in widths)
    compute = waves * max(issue, chain) / (GHZ * 1e9) * 1e3
    return max(compute, B * dram / DRAM_BW * 1e3, B * l2 / L2_FAST * 1e3) + LAT_LAUNCH / (GHZ * 1e9) * 1e3


def cases(sx):
    from netgen.compiler import compile_network
    from netgen.construct import build

    out = []
    for n, B in ((1024, 64), (4096, 16)):
        net = build("oddeven", n, n)
        pairs, _ = planned(net, "forward")
        P = 4 * n * n  # bytes of P per row
        for G in (8, 16, 32):
            for label, cnt in (("prototype", sx), ("design", DESIGN)):
                fwd = sweep_ms(net, B, n, G, pairs, cnt["per_pair"], cnt["per_comparator"], dram=P,
                               l2=4 * net.size * math.ceil(n / G))
                # backward: recompute the forward sweep of the group's lanes into scratch D (written, read
                # back: DRAM), then the adjoint sweep reading it; dL/dP in; partial dL/dp per group out
                rec = sweep_ms(net, B, n, G, pairs, cnt["per_pair"] + 2, cnt["per_comparator"], dram=4 * pairs,
                               l2=4 * net.size * math.ceil(n / G))
                adj = sweep_ms(net, B, n, G, pairs, cnt["per_pair"] + 4, cnt["per_comparator"] + 2,
                               dram=P + 4 * pairs + 4 * net.size * math.ceil(n / G))
                keep = 4 * net.size * math.ceil(n / G)  # partial dL/dp per group, per row
                slots = SMS * max(1, min(SMEM_SM // (G * n * 4 + SMEM_RESERVED), 2))
                scratch = slots * 4 * pairs / math.ceil(n / G)
                out.append({"case": f"sort n={n} B={B}", "G": G, "counts": label, "fwd_ms": fwd,
                            "bwd_ms": rec + adj, "total_ms": fwd + rec + adj, "pairs_per_row": pairs,
                            "P_MB": B * P / 1e6, "extra_MB": (B * keep + scratch) / 1e6})
    net = compile_network(build("splitter", 10450, 5)).network
    pairs, _ = planned(net, "back")
    for B in (64, 500, 4096):
        for label, cnt in (("prototype", sx), ("design", DESIGN)):
            for G, what in ((5, "rows, one group of k = 5 lanes"), (1, "rows, 5 groups of 1 lane")):
                # rows: values sweep (today's, ~0.5 x the column forward), back sweep with P out (coalesced,
                # float4), D kept lane-major (coalesced), the G sweep with dL/dP in, the values' adjoint
                vals = 2 * sweep_ms(net, B, 1, 1, net.size, 0, 30, dram=4 * (net.n + 2 * net.size))
                fwd = sweep_ms(net, B, 5, G, pairs, cnt["per_pair"], cnt["per_comparator"],
                               dram=4 * (5 * net.n + 5 * net.size), l2=4 * net.size * math.ceil(5 / G))
                bwd = sweep_ms(net, B, 5, G, pairs, cnt["per_pair"] + 2, cnt["per_comparator"] + 2,
                               dram=4 * (5 * net.n + 5 * net.size + net.size * math.ceil(5 / G)))
                out.append({"case": f"top-5 of 10450 {what} B={B}", "G": G, "counts": label,
                            "total_ms": vals + fwd + bwd, "fwd_ms": vals / 2 + fwd, "bwd_ms": vals / 2 + bwd})
            col = 2 * sweep_ms(net, B, 1, 1, net.size, cnt["per_pair"], cnt["per_comparator"],
                               dram=4 * (net.n + 3 * net.size))
            out.append({"case": f"top-5 of 10450 column (forward sweep, 1 lane beside the values) B={B}", "G": 1,
                        "counts": label, "total_ms": col})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptx", default=None, help="ptx.py --json output (default: compile now)")
    args = ap.parse_args(argv)
    if args.ptx:
        res = json.loads(Path(args.ptx).read_text())
    else:
        import subprocess
        import tempfile

        out = Path(tempfile.mkdtemp()) / "ptx.json"
        subprocess.run([sys.executable, str(HERE / "ptx.py"), "--json", str(out)], check=True, capture_output=True)
        res = json.loads(out.read_text())
    f = res["fwd_fwd float32"]
    sx = {"per_pair": f["per_lane"], "per_comparator": f["per_comparator"]}
    print(f"ESTIMATES (model, not measurements; H100, c = {C}): lane-sweep kernels; SASS counts: prototype "
          f"{sx['per_pair']:.0f} per pair / {sx['per_comparator']:.0f} per comparator, design "
          f"{DESIGN['per_pair']:.0f} / {DESIGN['per_comparator']:.0f}")
    for row in cases(sx):
        extra = (f"  P {row['P_MB']:.0f} MB, extra {row['extra_MB']:.0f} MB ({row['extra_MB'] / row['P_MB']:.2f} x P); "
                 f"{row['pairs_per_row'] / 1e6:.1f} M planned pairs per row") if "P_MB" in row else ""
        parts = f"fwd {row['fwd_ms']:.2f} + bwd {row['bwd_ms']:.2f} = " if "fwd_ms" in row else ""
        print(f"  {row['case']:62s} G={row['G']:2d} {row['counts']:9s}: {parts}{row['total_ms']:.2f} ms (estimate)"
              + extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
