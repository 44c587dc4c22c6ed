"""The ``cuda`` target's kernels as objects, rendered per float type and
*variant* with the :class:`~netgen.codegen.lines.Lines` builder.

A :class:`Kernel` is a name, its arguments (name and kind each, in order;
the wire-array scratch is always last), the smallest wire-array use (rows
of n floats), and a body writer: a function that states the kernel's
statements into a ``Lines`` builder. The statements are trusted text of
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
  swap code runs once per comparator and row here, and once more in the
  values' adjoint: p is stored because the swap code costs more issue slots
  than 8 bytes of traffic per comparator); then, when P is asked for
  (``do_P``), the back-sweep of **all k ranks of the row at once**: R is k x
  n floats, wire-major (``R[w * k + r]``), each comparator's wires and p
  read once and applied to the ranks ``clo[i] <= r < chi[i]`` of the
  build-time plan; saves ``D[b, doff[i] + r - clo[i]] = R[r, a] - R[r, c]``
  when ``save_D``; writes P once, coalesced. ``do_P`` false is the
  values-only path (``Layer.values``).
* ``_bwd`` (one block per row): when dL/dP is given, optionally recomputes
  the back-sweep into D (``recompute``: D is then a per-chunk scratch, not
  kept from the forward), pushes dL/dP's k rows forward through the layers
  (G, k x n) and sums each comparator's dL/dp over its ranks right there
  (``gp[b, i]``: no B x nnz array of shares); then sweeps the values'
  adjoint back (g, n floats), adding dL/dp from the values, and sums
  dL/ds = sum_i dL/dp_i dp_i/ds over the row into ``gs[b]``.
* ``_fwd_col`` / ``_bwd_col``: the column P[:, y] (v and u, 2 n floats) and
  its adjoint, one block per row.

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
which fast math keeps (tests/codegen/test_cuda_ptx.py checks the PTX).

Bad rows without a host synchronisation: a row of ``x`` with a NaN or inf,
a steepness that is not finite and > 0, a ``steepness * (max(x) - min(x))``
that overflows the float type, or (column) a ``y`` outside 0..n-1 is
flagged in ``bad[b]``; every output of that row (values, P, column, dL/dx,
the row's share of dL/ds) is NaN.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from .lines import Lines, literal
from .render import scalar_literal

__all__ = ["Kernel", "KERNELS", "KERNEL_ARGS", "MIN_ROWS", "FASTMATH", "UNROLL_RANKS", "VARIANTS", "kernels_source"]

#: argument kinds: "f1"/"f2" float arrays of that rank (the compute dtype),
#: "w1" wire vector (uint16 or uint32, the module's ``WIRE_DTYPE``), "u1"
#: uint32 vector, "i1" int64 vector, "b1" int32 vector, "bool" a flag
KINDS = ("f1", "f2", "w1", "u1", "i1", "b1", "bool")
VARIANTS = ("global", "shared")
#: Numba's fastmath option per float type (see the module doc)
FASTMATH = {"float32": True, "float64": False}
#: rank sweeps of networks with k <= UNROLL_RANKS get one guarded copy of
#: the update per rank instead of a rank loop (docs/cuda-kernels.md)
UNROLL_RANKS = 8
WARP = 32


@dataclass(frozen=True)
class Ctx:
    """What a body writer needs besides the statements: the float type,
    the variant, the swap code (defining p, dp, dps from d) and k."""

    ft: str
    variant: str
    swap: str
    k: int


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

    def render(self, ft: str, variant: str, swap: str, k: int) -> str:
        """The kernel function's source (decorator included) for float type
        ``ft``, ``variant`` ("shared" or "global") and a network of ``k``
        outputs; ``swap``: the swap code
        (:func:`netgen.codegen._swap_code.swap_code` with ``steepness="s"``,
        indent 0)."""
        if ft not in FASTMATH or variant not in VARIANTS or int(k) < 1:
            raise ValueError(f"unknown float type or variant {ft!r} {variant!r}")
        L = Lines()
        L("@cuda.jit(fastmath=True)" if FASTMATH[ft] else "@cuda.jit")
        with L.block(f"def {self.function_name(ft, variant)}({', '.join(a for a, _ in self.args)}):"):
            _prologue(L, ft, self.length, k)
            self.body(L, Ctx(ft, variant, swap, k))
        return L.render()


# ------------------------------------------------------------------ pieces
def _prologue(L: Lines, ft: str, length: str, k: int) -> None:
    """Block and thread indices, unsigned constants, the float constants
    (locals: the compiler folds them), k (the network's, a constant: the
    wire-major index arithmetic multiplies by a literal), n, the
    steepness."""
    nan, inf = ("np.float32(math.nan)", "np.float32(math.inf)") if ft == "float32" else ("math.nan", "math.inf")
    L("b = np.uint32(cuda.blockIdx.x)",
      "tx = np.uint32(cuda.threadIdx.x)",
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
      f"k = np.uint32({literal(k)})",
      "s = sv[0]",
      f"n = np.uint32({length}.shape[1])")


def _alloc(L: Lines, c: Ctx) -> None:
    """``sm``: the block's wire arrays (dynamic shared memory or the
    block's scratch row)."""
    L(f"sm = cuda.shared.array(0, dtype=numba.{c.ft})" if c.variant == "shared" else "sm = scratch[b]")


