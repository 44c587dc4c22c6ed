"""Statement writers of a ``cuda`` row kernel's way in and out: the row of
x loaded with the bad-row check (:func:`load_row`), each output's
statement (:func:`per_output`), P written or dL/dP read per rank and wire
(:func:`per_rank`), dL/dx and dL/ds out (:func:`grad_out`). Used by the
body writers of :mod:`.row_bodies` and :mod:`.groups`; the sweeps' pieces
are in :mod:`.sweeps` and :mod:`.updates`. Trusted statements only (as there)."""

from __future__ import annotations

import numpy as np

from .sweeps import WARP, Ctx, strided
from .updates import ROW_BAD, ROW_OK, ROW_WIDE, TAME_SHIFT
from ..lines import Lines, literal
from ..render import scalar_literal

__all__ = ["load_row", "row_code", "per_output", "per_rank", "grad_out"]


def load_row(L: Lines, c: Ctx, col: bool, count32: bool = False) -> None:
    """Load row b of x into ``sm[:n]`` (zeros for a bad row), flag bad rows:
    non-finite entries, a steepness not finite and > 0, an overflowing
    steepness * (max - min), and for the column a y outside 0..n-1
    (``count32``: the loops over w as in :func:`strided`)."""
    L(f"mm = cuda.shared.array(2, dtype=numba.{c.ft})")
    with L.block("if tx == U0:"):
        L("mm[0] = -INF", "mm[1] = INF")
    L("cuda.syncthreads()",
      "nonfinite = 1 if yb < 0 or yb >= n else 0" if col else "nonfinite = 0",
      "hx = -INF",
      "lx = INF")
    with strided(L, "w", "n", count32):
        L("xw = x[b, w]")
        with L.block("if not math.isfinite(xw):"):
            L("nonfinite = 1")
        L("hx = max(hx, xw)", "lx = min(lx, xw)", "sm[w] = xw")
        if col:
            L("sm[n + w] = ZERO")
    L("cuda.atomic.max(mm, 0, hx)",
      "cuda.atomic.min(mm, 1, lx)",
      "anybad = cuda.syncthreads_or(nonfinite)",
      "spread = s * (mm[0] - mm[1])",
      "isbad = anybad != 0 or not (s > ZERO and math.isfinite(s) and math.isfinite(spread))",
      # the swap code without its clamps of d and z where they cannot act (updates.per_range)
      f"tame = max(s, spread) <= {scalar_literal(tame_bound(c.ft), c.ft)}")
    with L.block("if isbad:"):
        with strided(L, "w", "n", count32):
            L("sm[w] = ZERO")
        L("cuda.syncthreads()")


def tame_bound(ft: str) -> float:
    """The largest s max(1, max - min) of a tame row (:func:`.updates.per_range`):
    2^-TAME_SHIFT of the float type's largest finite value."""
    return float(np.finfo(np.dtype(ft)).max) * 2.0 ** -TAME_SHIFT


def row_code(L: Lines) -> None:
    """The forward's thread 0 writes the row's code (``bad[b]``) for the
    kernels after it: ROW_BAD, ROW_OK (tame) or ROW_WIDE."""
    with L.block("if tx == U0:"):
        L(f"bad[b] = {literal(ROW_BAD)} if isbad else ({literal(ROW_OK)} if tame else {literal(ROW_WIDE)})")


def per_output(L: Lines, c: Ctx, stmt: str) -> None:
    """``stmt`` for each output r < k, one per thread: where k <= 32 (a
    block has at least a warp) under ``if tx < k`` with r = tx, else in a
    strided loop on a uint32 counter (NVVM unrolls a ``range(tx, k, nt)``
    loop fourfold with 64-bit indices: in bwd_col that copy set the
    kernel's register count)."""
    if c.k <= WARP:
        with L.block("if tx < k:"):
            L("r = tx", stmt)
    else:
        with strided(L, "r", "k", True):
            L(stmt)


def grad_out(L: Lines, count32: bool = False) -> None:
    """dL/dx from ``sm[:n]`` and the row's dL/ds (NaN for a bad row;
    ``count32``: see :func:`strided`)."""
    L(f"isbad = bad[b] == {literal(ROW_BAD)}")
    with strided(L, "w", "n", count32):
        L("gx[b, w] = NAN if isbad else sm[w]")
    with L.block("if want_gs:"):
        L("cuda.atomic.add(gs, b, NAN if isbad else acc_s)")


def per_rank(L: Lines, c: Ctx, src: str) -> None:
    """For each rank r and wire (or input column) w: ``src``, with ``j = b k
    n + r n + w`` the index of P[b, r, w] in the launch's flat P (``P`` /
    ``gP``: a 1-D view of the launch's rows) and ``e`` its place in the
    sweep's wire-major state: ``w * m + r`` going back (P's row r is lane
    r), ``outs[r] * m + w`` going forward (P's row r is wire outs[r], its
    column w lane w). Threads stride over w: coalesced; ``j = jr + w``
    with the rank's base ``jr`` (no 64-bit row base per element: the row
    view ``P[b, j]`` cost four address instructions an element, docs/
    cuda-round11.md). The loops count on uint32 (:func:`strided`): j and
    e are 32-bit, as the prologue's ``mn = m * n`` always was (the
    launcher keeps rows x k n < 2^32 per launch: INDEX_LIMIT; where m n
    passes 2^32 the rows with P run in lane groups, and emit refuses
    ``lane_groups=False`` there)."""
    L("r = U0", "bP = np.uint32(b * k * n)")
    with L.block("while r < k:"):
        L("jr = np.uint32(bP + r * n)")
        if c.fwd:
            L("o = np.uint32(outs[r]) * m")
        with strided(L, "w", "n", True):
            L("j = np.uint32(jr + w)", "e = np.uint32(o + w)" if c.fwd else "e = np.uint32(w * m + r)", src)
        L("r = np.uint32(r + U1)")
