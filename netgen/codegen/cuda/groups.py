"""Lane-group kernels of the ``cuda`` target: P's sweep spread over blocks,
G lanes per block (docs/cuda-round6.md (c)+(d), docs/cuda-rounds7-8.md Round 7).

Today's ``fwd``/``bwd`` kernels run a row's whole P sweep (m lanes: k ranks
going back, n input columns going forward) in one block, one thread per
comparator walking all its lanes: for a sorter of n = 1024 that is one
block per row walking 8.4 million (comparator, column) pairs (152.7 ms
measured at B = 64 on an H100), and where m n floats do not fit a block's
shared memory the kernels fall to a global scratch row. These kernels run
**items (row b, lane group g)** instead: a block holds the group's G
lanes (``nl`` in the last group) as lane-major rows of n floats in
dynamic shared memory (``sm[q n + w]``), every block walks every
comparator but updates only its lanes inside the comparator's plan range
(``clo``..``chi``: for a sorter's forward sweep the input columns that can
reach the comparator's wires; the early layers touch 1-2 of a group's
lanes), so a row's work is spread over ceil(m / G) blocks. The same
kernels are the **rank groups** of the rows with P (back direction, m = k)
where k n floats do not fit a block (A100, L4, T4; H100 above k n =
58,096).

* ``grp_fwd``: P's lanes of the group, from the identity (forward: lane l
  is input column l; back: lane l is rank l, a 1 at ``outs[l]``), swept
  in the module's direction with p from the values sweep (today's ``fwd``
  kernel with ``do_P`` false: values, d, p, bad), written to P (B, k n);
  NaN rows where ``bad``.
* ``grp_bwd``: per item, the group's sweep **recomputed** into the
  block's own scratch D (G x size floats, lane-major ``D[(blk G + q) S +
  i]``, flat:
  a warp's comparators coalesced), then dL/dP of the group's lanes pushed
  the other way, each comparator's dL/dp summed over the group's lanes and
  added to ``gp[b, i]`` atomically (ceil(m / G) groups per row add to it).
  The grid is persistent (as many blocks as are resident at once, each
  looping over items ``blockIdx``, ``blockIdx + gridDim``, ...), so D is
  bounded by the device, not the batch: memory stays under 2x P.
* ``vals_bwd``: the values' adjoint of today's ``bwd`` kernel, one block
  per row, adding dL/dp from ``gp`` (``has_gp``): dL/dx and dL/ds.

``geo`` (uint32) = (G, groups per row, items). Index arithmetic uint32 as
in :mod:`.kernels`; the launcher keeps a launch's B k n and grid G size
below 2^32.

This file holds the body writers; the :class:`~.kernels.Kernel` objects
(``GROUP_KERNELS``) and their emission (modules whose P sweep runs forward:
the sorters) are in :mod:`.kernels`; the launches in :mod:`.group_ops`:
forward = ``fwd`` (do_P false) then ``grp_fwd`` on B x groups blocks;
backward = ``gp`` zeroed, ``grp_bwd`` on a persistent grid with D (grid,
G size), then ``vals_bwd`` on B blocks.
"""

from __future__ import annotations

from .row_io import grad_out
from .sweeps import WIRES, alloc, fill_rows, layers, strided
from .updates import ROW_BAD, mix, values_adjoint
from ..lines import Lines, literal

__all__ = ["grp_fwd", "grp_bwd", "vals_bwd"]

#: a comparator's tables for a group's lane sweep: plan range, wires, p
_LANE_LOADS = (("lo", "clo[{}]", "U0"), ("hi", "chi[{}]", "U0"), ("a", "wa[{}]", "U0"), ("c", "wb[{}]", "U0"),
               ("p", "psb[{}]", "ZERO"))


#: the same without the plan range (every lane of the group at every comparator)
_ALL_LOADS = _LANE_LOADS[2:]