@contextmanager
def _layers(L: Lines, reverse: bool) -> Iterator[None]:
    """The layer loop around the body (code for comparator ``i``): threads
    stride over a layer's comparators; a layer of <= 32 comparators is run
    by warp 0 and closed with syncwarp when the next layer is narrow too,
    else every layer ends with syncthreads."""
    with L.block("for li in range(U0, L, U1):"):
        L("l = np.uint32(L - U1 - li)" if reverse else "l = np.uint32(li)",
          "ls = offs[l]",
          "le = offs[l + U1]",
          "narrow = le - ls <= WARP")
        with L.block("if narrow:"):
            L("i0 = np.uint32(ls + tx) if tx < WARP else le", "di = WARP")
        with L.block("else:"):
            L("i0 = np.uint32(ls + tx)", "di = nt")
        L("i = i0")
        with L.block("while i < le:"):
            yield
            L("i = np.uint32(i + di)")
        L("nxt_narrow = l > U0 and offs[l] - offs[l - U1] <= WARP" if reverse
          else "nxt_narrow = l + U1 < L and offs[l + U2] - offs[l + U1] <= WARP")
        with L.block("if narrow and nxt_narrow:"):
            with L.block("if tx < WARP:"):
                L("cuda.syncwarp()")
        with L.block("else:"):
            L("cuda.syncthreads()")


def _fill_rows(L: Lines, var: str, stop: str, *offsets: str) -> None:
    """``sm[off + var] = ZERO`` for var < ``stop``, each offset, then a barrier."""
    with L.block(f"for {var} in range(tx, {stop}, nt):"):
        for off in offsets:
            L(f"sm[{off}{var}] = ZERO")
    L("cuda.syncthreads()")


def _mix(L: Lines, a: str, c: str, va: str, vc: str, grad: str = "") -> None:
    """The comparator update of one pair of entries: ``sm[a] = p va + q vc``,
    ``sm[c] = q va + p vc`` (plus / minus ``grad`` in an adjoint)."""
    L(f"sm[{a}] = p * {va} + q * {vc}{' + ' + grad if grad else ''}",
      f"sm[{c}] = q * {va} + p * {vc}{' - ' + grad if grad else ''}")


def _swap_at(L: Lines, c: Ctx, saved: str | None = None) -> None:
    """Wires of comparator i, its difference d (``saved``: where the forward
    kept it; else from the values xa, xc), then the swap code (p, dp, dps)
    and q."""
    L("a = wa[i]", "c = wb[i]")
    if saved:
        L(f"d = {saved}")
    else:
        L("xa = sm[a]", "xc = sm[c]", "d = xa - xc")
    L(c.swap, "q = ONE - p")


