"""The ``cuda`` target's kernels as objects, rendered per float type and
*variant* with the :class:`~netgen.codegen.lines.Lines` builder: one
lane-sweep kernel family (docs/cuda-kernels.md, Rounds 6 and 7).

A :class:`Kernel` is a name, its arguments (name and kind each, in order;
the state's scratch is always last), the smallest state it runs with (rows
of n floats) and a body writer: a function that states the kernel's
statements into a ``Lines`` builder, made of the shared pieces in
:mod:`netgen.codegen.cuda.sweeps`. The statements are trusted text of this
file; nothing from a network or a user reaches them (the tables are kernel
arguments, the swap code comes from :mod:`netgen.codegen.render`, float
constants from :func:`netgen.codegen.render.scalar_literal`, n, k and the
size through ``literal``), and no rendered text is searched or substituted
again. What a generated module needs about the kernels -- ``KERNEL_ARGS``
(argument kinds), the kernel functions, the ``KERNELS`` table -- is derived
from the objects (:func:`kernels_source`).

A network's relaxed map applied to *lanes*, without forming P, is one sweep
of the lanes through the comparators with each comparator's swap
probability p from the values sweep (docs/operators.md, section 3):

* ``back_fwd``: W P (m lanes, W (m, k)): the state R starts at
  ``R[q, outs[r]] = W[q, r]`` and sweeps the layers last to first; P's
  rows are W = I_k (``init`` 1, the plan's ranges of ranks apply:
  ``ranged``), ranks and masks one lane;
* ``back_bwd``: its adjoint: dL/dY pushed through the layers first to last,
  dL/dp summed over the lanes per comparator, dL/dW = the lanes at the
  outputs at the end; then, in the same block, the values' adjoint;
* ``fwd_fwd``: P V (d lanes, V (n, d)): the state A starts at ``A[q, w] =
  V[w, q]`` (``init`` 0), the identity (1: the sorters' P, ranged) or a
  one-hot lane at y (2: the column), mixed *beside the values* first layer
  to last (the swap code runs once, here); with no lane it is the values
  sweep alone (the values-only path);
* ``fwd_bwd``: its adjoint, last layer first, beside the values' adjoint
  (one pass; dL/dV = the lanes at the end); with no lane the values'
  adjoint alone.

**Lane groups.** A block runs items (row b, lane group g): the group's
``G`` lanes (``nl`` in the last group) as rows of NS = n | 1 floats in
dynamic shared memory (``sm[LB + q NS + w]``; the forward kernels keep the
values in the row before), the grid a launch's rows x groups items, each
block taking every gridDim-th item (a smaller, persistent grid where the
backward recomputes the sweep into a scratch D per block). ``vals``: the
block runs the values sweep (forward) or the values' adjoint (backward)
itself; the launcher does so where a row is one group, else it runs the
values in a launch of their own and the lane groups read p (and add dL/dp
atomically: ``atomic``). The same mechanism gives the rows with P (one
group of k lanes where k n floats fit the block, **rank groups** where they
do not), sorting (groups of 8-32 input columns per block, 32-128 blocks
per row) and the operators of issue 31.

**What a thread does per comparator**: its tables (wires, plan range, p)
once per comparator and block, then the block's lanes of the comparator in
rounds of ``u`` lanes (every lane's pair loaded before the first update;
``UNROLL_LANES``), each update ``t = p (va - vc)``, ``va' = vc + t``,
``vc' = va - t`` on the difference the sweep has anyway. D, a lane's
difference before a comparator's update, is lane-major (``D[(b m + g0 + q)
S + i]``, a warp's comparators coalesced); the forward keeps it where the
plan says (``save_D``), else the backward recomputes it.

Index arithmetic is unsigned and 32-bit (wires and plan ranges uint16 where
n < 65,536, else uint32; offsets uint32; thread, block and loop indices
uint32; the per-comparator arrays ds, ps, gp and D flat with one 32-bit
index, the launcher keeping a launch's rows x lanes x size < 2^32:
``INDEX_LIMIT``): Numba emits no negative-index wraparound and no 64-bit
address rebuild per comparator (docs/cuda-kernels.md, Rounds 2-5). Literal
integers are never mixed into index arithmetic (uint64 + int64 is float64
in Numba).

Within a block, threads stride over a layer's comparators. A layer of at
most 32 comparators (the narrow tail of a selection network) is run by
warp 0 alone and closed by ``cuda.syncwarp()``; a block-wide
``cuda.syncthreads()`` is paid only where a wide layer follows or
precedes. A layer's tables are prefetched a layer ahead (Round 4).

Variants: the block's state lives in dynamic shared memory (``shared``;
the launcher asks for exactly what a launch needs) or in a global scratch
row per block (``global``, where not even one lane row fits), the same
code between.

Float types: float64 kernels compile with IEEE arithmetic; float32 kernels
with Numba's ``fastmath`` (:data:`FASTMATH`: approximate division and
square root, flush-to-zero, fused multiply-adds, the fast ``expf``); the
finiteness tests of the bad-row check stay comparisons against infinity,
which fast math keeps (tests/codegen/cuda/test_cuda_ptx.py checks the PTX).

Bad rows without a host synchronisation: a row of ``x`` with a NaN or inf,
a steepness that is not finite and > 0, a ``steepness * (max(x) - min(x))``
that overflows the float type, or (the one-hot lane) a ``y`` outside
0..n-1 is flagged in ``bad[b]``; every output of that row (values, lanes,
dL/dx, dL/dW or dL/dV, the row's share of dL/ds) is NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .sweeps import (
    CR,
    P_SAVED,
    UNROLL_LANES,
    WAB,
    WARP,
    Ctx,
    alloc,
    counted,
    fill,
    grad_out,
    group_pairs,
    items,
    lanes_at,
    layers,
    load_row,
    mix,
    pairs,
    prologue,
    strided,
    swap_at,
    values_adjoint,
)
from ..lines import Lines, literal

__all__ = ["Kernel", "KERNELS", "KERNEL_ARGS", "MIN_ROWS", "FASTMATH", "UNROLL_LANES", "VARIANTS", "kernels_source",
           "unroll"]

#: argument kinds: "f1"/"f2" float arrays of that rank (the compute dtype),
#: "w1" wire vector (uint16 or uint32, the module's ``WIRE_DTYPE``), "u1"
#: uint32 vector, "i1" int64 vector, "b1" int32 vector, "bool" a flag,
#: "int" an integer (int64)
KINDS = ("f1", "f2", "w1", "u1", "i1", "b1", "bool", "int")
VARIANTS = ("global", "shared")
#: Numba's fastmath option per float type (see the module doc)
FASTMATH = {"float32": True, "float64": False}


def unroll(name: str, k: int, n: int, forward: bool) -> int:
    """Lanes per round of kernel ``name`` for a network of k outputs on n
    wires whose P sweep runs ``forward`` (else back): the kernels of P's
    direction (back: k ranks; forward: n input columns) update up to
    :data:`UNROLL_LANES` lanes per round, the other direction's (the
    column, ranks, masks: usually one lane) one."""
    lanes = n if forward else k
    mine = name.startswith("fwd") == forward
    return max(1, min(UNROLL_LANES, lanes)) if mine else 1


@dataclass(frozen=True)
class Kernel:
    """One kernel: ``name`` (``back_fwd`` -> functions ``_back_fwd_f32_s``
    etc.), ``args`` ((name, kind) in order, the scratch last), ``rows`` (its
    smallest state in rows of n floats: the shared variant exists where
    that fits) and ``body`` (writes the statements after the prologue)."""

    name: str
    args: tuple[tuple[str, str], ...]
    rows: int
    body: Callable[[Lines, Ctx], None]

    def __post_init__(self) -> None:
        names = [a for a, _ in self.args]
        if (len(set(names)) != len(names) or any(k not in KINDS for _, k in self.args)
                or self.args[-1] != ("scratch", "f2")):  # pragma: no cover - a bug here
            raise ValueError(f"kernel {self.name}: arguments {self.args} (unique names, known kinds, the scratch "
                             f"last)")

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for _, k in self.args)

    def function_name(self, ft: str, variant: str) -> str:
        return f"_{self.name}_f{32 if ft == 'float32' else 64}_{variant[0]}"

    def render(self, ft: str, variant: str, swap: str, k: int, n: int, size: int, fwd: bool = False) -> str:
        """The kernel function's source (decorator included) for float type
        ``ft``, ``variant`` ("shared" or "global") and a network of ``k``
        outputs on ``n`` wires with ``size`` comparators whose P sweep runs
        forward over the input columns (``fwd``) or back over the ranks;
        ``swap``: the swap code (:func:`netgen.codegen.swap_code.swap_code`
        with ``steepness="s"``, indent 0)."""
        if ft not in FASTMATH or variant not in VARIANTS or int(k) < 1 or int(n) < 1 or int(size) < 0:
            raise ValueError(f"unknown float type or variant {ft!r} {variant!r}, or bad sizes")
        c = Ctx(ft, variant, swap, int(k), int(n), int(size), unroll(self.name, int(k), int(n), bool(fwd)))
        L = Lines()
        L("@cuda.jit(fastmath=True)" if FASTMATH[ft] else "@cuda.jit")
        with L.block(f"def {self.function_name(ft, variant)}({', '.join(a for a, _ in self.args)}):"):
            prologue(L, c)
            self.body(L, c)
        return L.render()


# ------------------------------------------------------------------ pieces
def _per_output(L: Lines, c: Ctx, stmt: str) -> None:
    """``stmt`` for each output r < k, one per thread: where k <= 32 (a
    block has at least a warp) under ``if tx < k`` with r = tx, else in a
    strided uint32 loop."""
    if c.k <= WARP:
        with L.block("if tx < k:"):
            L("r = tx", stmt)
    else:
        with strided(L, "r", "k"):
            L(stmt)


def _values_sweep(L: Lines, c: Ctx, keep: str, lanes: bool) -> None:
    """The values sweep, first layer first (the swap code runs here, once
    per comparator and row), saving d and p where ``keep``; ``lanes``: the
    block's lanes mixed in the same pass (forward kernels)."""
    for _ in layers(L, reverse=False, loads=WAB + (CR if lanes else ()), prefetch=True):
        swap_at(L, c)
        mix(L, "a", "c", "xa", "xc", diff="d")
        with L.block(f"if {keep}:"):
            L("ds[np.uint32(bS + i)] = d", "ps[np.uint32(bS + i)] = p")
        if lanes:
            lanes_at(L, c, adj=False, save="save_D")


