"""Lane kernels of the ``cuda`` target: ``W P`` and ``P V`` without P
(the Layer's ``back``/``fwd``, the operators of issue 31; docs/cuda-rounds7-8.md,
Round 8).

The lane-group kernels' sweep (:func:`.groups._lane_sweep`) started from
given lanes instead of the identity: items (row b, lane group g) of G
lanes, one block each, the lanes lane-major rows of n floats in the
block's wire arrays (``sm[q n + w]``), every comparator updating all the
group's lanes (no plan range: a given lane is a mix of every rank or
column) with the p the values sweep (today's ``fwd`` kernel without P)
left in ``ps``.

* ``wp_fwd`` (``W P``, m lanes swept back): lane q starts as W's row q
  on the output wires (``sm[q n + outs[r]] = W[b, q, r]``), the
  comparators run last layer first, the result is the lanes at every
  wire: ``R[b, q, w]``. With ``save``, each lane's difference at each
  comparator is kept in ``D`` (flat, ``D[(b m + lane) S + i]``: m x size
  floats per row) for the backward.
* ``wp_bwd``: dL/dR as the lanes, swept first layer first (M_l is
  symmetric), dL/dp of each comparator (the lanes' differences times D)
  added to ``gp[b, i]`` atomically (the row's groups share it), dL/dW
  the lanes at the output wires.
* ``pv_fwd`` / ``pv_bwd``: the same for ``P V`` (d lanes): lane q starts
  as V's column q on every wire, swept first layer first, the result is
  the lanes at the output wires ``Y[b, r, q]``; the backward starts dL/dY
  on the output wires, sweeps last layer first and gives dL/dV at every
  wire.

dL/dx and dL/ds then come from ``vals_bwd`` (:mod:`.groups`: the values'
adjoint with ``gp``). ``geo`` (uint32) = (G, groups per row, unused, m).
Arrays are 2-D (B, lanes x n, k or d) row-major as the Layer's results
are; indices uint32 (the launcher keeps B m size and B m n below 2^32).
"""

from __future__ import annotations

from .groups import _lane_sweep
from .sweeps import alloc, fill_rows, strided
from .updates import ROW_BAD
from ..lines import Lines, literal

__all__ = ["wp_fwd", "wp_bwd", "pv_fwd", "pv_bwd"]


def _lane_item(L: Lines, length: str) -> None:
    """Geometry (m from ``geo``, n from ``length`` of shape (B, m n)), the
    block's row ``b`` and lanes ``g0``..``ge`` - 1 (``nl``), p of the row,
    its bad flag and its D base ``Dq``."""
    L("G = geo[0]", "groups = geo[1]", "m = geo[3]", "S = np.uint32(wa.shape[0])",
      f"n = np.uint32(np.uint32({length}.shape[1]) // m)",
      "item = b",
      "b = np.uint32(item // groups)",
      "g0 = np.uint32(np.uint32(item - b * groups) * G)",
      "ge = np.uint32(g0 + G)",
      "ge = ge if ge < m else m",
      "nl = np.uint32(ge - g0)",
      "psb = ps[b]",
      f"isbad = bad[b] == {literal(ROW_BAD)}",
      "Dq = np.uint32(np.uint32(b * m + g0) * S)")


def _on_outputs(L: Lines, order: str, stmt: str) -> None:
    """``stmt`` for each (output r, lane q < nl), threads strided over the
    pairs: ``order`` "qr" (r fastest: reads of W's rows coalesced) or "rq"
    (q fastest: a row of Y, d wide)."""
    with strided(L, "t", "np.uint32(k * nl)", True):
        if order == "qr":
            L("q = np.uint32(t // k)", "r = np.uint32(t - q * k)")
        else:
            L("r = np.uint32(t // nl)", "q = np.uint32(t - r * nl)")
        L(stmt)


def _on_wires(L: Lines, stmt: str) -> None:
    """``stmt`` for each (wire w, lane q < nl), q fastest (V's rows, d wide, coalesced)."""
    with strided(L, "t", "np.uint32(n * nl)", True):
        L("w = np.uint32(t // nl)", "q = np.uint32(t - w * nl)", stmt)


def _sweep(L: Lines, reverse: bool) -> None:
    """The group's lanes through the comparators, saving D where ``save``."""
    with L.block("if save:"):
        _lane_sweep(L, reverse, "save", planned=False)
    with L.block("else:"):
        _lane_sweep(L, reverse, "plain", planned=False)


def wp_fwd(L: Lines, c) -> None:
    alloc(L, c)
    _lane_item(L, "R")
    fill_rows(L, "w", "np.uint32(nl * n)", "", count32=True)
    _on_outputs(L, "qr", "sm[np.uint32(q * n + outs[r])] = W[b, np.uint32(np.uint32(g0 + q) * k + r)]")
    L("cuda.syncthreads()")
    _sweep(L, reverse=True)
    # the group's rows of R are contiguous: R[b, (g0 + q) n + w] = sm[q n + w]
    with strided(L, "t", "np.uint32(nl * n)", True):
        L("R[b, np.uint32(g0 * n + t)] = NAN if isbad else sm[t]")


def wp_bwd(L: Lines, c) -> None:
    alloc(L, c)
    _lane_item(L, "gR")
    with strided(L, "t", "np.uint32(nl * n)", True):
        L("sm[t] = gR[b, np.uint32(g0 * n + t)]")
    L("cuda.syncthreads()")
    _lane_sweep(L, reverse=False, mode="adj", planned=False)
    _on_outputs(L, "qr", "gW[b, np.uint32(np.uint32(g0 + q) * k + r)] = "
                         "NAN if isbad else sm[np.uint32(q * n + outs[r])]")


def pv_fwd(L: Lines, c) -> None:
    alloc(L, c)
    _lane_item(L, "V")
    _on_wires(L, "sm[np.uint32(q * n + w)] = V[b, np.uint32(w * m + g0 + q)]")
    L("cuda.syncthreads()")
    _sweep(L, reverse=False)
    _on_outputs(L, "rq", "Y[b, np.uint32(r * m + g0 + q)] = NAN if isbad else sm[np.uint32(q * n + outs[r])]")


def pv_bwd(L: Lines, c) -> None:
    alloc(L, c)
    _lane_item(L, "gV")
    fill_rows(L, "w", "np.uint32(nl * n)", "", count32=True)
    _on_outputs(L, "rq", "sm[np.uint32(q * n + outs[r])] = gY[b, np.uint32(r * m + g0 + q)]")
    L("cuda.syncthreads()")
    _lane_sweep(L, reverse=True, mode="adj", planned=False)
    _on_wires(L, "gV[b, np.uint32(w * m + g0 + q)] = NAN if isbad else sm[np.uint32(q * n + w)]")