def _load_row(L: Lines, c: Ctx, col: bool) -> None:
    """Load row b of x into ``sm[:n]`` (zeros for a bad row), flag bad rows:
    non-finite entries, a steepness not finite and > 0, an overflowing
    steepness * (max - min), and for the column a y outside 0..n-1."""
    L(f"mm = cuda.shared.array(2, dtype=numba.{c.ft})")
    with L.block("if tx == U0:"):
        L("mm[0] = -INF", "mm[1] = INF")
    L("cuda.syncthreads()",
      "nonfinite = 1 if yb < 0 or yb >= n else 0" if col else "nonfinite = 0",
      "hx = -INF",
      "lx = INF")
    with L.block("for w in range(tx, n, nt):"):
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
      "isbad = anybad != 0 or not (s > ZERO and math.isfinite(s) and math.isfinite(spread))")
    with L.block("if isbad:"):
        with L.block("for w in range(tx, n, nt):"):
            L("sm[w] = ZERO")
        L("cuda.syncthreads()")


@contextmanager
def _ranks(L: Lines, c: Ctx, acc: bool = False) -> Iterator[None]:
    """Comparator i's planned ranks lo..hi-1 in wire-major rows (its wires'
    entries start at ``a``, ``c``), p and q read from the forward; the body
    is the rank sweep (:func:`_rank_step`)."""
    L("lo = clo[i]", "hi = chi[i]")
    if acc:
        L("acc = ZERO")
    with L.block("if lo < hi:"):
        L("a = wa[i] * k", "c = wb[i] * k", "p = psb[i]", "q = ONE - p")
        if c.k > UNROLL_RANKS:
            L("ia = a + lo", "ic = c + lo", "ie = a + hi")
        yield


def _rank_step(L: Lines, c: Ctx, names: tuple[str, str], d_index: bool, body: Callable[[str], None]) -> None:
    """The update of comparator i's ranks: load the pair, ``body`` (given
    the D index of the rank), mix. Where k <= UNROLL_RANKS every rank r < k
    gets its own guarded copy (``lo <= r < hi``; no rank loop: the model
    counts ~25% fewer instructions per comparator at k = 5); otherwise a
    ``while ia < ie`` loop with running indices (``j`` too where D is
    indexed)."""
    va, vc = names
    if d_index:
        L("j = doff[i] + U0")
    if c.k <= UNROLL_RANKS:
        for r in range(c.k):
            L(f"r = np.uint32({r})")
            with L.block("if lo <= r and r < hi:"):
                L(f"{va} = sm[a + r]", f"{vc} = sm[c + r]")
                body("j + r - lo")
                _mix(L, "a + r", "c + r", va, vc)
        return
    with L.block("while ia < ie:"):
        L(f"{va} = sm[ia]", f"{vc} = sm[ic]")
        body("j")
        _mix(L, "ia", "ic", va, vc)
        L("ia += U1", "ic += U1")
        if d_index:
            L("j += U1")


def _backsweep(L: Lines, c: Ctx, save: str) -> None:
    """R (k x n, wire-major, in ``sm``) <- R M_l from the last layer to the
    first over the planned ranks; saves D when ``save`` (a flag name: one
    layer loop each way, so the flag is tested once, not per comparator)."""
    _fill_rows(L, "j", "kn", "")
    with L.block("for r in range(tx, k, nt):"):
        L("sm[outs[r] * k + r] = ONE")
    L("cuda.syncthreads()")
    with L.block(f"if {save}:"):
        with _layers(L, reverse=True), _ranks(L, c):
            _rank_step(L, c, ("ra", "rc"), True, lambda j: L(f"Db[{j}] = ra - rc"))
    with L.block("else:"):
        with _layers(L, reverse=True), _ranks(L, c):
            _rank_step(L, c, ("ra", "rc"), False, lambda j: None)


def _grad_out(L: Lines) -> None:
    """dL/dx from ``sm[:n]`` and the row's dL/ds (NaN for a bad row)."""
    L("isbad = bad[b] != 0")
    with L.block("for w in range(tx, n, nt):"):
        L("gx[b, w] = NAN if isbad else sm[w]")
    with L.block("if want_gs:"):
        L("cuda.atomic.add(gs, b, NAN if isbad else acc_s)")


