"""The launches of the lane-group kernels (:mod:`.groups`): the rows with P
where a row's P sweep (n x n floats for a sorter swept forward, k x n for
a selection network swept back) does not fit one block (today's
``fwd``/``bwd`` would fall to a global scratch row, one block walking all
lanes per row), spread over blocks of G lanes: sorting's input-column
groups, the rows' **rank groups** (modules built with ``lane_groups``).

* forward: ``fwd`` without P (values, d, p, bad; one block per row), then
  ``grp_fwd`` on B x groups blocks (G n floats of shared memory each),
  writing P;
* backward: dL/dp zeroed, ``grp_bwd`` on a persistent grid (as many blocks
  as the device holds at once, each with its own scratch D of G x size
  floats: memory bounded by the device, not the batch), each group's
  share of dL/dp added atomically, then ``vals_bwd`` (one block per row):
  dL/dx and dL/ds.

:func:`_use_groups` decides, the same way in both directions. Real code,
copied into every generated cuda module by source extraction
(:data:`PARTS`; where the module holds no group kernels it never picks
them); it reads the launcher's pieces.
"""

from __future__ import annotations

import torch

from ..runtime.tables import _CHI, _CLO, _K, _N, _OFFSETS, _SIZE
from .batch import _batch, _most, _part
from .driver import SIMULATED, SM_SHARED, _sm_count
from .launch import LANES, _index, _launch, _shared_room, _tables, _variant
from .layout import spans
from .packing import _np_dtype

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("KERNELS",)
KERNELS: dict = {}

#: the most input columns one block sweeps
GROUP_CAP = 32
#: blocks of the backward's persistent grid under the simulator (fewer than the items: each block loops)
SIM_SLOTS = 3
_GEO: dict = {}  # (device, dtype, B) -> (G, groups, geo and the span table on the device): uploaded once
_SPANS: dict = {}  # (device, G) -> the span table on the device (one G per device and dtype: bounded)
_GROUP_LANES: dict = {}  # (device, dtype) -> _group_lanes: worked out on a layer's first call, not each call
#: entries of _GEO kept before it is cleared (a new batch size each call would grow it without end)
GEO_MAX = 64

#: the module-level statements a generated module copies
STATE = ("GROUP_CAP", "SIM_SLOTS", "_GEO", "_SPANS", "_GROUP_LANES", "GEO_MAX")


def _group_lanes(device, dt):
    """Lanes per block of the lane-group kernels on ``device`` (input
    columns going forward, ranks going back): the most (<= GROUP_CAP, <=
    LANES) whose rows of n floats fit the shared variant's dynamic shared
    memory; 0 where P's whole sweep fits one block (today's kernels run
    it), the module has no group kernels, or not one row fits. Once per
    (device, dtype): the shared room is the loaded kernels' (one entry per
    device and dtype: bounded)."""
    key = (device, dt)
    got = _GROUP_LANES.get(key)
    if got is None:
        if (dt, "grp_fwd", "shared") not in KERNELS or _variant(device, dt, "fwd", LANES) == "shared":
            got = 0
        else:
            fit = _shared_room(device, dt, ("grp_fwd", "grp_bwd")) // (_N * dt.itemsize)
            got = max(0, min(GROUP_CAP, LANES, fit))
        _GROUP_LANES[key] = got
    return got


def _use_groups(device, dt):
    """Whether the rows with P run as lane groups on ``device``."""
    return _group_lanes(device, dt) > 0


def _spans(device, G):
    """The kernels' span table for groups of G lanes (:func:`spans`: per
    group and layer the comparators that can touch the group), uint32 on
    ``device``, computed and uploaded once per (device, G)."""
    key = (device, G)
    got = _SPANS.get(key)
    if got is None:
        table = spans(_CLO, _CHI, _OFFSETS, LANES, G).reshape(-1)
        got = _SPANS[key] = torch.from_numpy(table).to(torch.uint32).to(device)
    return got


