"""Low-level helpers of the generated numba module: flush-to-zero, the
16-lane vector updates (LLVM IR through llvmlite), a typed constant and the
float-type dispatch of the rendered swap code.

Real code, copied into generated modules by source extraction (:data:`PARTS`,
:func:`netgen.codegen.runtime.assemble`); the kernels of
:mod:`.numba_kernels` call these by name. Importable and tested on its own
(tests/codegen/numba/test_numba_runtime.py).

* Subnormal floats (below 1.2e-38 in float32) cost x86 cores a microcode
  assist per operation, and relaxations with fast-decaying tails make many
  of them (gaussian: exp(-z^2/2) in p, then products of small p in P and the
  adjoints; its column path ran 1.8x slower on normal inputs than on inputs
  scaled by 0.01). Every kernel sets FTZ|DAZ in the MXCSR of the thread that
  runs a block (:func:`_ftz_on`) and restores it after (:func:`_ftz_off`), so
  such numbers are read and written as 0: differences below 1.2e-38
  (float32) or 2.2e-308 (float64), far below any tolerance. Other machines
  keep their default mode (both are no-ops there).
* Block transposes between a batch's (row, wire) layout and a kernel's
  (wire, row) blocks of ``_W`` rows (:func:`_load_block`,
  :func:`_store_block`; tiles of ``_T`` wires), and between P's (row, rank,
  column) layout and a forward sweep's column group (:func:`_load_cols`,
  :func:`_store_cols`: one call per group, not one per rank).
* Explicit 16-lane vector updates: a loop over the 16 rows of two tiles of
  the same scratch array is unrolled by LLVM and then left scalar, because
  it cannot prove the tiles do not overlap (measured: 7.5 ns per 16-row
  update scalar, 0.5 ns as one vector). Each helper loads its tiles as
  ``<_W x float>`` vectors, computes, stores; the arguments are 1-d
  C-contiguous views of at least ``_W`` elements (a wire's row of R, G, D,
  q), never checked: only the kernels call them. Arithmetic carries the
  ``contract`` flag (multiply-adds may fuse), like the kernels.
"""

from __future__ import annotations

import platform

import numba
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic, overload

__all__ = ["PARTS", "_T", "_W"]

#: batch rows per block in every kernel (one or two SIMD vectors); the
#: emitter writes this value into each module
_W = 16
#: wires per tile when transposing between (row, wire) and (wire, row)
_T = 64

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("_CACHE", "_W", "_T")  # _W and _T: the emitter writes the values above
_CACHE = False


def _x86():
    return platform.machine().lower() in ("x86_64", "amd64")


def _mxcsr(builder, op, slot):
    i8p = ir.IntType(8).as_pointer()
    fn = builder.module.declare_intrinsic(f"llvm.x86.sse.{op}", fnty=ir.FunctionType(ir.VoidType(), [i8p]))
    builder.call(fn, [builder.bitcast(slot, i8p)])


@intrinsic
def _ftz_on(typingctx):
    """Sets FTZ|DAZ on this thread (x86), returns the old MXCSR (else 0)."""
    def codegen(context, builder, sig, args):
        if not _x86():
            return ir.Constant(ir.IntType(32), 0)
        slot = cgutils.alloca_once(builder, ir.IntType(32))
        _mxcsr(builder, "stmxcsr", slot)
        old = builder.load(slot)
        builder.store(builder.or_(old, ir.Constant(ir.IntType(32), 0x8040)), slot)
        _mxcsr(builder, "ldmxcsr", slot)
        return old
    return types.uint32(), codegen


@intrinsic
def _ftz_off(typingctx, old):
    """Restores the MXCSR that :func:`_ftz_on` returned (x86)."""
    def codegen(context, builder, sig, args):
        if _x86():
            slot = cgutils.alloca_once(builder, ir.IntType(32))
            builder.store(args[0], slot)
            _mxcsr(builder, "ldmxcsr", slot)
        return context.get_dummy_value()
    return types.void(types.uint32), codegen


@intrinsic
def _one_like(typingctx, x):
    """1 in the float type of ``x`` (a float32 kernel never promotes to
    float64 through a literal)."""
    def codegen(context, builder, sig, args):
        return context.get_constant(sig.return_type, 1.0)
    return x(x), codegen


def _by_float(f32, f64):
    """A function ``(d, stp)`` for jitted code that runs ``f32`` on float32 ``d`` and
    ``f64`` on any other, inlined into the caller (numba IR, so the caller's
    flags apply): the per-type swap code rendered by the emitter."""
    def pick(d, stp):  # pragma: no cover - only called from jitted code
        raise NotImplementedError("call from a numba kernel")

    @overload(pick, inline="always")
    def _pick(d, stp):
        return f32 if d == types.float32 else f64

    return pick