def _per_rank(L: Lines, src: str) -> None:
    """For each rank r and wire w: ``src``, with ``j = r n + w`` the
    rank-major index of a (k, n) row and ``sm[w * k + r]`` its wire-major
    place (threads stride over w: coalesced; no division of j by n)."""
    with L.block("for r in range(U0, k, U1):"):
        with L.block("for w in range(tx, n, nt):"):
            L("j = r * n + w", src)


# ------------------------------------------------------------------ bodies
def _fwd(L: Lines, c: Ctx) -> None:
    L("kn = k * n", "dsb = ds[b]", "psb = ps[b]", "Db = D[b if save_D else U0]")
    _alloc(L, c)
    _load_row(L, c, col=False)
    with _layers(L, reverse=False):
        _swap_at(L, c)
        _mix(L, "a", "c", "xa", "xc")
        L("dsb[i] = d", "psb[i] = p")
    with L.block("for r in range(tx, k, nt):"):
        L("values[b, r] = NAN if isbad else sm[outs[r]]")
    with L.block("if tx == U0:"):
        L("bad[b] = 1 if isbad else 0")
    with L.block("if do_P:"):
        L("cuda.syncthreads()")
        _backsweep(L, c, "save_D")
        _per_rank(L, "P[b, j] = NAN if isbad else sm[w * k + r]")


def _bwd(L: Lines, c: Ctx) -> None:
    L("kn = k * n", "dsb = ds[b]", "psb = ps[b]", "Db = D[b if has_gP else U0]", "gpb = gp[b if has_gP else U0]")
    _alloc(L, c)
    with L.block("if has_gP:"):
        with L.block("if recompute:"):
            _backsweep(L, c, "recompute")
        _per_rank(L, "sm[w * k + r] = gP[b, j]")
        L("cuda.syncthreads()")
        with _layers(L, reverse=False):
            with _ranks(L, c, acc=True):
                _rank_step(L, c, ("ga", "gc"), True, lambda j: L(f"acc += (ga - gc) * Db[{j}]"))
            L("gpb[i] = acc")
    _fill_rows(L, "w", "n", "")
    with L.block("if has_gv:"):
        with L.block("for r in range(tx, k, nt):"):
            L("sm[outs[r]] = gv[b, r]")
        L("cuda.syncthreads()")
    L("acc_s = ZERO")
    with _layers(L, reverse=True):
        _swap_at(L, c, "dsb[i]")
        L("ga = sm[a]", "gc = sm[c]", "gpi = (ga - gc) * d")
        with L.block("if has_gP:"):
            L("gpi += gpb[i]")
        L("acc_s += gpi * dps", "gd = gpi * dp")
        _mix(L, "a", "c", "ga", "gc", "gd")
    _grad_out(L)


def _fwd_col(L: Lines, c: Ctx) -> None:
    L("yb = y[b]", "dsb = ds[b if save else U0]", "dusb = dus[b if save else U0]")
    _alloc(L, c)
    _load_row(L, c, col=True)
    with L.block("if tx == U0 and not isbad:"):
        L("sm[n + np.uint32(yb)] = ONE")
    L("cuda.syncthreads()")
    with _layers(L, reverse=False):
        _swap_at(L, c)
        _mix(L, "a", "c", "xa", "xc")
        L("ua = sm[n + a]", "uc = sm[n + c]")
        _mix(L, "n + a", "n + c", "ua", "uc")
        with L.block("if save:"):
            L("dsb[i] = d", "dusb[i] = ua - uc")
    with L.block("for r in range(tx, k, nt):"):
        L("col[b, r] = NAN if isbad else sm[n + outs[r]]")
    with L.block("if tx == U0:"):
        L("bad[b] = 1 if isbad else 0")


def _bwd_col(L: Lines, c: Ctx) -> None:
    L("dsb = ds[b]", "dusb = dus[b]")
    _alloc(L, c)
    _fill_rows(L, "w", "n", "", "n + ")
    with L.block("for r in range(tx, k, nt):"):
        L("sm[n + outs[r]] = gcol[b, r]")
    L("cuda.syncthreads()", "acc_s = ZERO")
    with _layers(L, reverse=True):
        _swap_at(L, c, "dsb[i]")
        L("ga = sm[a]", "gc = sm[c]", "ua = sm[n + a]", "uc = sm[n + c]",
          "gpi = (ga - gc) * d + (ua - uc) * dusb[i]",
          "acc_s += gpi * dps",
          "gd = gpi * dp")
        _mix(L, "a", "c", "ga", "gc", "gd")
        _mix(L, "n + a", "n + c", "ua", "uc")
    _grad_out(L)


