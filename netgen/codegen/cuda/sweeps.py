"""Statement writers of the ``cuda`` target's kernels: the pieces the
kernel bodies of :mod:`netgen.codegen.cuda.kernels` are made of (the
prologue, the loop over a launch's (row, lane group) items, the layer loop
with its warp/block barriers, a comparator's lanes, the comparator update,
the row load with the bad-row check, the values' adjoint, dL/dx out), each
written once. Each states trusted statements into a
:class:`~netgen.codegen.lines.Lines` builder; values reach them only
through :func:`~netgen.codegen.lines.literal` and
:func:`~netgen.codegen.render.scalar_literal`."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from ..lines import Lines, literal
from ..render import scalar_literal

#: most lanes a thread updates per round of one comparator (the lane
#: sweeps in the direction of the module's P: k ranks going back, n input
#: columns going forward); the other direction's kernels (the column,
#: ranks, masks: one lane) update one lane per round
UNROLL_LANES = 8
WARP = 32


@dataclass(frozen=True)
class Ctx:
    """What a body writer needs besides the statements: the float type,
    the variant, the swap code (defining p, dp, dps from d), the network's
    k, n and size (literals in the kernels), the row stride of the lane
    state ``ns`` (n rounded up to an odd number: a warp reading one wire
    of 32 lanes, or 32 wires of one lane, hits 32 banks) and ``u``, the
    lanes a thread updates per round of a comparator (see
    :data:`UNROLL_LANES`)."""

    ft: str
    variant: str
    swap: str
    k: int
    n: int
    size: int
    u: int = 1

    @property
    def ns(self) -> int:
        return self.n | 1


def prologue(L: Lines, c: Ctx) -> None:
    """Thread indices, unsigned constants, the float constants (locals: the
    compiler folds them), k, n, the lane rows' stride NS and the network's
    size S (literals: index arithmetic multiplies by constants), the
    per-round offsets of the unrolled lanes (``NSu``, ``Su``), the layer
    count, the steepness."""
    ft = c.ft
    nan, inf = ("np.float32(math.nan)", "np.float32(math.inf)") if ft == "float32" else ("math.nan", "math.inf")
    L("tx = np.uint32(cuda.threadIdx.x)",
      "nt = np.uint32(cuda.blockDim.x)",
      "U0 = np.uint32(0)",
      "U1 = np.uint32(1)",
      "U2 = np.uint32(2)",
      f"WARP = np.uint32({WARP})",
      f"ZERO = {scalar_literal(0.0, ft)}",
      f"ONE = {scalar_literal(1.0, ft)}",
      f"NAN = {nan}",
      f"INF = {inf}",
      "L = np.uint32(offs.shape[0]) - U1",
      f"k = np.uint32({literal(c.k)})",
      f"n = np.uint32({literal(c.n)})",
      f"NS = np.uint32({literal(c.ns)})",
      f"S = np.uint32({literal(c.size)})",
      "s = sv[0]")
    for u in range(3, c.u + 1):
        L(f"U{u} = np.uint32({u})")
    if c.u > 1:
        L("NS1 = NS", "S1 = S")
    for u in range(2, c.u + 1):
        L(f"NS{u} = np.uint32({literal(u * c.ns)})", f"S{u} = np.uint32({literal(u * c.size)})")


def alloc(L: Lines, c: Ctx) -> None:
    """``sm``: the block's state (dynamic shared memory, or the global
    scratch row of this block: a launch's grid is at most its scratch rows)."""
    L(f"sm = cuda.shared.array(0, dtype=numba.{c.ft})" if c.variant == "shared"
      else "sm = scratch[np.uint32(cuda.blockIdx.x)]")