def _values_out(L: Lines, c: Ctx) -> None:
    _per_output(L, c, "values[b, r] = NAN if isbad else sm[outs[r]]")
    with L.block("if tx == U0:"):
        L("bad[b] = 1 if isbad else 0")


def _back_init(L: Lines) -> None:
    """The back sweep's lanes at the output wires: P's ranks (``init`` 1:
    lane q is rank g0 + q, ``R[q, outs[g0 + q]] = 1``) or W's rows
    (``R[q, outs[r]] = W[g0 + q, r]``, W one for every row or per row)."""
    with L.block("if init == 1:"):
        with strided(L, "q", "nl"):
            L("sm[np.uint32(q * NS + outs[np.uint32(g0 + q)])] = ONE")
    with L.block("else:"):
        L("wr = b if w_rows else U0")
        group_pairs(L, "k")
        with pairs(L, "k"):
            L("sm[np.uint32(q * NS + outs[o])] = W[wr, np.uint32(np.uint32(g0 + q) * k + o)]")


def _fwd_init(L: Lines) -> None:
    """The forward sweep's lanes (rows ``LB + q NS``): the identity
    (``init`` 1: lane q is input column g0 + q), a one-hot lane at y[b]
    (2: the column; y checked by the values' row load) or V's columns
    (0: ``A[q, w] = V[w, g0 + q]``, one V for every row or per row)."""
    with L.block("if init == 1:"):
        with strided(L, "q", "nl"):
            L("sm[np.uint32(LB + q * NS + g0 + q)] = ONE")
    with L.block("elif init == 2:"):
        L("yv = y[b]")
        with L.block("if tx == U0 and yv >= 0 and yv < n:"):
            L("sm[np.uint32(LB + np.uint32(yv))] = ONE")
    with L.block("else:"):
        L("vr = b if v_rows else U0")
        with strided(L, "w", "n"):
            with counted(L, "q", "nl"):
                L("sm[np.uint32(LB + q * NS + w)] = V[vr, np.uint32(w * m32 + g0 + q)]")