# ------------------------------------------------------------------ the kernels
_NET = (("wa", "w1"), ("wb", "w1"), ("offs", "u1"))
_PLAN = (("clo", "w1"), ("chi", "w1"), ("doff", "u1"), ("outs", "w1"))
_SCRATCH = (("scratch", "f2"),)

#: the kernels of a generated module, in the order they are emitted
KERNELS = (
    Kernel("fwd", (("x", "f2"), ("sv", "f1"), *_NET, *_PLAN, ("values", "f2"), ("ds", "f2"), ("ps", "f2"),
                   ("bad", "b1"), ("P", "f2"), ("D", "f2"), ("do_P", "bool"), ("save_D", "bool"), *_SCRATCH),
           rows=1, length="x", body=_fwd),
    Kernel("bwd", (("sv", "f1"), *_NET, *_PLAN, ("gv", "f2"), ("gP", "f2"), ("ds", "f2"), ("ps", "f2"),
                   ("D", "f2"), ("gp", "f2"), ("bad", "b1"), ("gx", "f2"), ("gs", "f1"), ("has_gv", "bool"),
                   ("has_gP", "bool"), ("recompute", "bool"), ("want_gs", "bool"), *_SCRATCH),
           rows=1, length="gx", body=_bwd),
    Kernel("fwd_col", (("x", "f2"), ("y", "i1"), ("sv", "f1"), *_NET, ("outs", "w1"), ("col", "f2"), ("ds", "f2"),
                       ("dus", "f2"), ("bad", "b1"), ("save", "bool"), *_SCRATCH),
           rows=2, length="x", body=_fwd_col),
    Kernel("bwd_col", (("sv", "f1"), *_NET, ("outs", "w1"), ("gcol", "f2"), ("ds", "f2"), ("dus", "f2"),
                       ("bad", "b1"), ("gx", "f2"), ("gs", "f1"), ("want_gs", "bool"), *_SCRATCH),
           rows=2, length="gx", body=_bwd_col),
)

#: kernel name -> argument kinds, in order (launchers, signatures, the
#: packing and the compile check use these; derived from KERNELS)
KERNEL_ARGS = {kern.name: kern.kinds for kern in KERNELS}
#: the smallest wire-array use of each kernel, in rows of n floats
MIN_ROWS = {kern.name: kern.rows for kern in KERNELS}


def kernels_source(n: int, k: int, shared_limit: int, swaps: dict[str, str]) -> tuple[str, str, str]:
    """What a generated module holds about its kernels, from the objects:
    (the ``KERNEL_ARGS`` assignment, the kernel functions, the ``KERNELS``
    table ``(dtype, name, variant) -> kernel``). ``swaps``: float type ->
    swap code. A shared variant is emitted where the kernel's smallest
    wire-array use (``rows`` x n floats) fits ``shared_limit`` bytes."""
    args = Lines()
    with args.indented():
        for kern in KERNELS:
            args(f"{literal(kern.name)}: {literal(kern.kinds)},")
    sources, table = [], Lines()
    with table.indented():
        for ft, swap in swaps.items():
            size = 4 if ft == "float32" else 8
            for variant in VARIANTS:
                for kern in KERNELS:
                    if variant == "shared" and kern.rows * n * size > shared_limit:
                        continue
                    sources.append(kern.render(ft, variant, swap, k))
                    table(f"(np.dtype(np.{ft}), {literal(kern.name)}, {literal(variant)}): "
                          f"{kern.function_name(ft, variant)},")
    return ("KERNEL_ARGS = {\n" + args.render() + "}", "\n\n".join(s.rstrip() for s in sources),
            "KERNELS = {\n" + table.render() + "}")
