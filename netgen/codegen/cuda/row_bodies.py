"""Body writers of the ``cuda`` target's row and column kernels (``fwd``,
``bwd``: the rows, values and P; ``fwd_col``, ``bwd_col``: the column
P[:, y]): each states a kernel's statements after the prologue into a
:class:`~netgen.codegen.lines.Lines` builder from the shared pieces of
:mod:`.sweeps` and :mod:`.updates`. The :class:`~.kernels.Kernel` objects that hold them, and
what each kernel does, are in :mod:`.kernels`; the lane-group bodies in
:mod:`.groups`, the lane kernels' in :mod:`.lane_bodies`."""

from __future__ import annotations

from .row_io import grad_out, load_row, per_output, per_rank, row_code
from .sweeps import Ctx, alloc, fill_rows, layers
from .updates import adjoint_loops, mix, per_range, rank_step, rank_tables, ranks, swap_at, sweep, values_adjoint
from ..lines import Lines, literal

__all__ = ["fwd", "bwd", "fwd_col", "bwd_col"]

#: the rows and column kernels' wires: a, c of comparator i from the interleaved
#: table wab (2 size entries: wab[2 i], wab[2 i + 1]): one address for both
_WAB = (("a", "wab[{0} + {0}]", "U0"), ("c", "wab[{0} + {0} + U1]", "U0"))


def _flat(L: Lines, c: Ctx, has_D: str) -> None:
    """The rows kernels index ds, ps, gp (size per row) and D (``dix[S]``
    per row) flat with 32-bit indices: row b's at ``bS`` = b size and
    ``bD`` = b dix[S] (0 where the flag ``has_D`` says D is a dummy) in 1-D
    views of the launch's rows (the launcher keeps rows x max(size, D's
    row) < 2^32 per launch: INDEX_LIMIT). Row views cost a 64-bit row base
    per access (docs/cuda-round9.md). ``DS``: D's lane stride
    (:func:`.layout.d_slots`; a constant: the unrolled ranks' offsets
    ``r DS`` are immediates)."""
    L("mn = m * n")
    _row_base(L)
    L(f"bD = np.uint32(b * dix[S]) if {has_D} else U0", f"DS = np.uint32({literal(c.dstride)})")


def _row_base(L: Lines, when: str = "") -> None:
    """``S``, the comparators per row (``wab`` holds two wires each), and
    ``bS`` = b S, row b's first index into the launch's flat per-comparator
    arrays (U0 unless the flag ``when`` holds, where given)."""
    unless = f" if {when} else U0" if when else ""
    L("S = np.uint32(np.uint32(wab.shape[0]) >> U1)", f"bS = np.uint32(b * S){unless}")


def fwd(L: Lines, c: Ctx) -> None:
    _flat(L, c, "save_D")
    alloc(L, c)
    load_row(L, c, col=False, count32=True)
    for tame in per_range(L, c):  # the clamps of d and z only where they can act
        for _ in layers(L, reverse=False, loads=_WAB, prefetch=True):
            swap_at(L, c, tame=tame)
            mix(L, "a", "c", "xa", "xc", diff="d")
            L("ji = np.uint32(bS + i)", "ds[ji] = d", "ps[ji] = p")
    per_output(L, c, "values[b, r] = NAN if isbad else sm[outs[r]]")
    row_code(L)
    with L.block("if do_P:"):
        L("cuda.syncthreads()")
        sweep(L, c, "save_D")
        # a bad row's P is NaN: its P state is set to NaN (isbad holds for the whole block) and P's store
        # tests no flag per element (with the test, ptxas rebuilt the shared base in every iteration)
        with L.block("if isbad:"):
            fill_rows(L, "j", "mn", "", count32=True, value="NAN")
        per_rank(L, c, "P[j] = sm[e]")


