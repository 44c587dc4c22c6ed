"""ESTIMATES (no GPU): netgen's lane-group kernels (netgen/codegen/cuda/
groups.py) for sorting on an H100, with the SASS counts of the kernels as
compiled (groups_ptx.py: the lane loop's SASS per (comparator, lane) pair
and the comparator loop's outside it) in estimate.py's model (calibrated
issue scale c = 1.60, busiest SM, the chain, DRAM / L2 bounds).

    python research/lane_sweep/groups_estimate.py [--ptx FILE.json]

Per case: forward = the values sweep (today's ``fwd`` without P) + grp_fwd
(B x groups blocks of G input columns, each visiting its group's spans of
comparators only: ``netgen.codegen.cuda.layout.spans``; the figure
visiting every comparator is printed beside it); backward = grp_bwd on a persistent
grid of one block per resident slot (the group's sweep recomputed into the
block's dense scratch D of G x size floats, then the adjoint sweep) +
vals_bwd. G is the most columns (<= 32) whose G n float32 fit the opt-in
227 KB. Memory beyond P: the scratch D of the persistent grid, dL/dp (B x
size) and d, p (2 B x size). Every number printed is an ESTIMATE.
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

from _gpu_cost import SMEM_RESERVED, SMEM_SM, SMS  # noqa: E402
from estimate import planned, sweep_ms  # noqa: E402

OPT_IN = 232_448 - 16  # an H100's opt-in dynamic shared memory less the kernels' static


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ptx", default=None, help="groups_ptx.py --json output (default: compile now, n = 1024)")
    args = ap.parse_args(argv)
    if args.ptx:
        res = json.loads(Path(args.ptx).read_text())
    else:
        out = Path(tempfile.mkdtemp()) / "groups_ptx.json"
        subprocess.run([sys.executable, str(HERE / "groups_ptx.py"), "--json", str(out)], check=True,
                       capture_output=True)
        res = json.loads(out.read_text())
    from netgen.codegen.cuda.layout import spans
    from netgen.codegen.runtime.tables import plan
    from netgen.construct import build

    f = res["grp_fwd float32"]["lane_loops"][0]
    save, adj = res["grp_bwd float32"]["lane_loops"][:2]
    vb = res["vals_bwd float32"]["lane_loops"][0]
    print(f"ESTIMATES (model, not measurements; H100, c = 1.60): lane-group kernels as compiled for sm_90; SASS "
          f"per pair / per comparator: grp_fwd {f['per_lane']:.1f} / {f['per_comparator']}, grp_bwd save "
          f"{save['per_lane']:.1f} / {save['per_comparator']}, adjoint {adj['per_lane']:.1f} / "
          f"{adj['per_comparator']}")
    for n, B, softsort in ((1024, 64, "3.49 measured"), (4096, 16, "~14 extrapolated, not measured")):
        net = build("oddeven", n, n)
        pairs, _ = planned(net, "forward")
        clo, chi, _ = plan(n, net.comparators, net.layer_offsets, list(net.outputs), direction="forward")
        S = net.size
        P = 4 * n * n
        for G in sorted({min(32, OPT_IN // (4 * n)), 16, 8}, reverse=True):
            if G * 4 * n > OPT_IN:
                continue
            groups = math.ceil(n / G)
            sp = spans(clo, chi, net.layer_offsets, n, G)
            seen = float((sp[..., 1] - sp[..., 0]).mean(axis=0).sum())  # comparators a block visits, on average
            # the values sweep (one block per row) and its adjoint (vals_bwd: the swap code's derivative)
            vals = sweep_ms(net, B, 1, 1, S, 0, 30, dram=4 * (n + 2 * S))
            vbwd = sweep_ms(net, B, 1, 1, S, 0, vb["per_comparator"], dram=4 * (n + 3 * S))
            per_sm = max(1, SMEM_SM // (G * n * 4 + SMEM_RESERVED))
            slots = SMS * per_sm

            def lanes(v):
                """grp_fwd, the recompute and the adjoint, each block visiting v comparators per row."""
                fwd = sweep_ms(net, B, n, G, pairs, f["per_lane"], f["per_comparator"], dram=P, l2=8 * v * groups,
                               visits=v)
                rec = sweep_ms(net, B, n, G, pairs, save["per_lane"], save["per_comparator"], dram=4 * pairs,
                               l2=8 * v * groups, visits=v)
                ad = sweep_ms(net, B, n, G, pairs, adj["per_lane"], adj["per_comparator"],
                              dram=P + 4 * pairs + 4 * v * groups, l2=8 * v * groups, visits=v)
                return fwd, rec, ad

            fwd, rec, ad = lanes(seen)
            every = vals + vbwd + sum(lanes(S))
            scratch = min(slots, B * groups) * G * S * 4
            extra = scratch + 3 * B * S * 4
            total = vals + fwd + rec + ad + vbwd
            print(f"  sort n={n} B={B} G={G:2d} ({groups} groups per row, {per_sm} block(s) per SM, {seen / S:.0%} of "
                  f"the comparators visited per block): fwd {vals + fwd:.2f} (values {vals:.2f}) + bwd "
                  f"{rec + ad + vbwd:.2f} (recompute {rec:.2f}, adjoint {ad:.2f}, values' adjoint {vbwd:.2f}) = "
                  f"{total:.2f} ms (estimate; every comparator visited: {every:.2f}; SoftSort {softsort}); "
                  f"P {B * P / 1e6:.0f} MB, extra {extra / 1e6:.0f} MB ({extra / (B * P):.2f} x P)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
