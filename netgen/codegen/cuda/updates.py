"""The comparator's update in the ``cuda`` target's kernels: the swap
code (and its tame copy, :func:`per_range`), the update of a pair of
entries (:func:`mix`), the rank sweeps of the P state (:func:`ranks`,
:func:`rank_step`, :func:`sweep`) and the values' adjoint; the layer
loops they run in are :mod:`.sweeps`. Trusted statements only, as there:
values reach them through :func:`~netgen.codegen.lines.literal`."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from .sweeps import Ctx, fill_rows, layers, per_flag, strided
from ..lines import Lines, literal

#: rank sweeps of networks with k <= UNROLL_RANKS get one guarded copy of
#: the update per rank instead of a rank loop (docs/cuda-kernels.md)
UNROLL_RANKS = 8


def rank_tables(d_index: bool) -> tuple[tuple[str, str, str], ...]:
    """What a rank sweep loads per comparator (for :func:`layers`; plain
    loads, so that a prefetch waits for nothing): its plan range, its wires
    (``wa_``, ``wb_``) from the interleaved ``rtab`` (one base address for
    the four, where four tables cost a base pointer each, reloaded from the
    constant bank every iteration: 6 SASS per comparator), p (``ps`` flat:
    row b's at ``bS``) and, where D is
    indexed, its first D index ``j`` (flat: row b's D at ``bD``; 32-bit
    indices, one ``IMAD.WIDE.U32`` per address where row views cost a
    64-bit row base)."""
    out = (("lo", "rtab[np.uint32({0} << U2)]", "U0"), ("hi", "rtab[np.uint32({0} << U2) + U1]", "U0"),
           ("wa_", "rtab[np.uint32({0} << U2) + U2]", "U0"), ("wb_", "rtab[np.uint32({0} << U2) + U3]", "U0"),
           ("p", "ps[np.uint32(bS + {0})]", "ZERO"))
    return out + ((("j", "np.uint32(bD + dix[{0}])", "U0"),) if d_index else ())


#: ROW_OK, ROW_BAD, ROW_WIDE: a row's code in ``bad[b]`` (written by the
#: forward's thread 0, read by every later kernel of the row): tame (the
#: clamps of d and z cannot act), bad (NaN/inf, a bad steepness, y out of
#: range: NaN outputs), finite but wide (s max(1, max - min) past TAME)
ROW_OK, ROW_BAD, ROW_WIDE = 0, 1, 2
#: 2^-24 of the float type's largest value: up to it a row is tame
TAME_SHIFT = 24


def per_range(L: Lines, c: Ctx) -> Iterator[bool]:
    """The code after it once under ``if tame:`` (yielding True: the swap
    code without the clamps of d and z) and once under ``else:`` (False:
    with them), where the kernels hold the tame copy (``c.tame_swap``;
    else once, False, with no test). ``tame`` is set by the forward's
    bad-row check (:func:`.row_io.load_row`) or read from ``bad[b]``
    (:func:`read_tame`).

    Why the clamps cannot act in a tame row (docs/cuda-round10.md): every
    value of the sweep is a convex combination of the row's values, so
    each d is within max - min of the row, plus a rounding drift of about
    an ulp of the largest value per layer; phi(d) is at most max(1, |d|);
    a row with s max(1, max - min) <= 2^-24 of the largest finite value
    keeps d and z = s phi(d) finite with 2^24 to spare, and there the
    clamps return their input: the copies compute the same bits. The
    clamps cost 4 SASS per comparator (59 -> 55 in the column forward)."""
    if not c.tame_swap:
        yield False
        return
    yield from per_flag(L, "tame")


def read_tame(L: Lines, c: Ctx) -> None:
    """``tame`` from the row's code the forward wrote (``bad[b]``), in a
    kernel after it that runs the swap code (where the kernels hold the
    tame copy)."""
    if c.tame_swap:
        L(f"tame = bad[b] == {literal(ROW_OK)}")


def mix(L: Lines, a: str, c: str, va: str, vc: str, grad: str = "", diff: str = "") -> None:
    """The comparator update of one pair of entries: ``sm[a] = p va + q vc``,
    ``sm[c] = q va + p vc`` (plus / minus ``grad`` in an adjoint), written
    as ``t = p (va - vc) (+ grad)``, ``sm[a] = vc + t``, ``sm[c] = va - t``
    (q = 1 - p): one multiply-add and two adds where the difference
    ``diff`` (``va - vc``, when the caller has it) is computed anyway, no q
    (docs/cuda-kernels.md: 2-3 SASS instructions per update fewer)."""
    L(f"t = p * {diff or '(' + va + ' - ' + vc + ')'}{' + ' + grad if grad else ''}",
      f"sm[{a}] = {vc} + t",
      f"sm[{c}] = {va} - t")


def adjoint_loops(L: Lines, c: Ctx) -> Iterator[tuple[bool, bool]]:
    """The adjoints' copies of their layer loop: ``acc_s`` zeroed and the
    row's ``tame`` read, then the code after it once per (``want_gs``,
    ``tame``) value (:func:`per_flag`, :func:`per_range`), yielding
    (dL/ds summed, the tame swap code). The values' adjoint
    (:func:`values_adjoint`) and the column's backward."""
    read_tame(L, c)
    L("acc_s = ZERO")
    for gs_on in per_flag(L, "want_gs"):  # dL/ds summed only where asked for
        for tame in per_range(L, c):  # the clamps of d and z only where they can act
            yield gs_on, tame