def _lane_rows(L: Lines) -> None:
    """Zero the block's lane rows (``LB`` .. ``LB + nl NS``), then a barrier."""
    fill(L, "LB", "np.uint32(LB + nl * NS)")
    L("cuda.syncthreads()")


def _recompute(L: Lines, c: Ctx, reverse: bool, init: Callable[[Lines], None]) -> None:
    """Where the forward kept no D (``recompute``): this group's lane sweep
    again, into the block's own scratch D (``Dq`` from the block index:
    the launcher's persistent grid has one scratch per block); else ``Dq``
    is the item's place in the kept D."""
    with L.block("if recompute:"):
        L("Dq = np.uint32(np.uint32(np.uint32(cuda.blockIdx.x) * G32) * S)")
        _lane_rows(L)
        init(L)
        L("cuda.syncthreads()")
        for _ in layers(L, reverse=reverse, loads=CR + WAB + P_SAVED, prefetch=True):
            lanes_at(L, c, adj=False, save="True")
    with L.block("else:"):
        L("Dq = np.uint32(np.uint32(b * m32 + g0) * S)")


def _gp_out(L: Lines) -> None:
    """dL/dp of comparator i from this block's lanes: written, or added to
    the other groups' (``atomic``: the row's lanes span several blocks; gp
    zeroed by the launcher)."""
    with L.block("if atomic:"):
        with L.block("if qlo < qhi:"):
            L("cuda.atomic.add(gp, np.uint32(bS + i), acc)")
    with L.block("else:"):
        L("gp[np.uint32(bS + i)] = acc")