def _items(L: Lines, length: str) -> None:
    """Geometry (n from ``length``, P or dL/dP of shape (B, k n)) and the
    first item of the persistent loop (the loop itself is the caller's
    ``while item < items:``)."""
    L(f"n = np.uint32(np.uint32({length}.shape[1]) // k)",
      "G = geo[0]", "groups = geo[1]", "items = geo[2]", "S = np.uint32(wa.shape[0])",
      "blk = np.uint32(cuda.blockIdx.x)", "item = blk")


def _item(L: Lines) -> None:
    """Row ``b``, lanes ``g0``..``ge`` - 1 (``nl`` of them) of ``item`` and
    ``sb``, its group's base in the span table ``spn`` (groups x L x 2
    uint32: per layer the [start, end) of the comparators that can touch
    the group's lanes; the launcher derives it from the plan ranges)."""
    L("b = np.uint32(item // groups)",
      "gi = np.uint32(item - b * groups)",
      "g0 = np.uint32(gi * G)",
      "sb = np.uint32(gi * np.uint32(L + L))",
      "ge = np.uint32(g0 + G)",
      "ge = ge if ge < m else m",
      "nl = np.uint32(ge - g0)",
      "psb = ps[b]")


def _unit_lanes(L: Lines, fwd: bool) -> None:
    """The group's lanes of the identity: lane l = input column l (a 1 on
    wire l; forward) or rank l (a 1 on wire outs[l]; back)."""
    fill_rows(L, "w", "np.uint32(nl * n)", "", count32=True)
    with strided(L, "q", "nl", True):
        L("sm[np.uint32(q * n + g0 + q)] = ONE" if fwd else "sm[np.uint32(q * n + outs[np.uint32(g0 + q)])] = ONE")
    L("cuda.syncthreads()")


def _lane_sweep(L: Lines, reverse: bool, mode: str, planned: bool = True) -> None:
    """The group's lanes through the layers (``reverse``: last first), each
    comparator on its lanes qlo..qhi-1 (its plan range cut to the group):
    ``mode`` "plain" (the update), "save" (``D[Dq + q S + i]`` = the lane's
    difference before the update) or "adj" (``acc`` += the lane's
    difference times ``D[Dq + q S + i]``; then dL/dp added to ``gp[b,
    i]``). D is the launch's flat scratch, indexed with one 32-bit index
    from the block's base ``Dq`` (a row view would rebuild a 64-bit address
    per access). ``planned`` False: every comparator updates all the
    group's lanes (lanes given by the caller, not the identity: the lane
    kernels of :mod:`.lane_bodies`), no plan range loaded. Planned, the
    threads visit only the group's span of each layer (``spn`` from ``sb``:
    the comparators whose plan range meets the group's lanes lie in it; a
    sorter's early layers touch a group with a few of theirs)."""
    for _ in layers(L, reverse=reverse, loads=_LANE_LOADS if planned else _ALL_LOADS, count32=True,
                    span="sb" if planned else None):
        if planned:
            L("qlo = np.uint32(lo - g0) if lo > g0 else U0",
              "qh = hi if hi < ge else ge",
              "qhi = np.uint32(qh - g0) if qh > g0 else U0")
        else:
            L("qlo = U0", "qhi = nl")
        L("q = qlo",
          "sa = np.uint32(q * n + a)",
          "sc = np.uint32(q * n + c)")
        if mode != "plain":
            L("j = np.uint32(Dq + q * S + i)")
        if mode == "adj":
            L("acc = ZERO")
        # two lanes per round (both pairs loaded before either update: the
        # loads issue together), then the odd lane
        L("n2 = np.uint32(n + n)", "q2 = np.uint32(q + U1)")
        if mode != "plain":
            L("S2 = np.uint32(S + S)")
        with L.block("while q2 < qhi:"):
            L("va = sm[sa]", "vc = sm[sc]", "wa_ = sm[np.uint32(sa + n)]", "wc_ = sm[np.uint32(sc + n)]",
              "dv = va - vc", "dw = wa_ - wc_")
            if mode == "save":
                L("D[j] = dv", "D[np.uint32(j + S)] = dw")
            elif mode == "adj":
                L("acc += dv * D[j] + dw * D[np.uint32(j + S)]")
            mix(L, "sa", "sc", "va", "vc", diff="dv")
            mix(L, "np.uint32(sa + n)", "np.uint32(sc + n)", "wa_", "wc_", diff="dw")
            L("q = np.uint32(q + U2)", "q2 = np.uint32(q2 + U2)", "sa = np.uint32(sa + n2)",
              "sc = np.uint32(sc + n2)")
            if mode != "plain":
                L("j = np.uint32(j + S2)")
        with L.block("if q < qhi:"):
            L("va = sm[sa]", "vc = sm[sc]", "dv = va - vc")
            if mode == "save":
                L("D[j] = dv")
            elif mode == "adj":
                L("acc += dv * D[j]")
            mix(L, "sa", "sc", "va", "vc", diff="dv")
        if mode == "adj":
            with L.block("if qlo < qhi:"):
                L("cuda.atomic.add(gp, (b, i), acc)")


