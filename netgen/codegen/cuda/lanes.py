"""How a generated ``cuda`` module runs a lane sweep: the one launch
interface of the lane-sweep kernel family (:mod:`netgen.codegen.cuda.kernels`)
that the ops (:mod:`.ops`) call for every path: the rows with P, values
only, the column, and the operators' ``W P`` / ``P V``.

* :func:`lanes_forward` and :func:`lanes_backward` take a path as (sweep
  ``kind``: "back" for W P, "fwd" for P V; ``init``: the lanes given,
  the identity, or a one-hot lane at y; ``m`` lanes, 0 for the values
  alone) and plan its launches (:func:`lane_plan`): where a row's lanes and
  values fit one block, **one launch** (the values sweep and the lanes in
  the same block, as the kernels always did for the rows and the column);
  else a launch for the values and one for the lane groups (G lanes per
  block, the grid rows x groups), whose backward adds dL/dp atomically;
  where not even one lane row fits a block, the global-scratch variant.
  This is what makes the rows with P run as **rank groups** on GPUs with
  less shared memory than k n floats (A100 163 KB, L4 / 4090 99 KB, T4
  64 KB; an H100 above k n = 58,096), and sorting as groups of input
  columns spread over 32-128 blocks per row.
* **What the backward keeps**: d and p per comparator and row, and D (the
  lanes' differences, m x size per row) where :func:`keep_d` says so (the
  plan's mode for P, the same budget for other lanes); else the backward
  recomputes each group's sweep into a scratch D per block, on a
  persistent grid of as many blocks as the device holds at once (so the
  scratch is bounded by the device, not the batch: sorting's memory stays
  under 2x P).
* **32-bit indices**: a launch covers at most ``INDEX_LIMIT`` // (lanes x
  size) rows (the kernels index d, p, dL/dp and D with one 32-bit flat
  index).

Real code, copied into generated modules by source extraction
(:data:`STATE`, :data:`PARTS`); it reads the emitter's constants and the
launcher's pieces (:data:`READS`; stand-ins here).
"""

from __future__ import annotations

import torch

from ..runtime.tables import _K, _N, _SIZE
from .launch import NS, SIMULATED, _launch, _np_dtype, _tables, _variant

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("SAVE_D", "SAVE_PER_KN", "INDEX_LIMIT", "SHARED_LIMIT", "SM_SHARED", "KERNELS", "_LIMITS", "_handle",
         "_DIRECTION")
SAVE_D = True
SAVE_PER_KN = 4
INDEX_LIMIT = 2**32
SHARED_LIMIT = 227 * 1024
SM_SHARED = 228 * 1024
KERNELS: dict = {}
_LIMITS: dict = {}
_DIRECTION = "back"


def _handle(device_index, dtype, name, variant):  # pragma: no cover - the launcher's
    raise NotImplementedError


# ---------------------------------------------------------------- state (copied)
#: the kernels' ``init``: the lanes given (W or V), the identity (P), a one-hot lane at y (the column)
INIT_GIVEN, INIT_EYE, INIT_ONEHOT = 0, 1, 2
#: the most lanes one block runs (tests lower it to get several groups per row)
LANE_CAP = 32
#: the simulator's blocks resident at once (a persistent grid smaller than the work, tested)
SIM_SLOTS = 3
_SMS: dict = {}  # device index -> multiprocessors

#: the module-level statements a generated module copies (after PARTS; in file order)
STATE = ("INIT_GIVEN", "INIT_EYE", "INIT_ONEHOT", "LANE_CAP", "SIM_SLOTS", "_SMS")


# ---------------------------------------------------------------- functions (copied)
def keep_d(m, init):
    """Whether the forward keeps the lanes' differences D (m x size floats
    per row) for the backward: the plan's mode for P's lanes (``SAVE_D``),
    else the same budget (at most SAVE_PER_KN k n floats per row);
    otherwise the backward recomputes the sweep."""
    if init == INIT_EYE:
        return bool(SAVE_D)
    return m * _SIZE <= SAVE_PER_KN * _K * _N


def _fit(device, dt, name):
    """Rows of NS floats of state a block of kernel ``name``'s shared
    variant may have on ``device`` (0: no shared variant)."""
    if (dt, name, "shared") not in KERNELS:
        return 0
    if SIMULATED:
        return SHARED_LIMIT // (NS * dt.itemsize)
    index = device.index if getattr(device, "index", None) is not None else torch.cuda.current_device()
    _handle(index, dt, name, "shared")
    return _LIMITS[(index, dt, name, "shared")][2] // (NS * dt.itemsize)