@numba.njit(cache=_CACHE)
def _load_block(src, b0, nb, dst):
    # dst[w, j] = src[b0 + j, w] for the block's nb rows, in tiles of _T
    # wires (L1-sized)
    n = src.shape[1]
    for w0 in range(0, n, _T):
        for j in range(nb):
            for w in range(w0, min(w0 + _T, n)):
                dst[w, j] = src[b0 + j, w]


@numba.njit(cache=_CACHE)
def _store_block(src, b0, nb, dst):
    # dst[b0 + j, w] = src[w, j]: the inverse of _load_block
    n = dst.shape[1]
    for w0 in range(0, n, _T):
        for j in range(nb):
            for w in range(w0, min(w0 + _T, n)):
                dst[b0 + j, w] = src[w, j]


@numba.njit(cache=_CACHE)
def _load_cols(src, b0, nb, g0, g1, outs, dst):
    # dst[outs[r], c - g0, j] = src[b0 + j, r, c] for the block's nb rows,
    # every rank r and the columns g0..g1-1 (dL/dP of a forward sweep's
    # column group: rank r is wire outs[r])
    for r in range(outs.shape[0]):
        d = dst[outs[r]]
        for j in range(nb):
            for c in range(g0, g1):
                d[c - g0, j] = src[b0 + j, r, c]


@numba.njit(cache=_CACHE)
def _store_cols(src, b0, nb, g0, g1, outs, dst):
    # dst[b0 + j, r, c] = src[outs[r], c - g0, j]: the inverse of _load_cols
    for r in range(outs.shape[0]):
        s = src[outs[r]]
        for j in range(nb):
            for c in range(g0, g1):
                dst[b0 + j, r, c] = s[c - g0, j]


def _vptrs(context, builder, sig, args):
    """Vector pointers to the data of ``args`` (arrays of one float type),
    and load/store functions with the element alignment."""
    vec = ir.VectorType(context.get_value_type(sig.args[0].dtype), _W)
    ptrs = []
    for ty, val in zip(sig.args, args):
        ary = context.make_array(ty)(context, builder, val)
        ptrs.append(builder.bitcast(ary.data, vec.as_pointer()))
    al = sig.args[0].dtype.bitwidth // 8
    return ptrs, (lambda ptr: builder.load(ptr, align=al)), (lambda val, ptr: builder.store(val, ptr, align=al))


def _fops(builder):
    """Vector add, sub and mul with the ``contract`` flag."""
    fl = ("contract",)
    return (lambda a, b: builder.fadd(a, b, flags=fl), lambda a, b: builder.fsub(a, b, flags=fl),
            lambda a, b: builder.fmul(a, b, flags=fl))


@intrinsic
def _vq(typingctx, p, q):
    """q = 1 - p."""
    def codegen(context, builder, sig, args):
        (pp, pq), load, store = _vptrs(context, builder, sig, args)
        one = ir.Constant(ir.VectorType(context.get_value_type(sig.args[0].dtype), _W), [1.0] * _W)
        store(builder.fsub(one, load(pp)), pq)
        return context.get_dummy_value()
    return types.void(p, q), codegen


@intrinsic
def _vmix(typingctx, ra, rc, q):
    """t = q (c - a); a += t; c -= t."""
    def codegen(context, builder, sig, args):
        (pa, pc, pq), load, store = _vptrs(context, builder, sig, args)
        add, sub, mul = _fops(builder)
        a, c = load(pa), load(pc)
        t = mul(load(pq), sub(c, a))
        store(add(a, t), pa)
        store(sub(c, t), pc)
        return context.get_dummy_value()
    return types.void(ra, rc, q), codegen


@intrinsic
def _vmixd(typingctx, ra, rc, q, dr):
    """dr = a - c, then :func:`_vmix`."""
    def codegen(context, builder, sig, args):
        (pa, pc, pq, pd), load, store = _vptrs(context, builder, sig, args)
        add, sub, mul = _fops(builder)
        a, c = load(pa), load(pc)
        store(sub(a, c), pd)
        t = mul(load(pq), sub(c, a))
        store(add(a, t), pa)
        store(sub(c, t), pc)
        return context.get_dummy_value()
    return types.void(ra, rc, q, dr), codegen


@intrinsic
def _vpush(typingctx, ga, gc, q, dr, acc):
    """acc += (ga - gc) dr, then :func:`_vmix` (ga, gc, q)."""
    def codegen(context, builder, sig, args):
        (pa, pc, pq, pd, pacc), load, store = _vptrs(context, builder, sig, args)
        add, sub, mul = _fops(builder)
        a, c = load(pa), load(pc)
        store(add(load(pacc), mul(sub(a, c), load(pd))), pacc)
        t = mul(load(pq), sub(c, a))
        store(add(a, t), pa)
        store(sub(c, t), pc)
        return context.get_dummy_value()
    return types.void(ga, gc, q, dr, acc), codegen