def grp_fwd(L: Lines, c) -> None:
    alloc(L, c)
    _items(L, "P")
    with L.block("while item < items:"):
        _item(L)
        L(f"isbad = bad[b] == {literal(ROW_BAD)}")
        _unit_lanes(L, c.fwd)
        _lane_sweep(L, reverse=not c.fwd, mode="plain")
        if c.fwd:  # P[b, r n + l] = lane l at wire outs[r]; threads over (r, q), q fastest
            with strided(L, "t", "np.uint32(k * nl)", True):
                L("r = np.uint32(t // nl)", "q = np.uint32(t - r * nl)",
                  "P[b, np.uint32(r * n + g0 + q)] = NAN if isbad else sm[np.uint32(q * n + outs[r])]")
        else:  # P[b, l n + w] = lane l at wire w: the group's rows are contiguous in P
            with strided(L, "t", "np.uint32(nl * n)", True):
                L("P[b, np.uint32(g0 * n + t)] = NAN if isbad else sm[t]")
        L("cuda.syncthreads()", "item = np.uint32(item + cuda.gridDim.x)")


def grp_bwd(L: Lines, c) -> None:
    alloc(L, c)
    _items(L, "gP")
    L("Dq = np.uint32(blk * np.uint32(G * S))")
    with L.block("while item < items:"):
        _item(L)
        _unit_lanes(L, c.fwd)
        _lane_sweep(L, reverse=not c.fwd, mode="save")
        # the group's dL/dP as the adjoint's start
        if c.fwd:
            fill_rows(L, "w", "np.uint32(nl * n)", "", count32=True)
            with strided(L, "t", "np.uint32(k * nl)", True):
                L("r = np.uint32(t // nl)", "q = np.uint32(t - r * nl)",
                  "sm[np.uint32(q * n + outs[r])] = gP[b, np.uint32(r * n + g0 + q)]")
        else:
            with strided(L, "t", "np.uint32(nl * n)", True):
                L("sm[t] = gP[b, np.uint32(g0 * n + t)]")
        L("cuda.syncthreads()")
        _lane_sweep(L, reverse=c.fwd, mode="adj")
        L("item = np.uint32(item + cuda.gridDim.x)")


def vals_bwd(L: Lines, c) -> None:
    L("dsb = ds[b]", "psb = ps[b]", "gpb = gp[b if has_gp else U0]")
    alloc(L, c)
    fill_rows(L, "w", "n", "", count32=True)
    with L.block("if has_gv:"):
        with strided(L, "r", "k", True):
            L("sm[outs[r]] = gv[b, r]")
        L("cuda.syncthreads()")
    values_adjoint(L, c, WIRES + (("d", "dsb[{}]", "ZERO"), ("pv", "psb[{}]", "ZERO"),
                                  ("gq", "(gpb[{}] if has_gp else ZERO)", "ZERO")))
    grad_out(L, count32=True)