# ------------------------------------------------------------------ bodies
def _back_fwd(L: Lines, c: Ctx) -> None:
    alloc(L, c)
    with items(L):
        with L.block("if vals:"):
            load_row(L, c, col=False)
            _values_sweep(L, c, "True", lanes=False)
            _values_out(L, c)
            L("cuda.syncthreads()")
        with L.block("else:"):
            L("isbad = bad[b] != 0")
        with L.block("if nl > U0:"):
            L("LB = U0", "Dq = np.uint32(np.uint32(b * m32 + g0) * S)")
            _lane_rows(L)
            _back_init(L)
            L("cuda.syncthreads()")
            for _ in layers(L, reverse=True, loads=CR + WAB + P_SAVED, prefetch=True):
                lanes_at(L, c, adj=False, save="save_D")
            with counted(L, "q", "nl"):
                L("yq = np.uint32(np.uint32(g0 + q) * n)", "sq = np.uint32(q * NS)")
                with strided(L, "w", "n"):
                    L("Y[b, np.uint32(yq + w)] = NAN if isbad else sm[np.uint32(sq + w)]")


def _back_bwd(L: Lines, c: Ctx) -> None:
    alloc(L, c)
    with items(L):
        L("isbad = bad[b] != 0", "LB = U0")
        with L.block("if nl > U0:"):
            _recompute(L, c, True, _back_init)
            # dL/dY of the group's lanes, pushed first layer to last
            with counted(L, "q", "nl"):
                L("yq = np.uint32(np.uint32(g0 + q) * n)", "sq = np.uint32(q * NS)")
                with strided(L, "w", "n"):
                    L("sm[np.uint32(sq + w)] = gY[b, np.uint32(yq + w)]")
            L("cuda.syncthreads()")
            for _ in layers(L, reverse=False, loads=CR + WAB + P_SAVED, prefetch=True):
                L("acc = ZERO")
                lanes_at(L, c, adj=True)
                _gp_out(L)
            with L.block("if want_gW:"):  # dL/dW = dL/dY P^T: the lanes at the outputs
                group_pairs(L, "k")
                with pairs(L, "k"):
                    L("gW[b, np.uint32(np.uint32(g0 + q) * k + o)] = NAN if isbad else sm[np.uint32(q * NS + outs[o])]")
            L("cuda.syncthreads()")
        with L.block("if vals:"):
            fill(L, "U0", "n")
            L("cuda.syncthreads()")
            with L.block("if has_gv:"):
                _per_output(L, c, "sm[outs[r]] = gv[b, r]")
            L("cuda.syncthreads()", "acc_s = ZERO")
            values_adjoint(L, c, inline_lanes=False)
            grad_out(L)