def bwd(L: Lines, c: Ctx) -> None:
    _flat(L, c, "has_gP")
    alloc(L, c)
    with L.block("if has_gP:"):
        with L.block("if recompute:"):
            sweep(L, c, "recompute")
        if c.fwd and c.k < c.lanes:
            fill_rows(L, "j", "mn", "", count32=True)  # wires that are no output get no dL/dP
        per_rank(L, c, "sm[e] = gP[j]")
        L("cuda.syncthreads()")
        # dL/dP pushed through the comparators the other way than the sweep
        for _ in layers(L, reverse=c.fwd, loads=rank_tables(True), prefetch=True):
            with ranks(L, c, acc=True):
                rank_step(L, c, ("ga", "gc"), True, lambda j, e: L(f"acc += dv * {e}"), gather="D")
            L("gp[np.uint32(bS + i)] = acc")
    fill_rows(L, "w", "n", "", count32=True)
    with L.block("if has_gv:"):
        per_output(L, c, "sm[outs[r]] = gv[b, r]")
        L("cuda.syncthreads()")
    # d, p and dL/dp (zero without dL/dP: gp is then a 1 x 1 dummy) loaded by the layer loop
    values_adjoint(L, c, _WAB + (("d", "ds[np.uint32(bS + {})]", "ZERO"), ("pv", "ps[np.uint32(bS + {})]", "ZERO"),
                                 ("gq", "(gp[np.uint32(bS + {})] if has_gP else ZERO)", "ZERO")))
    grad_out(L, count32=True)


# The column kernels write their loops over wires and outputs with uint32
# counters (count32, per_output): a kernel's register count is its largest
# anywhere, and NVVM's fourfold 64-bit copies of those loops, not the
# comparator loop, set it (docs/cuda-rounds4-5.md, Round 5).
def fwd_col(L: Lines, c: Ctx) -> None:
    # d, du and p of comparator i of row b side by side at 3 j, 3 j + 1, 3 j
    # + 2 of the launch's cs, j = b size + i (a 1-D view; the launcher keeps
    # rows x 3 size < 2^32 per launch: INDEX_LIMIT): one base address and a
    # 32-bit index per comparator, where row views cost 64-bit row bases
    L("yb = y[b]")
    _row_base(L, when="save")
    alloc(L, c)
    load_row(L, c, col=True, count32=True)
    with L.block("if tx == U0 and not isbad:"):
        L("sm[n + np.uint32(yb)] = ONE")
    L("cuda.syncthreads()")
    for tame in per_range(L, c):  # the clamps of d and z only where they can act
        for _ in layers(L, reverse=False, loads=_WAB, count32=True):
            swap_at(L, c, tame=tame)
            mix(L, "a", "c", "xa", "xc", diff="d")
            L("ua = sm[n + a]", "uc = sm[n + c]", "du = ua - uc")
            mix(L, "n + a", "n + c", "ua", "uc", diff="du")
            with L.block("if save:"):
                L("j3 = np.uint32(np.uint32(bS + i) * U3)", "cs[j3] = d", "cs[j3 + U1] = du", "cs[j3 + U2] = p")
    per_output(L, c, "col[b, r] = NAN if isbad else sm[n + outs[r]]")
    row_code(L)


def bwd_col(L: Lines, c: Ctx) -> None:
    _row_base(L)  # flat indices, as in fwd_col
    alloc(L, c)
    fill_rows(L, "w", "n", "", "n + ", count32=True)
    per_output(L, c, "sm[n + outs[r]] = gcol[b, r]")
    L("cuda.syncthreads()")
    # one bound ahead, no prefetch: with both, 40 -> 42 SASS per comparator
    # (docs/cuda-round11.md; in Round 5 they took it past 32 registers)
    for gs_on, tame in adjoint_loops(L, c):
        for _ in layers(L, reverse=True, loads=_WAB, ahead=1, count32=True):
            L("j3 = np.uint32(np.uint32(bS + i) * U3)")
            swap_at(L, c, "cs[j3]", "cs[j3 + U2]", tame)
            L("ga = sm[a]", "gc = sm[c]", "ua = sm[n + a]", "uc = sm[n + c]", "dg = ga - gc", "du = ua - uc",
              "gpi = dg * d + du * cs[j3 + U1]",
              "gd = gpi * dp")
            if gs_on:
                L("acc_s += gpi * dps")
            mix(L, "a", "c", "ga", "gc", "gd", diff="dg")
            mix(L, "n + a", "n + c", "ua", "uc", diff="du")
    grad_out(L, count32=True)
