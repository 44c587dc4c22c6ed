"""The launches of the lane kernels (:mod:`.lane_bodies`): ``W P`` (m lanes
swept back) and ``P V`` (d lanes swept forward) for the Layer's
``back``/``fwd``, with their backward, as one ``autograd.Function``
(docs/cuda-rounds7-8.md, Round 8).

* forward: ``fwd`` without P (values, d, p, bad; one block per row),
  then ``wp_fwd`` / ``pv_fwd`` on B x groups blocks of G lanes (G n floats
  of wire arrays each), keeping each lane's difference at each comparator
  (D: B x m x size floats) when a gradient is wanted;
* backward: dL/dp zeroed, ``wp_bwd`` / ``pv_bwd`` on the same grid
  (dL/dW or dL/dV, dL/dp added atomically), then ``vals_bwd`` (one block
  per row): dL/dx and dL/ds.

The Layer uses them for 1 <= m <= :data:`LANE_KERNEL_MAX` lanes (the
operators: soft_rank and topk_mask have m = 1) where the module holds
them; else the torch sweeps of :mod:`netgen.codegen.runtime.lanes`. A
row with a NaN/inf (or a bad steepness) gives NaN results and gradients,
found on the GPU without a host synchronisation. Once differentiable.

Real code, copied into every generated cuda module by source extraction
(:data:`PARTS`, :data:`STATE`); it reads the launcher's pieces.
"""

from __future__ import annotations

import torch

from ..runtime.common import refuse_second_order
from ..runtime.tables import _K, _N, _SIZE
from .batch import INDEX_LIMIT
from .launch import _dummy, _launch, _shared_room, _tables
from .packing import _np_dtype
from .ops import _rows_forward

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("KERNELS",)
KERNELS: dict = {}

#: the most lanes the Layer sends through the lane kernels (more go to the torch sweeps)
LANE_KERNEL_MAX = 64
#: the most lanes one block sweeps
LANE_CAP = 32
_LANE_GEO: dict = {}  # (device, dtype, m, kernel family) -> (G, groups, geo on the device): at most 64 m

#: the module-level statements a generated module copies
STATE = ("LANE_KERNEL_MAX", "LANE_CAP", "_LANE_GEO")


def _lane_rows(m):
    """The most rows of ``m`` lanes one launch of the lane kernels takes:
    their 32-bit indices must hold (rows m size, rows m n, rows m k <
    INDEX_LIMIT); 0 where not one row fits."""
    return (INDEX_LIMIT - 1) // (m * max(_SIZE, _N, _K, 1))


def _lane_kernels_for(x, m):
    """Whether ``m`` lanes of the rows of x (..., n) run in the lane
    kernels: the module holds them, 1 <= m <= LANE_KERNEL_MAX, one row's
    indices fit 32 bits (a larger batch runs in launches of
    :func:`_lane_rows` rows) and torch.compile is not tracing (the launches
    are opaque to it: the torch sweeps trace)."""
    return ((_np_dtype(x), "wp_fwd", "global") in KERNELS and 1 <= m <= LANE_KERNEL_MAX
            and not torch.compiler.is_compiling() and _lane_rows(m) > 0)