def values_adjoint(L: Lines, c: Ctx, loads) -> None:
    """The values' adjoint swept back (the gradient in ``sm[:n]``), adding
    each comparator's dL/dp ``gq``: ``loads`` are its wires (``a``, ``c``)
    and its saved ``d``, ``pv`` (p) and ``gq`` (for :func:`layers`). The
    swap code gives dp/dd and dp/ds from d; dL/ds is summed into ``acc_s``
    only in the ``want_gs`` copy of the loop (:func:`per_flag`). The rows'
    ``bwd`` and the lane groups' ``vals_bwd`` (they differ in where d, p
    and dL/dp are read from). Where the kernels hold the tame swap code
    the row's ``tame`` flag picks the copy (:func:`per_range`)."""
    for gs_on, tame in adjoint_loops(L, c):
        for _ in layers(L, reverse=True, loads=loads, prefetch=True):
            swap_at(L, c, "d", "pv", tame)
            L("ga = sm[a]", "gc = sm[c]", "dg = ga - gc", "gpi = dg * d + gq", "gd = gpi * dp")
            if gs_on:
                L("acc_s += gpi * dps")
            mix(L, "a", "c", "ga", "gc", "gd", diff="dg")


def swap_at(L: Lines, c: Ctx, saved: str | None = None, saved_p: str | None = None, tame: bool = False) -> None:
    """Wires of comparator i, its difference d (``saved``: where the forward
    kept it; else from the values xa, xc), then the swap code (p, dp, dps).
    ``saved_p``: where the forward kept p; p is then read, not recomputed
    (the swap code's p is dead and the compiler drops it: an adjoint needs
    only dp and dps, one division, not the arctangent). ``tame``: the copy
    without the clamps of d and z (:func:`per_range`)."""
    if saved:
        if saved != "d":
            L(f"d = {saved}")
    else:
        L("xa = sm[a]", "xc = sm[c]", "d = xa - xc")
    L(c.tame_swap if tame else c.swap)
    if saved_p:
        L(f"p = {saved_p}")


@contextmanager
def ranks(L: Lines, c: Ctx, acc: bool = False) -> Iterator[None]:
    """Comparator i's planned lanes lo..hi-1 (ranks, or input columns going
    forward; "ranks" below) in wire-major rows of m lanes (its wires'
    entries start at ``a``, ``c``; ``lo``, ``hi``, the wires, p and ``j``
    loaded by :func:`layers` from :func:`rank_tables`); the body is the rank
    sweep (:func:`rank_step`). There is no range test around the sweep: the
    unrolled copies are guarded rank by rank and the rank loop runs no
    iteration where lo >= hi. (Behind a ``lo < hi`` test the compiler sank
    the wires, p and D offset below it: two dependent rounds of L2 latency
    per comparator; docs/cuda-rounds4-5.md, Round 4.)"""
    L("a = wa_ * m", "c = wb_ * m")
    if acc:
        L("acc = ZERO")
    if c.lanes > UNROLL_RANKS:
        L("ia = a + lo", "ic = c + lo", "ie = a + hi")
    yield