def _slots(device, rows, dt):
    """Blocks of ``rows`` rows of state resident on ``device`` at once (a
    persistent grid's size)."""
    if SIMULATED:
        return SIM_SLOTS
    index = device.index if getattr(device, "index", None) is not None else torch.cuda.current_device()
    sms = _SMS.get(index)
    if sms is None:
        sms = _SMS[index] = int(getattr(torch.cuda.get_device_properties(index), "multi_processor_count", 132))
    per_sm = max(1, min(32, SM_SHARED // (rows * NS * dt.itemsize + 1024)))
    return sms * per_sm


def lane_plan(kind, device, dt, m, vals):
    """How ``m`` lanes of sweep ``kind`` ("back" or "fwd") run per row:
    ``(fused, G, groups)``. ``fused``: one block per row runs the values
    (``vals``) and all lanes (their rows, and for "fwd" the values' row,
    fit the block); else the values run in a launch of their own and the
    lanes in groups of G (``groups`` blocks per row): as many as fit the
    block's shared memory, at most LANE_CAP (the global-scratch variant
    where not one fits)."""
    name = kind + "_fwd"
    fit = _fit(device, dt, name)
    if m == 0:
        return True, 0, 1
    cap = max(1, min(m, LANE_CAP))
    if vals and m <= cap and m + (kind == "fwd") <= fit:
        return True, m, 1
    G = max(1, min(cap, fit)) if fit >= 1 else cap
    return False, G, -(-m // G)


def _rows_per_launch(B, per_row):
    """Row ranges of the batch, each launch at most INDEX_LIMIT // per_row
    rows (the kernels' 32-bit flat indices)."""
    step = max(1, min(B, INDEX_LIMIT // max(1, per_row))) if B else 1
    return [(i, min(B, i + step)) for i in range(0, B, step)]


def _grid(like, name, rows, items, recompute):
    """Blocks of a launch of ``items`` items of ``rows`` rows of state:
    one per item, or (a recomputing backward: one scratch D per block; the
    global variant: one scratch row per block) as many as the device holds
    at once, each looping over the items."""
    dt = _np_dtype(like)
    if recompute or _variant(like.device, dt, name, rows) == "global":
        return min(items, _slots(like.device, rows, dt))
    return items


def _lanes_arg(t, like, shape):
    """The lanes given (W (Bw, m, k) or V (Bv, n, d), one for all rows or
    one per row) as a (Bw, m k) or (Bv, n d) view in like's dtype, and
    whether there is one per row; a 1 x 1 dummy for None."""
    if t is None:
        return like.new_empty((1, 1)), False
    t = t.to(like.dtype).contiguous()
    return t.reshape(t.shape[0], -1), t.shape[0] > 1 or shape


def lanes_forward(kind, x, s, lin, y, init, m, save, per_row=False):
    """The forward of a lane sweep for x (B, n): ``kind`` "back" (Y = W P,
    (B, m n); ``lin`` W (Bw, m, k)) or "fwd" (Y = P V, (B, k m); ``lin``
    V (Bv, n, m)); ``init`` INIT_GIVEN (``lin``), INIT_EYE (P's lanes: the
    module's direction, m = k or n) or INIT_ONEHOT (the column: a one-hot
    lane at ``y`` (B,) int64); ``m`` = 0: the values alone (kind "fwd").
    ``save``: keep what the backward needs. ``per_row``: ``lin`` has one
    matrix per row even where B = 1. Returns (values (B, k), Y, ds, ps (B,
    size), D (B, m size) or 1 x 1, bad (B,) int32)."""
    B = x.shape[0]
    dt = _np_dtype(x)
    t = _tables(x.device)
    cr = t["crb"] if kind == "back" else t["crf"]
    name = kind + "_fwd"
    values, bad = x.new_empty((B, _K)), torch.empty((B,), dtype=torch.int32, device=x.device)
    ds, ps = x.new_empty((B * _SIZE,)), x.new_empty((B * _SIZE,))
    Y = x.new_empty((B, m * _N) if kind == "back" else (B, _K * m))
    keep = save and m > 0 and keep_d(m, init)
    D = x.new_empty((B * m * _SIZE,) if keep else (1,))
    lin2, rows_lin = _lanes_arg(lin, x, per_row)
    yv = y if y is not None else torch.zeros((1,), dtype=torch.int64, device=x.device)
    ranged = init == INIT_EYE
    fused, G, groups = lane_plan(kind, x.device, dt, m, True)
    dummy = x.new_empty((1, 1))
    vals_name = name if fused else "fwd_fwd"
    for b0, b1 in _rows_per_launch(B, max(1, m) * _SIZE if keep else _SIZE):
        rb = b1 - b0
        v = (values[b0:b1], ds[b0 * _SIZE:b1 * _SIZE], ps[b0 * _SIZE:b1 * _SIZE], bad[b0:b1])
        Dv = D[b0 * m * _SIZE:b1 * m * _SIZE] if keep else D
        L = lin2[b0:b1] if rows_lin else lin2
        if not fused:  # the values alone: fwd_fwd without lanes
            _launch("fwd_fwd", x, rb, (x[b0:b1], yv[b0:b1] if y is not None else yv, s, t["wab"], t["offs"],
                                       t["crf"], t["outs"], dummy, *v, dummy, D, True, True, 0, False, False,
                                       False, 0, 0, 1, rb), 1)
        if m == 0:
            continue
        rows = G + (1 if fused and kind == "fwd" else 0)
        items = rb * groups
        grid = _grid(x, name, rows, items, False)
        common = (t["wab"], t["offs"], cr, t["outs"], L, *v, Y[b0:b1], Dv, fused)
        if kind == "back":
            _launch(name, x, grid, (x[b0:b1], s, *common, init, rows_lin, ranged, keep, G, m, groups, items), rows)
        else:
            yb = yv[b0:b1] if y is not None else yv
            _launch(name, x, grid, (x[b0:b1], yb, s, *common[:-1], fused, save, init, rows_lin, ranged, keep, G, m,
                                    groups, items), rows)
        del vals_name
        vals_name = None
    return values, Y, ds.view(B, _SIZE), ps.view(B, _SIZE), D, bad


def lanes_backward(kind, gv, gY, s, ds, ps, D, bad, lin, y, init, m, want_gs, want_glin, per_row=False):
    """dL/dx (B, n), the rows' shares of dL/ds (B,) when ``want_gs`` (else
    a 1-element dummy) and dL/d``lin`` (B, m k) or (B, n m) per row when
    ``want_glin`` (else None) for :func:`lanes_forward`'s path (``kind``,
    ``init``, ``m``, ``lin``, ``y``) from dL/dvalues ``gv`` (B, k) and
    dL/dY ``gY`` (either may be None; gY None: no lane is differentiated)."""
    B = ds.shape[0]
    dt = _np_dtype(ds)
    t = _tables(ds.device)
    cr = t["crb"] if kind == "back" else t["crf"]
    name = kind + "_bwd"
    gx = ds.new_empty((B, _N))
    gs = torch.zeros((B,), dtype=ds.dtype, device=ds.device) if want_gs else ds.new_empty((1,))
    dummy = ds.new_empty((1, 1))
    has_gv = gv is not None
    gv = gv.to(ds.dtype).contiguous() if has_gv else dummy
    if gY is None:
        m = 0
    lanes = m > 0
    fused, G, groups = lane_plan(kind, ds.device, dt, m, True)
    recompute = lanes and not keep_d(m, init)
    glin = None
    if lanes:
        gY = gY.to(ds.dtype).reshape(B, -1).contiguous()
        glin = ds.new_empty((B, m * _K) if kind == "back" else (B, _N * m)) if want_glin else dummy
    gp = (torch.zeros if lanes and not fused else torch.empty)((B * _SIZE if lanes else 1,), dtype=ds.dtype,
                                                             device=ds.device)
    lin2, rows_lin = _lanes_arg(lin, ds, per_row)
    yv = y if y is not None else torch.zeros((1,), dtype=torch.int64, device=ds.device)
    ranged = init == INIT_EYE
    dsf, psf = ds.reshape(-1), ps.reshape(-1)
    for b0, b1 in _rows_per_launch(B, max(1, m) * _SIZE if lanes and not recompute else _SIZE):
        rb = b1 - b0
        saved = (dsf[b0 * _SIZE:b1 * _SIZE], psf[b0 * _SIZE:b1 * _SIZE])
        yb = yv[b0:b1] if y is not None else yv
        gvb = gv[b0:b1] if has_gv else gv
        gs_b = gs[b0:b1] if want_gs else gs
        out = (bad[b0:b1], glin[b0:b1] if lanes and want_glin else dummy, gx[b0:b1], gs_b)
        if lanes:
            rows = G + (1 if fused and kind == "fwd" else 0)
            items = rb * groups
            grid = _grid(ds, name, rows, items, recompute)
            if recompute:
                Dv = ds.new_empty((grid * G * _SIZE,))
            else:
                Dv = D[b0 * m * _SIZE:b1 * m * _SIZE]
            gpb = gp[b0 * _SIZE:b1 * _SIZE]
            L = lin2[b0:b1] if rows_lin else lin2
            head = (s, t["wab"], t["offs"], cr, t["outs"], L, gY[b0:b1], gvb, *saved, Dv, gpb, *out)
            flags = (fused, init, rows_lin, ranged, recompute, not fused, has_gv and fused, fused, want_glin,
                     want_gs and fused, G, m, groups, items)
            _launch(name, ds, grid, (yb, *head, *flags) if kind == "fwd" else (*head, *flags), rows)
            if fused:
                continue
        # the values' adjoint alone (adding the lane groups' dL/dp where they ran)
        gpb = gp[b0 * _SIZE:b1 * _SIZE] if lanes else gp
        _launch("fwd_bwd", ds, rb, (yb, s, t["wab"], t["offs"], t["crf"], t["outs"], dummy, dummy, gvb, *saved,
                                    D[:1], gpb, *out[:1], dummy, *out[2:], True, 0, False, False, False, False,
                                    has_gv, lanes, False, want_gs, 0, 0, 1, rb), 1)
    return gx, gs, glin


#: the functions a generated module copies, in order
PARTS = (keep_d, _fit, _slots, lane_plan, _rows_per_launch, _grid, _lanes_arg, lanes_forward, lanes_backward)