@contextmanager
def items(L: Lines) -> Iterator[None]:
    """The block's (row, lane group) items: item = blockIdx.x, then every
    gridDim.x-th (a grid smaller than the work loops: the persistent grid
    of the recomputing backward, whose scratch D is per block). Defines
    ``b`` (the launch's row), ``g0`` (the group's first lane), ``nl`` (its
    lanes: G, fewer in the last group, 0 without lanes), ``ge`` = g0 + nl,
    ``bS`` = b S (the row's first comparator in the flat per-comparator
    arrays); a barrier ends each item (the next one reuses ``sm``)."""
    L("G32 = np.uint32(G)", "m32 = np.uint32(m)", "groups32 = np.uint32(groups)", "items32 = np.uint32(items)",
      "grid = np.uint32(cuda.gridDim.x)", "item = np.uint32(cuda.blockIdx.x)")
    with L.block("while item < items32:"):
        L("b = np.uint32(item // groups32)",
          "g0 = np.uint32(np.uint32(item - b * groups32) * G32)",
          "nl = np.uint32(m32 - g0) if np.uint32(m32 - g0) < G32 else G32",
          "ge = np.uint32(g0 + nl)",
          "bS = np.uint32(b * S)")
        yield
        L("cuda.syncthreads()", "item = np.uint32(item + grid)")


#: a comparator's wires from the interleaved table ``wab`` (wab[2 i],
#: wab[2 i + 1]: one address for both) for :func:`layers`
WAB = (("a", "wab[{0} + {0}]", "U0"), ("c", "wab[{0} + {0} + U1]", "U0"))
#: its plan range of lanes from the interleaved ``cr`` (cr[2 i], cr[2 i + 1])
CR = (("lo", "cr[{0} + {0}]", "U0"), ("hi", "cr[{0} + {0} + U1]", "U0"))
#: p as the values sweep saved it
P_SAVED = (("p", "ps[np.uint32(bS + {0})]", "ZERO"),)