def rank_step(L: Lines, c: Ctx, names: tuple[str, str], d_index: bool, body: Callable[[str, str], None],
              gather: str | None = None) -> None:
    """The update of comparator i's ranks: load the pair and its difference
    ``dv``, ``body`` (given the D index of the rank and, where ``gather``
    names an array indexed like D, that array's entry for the rank), mix.
    Where m <= UNROLL_RANKS every rank r < m gets its own guarded copy (``lo
    <= r < hi``; no rank loop: the model counts ~25% fewer instructions per
    comparator at k = 5), every rank's pair (and gathered entry) loaded
    before the first update (one round of load latency per comparator, not
    one per rank); otherwise a ``while ia < ie`` loop with running indices
    (``j`` too where D is indexed)."""
    va, vc = names
    if c.lanes <= UNROLL_RANKS:
        # every rank's pair loaded first (in bounds for every r < k; the
        # entries of one comparator's ranks are distinct, so no store below
        # can change them): the loads issue together instead of each
        # waiting on the previous rank's stores
        for r in range(c.lanes):
            L(f"r = np.uint32({r})", f"{va}{r} = sm[a + r]", f"{vc}{r} = sm[c + r]")
        if gather:
            # the gathered entries likewise, each only where the rank is
            # planned (outside lo..hi-1 the D index is another comparator's)
            for r in range(c.lanes):
                L(f"r = np.uint32({r})", f"e{r} = {gather}[j + r * DS] if lo <= r and r < hi else ZERO")
        for r in range(c.lanes):
            L(f"r = np.uint32({r})")
            with L.block("if lo <= r and r < hi:"):
                L(f"dv = {va}{r} - {vc}{r}")
                body("j + r * DS", f"e{r}")
                mix(L, "a + r", "c + r", f"{va}{r}", f"{vc}{r}", diff="dv")
        return
    if d_index:  # the D index of lane lo, then one stride per lane
        L("j = np.uint32(j + lo * DS)")
    with L.block("while ia < ie:"):
        L(f"{va} = sm[ia]", f"{vc} = sm[ic]", f"dv = {va} - {vc}")
        if gather:
            L(f"e = {gather}[j]")
        body("j", "e")
        mix(L, "ia", "ic", va, vc, diff="dv")
        L("ia += U1", "ic += U1")
        if d_index:
            L("j = np.uint32(j + DS)")


def sweep(L: Lines, c: Ctx, save: str) -> None:
    """The P sweep over the planned lanes, its state (n x m, wire-major, in
    ``sm``) started at the outputs' ranks and swept from the last layer to
    the first (``R <- R M_l``; back), or started at the identity and swept
    from the first layer to the last (``A <- M_l A``; ``c.fwd``); saves D
    when ``save`` (a flag name: one layer loop each way, so the flag is
    tested once, not per comparator; the loops outside the layers count
    on uint32, as :func:`strided`)."""
    fill_rows(L, "j", "mn", "", count32=True)
    if c.fwd:
        with strided(L, "w", "n", True):
            L("sm[w * m + w] = ONE")
    else:
        with strided(L, "r", "k", True):
            L("sm[outs[r] * m + r] = ONE")
    L("cuda.syncthreads()")
    with L.block(f"if {save}:"):
        for _ in layers(L, reverse=not c.fwd, loads=rank_tables(True), prefetch=True):
            with ranks(L, c):
                rank_step(L, c, ("ra", "rc"), True, lambda j, e: L(f"D[{j}] = dv"))
    with L.block("else:"):
        for _ in layers(L, reverse=not c.fwd, loads=rank_tables(False), prefetch=True):
            with ranks(L, c):
                rank_step(L, c, ("ra", "rc"), False, lambda j, e: None)