def _fwd_fwd(L: Lines, c: Ctx) -> None:
    alloc(L, c)
    with items(L):
        L("LB = NS if vals else U0", "Dq = np.uint32(np.uint32(b * m32 + g0) * S)")
        with L.block("if vals:"):
            load_row(L, c, col=True)
        with L.block("else:"):
            L("isbad = bad[b] != 0")
        with L.block("if nl > U0:"):
            _lane_rows(L)
            _fwd_init(L)
            L("cuda.syncthreads()")
        with L.block("if vals and nl > U0:"):
            _values_sweep(L, c, "keep", lanes=True)
        with L.block("elif vals:"):
            _values_sweep(L, c, "keep", lanes=False)
        with L.block("else:"):
            for _ in layers(L, reverse=False, loads=CR + WAB + P_SAVED, prefetch=True):
                lanes_at(L, c, adj=False, save="save_D")
        with L.block("if vals:"):
            _values_out(L, c)
        with L.block("if nl > U0:"):
            # Y[r, g0 + q] = A[q, outs[r]]: consecutive threads, consecutive lanes of one output
            group_pairs(L, "k")
            with pairs(L, "k"):
                L("Y[b, np.uint32(o * m32 + g0 + q)] = NAN if isbad else sm[np.uint32(LB + q * NS + outs[o])]")


def _fwd_bwd(L: Lines, c: Ctx) -> None:
    alloc(L, c)
    with items(L):
        L("isbad = bad[b] != 0", "LB = NS if vals else U0")
        with L.block("if nl > U0:"):
            _recompute(L, c, False, _fwd_init)
            _lane_rows(L)
            group_pairs(L, "k")
            with pairs(L, "k"):
                L("sm[np.uint32(LB + q * NS + outs[o])] = gY[b, np.uint32(o * m32 + g0 + q)]")
        with L.block("if vals:"):
            fill(L, "U0", "n")
            L("cuda.syncthreads()")
            with L.block("if has_gv:"):
                _per_output(L, c, "sm[outs[r]] = gv[b, r]")
        L("cuda.syncthreads()", "acc_s = ZERO")
        with L.block("if vals and nl > U0:"):  # the lanes' adjoint beside the values': one pass
            values_adjoint(L, c, inline_lanes=True)
        with L.block("elif vals:"):
            values_adjoint(L, c, inline_lanes=False)
        with L.block("else:"):
            for _ in layers(L, reverse=True, loads=CR + WAB + P_SAVED, prefetch=True):
                L("acc = ZERO")
                lanes_at(L, c, adj=True)
                _gp_out(L)
        with L.block("if nl > U0 and want_gV:"):  # dL/dV = P^T dL/dY: the lanes at the end
            with strided(L, "w", "n"):
                with counted(L, "q", "nl"):
                    L("gV[b, np.uint32(w * m32 + g0 + q)] = NAN if isbad else sm[np.uint32(LB + q * NS + w)]")
        with L.block("if vals:"):
            grad_out(L)


# ------------------------------------------------------------------ the kernels
_NET = (("wab", "w1"), ("offs", "u1"), ("cr", "w1"), ("outs", "w1"))
_SAVED = (("ds", "f1"), ("ps", "f1"))
_GROUPS = (("G", "int"), ("m", "int"), ("groups", "int"), ("items", "int"))
_SCRATCH = (("scratch", "f2"),)