def _lane_geo(device, dt, m, family):
    """G (lanes per block: the most, <= LANE_CAP and m, whose rows of n
    floats fit the shared variants of both kernels of ``family``; at least
    1, the global variant then), groups per row and the kernels' uint32
    ``geo`` (G, groups, 0, m; the lane kernels take their item from the
    block index, not a count), uploaded once per (device, dtype, m)."""
    key = (device, dt, m, family)
    got = _LANE_GEO.get(key)
    if got is None:
        row = _N * dt.itemsize
        names = (family + "_fwd", family + "_bwd")
        if any((dt, name, "shared") not in KERNELS for name in names):
            fit = 1
        else:
            fit = _shared_room(device, dt, names) // row
        G = max(1, min(LANE_CAP, m, fit))
        groups = -(-m // G)
        geo = torch.tensor([G, groups, 0, m], dtype=torch.int64).to(torch.uint32).to(device)
        got = _LANE_GEO[key] = (G, groups, geo)
    return got


class _LaneKernels(torch.autograd.Function):
    """W P (``back``: lanes (B, m, k) -> (B, m, n)) or P V (lanes (B, n, d)
    -> (B, k, d)) of the rows x2 (B, n) in the lane kernels; s a 1-element
    tensor. Gradients to x2, s and the lanes."""

    @staticmethod
    def forward(ctx, x2, s, lanes, back):
        ctx.set_materialize_grads(False)
        B = x2.shape[0]
        m = lanes.shape[1] if back else lanes.shape[2]
        want = any(ctx.needs_input_grad[:3])
        out = x2.new_empty((B, m, _N) if back else (B, _K, m))
        _, _, ds, ps, _, bad = _rows_forward(x2, s, False, False)
        family = "wp" if back else "pv"
        D = x2.new_empty((B * m * _SIZE,)) if want else _dummy(x2, 1)
        if B:
            t = _tables(x2.device)
            G, groups, geo = _lane_geo(x2.device, _np_dtype(x2), m, family)
            _launch(family + "_fwd", x2, B * groups, (lanes.reshape(B, -1), s, t["wa"], t["wb"], t["offs"], t["outs"],
                                                      ps, bad, out.view(B, -1), D, geo, want), G)
        if want:
            ctx.save_for_backward(x2, s, lanes, ds, ps, D, bad)
        ctx.back, ctx.m = back, m
        return out

    @staticmethod
    def backward(ctx, g):
        if g is None:
            return None, None, None, None
        x2, s, lanes, ds, ps, D, bad = ctx.saved_tensors
        B, m, family = ds.shape[0], ctx.m, "wp" if ctx.back else "pv"
        want_gs = bool(ctx.needs_input_grad[1])
        gx = ds.new_empty((B, _N))
        gl = ds.new_empty(lanes.shape)
        gs = ds.new_zeros((B,)) if want_gs else _dummy(ds, 1)
        if B:
            t = _tables(ds.device)
            G, groups, geo = _lane_geo(ds.device, _np_dtype(ds), m, family)
            gp = ds.new_zeros((B, _SIZE))
            _launch(family + "_bwd", ds, B * groups, (g.to(ds.dtype).reshape(B, -1).contiguous(), s, t["wa"], t["wb"],
                                                      t["offs"], t["outs"], ps, D, gp, gl.view(B, -1), bad, geo), G)
            _launch("vals_bwd", ds, B, (s, t["wa"], t["wb"], t["offs"], t["outs"], _dummy(ds, 2), ds, ps, gp, bad, gx,
                                        gs, False, True, want_gs), 1)
        gs = gs.sum().reshape(s.shape) if want_gs else None
        gx, gs, gl = refuse_second_order((gx, gs, gl), (x2, s, lanes))
        return (gx if ctx.needs_input_grad[0] else None, gs, gl if ctx.needs_input_grad[2] else None, None)


def _lane_kernels(x2, s, lanes, back):
    """W P (``back``) or P V of the rows x2 (B, n) in the lane kernels:
    lanes (B, m, k) -> (B, m, n), or (B, n, d) -> (B, k, d); in launches of
    at most :func:`_lane_rows` rows (their 32-bit indices), joined."""
    lanes = lanes.to(x2.dtype).contiguous()
    B = x2.shape[0]
    step = _lane_rows(lanes.shape[1] if back else lanes.shape[2])
    if B <= step:
        return _LaneKernels.apply(x2, s, lanes, back)
    return torch.cat([_LaneKernels.apply(x2[b:b + step], s, lanes[b:b + step], back) for b in range(0, B, step)])


#: the functions a generated module copies, in order
PARTS = (_lane_rows, _lane_kernels_for, _lane_geo, _LaneKernels, _lane_kernels)
