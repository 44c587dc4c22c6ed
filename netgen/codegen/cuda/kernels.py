"""The ``cuda`` target's kernels as objects, rendered per float type and
*variant* with the :class:`~netgen.codegen.lines.Lines` builder.

A :class:`Kernel` is a name, its arguments (name and kind each, in order;
the wire-array scratch is always last), the smallest wire-array use (rows
of n floats), and a body writer: a function that states the kernel's
statements into a ``Lines`` builder, made of the shared pieces in
:mod:`netgen.codegen.cuda.sweeps` and :mod:`netgen.codegen.cuda.updates`. The statements are trusted text of
this file; nothing from a network or a user reaches them (the tables are
kernel arguments, the swap code comes from :mod:`netgen.codegen.render`,
float constants from :func:`netgen.codegen.render.scalar_literal`), and no
rendered text is searched or substituted again. What a generated module
needs about the kernels -- ``KERNEL_ARGS`` (argument kinds), the kernel
functions, the ``KERNELS`` table -- is derived from the objects
(:func:`kernels_source`).

Four kernels, one launch per direction (docs/cuda-kernels.md has the
design, the choices and their estimates):

* ``_fwd`` (one block per batch row): the values sweep (v, n floats),
  saving each comparator's difference d = x - y and swap probability p (the
  swap code runs once per comparator and row, here; the rank sweeps read p,
  and the values' adjoint reads p and recomputes only dp/dd and dp/ds from
  d, one division and no arctangent: the swap code costs more issue slots
  than 8 bytes of traffic per comparator); then, when P is asked for
  (``do_P``), the P sweep over **all m lanes of the row at once** (the
  module's direction: the back-sweep over the k ranks, or the forward sweep
  over the n input columns, for sorters; ``Ctx.fwd``): its state is m x n
  floats, wire-major (``R[w * m + r]``), each comparator's wires and p read
  once and applied to the lanes ``clo[i] <= r < chi[i]`` of the build-time
  plan; saves ``D[b, dix[i] + r DS] = R[r, a] - R[r, c]`` when
  ``save_D``; writes P once, coalesced. ``do_P`` false is the values-only
  path (``Layer.values``).
* ``_bwd`` (one block per row): when dL/dP is given, optionally recomputes
  the P sweep into D (``recompute``: D is then a per-chunk scratch, not
  kept from the forward), pushes dL/dP through the layers the other way
  (G, m x n) and sums each comparator's dL/dp over its lanes right there
  (``gp[b, i]``: no B x nnz array of shares); then sweeps the values'
  adjoint back (g, n floats), adding dL/dp from the values, and sums
  dL/ds = sum_i dL/dp_i dp_i/ds over the row into ``gs[b]``.
  Both take ds, ps, gp and D as 1-D views of a launch's rows, indexed
  with 32-bit flat indices (``b size + i``, ``b dix[S] + dix[i]``: one
  ``IMAD.WIDE.U32`` per address where row views cost a 64-bit row base:
  docs/cuda-round9.md, with the SASS counts).
* ``_fwd_col`` / ``_bwd_col``: the column P[:, y] (v and u, 2 n floats) and
  its adjoint, one block per row; the forward saves, in ``cs`` (B x 3
  size), each comparator's difference of the values, of u, and p side by
  side (``cs[3 j]``, ``cs[3 j + 1]``, ``cs[3 j + 2]``, j = b size + i: one
  base address for the three), so the backward reads p instead of
  rerunning the arctangent. Both kernels take cs as a 1-D view of a
  launch's rows with a 32-bit flat index (row views cost a 64-bit row base
  each); the launcher keeps rows x 3 size <= 2^32 per launch
  (``INDEX_LIMIT``).
  They read a comparator's wires from ``wab``, the wire table interleaved
  (``wab[2 i]``, ``wab[2 i + 1]``: one address for both).

Modules whose P sweep runs forward (the sorters) also hold the lane-group
kernels ``grp_fwd``, ``grp_bwd``, ``vals_bwd`` (:data:`GROUP_KERNELS`,
bodies in :mod:`netgen.codegen.cuda.groups`): P's sweep spread over blocks
of G input columns each, where the row's n x n floats do not fit one
block (:mod:`netgen.codegen.cuda.group_ops` launches them).

Each comparator update is written ``t = p (va - vc)``, ``va' = vc + t``,
``vc' = va - t`` with the difference ``va - vc`` every sweep needs anyway
(d, a row of D, dL/dp's factor): one multiply-add and two adds, no q.

Within a block, threads stride over a layer's comparators. A layer of at
most 32 comparators (the narrow tail of a selection network) is run by
warp 0 alone and closed by ``cuda.syncwarp()``; a block-wide
``cuda.syncthreads()`` is paid only where a wide layer follows or precedes.

Index arithmetic is unsigned (wires uint16 where n < 65,536, else uint32;
offsets uint32; thread and block indices cast to uint32): Numba emits no
negative-index wraparound for unsigned indices. Literal integers are never
mixed into index arithmetic (uint64 + int64 is float64 in Numba).

Variants: the block's wire arrays live in dynamic shared memory
(``shared``; the launcher asks for exactly what a launch needs: k n floats
for the rows with P, n for values only, 2 n for the column) or in a global
scratch row per block (``global``), the same code between.

Float types: float64 kernels compile with IEEE arithmetic; float32 kernels
with Numba's ``fastmath`` (:data:`FASTMATH`: approximate division and
square root, flush-to-zero, fused multiply-adds, the fast ``expf``), which
the model says the issue-bound kernels need (docs/cuda-kernels.md); the
finiteness tests of the bad-row check stay comparisons against infinity,
which fast math keeps (tests/codegen/cuda/test_cuda_ptx.py checks the PTX).

Bad rows without a host synchronisation: a row of ``x`` with a NaN or inf,
a steepness that is not finite and > 0, a ``steepness * (max(x) - min(x))``
that overflows the float type, or (column) a ``y`` outside 0..n-1 is
flagged in ``bad[b]``; every output of that row (values, P, column, dL/dx,
the row's share of dL/ds) is NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .groups import grp_bwd, grp_fwd, vals_bwd
from .lane_bodies import pv_bwd, pv_fwd, wp_bwd, wp_fwd
from .row_bodies import bwd, bwd_col, fwd, fwd_col
from .sweeps import Ctx, prologue
from .updates import UNROLL_RANKS
from ..lines import Lines, literal

__all__ = ["Kernel", "KERNELS", "GROUP_KERNELS", "LANE_KERNELS", "KERNEL_ARGS", "GROUP_ARGS", "LANE_ARGS", "MIN_ROWS",
           "FASTMATH", "UNROLL_RANKS", "SMALLEST_SHARED", "VARIANTS", "default_groups", "emitted", "kernels_source",
           "ONE_BLOCK_SHARED", "launch_bounds"]

#: argument kinds: "f1"/"f2" float arrays of that rank (the compute dtype),
#: "w1" wire vector (uint16 or uint32, the module's ``WIRE_DTYPE``), "u1"
#: uint32 vector, "i1" int64 vector, "b1" int32 vector, "bool" a flag
KINDS = ("f1", "f2", "w1", "u1", "i1", "b1", "bool")
VARIANTS = ("global", "shared")
#: Numba's fastmath option per float type (see the module doc)
FASTMATH = {"float32": True, "float64": False}


@dataclass(frozen=True)
class Kernel:
    """One kernel: ``name`` (``fwd`` -> functions ``_fwd_f32_s`` etc.),
    ``args`` ((name, kind) in order, the scratch last), ``rows`` (its
    smallest wire-array use in rows of n floats: the shared variant exists
    where that fits), ``length`` (the argument whose ``shape[1]`` is n) and
    ``body`` (writes the statements after the prologue)."""

    name: str
    args: tuple[tuple[str, str], ...]
    rows: int
    length: str
    body: Callable[[Lines, Ctx], None]
    #: the P sweep's whole state (lanes x n floats) in shared memory: where
    #: that allows one block per SM on any GPU it gets launch bounds
    #: (:func:`launch_bounds`)
    state: bool = False

    def __post_init__(self) -> None:
        names = [a for a, _ in self.args]
        if (len(set(names)) != len(names) or any(k not in KINDS for _, k in self.args)
                or self.args[-1] != ("scratch", "f2") or self.length not in names):  # pragma: no cover - a bug here
            raise ValueError(f"kernel {self.name}: arguments {self.args} (unique names, known kinds, the scratch "
                             f"last, {self.length!r} among them)")

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for _, k in self.args)

    def function_name(self, ft: str, variant: str) -> str:
        return f"_{self.name}_f{32 if ft == 'float32' else 64}_{variant[0]}"

    def render(self, ft: str, variant: str, swap: str, k: int, n: int = 0, fwd: bool = False,
               dstride: int = 1, tame_swap: str = "") -> str:
        """The kernel function's source (decorator included) for float type
        ``ft``, ``variant`` ("shared" or "global") and a network of ``k``
        outputs of ``n`` wires whose P sweep runs forward over the input
        columns (``fwd``) or back over the ranks; ``swap``: the swap code
        (:func:`netgen.codegen.swap_code.swap_code` with ``steepness="s"``,
        indent 0); ``dstride``: where the rows kernels keep D
        (:func:`.layout.d_slots`: lane l of comparator i at ``dix[i] + l
        dstride``); ``tame_swap``: the swap code without the clamps of d
        and z, run in rows where they cannot act (:func:`.updates.per_range`;
        empty: none, every row runs ``swap``)."""
        if ft not in FASTMATH or variant not in VARIANTS or int(k) < 1 or (fwd and int(n) < 1):
            raise ValueError(f"unknown float type or variant {ft!r} {variant!r}")
        lanes = int(n) if fwd else int(k)
        L = Lines()
        L("@cuda.jit(fastmath=True)" if FASTMATH[ft] else "@cuda.jit")
        with L.block(f"def {self.function_name(ft, variant)}({', '.join(a for a, _ in self.args)}):"):
            prologue(L, ft, self.length, k, lanes)
            self.body(L, Ctx(ft, variant, swap, k, bool(fwd), lanes, int(dstride), tame_swap))
        return L.render()


# ------------------------------------------------------------------ the kernels
_NET = (("wa", "w1"), ("wb", "w1"), ("offs", "u1"))
#: the rows and column kernels' network: both wires of comparator i in one table (wab[2 i], wab[2 i + 1]:
#: one base address for the pair), the layer offsets
_WAB_NET = (("wab", "w1"), ("offs", "u1"))
#: the rows kernels' plan: a comparator's plan range and wires interleaved (``rtab[4 i]`` .. ``rtab[4 i + 3]``:
#: one base address for the four; .updates.rank_tables), D's slots, the outputs
_PLAN = (("rtab", "w1"), ("dix", "u1"), ("outs", "w1"))
_SCRATCH = (("scratch", "f2"),)

#: the kernels of a generated module, in the order they are emitted
KERNELS = (
    Kernel("fwd", (("x", "f2"), ("sv", "f1"), *_WAB_NET, *_PLAN, ("values", "f2"), ("ds", "f1"), ("ps", "f1"),
                   ("bad", "b1"), ("P", "f1"), ("D", "f1"), ("do_P", "bool"), ("save_D", "bool"), *_SCRATCH),
           rows=1, length="x", body=fwd, state=True),
    Kernel("bwd", (("sv", "f1"), *_WAB_NET, *_PLAN, ("gv", "f2"), ("gP", "f1"), ("ds", "f1"), ("ps", "f1"),
                   ("D", "f1"), ("gp", "f1"), ("bad", "b1"), ("gx", "f2"), ("gs", "f1"), ("has_gv", "bool"),
                   ("has_gP", "bool"), ("recompute", "bool"), ("want_gs", "bool"), *_SCRATCH),
           rows=1, length="gx", body=bwd, state=True),
    Kernel("fwd_col", (("x", "f2"), ("y", "i1"), ("sv", "f1"), *_WAB_NET, ("outs", "w1"), ("col", "f2"), ("cs", "f1"),
                       ("bad", "b1"), ("save", "bool"), *_SCRATCH),
           rows=2, length="x", body=fwd_col),
    Kernel("bwd_col", (("sv", "f1"), *_WAB_NET, ("outs", "w1"), ("gcol", "f2"), ("cs", "f1"),
                       ("bad", "b1"), ("gx", "f2"), ("gs", "f1"), ("want_gs", "bool"), *_SCRATCH),
           rows=2, length="gx", body=bwd_col),
)

#: the lane-group kernels (:mod:`.groups`: P's sweep spread over blocks, G
#: lanes per block), emitted after KERNELS in modules whose P sweep runs
#: forward (the sorters); geo = (G, groups per row, items)
GROUP_KERNELS = (
    Kernel("grp_fwd", (("P", "f2"), ("sv", "f1"), *_NET, ("clo", "w1"), ("chi", "w1"), ("outs", "w1"),
                       ("ps", "f2"), ("bad", "b1"), ("geo", "u1"), ("spn", "u1"), *_SCRATCH),
           rows=1, length="P", body=grp_fwd),
    Kernel("grp_bwd", (("gP", "f2"), ("sv", "f1"), *_NET, ("clo", "w1"), ("chi", "w1"), ("outs", "w1"),
                       ("ps", "f2"), ("D", "f1"), ("gp", "f2"), ("geo", "u1"), ("spn", "u1"), *_SCRATCH),
           rows=1, length="gP", body=grp_bwd),
    Kernel("vals_bwd", (("sv", "f1"), *_NET, ("outs", "w1"), ("gv", "f2"), ("ds", "f2"), ("ps", "f2"),
                        ("gp", "f2"), ("bad", "b1"), ("gx", "f2"), ("gs", "f1"), ("has_gv", "bool"),
                        ("has_gp", "bool"), ("want_gs", "bool"), *_SCRATCH),
           rows=1, length="gx", body=vals_bwd),
)

#: the lane kernels (:mod:`.lane_bodies`: W P and P V from given lanes, G
#: lanes per block), emitted in every module with ``vals_bwd`` (their
#: backward's second launch); geo = (G, groups per row, unused, lanes)
_LANE_NET = (*_NET, ("outs", "w1"))
LANE_KERNELS = (
    Kernel("wp_fwd", (("W", "f2"), ("sv", "f1"), *_LANE_NET, ("ps", "f2"), ("bad", "b1"), ("R", "f2"), ("D", "f1"),
                      ("geo", "u1"), ("save", "bool"), *_SCRATCH),
           rows=1, length="R", body=wp_fwd),
    Kernel("wp_bwd", (("gR", "f2"), ("sv", "f1"), *_LANE_NET, ("ps", "f2"), ("D", "f1"), ("gp", "f2"), ("gW", "f2"),
                      ("bad", "b1"), ("geo", "u1"), *_SCRATCH),
           rows=1, length="gR", body=wp_bwd),
    Kernel("pv_fwd", (("V", "f2"), ("sv", "f1"), *_LANE_NET, ("ps", "f2"), ("bad", "b1"), ("Y", "f2"), ("D", "f1"),
                      ("geo", "u1"), ("save", "bool"), *_SCRATCH),
           rows=1, length="V", body=pv_fwd),
    Kernel("pv_bwd", (("gY", "f2"), ("sv", "f1"), *_LANE_NET, ("ps", "f2"), ("D", "f1"), ("gp", "f2"), ("gV", "f2"),
                      ("bad", "b1"), ("geo", "u1"), *_SCRATCH),
           rows=1, length="gV", body=pv_bwd),
)

#: kernel name -> argument kinds, in order (launchers, signatures, the
#: packing and the compile check use these; derived from KERNELS; a
#: sorter's module holds GROUP_ARGS too, every module LANE_ARGS)
KERNEL_ARGS = {kern.name: kern.kinds for kern in KERNELS}
GROUP_ARGS = {kern.name: kern.kinds for kern in GROUP_KERNELS}
LANE_ARGS = {kern.name: kern.kinds for kern in LANE_KERNELS}
#: the smallest wire-array use of each kernel, in rows of n floats
MIN_ROWS = {kern.name: kern.rows for kern in KERNELS}


#: the smallest dynamic shared memory a block of a supported GPU may opt in
#: to (Turing, compute 7.5: 64 KiB), less 1 KiB for the kernels' own static
#: shared memory: a module swept back whose rows' P state (k n floats, in
#: float64) passes it holds the rank-group kernels by default
#: (:func:`default_groups`)
SMALLEST_SHARED = 63 * 1024


def default_groups(n: int, k: int, fwd: bool) -> bool:
    """Whether a module holds the lane-group kernels when its options do
    not say: where its P sweep runs forward (the sorters: a row's n x n
    floats fit no block), and where a swept-back module's k x n floats (in
    float64) pass :data:`SMALLEST_SHARED`, so that a GPU with less shared
    memory per block than the rows need (A100 at (5, 10450): 163 KB against
    209 KB in float32; L4, RTX 4090, T4) runs the rows in rank groups that
    fit instead of a global scratch row per block."""
    return bool(fwd) or k * n * 8 > SMALLEST_SHARED


#: dynamic shared memory past which no SM of a supported GPU holds two
#: blocks (Hopper's and Blackwell's 228 KB per SM, the largest, halved)
ONE_BLOCK_SHARED = 228 * 1024 // 2
#: the launch bounds of a kernel that runs one block per SM: at most 1,024
#: threads (the launcher's largest block), one block per SM
ONE_BLOCK = (1024, 1)


def launch_bounds(kern: Kernel, ft: str, variant: str, n: int, lanes: int,
                  shared_limit: int) -> tuple[int, int] | None:
    """ONE_BLOCK for the shared variant of a kernel holding the P sweep's
    state (``fwd``, ``bwd``) where that state (``lanes`` x n floats) fits
    ``shared_limit`` and passes :data:`ONE_BLOCK_SHARED`: such a launch
    runs one block per SM anyway,
    and with the bounds ptxas may give each of its 1,024 threads up to 64
    registers instead of rematerialising addresses and table pointers in
    the loops (sm_90, float32, the (5, 10450) rows: fwd 48 / 72 -> 45 / 68
    and bwd 90 / 35 -> 85 / 31 SASS per comparator, 40 -> 48 and 55
    registers; docs/cuda-round10.md). Else None (the compiler's choice;
    the values-only launches of the same kernels, n floats, keep it: they
    run many blocks per SM, where registers cost some occupancy: at (5,
    10450) 256 instead of 320 threads per block, five blocks per SM)."""
    state = lanes * n * (4 if ft == "float32" else 8)
    if kern.state and variant == "shared" and ONE_BLOCK_SHARED < state <= shared_limit:
        return ONE_BLOCK
    return None


def emitted(groups: bool, lanes: bool = True) -> tuple[Kernel, ...]:
    """The kernels a module holds: KERNELS, GROUP_KERNELS with ``groups``
    (by default :func:`default_groups`), and with ``lanes`` the
    LANE_KERNELS and ``vals_bwd`` (once)."""
    out = KERNELS + GROUP_KERNELS if groups else KERNELS
    if lanes:
        out += tuple(kern for kern in GROUP_KERNELS if kern.name == "vals_bwd" and not groups) + LANE_KERNELS
    return out


def kernels_source(n: int, k: int, shared_limit: int, swaps: dict[str, str],
                   fwd: bool = False, groups: bool | None = None, lanes: bool = True,
                   dstride: int = 1, tame_swaps: dict[str, str] | None = None) -> tuple[str, str, str]:
    """What a generated module holds about its kernels, from the objects:
    (the ``KERNEL_ARGS`` assignment, the kernel functions, the ``KERNELS``
    table ``(dtype, name, variant) -> kernel``). ``swaps``: float type ->
    swap code; ``fwd``: the P sweep runs forward over the input columns;
    ``groups``: the lane-group kernels too (None: :func:`default_groups`);
    ``lanes``: the lane kernels of W P and P V (Round 8); ``dstride``:
    the rows kernels' D layout (:func:`.layout.d_slots`); ``tame_swaps``:
    float type -> the swap code without the clamps of d and z (None: the
    kernels hold only the clamped copy). A
    shared variant is emitted where the kernel's smallest wire-array use
    (``rows`` x n floats) fits ``shared_limit`` bytes."""
    held = emitted(default_groups(n, k, fwd) if groups is None else groups, lanes)
    args = Lines()
    with args.indented():
        for kern in held:
            args(f"{literal(kern.name)}: {literal(kern.kinds)},")
    sources, table, bounds = [], Lines(), Lines()
    lanes = n if fwd else k
    with table.indented(), bounds.indented():
        for ft, swap in swaps.items():
            size = 4 if ft == "float32" else 8
            for variant in VARIANTS:
                for kern in held:
                    if variant == "shared" and kern.rows * n * size > shared_limit:
                        continue
                    sources.append(kern.render(ft, variant, swap, k, n, fwd, dstride,
                                               (tame_swaps or {}).get(ft, "")))
                    table(f"(np.dtype(np.{ft}), {literal(kern.name)}, {literal(variant)}): "
                          f"{kern.function_name(ft, variant)},")
                    lb = launch_bounds(kern, ft, variant, n, lanes, shared_limit)
                    if lb is not None:
                        bounds(f"{literal(kern.function_name(ft, variant))}: {literal(lb)},")
    return ("KERNEL_ARGS = {\n" + args.render() + "}", "\n\n".join(s.rstrip() for s in sources),
            "KERNELS = {\n" + table.render() + "}\n\n"
            "#: launch bounds (max threads per block, min blocks per SM) of the kernels that run one block per SM:\n"
            "#: the compile check and numba-cuda compile them with these (not the simulator)\n"
            "LAUNCH_BOUNDS = {\n" + bounds.render() + "}")