def layers(L: Lines, reverse: bool, loads=WAB, prefetch: bool = False, ahead: int = 2) -> Iterator[None]:
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
    loaded (one round trip back); ``ahead`` = 2 costs a register.

    ``prefetch`` (needs ``ahead`` = 2): the ``loads`` of the first
    comparator a thread runs in a layer are made a layer earlier (after the
    loop of the layer before; before the loop for the first layer) into
    ``pf_<name>``, and that first comparator is a copy of its own (the first
    yield) reading them from registers; the loop then runs the rest (the
    second yield). A layer of one comparator per thread -- the narrow tail
    of a selection network -- then waits for no table load. Costs a
    register per load. (docs/cuda-kernels.md, Round 4)

    The layer index is a uint32 ``while`` counter and the layer count is
    read as uint32 (``L32``): ``for li in range(...)`` kept two 64-bit
    induction variables live across the comparator loop (Round 5)."""
    if prefetch and ahead != 2:  # pragma: no cover - a bug in a body writer
        raise ValueError("prefetch needs the next layer's bounds: ahead=2")
    U = {1: "U1", 2: "U2"}[ahead]
    new = "nb" if ahead == 1 else "nn"  # the bound loaded at the top of a layer
    past = ("ls" if reverse else "le") if ahead == 1 else "nb"  # its value where there is no such layer
    L("L32 = np.uint32(L)")
    if reverse:
        L("ls = offs[L32 - U1 if L32 > U0 else U0]", "le = offs[L32]")
        if ahead == 2:
            L("nb = offs[L32 - U2] if L32 >= U2 else ls")
    else:
        L("ls = offs[U0]", "le = offs[U1 if L32 > U0 else U0]")
        if ahead == 2:
            L("nb = offs[U2] if L32 >= U2 else le")
    if prefetch:
        _prefetch(L, "ls", "le", loads)
    L("lr = L32" if reverse else "l = U0")
    with L.block("while lr > U0:" if reverse else "while l < L32:"):
        if reverse:
            L("l = np.uint32(lr - U1)", f"{new} = offs[np.uint32(l - {U})] if l >= {U} else {past}")
        else:
            L(f"lf = np.uint32(l + U1 + {U})", f"{new} = offs[lf] if lf <= L32 else {past}")
        L("narrow = np.uint32(le - ls) <= WARP")
        with L.block("if narrow:"):
            L("i0 = np.uint32(ls + tx) if tx < WARP else le", "di = WARP")
        with L.block("else:"):
            L("i0 = np.uint32(ls + tx)", "di = nt")
        L("i = i0")
        if prefetch:
            # this layer's first comparator from registers
            with L.block("if i < le:"):
                L(*(f"{name} = pf_{name}" for name, _, _ in loads))
                yield
                L("i = np.uint32(i + di)")
        with L.block("while i < le:"):
            L(*(f"{name} = {load.format('i')}" for name, load, _ in loads))
            yield
            L("i = np.uint32(i + di)")
        if prefetch:  # the next layer's first comparator, loaded now
            _prefetch(L, *(("nb", "ls") if reverse else ("le", "nb")), loads)
        L("nxt_narrow = l > U0 and np.uint32(ls - nb) <= WARP" if reverse
          else "nxt_narrow = np.uint32(l + U2) <= L32 and np.uint32(nb - le) <= WARP")
        with L.block("if narrow and nxt_narrow:"):
            with L.block("if tx < WARP:"):
                L("cuda.syncwarp()")
        with L.block("else:"):
            L("cuda.syncthreads()")
        if ahead == 1:
            L("ls, le = (nb, ls)" if reverse else "ls, le = (le, nb)")
        else:
            L("ls, le, nb = (nb, ls, nn)" if reverse else "ls, le, nb = (le, nb, nn)")
        L("lr = l" if reverse else "l = np.uint32(l + U1)")


def _prefetch(L: Lines, start: str, end: str, loads) -> None:
    """``pf_<name>`` = the loads of this thread's first comparator in the
    layer ``start``..``end`` - 1 (zero where it runs none there: the layer
    is narrow and the thread past warp 0, or the layer has fewer
    comparators, or there is no such layer)."""
    L(f"ni = np.uint32({start} + tx)", f"ok = ni < {end} and (tx < WARP or np.uint32({end} - {start}) > WARP)",
      *(f"pf_{name} = {load.format('ni')} if ok else {zero}" for name, load, zero in loads))


@contextmanager
def strided(L: Lines, var: str, stop: str) -> Iterator[None]:
    """The threads' strided loop ``var`` = tx, tx + nt, ... < ``stop`` as a
    ``while`` loop on a uint32 ``var`` (NVVM unrolls a ``range`` loop
    fourfold with 64-bit induction variables: in the column kernels those
    copies, not the comparator loop, set the register count;
    docs/cuda-kernels.md, Round 5)."""
    L(f"{var} = tx")
    with L.block(f"while {var} < {stop}:"):
        yield
        L(f"{var} = np.uint32({var} + nt)")


@contextmanager
def counted(L: Lines, var: str, stop: str) -> Iterator[None]:
    """A plain uint32 loop ``var`` = 0 .. ``stop`` - 1 (every thread)."""
    L(f"{var} = U0")
    with L.block(f"while {var} < {stop}:"):
        yield
        L(f"{var} = np.uint32({var} + U1)")


def fill(L: Lines, start: str, stop: str) -> None:
    """``sm[start .. stop - 1] = ZERO``, threads strided (no barrier)."""
    with strided(L, "w", f"np.uint32({stop} - {start})"):
        L(f"sm[np.uint32({start} + w)] = ZERO")


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


def swap_at(L: Lines, c: Ctx, saved: str | None = None, saved_p: str | None = None) -> None:
    """Wires of comparator i, its difference d (``saved``: where the forward
    kept it; else from the values xa, xc), then the swap code (p, dp, dps).
    ``saved_p``: where the forward kept p; p is then read, not recomputed
    (the swap code's p is dead and the compiler drops it: an adjoint needs
    only dp and dps, one division, not the arctangent)."""
    if saved:
        L(f"d = {saved}")
    else:
        L("xa = sm[a]", "xc = sm[c]", "d = xa - xc")
    L(c.swap)
    if saved_p:
        L(f"p = {saved_p}")


def load_row(L: Lines, c: Ctx, col: bool) -> None:
    """Load row b of x into ``sm[:n]`` (zeros for a bad row), flag bad rows:
    non-finite entries, a steepness not finite and > 0, an overflowing
    steepness * (max - min), and (``col``, a one-hot lane at y) a y outside
    0..n-1."""
    L(f"mm = cuda.shared.array(2, dtype=numba.{c.ft})")
    with L.block("if tx == U0:"):
        L("mm[0] = -INF", "mm[1] = INF")
    L("cuda.syncthreads()")
    if col:
        L("yb = y[b] if init == 2 else 0", "nonfinite = 1 if yb < 0 or yb >= n else 0")
    else:
        L("nonfinite = 0")
    L("hx = -INF", "lx = INF")
    with strided(L, "w", "n"):
        L("xw = x[b, w]")
        with L.block("if not math.isfinite(xw):"):
            L("nonfinite = 1")
        L("hx = max(hx, xw)", "lx = min(lx, xw)", "sm[w] = xw")
    L("cuda.atomic.max(mm, 0, hx)",
      "cuda.atomic.min(mm, 1, lx)",
      "anybad = cuda.syncthreads_or(nonfinite)",
      "spread = s * (mm[0] - mm[1])",
      "isbad = anybad != 0 or not (s > ZERO and math.isfinite(s) and math.isfinite(spread))")
    with L.block("if isbad:"):
        with strided(L, "w", "n"):
            L("sm[w] = ZERO")
        L("cuda.syncthreads()")


def plan_range(L: Lines) -> None:
    """Comparator i's lanes in this block: its plan range ``lo``..``hi``
    (where ``ranged``: the lanes are the identity's, P's ranks or input
    columns; else every lane of a comparator that reaches an output, all
    of them or none) cut to the block's group g0..ge, as block-local lanes
    ``qlo``..``qhi``."""
    L("lo2 = lo if ranged else U0",
      "hi2 = hi if ranged else (m32 if lo < hi else U0)",
      "qlo = np.uint32(lo2 - g0) if lo2 > g0 else U0",
      "qh = hi2 if hi2 < ge else ge",
      "qhi = np.uint32(qh - g0) if qh > g0 else U0")


def lanes_at(L: Lines, c: Ctx, adj: bool, save: str | None = None) -> None:
    """Comparator i's update of the block's lanes qlo..qhi-1 (rows ``LB +
    q NS`` of ``sm``; wires ``a``, ``c``; p): a lane sweep (``adj`` False:
    saving each lane's difference before the update in ``D[j]`` where the
    flag ``save`` is set) or an adjoint sweep (``adj``: ``acc`` += the
    lane's difference times ``D[j]``, dL/dp of the comparator). ``j`` =
    ``Dq`` + q S + i: D is lane-major (a warp's consecutive comparators
    touch consecutive floats). ``c.u`` lanes per round: their loads first
    (a lane past qhi reads the round's first row again and is not
    updated; no load leaves the block's rows), then the guarded updates
    (stores at constant offsets ``NSu``)."""
    plan_range(L)
    L("sa = np.uint32(LB + qlo * NS + a)", "sc = np.uint32(LB + qlo * NS + c)")
    uses_d = adj or save is not None
    if uses_d:
        L("j = np.uint32(Dq + qlo * S + i)")
    L("q = qlo")
    step = ["q = np.uint32(q + U{})".format(c.u), f"sa = np.uint32(sa + {'NS' if c.u == 1 else f'NS{c.u}'})",
            f"sc = np.uint32(sc + {'NS' if c.u == 1 else f'NS{c.u}'})"]
    if uses_d:
        step.append(f"j = np.uint32(j + {'S' if c.u == 1 else f'S{c.u}'})")
    with L.block("while q < qhi:"):
        if c.u == 1:
            L("va = sm[sa]", "vc = sm[sc]", "dv = va - vc")
            if adj:
                L("acc += dv * D[j]")
            elif save:
                with L.block(f"if {save}:"):
                    L("D[j] = dv")
            mix(L, "sa", "sc", "va", "vc", diff="dv")
            L(*step)
            return
        L("rem = np.uint32(qhi - q)")
        for u in range(1, c.u):
            L(f"ok{u} = rem > U{u}", f"o{u} = NS{u} if ok{u} else U0")
        # every lane's pair (and D entry) loaded before the first update: the
        # loads issue together instead of each waiting on the stores before
        L("va0 = sm[sa]", "vc0 = sm[sc]")
        for u in range(1, c.u):
            L(f"va{u} = sm[np.uint32(sa + o{u})]", f"vc{u} = sm[np.uint32(sc + o{u})]")
        if adj:
            L("e0 = D[j]")
            for u in range(1, c.u):
                L(f"e{u} = D[np.uint32(j + (S{u} if ok{u} else U0))]")
        for u in range(c.u):
            with (L.block(f"if ok{u}:") if u else _same(L)):
                L(f"dv{u} = va{u} - vc{u}")
                off = "" if u == 0 else f" + NS{u}"
                if adj:
                    L(f"acc += dv{u} * e{u}")
                elif save:
                    with L.block(f"if {save}:"):
                        L(f"D[np.uint32(j{'' if u == 0 else f' + S{u}'})] = dv{u}")
                mix(L, f"np.uint32(sa{off})" if off else "sa", f"np.uint32(sc{off})" if off else "sc",
                    f"va{u}", f"vc{u}", diff=f"dv{u}")
        L(*step)


@contextmanager
def _same(L: Lines) -> Iterator[None]:
    yield


def values_adjoint(L: Lines, c: Ctx, inline_lanes: bool) -> None:
    """The values' adjoint, last layer first, on ``sm[:n]`` (dL/dvalues on
    the output wires, zero elsewhere, set up by the caller): per comparator
    d and p as the forward saved them, dp and dp/ds from the swap code (one
    division, no arctangent), dL/dp = (g_a - g_c) d + the lanes' dL/dp
    (``inline_lanes``: this block's lanes adjoint run in the same pass,
    ``acc``; else ``gp`` where ``has_gp``), dL/ds summed in ``acc_s``."""
    loads = WAB + (("d", "ds[np.uint32(bS + {0})]", "ZERO"), ("pv", "ps[np.uint32(bS + {0})]", "ZERO"))
    if inline_lanes:
        loads += CR
    else:
        loads += (("gq", "(gp[np.uint32(bS + {0})] if has_gp else ZERO)", "ZERO"),)
    for _ in layers(L, reverse=True, loads=loads, prefetch=True):
        if inline_lanes:
            L("p = pv", "acc = ZERO")
            lanes_at(L, c, adj=True)
            L("gq = acc")
        swap_at(L, c, "d", "pv")
        L("ga = sm[a]", "gc = sm[c]", "dg = ga - gc", "gpi = dg * d + gq", "acc_s += gpi * dps", "gd = gpi * dp")
        mix(L, "a", "c", "ga", "gc", "gd", diff="dg")


def grad_out(L: Lines) -> None:
    """dL/dx from ``sm[:n]`` and the row's dL/ds (NaN for a bad row)."""
    with strided(L, "w", "n"):
        L("gx[b, w] = NAN if isbad else sm[w]")
    with L.block("if want_gs:"):
        L("cuda.atomic.add(gs, b, NAN if isbad else acc_s)")


def group_pairs(L: Lines, count: str) -> None:
    """Per thread, the first (outer ``o0``, lane ``q0``) pair of a strided
    loop over ``count`` x nl pairs with the lane fastest, and the step
    (``do``, ``dq``) of one stride: two divisions per thread, none per
    element (:func:`pairs`)."""
    L("nlg = nl if nl > U0 else U1",
      "o0 = np.uint32(tx // nlg)", "q0 = np.uint32(tx - o0 * nlg)",
      "do = np.uint32(nt // nlg)", "dq = np.uint32(nt - do * nlg)")


@contextmanager
def pairs(L: Lines, count: str) -> Iterator[None]:
    """The threads' strided loop over (o, q), o < ``count``, q < nl, lane q
    fastest (consecutive threads: consecutive lanes of one output, so the
    global side is contiguous over a group's lanes), as running counters
    (:func:`group_pairs` first)."""
    L("o = o0", "q = q0")
    with L.block(f"while o < {count} and nl > U0:"):
        yield
        L("q = np.uint32(q + dq)", "o = np.uint32(o + do)")
        with L.block("if q >= nl:"):
            L("q = np.uint32(q - nl)", "o = np.uint32(o + U1)")