@intrinsic
def _vpush1(typingctx, ga, gc, q, dr, acc):
    """acc = (ga - gc) dr (acc is only written), then :func:`_vmix` (ga, gc, q)."""
    def codegen(context, builder, sig, args):
        (pa, pc, pq, pd, pacc), load, store = _vptrs(context, builder, sig, args)
        add, sub, mul = _fops(builder)
        a, c = load(pa), load(pc)
        store(mul(sub(a, c), load(pd)), pacc)
        t = mul(load(pq), sub(c, a))
        store(add(a, t), pa)
        store(sub(c, t), pc)
        return context.get_dummy_value()
    return types.void(ga, gc, q, dr, acc), codegen


@intrinsic
def _vadj(typingctx, ga, gc, q, s0, s1, gp):
    """gd = (ga - gc) s0 + gp s1; t = q (gc - ga) + gd; ga += t; gc -= t."""
    def codegen(context, builder, sig, args):
        (pa, pc, pq, p0, p1, pg), load, store = _vptrs(context, builder, sig, args)
        add, sub, mul = _fops(builder)
        a, c = load(pa), load(pc)
        gd = add(mul(sub(a, c), load(p0)), mul(load(pg), load(p1)))
        t = add(mul(load(pq), sub(c, a)), gd)
        store(add(a, t), pa)
        store(sub(c, t), pc)
        return context.get_dummy_value()
    return types.void(ga, gc, q, s0, s1, gp), codegen


def _one_minus(context, builder, sig, load, ptr):
    """1 - the vector at ``ptr``, in a register (q of a stored p)."""
    one = ir.Constant(ir.VectorType(context.get_value_type(sig.args[0].dtype), _W), [1.0] * _W)
    return builder.fsub(one, load(ptr))


@intrinsic
def _vmixp(typingctx, ra, rc, p):
    """:func:`_vmix` with q = 1 - p formed in a register (no q store and load)."""
    def codegen(context, builder, sig, args):
        (pa, pc, pp), load, store = _vptrs(context, builder, sig, args)
        add, sub, mul = _fops(builder)
        a, c = load(pa), load(pc)
        t = mul(_one_minus(context, builder, sig, load, pp), sub(c, a))
        store(add(a, t), pa)
        store(sub(c, t), pc)
        return context.get_dummy_value()
    return types.void(ra, rc, p), codegen


@intrinsic
def _vmixdp(typingctx, ra, rc, p, dr):
    """:func:`_vmixd` with q = 1 - p formed in a register."""
    def codegen(context, builder, sig, args):
        (pa, pc, pp, pd), load, store = _vptrs(context, builder, sig, args)
        add, sub, mul = _fops(builder)
        a, c = load(pa), load(pc)
        store(sub(a, c), pd)
        t = mul(_one_minus(context, builder, sig, load, pp), sub(c, a))
        store(add(a, t), pa)
        store(sub(c, t), pc)
        return context.get_dummy_value()
    return types.void(ra, rc, p, dr), codegen


@intrinsic
def _vpush1p(typingctx, ga, gc, p, dr, acc):
    """:func:`_vpush1` with q = 1 - p formed in a register."""
    def codegen(context, builder, sig, args):
        (pa, pc, pp, pd, pacc), load, store = _vptrs(context, builder, sig, args)
        add, sub, mul = _fops(builder)
        a, c = load(pa), load(pc)
        store(mul(sub(a, c), load(pd)), pacc)
        t = mul(_one_minus(context, builder, sig, load, pp), sub(c, a))
        store(add(a, t), pa)
        store(sub(c, t), pc)
        return context.get_dummy_value()
    return types.void(ga, gc, p, dr, acc), codegen


@intrinsic
def _vadjp(typingctx, ga, gc, p, s0, s1, gp):
    """:func:`_vadj` with q = 1 - p formed in a register."""
    def codegen(context, builder, sig, args):
        (pa, pc, pp, p0, p1, pg), load, store = _vptrs(context, builder, sig, args)
        add, sub, mul = _fops(builder)
        a, c = load(pa), load(pc)
        gd = add(mul(sub(a, c), load(p0)), mul(load(pg), load(p1)))
        t = add(mul(_one_minus(context, builder, sig, load, pp), sub(c, a)), gd)
        store(add(a, t), pa)
        store(sub(c, t), pc)
        return context.get_dummy_value()
    return types.void(ga, gc, p, s0, s1, gp), codegen


#: what a generated module copies from this file, in order
PARTS = (_x86, _mxcsr, _ftz_on, _ftz_off, _one_like, _by_float, _load_block, _store_block, _load_cols, _store_cols,
         _vptrs, _fops, _vq, _vmix, _vmixd, _vpush, _vpush1, _vadj,
         _one_minus, _vmixp, _vmixdp, _vpush1p, _vadjp)
