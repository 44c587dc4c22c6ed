"""Statement writers of the ``cuda`` target's kernels: the pieces the
kernel bodies (:mod:`.row_bodies`, :mod:`.groups`, :mod:`.lane_bodies`)
are made of (the prologue, the layer loop with its warp/block barriers,
the threads' strided loops), each written once; the comparator's update
run inside them (the swap code, the rank sweeps, the values' adjoint) is
in :mod:`.updates`, the row's way in and out (x with the bad-row check,
P, dL/dx) in :mod:`.row_io`. Each states trusted statements into a
:class:`~netgen.codegen.lines.Lines` builder; values reach them only
through :func:`~netgen.codegen.lines.literal` and
:func:`~netgen.codegen.render.scalar_literal`."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from .layout import WARP
from ..lines import Lines, literal
from ..render import scalar_literal


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