def _geo(device, dt, B):
    """G, groups per row, the kernels' uint32 ``geo`` (G, groups, items)
    and span table, uploaded once per (device, dtype, B)."""
    key = (device, dt, B)
    got = _GEO.get(key)
    if got is None:
        if len(_GEO) >= GEO_MAX:  # one entry per batch size seen: bounded
            _GEO.clear()
        G = _group_lanes(device, dt)
        groups = -(-LANES // G)
        geo = torch.tensor([G, groups, B * groups], dtype=torch.int64).to(torch.uint32).to(device)
        got = _GEO[key] = (G, groups, geo, _spans(device, G))
    return got


def _group_grid(device, dt, G, items):
    """The backward's persistent grid: blocks resident at once, at most
    ``items``, and few enough that the flat scratch D (grid x G x size)
    has 32-bit indices."""
    most = max(1, (2**32 - 1) // max(1, G * _SIZE))
    if SIMULATED:
        return max(1, min(items, SIM_SLOTS, most))
    sms = max(1, _sm_count(_index(device)))
    per_sm = max(1, SM_SHARED // (G * _N * dt.itemsize + 1024))
    return max(1, min(items, sms * per_sm, most))


def _groups_forward(x, s):
    """As ``_rows_forward`` with P, in lane groups: (values, P, ds, ps, D
    (a 1 x 1 dummy: the backward recomputes), bad)."""
    B = x.shape[0]
    dt = _np_dtype(x)
    t = _tables(x.device)
    values, ds, ps = x.new_empty((B, _K)), x.new_empty((B, _SIZE)), x.new_empty((B, _SIZE))
    P = x.new_empty((B, _K, _N))
    bad = torch.empty((B,), dtype=torch.int32, device=x.device)
    one = x.new_empty((1, 1))
    if B == 0:
        return values, P, ds, ps, one, bad
    none = one.view(-1)  # the rows kernel's P and D, unused
    for b0, b1 in _batch("fwd", x, B, 1, 0, _most(_SIZE)):  # ds, ps indexed flat with 32 bits
        _launch("fwd", x, b1 - b0, (_part(x, b0, b1), s, t["wab"], t["offs"], t["rtab"], t["dix"],
                                    t["outs"], _part(values, b0, b1), _part(ds, b0, b1).view(-1),
                                    _part(ps, b0, b1).view(-1), _part(bad, b0, b1), none, none, False, False), 1)
    G, groups, geo, spn = _geo(x.device, dt, B)
    _launch("grp_fwd", x, B * groups, (P.view(B, _K * _N), s, t["wa"], t["wb"], t["offs"], t["clo"], t["chi"],
                                       t["outs"], ps, bad, geo, spn), G)
    return values, P, ds, ps, one, bad


def _groups_backward(gv, gP, s, ds, ps, bad, want_gs):
    """As ``_rows_backward`` with dL/dP, in lane groups: (dL/dx, dL/ds per
    row or a dummy)."""
    B = ds.shape[0]
    dt = _np_dtype(ds)
    t = _tables(ds.device)
    gx = ds.new_empty((B, _N))
    gs = torch.zeros((B,), dtype=ds.dtype, device=ds.device) if want_gs else ds.new_empty((1,))
    if B == 0:
        return gx, gs
    has_gv = gv is not None
    gv = gv.to(ds.dtype).contiguous() if has_gv else ds.new_empty((1, 1))
    gp = torch.zeros((B, _SIZE), dtype=ds.dtype, device=ds.device)
    G, groups, geo, spn = _geo(ds.device, dt, B)
    grid = _group_grid(ds.device, dt, G, B * groups)
    D = ds.new_empty((grid * G * _SIZE,))
    _launch("grp_bwd", ds, grid, (gP.to(ds.dtype).reshape(B, _K * _N).contiguous(), s, t["wa"], t["wb"], t["offs"],
                                  t["clo"], t["chi"], t["outs"], ps, D, gp, geo, spn), G)
    _launch("vals_bwd", ds, B, (s, t["wa"], t["wb"], t["offs"], t["outs"], gv, ds, ps, gp, bad, gx, gs, has_gv, True,
                                want_gs), 1)
    return gx, gs


#: the functions a generated module copies, in order
PARTS = (_group_lanes, _use_groups, _spans, _geo, _group_grid, _groups_forward, _groups_backward)
