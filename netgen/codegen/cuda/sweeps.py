"""Statement writers of the ``cuda`` target's kernels: the pieces the
kernel bodies (:mod:`.row_bodies`, :mod:`.groups`, :mod:`.lane_bodies`)
are made of (the prologue, the layer loop with its warp/block barriers,
the rank sweeps, the comparator update, the threads' strided loops), each
written once; the row's way in and out (x with the bad-row check, P,
dL/dx) is in :mod:`.row_io`. Each states trusted statements into a
:class:`~netgen.codegen.lines.Lines` builder; values reach them only
through :func:`~netgen.codegen.lines.literal` and
:func:`~netgen.codegen.render.scalar_literal`."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from .layout import WARP
from ..lines import Lines, literal
from ..render import scalar_literal

#: rank sweeps of networks with k <= UNROLL_RANKS get one guarded copy of
#: the update per rank instead of a rank loop (docs/cuda-kernels.md)
UNROLL_RANKS = 8


@dataclass(frozen=True)
class Ctx:
    """What a body writer needs besides the statements: the float type,
    the variant, the swap code (defining p, dp, dps from d), k, and the P
    sweep: ``fwd`` (forward over the input columns, else back over the
    ranks) and ``lanes`` (its lanes per wire: n or k), D's lane stride,
    and the swap code without the clamps of d and z (``tame_swap``, run by
    :func:`per_range` in tame rows; empty: none)."""

    ft: str
    variant: str
    swap: str
    k: int
    fwd: bool = False
    lanes: int = 0
    dstride: int = 1
    tame_swap: str = ""

    def __post_init__(self) -> None:
        if not self.lanes:
            object.__setattr__(self, "lanes", self.k)


def prologue(L: Lines, ft: str, length: str, k: int, lanes: int | None = None) -> None:
    """Block and thread indices, unsigned constants, the float constants
    (locals: the compiler folds them), k (the network's, a constant), m
    (the P sweep's lanes per wire: k going back, n going forward; a
    constant: the wire-major index arithmetic multiplies by a literal), n,
    the steepness."""
    nan, inf = ("np.float32(math.nan)", "np.float32(math.inf)") if ft == "float32" else ("math.nan", "math.inf")
    L("b = np.uint32(cuda.blockIdx.x)",
      "tx = np.uint32(cuda.threadIdx.x)",
      "nt = np.uint32(cuda.blockDim.x)",
      "U0 = np.uint32(0)",
      "U1 = np.uint32(1)",
      "U2 = np.uint32(2)",
      "U3 = np.uint32(3)",
      f"WARP = np.uint32({WARP})",
      f"ZERO = {scalar_literal(0.0, ft)}",
      f"ONE = {scalar_literal(1.0, ft)}",
      f"NAN = {nan}",
      f"INF = {inf}",
      "L = np.uint32(offs.shape[0]) - U1",
      f"k = np.uint32({literal(k)})",
      f"m = np.uint32({literal(k if lanes is None else lanes)})",
      "s = sv[0]",
      f"n = np.uint32({length}.shape[1])")


def alloc(L: Lines, c: Ctx) -> None:
    """``sm``: the block's wire arrays (dynamic shared memory or the
    block's scratch row)."""
    L(f"sm = cuda.shared.array(0, dtype=numba.{c.ft})" if c.variant == "shared" else "sm = scratch[b]")


#: a comparator's wires: (name, its load with the comparator index for
#: ``{}``, a zero of its type) for :func:`layers`
WIRES = (("a", "wa[{}]", "U0"), ("c", "wb[{}]", "U0"))


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


def layers(L: Lines, reverse: bool, loads=WIRES, prefetch: bool = False, ahead: int = 2,
           count32: bool = False, span: str | None = None) -> Iterator[None]:
    """The layer loop around the comparator code (for comparator ``i``), a
    generator: ``for _ in layers(...)`` writes the comparator code once per
    copy it yields. Threads stride over a layer's comparators; a layer of <=
    32 comparators is run by warp 0 and closed with syncwarp when the next
    layer is narrow too, else every layer ends with syncthreads.
    ``reverse``: last layer first. ``loads``: the comparator's global loads
    ((name, load of index ``{}``, zero of its type)), stated here before the
    comparator code.

    The layer's bounds ``ls``, ``le`` (and, ``ahead`` = 2, the next layer's
    other bound ``nb``) are carried from layer to layer in registers; the
    one new bound, ``ahead`` layers on, is loaded at the top of a layer, so
    no load of the offsets waits on a layer's dependent path (it was two
    dependent L2 round trips per layer). With ``ahead`` = 1 the compiler
    may compute the next layer's narrow test at the top from the bound just
    loaded (one round trip back: the back-sweep did); ``ahead`` = 2 costs a
    register.

    ``prefetch`` (needs ``ahead`` = 2): the ``loads`` of the first
    comparator a thread runs in a layer are made a layer earlier (at the top
    of the layer before; before the loop for the first layer) into
    ``pf_<name>``, and that first comparator is a copy of its own (the first
    yield) reading them from registers; the loop then runs the rest (the
    second yield). A layer of one comparator per thread -- the narrow tail
    of a selection network -- then waits for no table load. Costs a
    register per load. (docs/cuda-rounds4-5.md, Round 4)

    ``count32``: the layer loop is a ``while`` loop on a uint32 layer index
    instead of ``for li in range(U0, L, U1)``, whose 64-bit induction
    variables hold four registers across the comparator loop, and reads
    the layer count as uint32 (``L32``; the prologue's ``L`` is a uint64:
    a register pair across the forward's comparator loop) (the column
    kernels; docs/cuda-rounds4-5.md, Round 5).

    ``span`` (needs ``count32``, no ``prefetch``): the name of a uint32
    base into the kernel's ``spn`` table of per-layer comparator spans
    (``spn[base + 2 l]``, ``spn[base + 2 l + 1]``: this block's [start,
    end) inside layer l); the threads stride over the span instead of the
    whole layer (the lane groups: comparators outside a group's lanes are
    not visited; docs/cuda-round9.md). The next layer's span is
    loaded at the top of a layer, off the dependent path; the barriers
    still follow the layers' own widths."""
    if prefetch and ahead != 2:  # pragma: no cover - a bug in a body writer
        raise ValueError("prefetch needs the next layer's bounds: ahead=2")
    if span and (prefetch or not count32):  # pragma: no cover - a bug in a body writer
        raise ValueError("a span loop has no prefetch and counts layers on uint32")
    U = {1: "U1", 2: "U2"}[ahead]
    new = "nb" if ahead == 1 else "nn"  # the bound loaded at the top of a layer
    past = ("ls" if reverse else "le") if ahead == 1 else "nb"  # its value where there is no such layer
    if reverse:
        L("ls = offs[L - U1 if L > U0 else U0]", "le = offs[L]")
        if ahead == 2:
            L("nb = offs[L - U2] if L >= U2 else ls")
    else:
        L("ls = offs[U0]", "le = offs[U1 if L > U0 else U0]")
        if ahead == 2:
            L("nb = offs[U2] if L >= U2 else le")
    if prefetch:
        _prefetch(L, "ls", "le", loads)
    NL = "L32" if count32 else "L"  # the layer count as the loop reads it
    if count32:  # the layer index a uint32 counter (reverse: lr = l + 1); L itself is 64-bit
        L(*(("lr = np.uint32(L)",) if reverse else ("L32 = np.uint32(L)", "l = U0")))
    lo_, hi_ = ("sl", "sh") if span else ("ls", "le")  # the range the threads stride over
    if span:  # the first layer's span
        L(f"sj = np.uint32({span} + np.uint32({'L - U1' if reverse else 'U0'}) * U2)",
          "sl = spn[sj] if L > U0 else U0",
          "sh = spn[np.uint32(sj + U1)] if L > U0 else U0")
    with L.block(("while lr > U0:" if reverse else "while l < L32:") if count32 else "for li in range(U0, L, U1):"):
        if reverse:
            L("l = np.uint32(lr - U1)" if count32 else "l = np.uint32(L - U1 - li)",
              f"{new} = offs[np.uint32(l - {U})] if l >= {U} else {past}")
        else:
            if not count32:
                L("l = np.uint32(li)")
            L(f"lf = np.uint32(l + U1 + {U})", f"{new} = offs[lf] if lf <= {NL} else {past}")
        if span:  # the next layer's span, loaded a layer ahead
            there = "l > U0" if reverse else f"np.uint32(l + U1) < {NL}"
            L(f"sj = np.uint32({span} + np.uint32({'l - U1' if reverse else 'l + U1'}) * U2)",
              f"nsl = spn[sj] if {there} else U0",
              f"nsh = spn[np.uint32(sj + U1)] if {there} else U0")
        # a narrow layer (<= 32 comparators) is warp 0's, one comparator a thread: its threads step by
        # nt too (a block holds at least a warp), so the step is nt in every layer (no select per layer,
        # which ptxas may rebuild in every iteration)
        L("narrow = np.uint32(le - ls) <= WARP",
          f"i = np.uint32({lo_} + tx) if tx < WARP or not narrow else {hi_}")
        if prefetch:
            # this layer's first comparator from registers
            with L.block("if i < le:"):
                L(*(f"{name} = pf_{name}" for name, _, _ in loads))
                yield
                L("i = np.uint32(i + nt)")
        with L.block(f"while i < {hi_}:"):
            L(*(f"{name} = {load.format('i')}" for name, load, _ in loads))
            yield
            L("i = np.uint32(i + nt)")
        if prefetch:  # the next layer's first comparator, loaded now
            _prefetch(L, *(("nb", "ls") if reverse else ("le", "nb")), loads)
        L("nxt_narrow = l > U0 and np.uint32(ls - nb) <= WARP" if reverse
          else f"nxt_narrow = np.uint32(l + U2) <= {NL} and np.uint32(nb - le) <= WARP")
        with L.block("if narrow and nxt_narrow:"):
            with L.block("if tx < WARP:"):
                L("cuda.syncwarp()")
        with L.block("else:"):
            L("cuda.syncthreads()")
        if ahead == 1:
            L("ls, le = (nb, ls)" if reverse else "ls, le = (le, nb)")
        else:
            L("ls, le, nb = (nb, ls, nn)" if reverse else "ls, le, nb = (le, nb, nn)")
        if span:
            L("sl, sh = (nsl, nsh)")
        if count32:
            L("lr = l" if reverse else "l = np.uint32(l + U1)")


def per_flag(L: Lines, flag: str) -> Iterator[bool]:
    """The code after it once under ``if flag:`` (yielding True) and once
    under ``else:`` (False), so that a loop tests a launch-wide flag once,
    not per comparator, and the ``else`` copy drops what only the flag
    needs: the adjoints' dL/ds (``dps``: with its clamps 4 SASS of the
    column backward's ~49 per comparator; the steepness is a constant in
    most training, docs/cuda-round9.md)."""
    for on in (True, False):
        with L.block(f"if {flag}:" if on else "else:"):
            yield on


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


def _prefetch(L: Lines, start: str, end: str, loads) -> None:
    """``pf_<name>`` = the loads of this thread's first comparator in the
    layer ``start``..``end`` - 1 (zero where it runs none there: the layer
    is narrow and the thread past warp 0, or the layer has fewer
    comparators, or there is no such layer)."""
    L(f"ni = np.uint32({start} + tx)", f"ok = ni < {end} and (tx < WARP or np.uint32({end} - {start}) > WARP)",
      *(f"pf_{name} = {load.format('ni')} if ok else {zero}" for name, load, zero in loads))


@contextmanager
def strided(L: Lines, var: str, stop: str, count32: bool = False) -> Iterator[None]:
    """The threads' strided loop ``var`` = tx, tx + nt, ... < ``stop``:
    ``for var in range(tx, stop, nt)``, or with ``count32`` a ``while`` loop
    on a uint32 ``var`` (NVVM unrolls the ``range`` loop fourfold with
    64-bit induction variables: in the column kernels those copies, not
    the comparator loop, set the register count; docs/cuda-rounds4-5.md,
    Round 5)."""
    if not count32:
        with L.block(f"for {var} in range(tx, {stop}, nt):"):
            yield
        return
    L(f"{var} = tx")
    with L.block(f"while {var} < {stop}:"):
        yield
        L(f"{var} = np.uint32({var} + nt)")


def fill_rows(L: Lines, var: str, stop: str, *offsets: str, count32: bool = False, value: str = "ZERO") -> None:
    """``sm[off + var] = value`` (a prologue constant: ZERO, NAN) for var <
    ``stop``, each offset, then a barrier (``count32``: see
    :func:`strided`)."""
    with strided(L, var, stop, count32):
        for off in offsets:
            L(f"sm[{off}{var}] = {value}")
    L("cuda.syncthreads()")


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