#: the kernels of a generated module, in the order they are emitted
KERNELS = (
    Kernel("back_fwd", (("x", "f2"), ("sv", "f1"), *_NET, ("W", "f2"), ("values", "f2"), *_SAVED, ("bad", "b1"),
                        ("Y", "f2"), ("D", "f1"), ("vals", "bool"), ("init", "int"), ("w_rows", "bool"),
                        ("ranged", "bool"), ("save_D", "bool"), *_GROUPS, *_SCRATCH),
           rows=1, body=_back_fwd),
    Kernel("back_bwd", (("sv", "f1"), *_NET, ("W", "f2"), ("gY", "f2"), ("gv", "f2"), *_SAVED, ("D", "f1"),
                        ("gp", "f1"), ("bad", "b1"), ("gW", "f2"), ("gx", "f2"), ("gs", "f1"), ("vals", "bool"),
                        ("init", "int"), ("w_rows", "bool"), ("ranged", "bool"), ("recompute", "bool"),
                        ("atomic", "bool"), ("has_gv", "bool"), ("has_gp", "bool"), ("want_gW", "bool"),
                        ("want_gs", "bool"), *_GROUPS, *_SCRATCH),
           rows=1, body=_back_bwd),
    Kernel("fwd_fwd", (("x", "f2"), ("y", "i1"), ("sv", "f1"), *_NET, ("V", "f2"), ("values", "f2"), *_SAVED,
                       ("bad", "b1"), ("Y", "f2"), ("D", "f1"), ("vals", "bool"), ("keep", "bool"), ("init", "int"),
                       ("v_rows", "bool"), ("ranged", "bool"), ("save_D", "bool"), *_GROUPS, *_SCRATCH),
           rows=1, body=_fwd_fwd),
    Kernel("fwd_bwd", (("y", "i1"), ("sv", "f1"), *_NET, ("V", "f2"), ("gY", "f2"), ("gv", "f2"), *_SAVED,
                       ("D", "f1"), ("gp", "f1"), ("bad", "b1"), ("gV", "f2"), ("gx", "f2"), ("gs", "f1"),
                       ("vals", "bool"), ("init", "int"), ("v_rows", "bool"), ("ranged", "bool"),
                       ("recompute", "bool"), ("atomic", "bool"), ("has_gv", "bool"), ("has_gp", "bool"),
                       ("want_gV", "bool"), ("want_gs", "bool"), *_GROUPS, *_SCRATCH),
           rows=1, body=_fwd_bwd),
)

#: kernel name -> argument kinds, in order (launchers, signatures, the
#: packing and the compile check use these; derived from KERNELS)
KERNEL_ARGS = {kern.name: kern.kinds for kern in KERNELS}
#: the smallest state of each kernel, in rows of n floats
MIN_ROWS = {kern.name: kern.rows for kern in KERNELS}


def kernels_source(n: int, k: int, size: int, shared_limit: int, swaps: dict[str, str],
                   fwd: bool = False) -> tuple[str, str, str]:
    """What a generated module holds about its kernels, from the objects:
    (the ``KERNEL_ARGS`` assignment, the kernel functions, the ``KERNELS``
    table ``(dtype, name, variant) -> kernel``). ``swaps``: float type ->
    swap code; ``fwd``: the module's P sweep runs forward over the input
    columns. A shared variant is emitted where the kernel's smallest state
    (``rows`` x n floats) fits ``shared_limit`` bytes."""
    args = Lines()
    with args.indented():
        for kern in KERNELS:
            args(f"{literal(kern.name)}: {literal(kern.kinds)},")
    sources, table = [], Lines()
    with table.indented():
        for ft, swap in swaps.items():
            isz = 4 if ft == "float32" else 8
            for variant in VARIANTS:
                for kern in KERNELS:
                    if variant == "shared" and kern.rows * (n | 1) * isz > shared_limit:
                        continue
                    sources.append(kern.render(ft, variant, swap, k, n, size, fwd))
                    table(f"(np.dtype(np.{ft}), {literal(kern.name)}, {literal(variant)}): "
                          f"{kern.function_name(ft, variant)},")
    return ("KERNEL_ARGS = {\n" + args.render() + "}", "\n\n".join(s.rstrip() for s in sources),
            "KERNELS = {\n" + table.render() + "}")
