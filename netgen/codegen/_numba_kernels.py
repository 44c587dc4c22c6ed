"""Kernel sources of the generated numba module (``--target numba``),
one template per float type (``@@SFX@@`` _f32/_f64, ``@@NPT@@`` the numpy
type, ``@@ONE@@``/``@@ZERO@@`` typed literals, ``@@SWAP16@@`` the swap code
of :mod:`._swap_code` indented into the batch loop, reading the run-time
steepness ``stp``). Substitution is one pass (:func:`._numba_common.fill`).

Every kernel is ``@njit(parallel=True, fastmath={"contract"})`` over
blocks of ``_W`` = 16 batch rows (``prange``), batch-innermost: the state of
a wire is a vector of 16 rows, so each comparator is a few short loops over
the rows with a constant trip count that LLVM vectorises. Each loop touches
few arrays and has no branch (LLVM gives up on a loop that needs too many
runtime alias checks): the swap probabilities and what backward needs in one
loop, the update of the two wires in another. The update is written
``t = q (c - a); a + t; c - t`` (= ``p a + q c``, ``q a + p c``: fewer
operations; ``contract`` lets LLVM fuse multiply-adds). Padding rows of a
partial last block are zeros and never written out.

The P engine (docs/targets.md, "numba: the P engine"): the back-sweep rows
of different ranks are independent, so P is computed per *rank group*
``[g0, g1)`` of ``grp`` ranks: the scratch ``R[w, r, j]`` holds only the
group's rows (n x grp x 16 floats) and the kernels run ``prange`` over
(row block, rank group) pairs, so a batch of 16 sorting rows still uses
every core. Each comparator's range of rows (the plan's ``clo..chi``) is
clipped to the group.

* ``_fwd_vals``: values by the forward sweep, saving p (and with a gradient
  dp/dd * d, dp/dd; with a steepness gradient dp/ds * d, dp/ds);
* ``_fwd_P``: P rows by the back-sweep ``R <- R M_l`` per (block, group),
  saving the differences ``D = R[r, a] - R[r, c]`` in mode ``save``;
* ``_bwd_rows``: per (block, group): dL/dP of the group pushed forward
  through the layers (the back-sweep's adjoint) gives the group's share of
  dL/dp; mode ``recompute`` first re-runs the group's back-sweep into a
  thread-local ``Dg`` (filled from the top in reverse comparator order, so
  the push reads it in order). Then the values' adjoint swept back once
  with that share (and, for group 0, dL/dvalues) adds dL/dp * dp/dd; the
  sweep is linear, so the shares' results add up, per thread, in ``gxt``
  (``gst`` for dL/ds);
* ``_fwd_col`` / ``_bwd_col``: P[:, y] by pushing e_y forward with the
  values, and its adjoint.
"""

# Helpers pasted above the kernels, once: flush-to-zero (x86: FTZ and DAZ
# bits of the MXCSR, set by each kernel on the thread running a block and
# restored after it; elsewhere a no-op) and the block transposes.
HELPERS = """# Subnormal floats (below 1.2e-38 in float32) cost x86 cores a microcode
# assist per operation, and relaxations with fast-decaying tails make many of
# them (gaussian: exp(-z^2/2) in p, then products of small p in P and the
# adjoints; its column path ran 1.8x slower on normal inputs than on inputs
# scaled by 0.01). Every kernel sets FTZ|DAZ in the MXCSR of the thread that
# runs a block and restores it after, so such numbers are read and written
# as 0: differences below 1.2e-38 (float32) or 2.2e-308 (float64), far
# below any tolerance. Other machines keep their default mode.
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

if platform.machine().lower() in ("x86_64", "amd64"):

    def _mxcsr(builder, op, slot):
        i8p = ir.IntType(8).as_pointer()
        fn = builder.module.declare_intrinsic(f"llvm.x86.sse.{op}", fnty=ir.FunctionType(ir.VoidType(), [i8p]))
        builder.call(fn, [builder.bitcast(slot, i8p)])

    @intrinsic
    def _ftz_on(typingctx):  # sets FTZ|DAZ on this thread, returns the old MXCSR
        def codegen(context, builder, sig, args):
            slot = cgutils.alloca_once(builder, ir.IntType(32))
            _mxcsr(builder, "stmxcsr", slot)
            old = builder.load(slot)
            builder.store(builder.or_(old, ir.Constant(ir.IntType(32), 0x8040)), slot)
            _mxcsr(builder, "ldmxcsr", slot)
            return old
        return types.uint32(), codegen

    @intrinsic
    def _ftz_off(typingctx, old):  # restores the MXCSR _ftz_on returned
        def codegen(context, builder, sig, args):
            slot = cgutils.alloca_once(builder, ir.IntType(32))
            builder.store(args[0], slot)
            _mxcsr(builder, "ldmxcsr", slot)
            return context.get_dummy_value()
        return types.void(types.uint32), codegen
else:
    @numba.njit(inline="always")
    def _ftz_on():
        return np.uint32(0)

    @numba.njit(inline="always")
    def _ftz_off(old):
        pass


# Explicit 16-lane vector updates (LLVM IR through llvmlite intrinsics). A
# loop over the 16 rows of two tiles of the same scratch array is unrolled
# by LLVM and then left scalar: it cannot prove the tiles do not overlap
# (measured: 7.5 ns per 16-row update scalar, 0.5 ns as one vector). Each
# helper loads its tiles as <16 x float> vectors, computes, stores; the
# arguments are 1-d C-contiguous views of at least 16 elements (a wire's
# row of R, G, D, q), never checked: only the kernels below call them.
def _vptrs(context, builder, sig, args):
    vec = ir.VectorType(context.get_value_type(sig.args[0].dtype), _W)
    ptrs = []
    for ty, val in zip(sig.args, args):
        ary = context.make_array(ty)(context, builder, val)
        ptrs.append(builder.bitcast(ary.data, vec.as_pointer()))
    al = sig.args[0].dtype.bitwidth // 8
    return ptrs, (lambda ptr: builder.load(ptr, align=al)), (lambda val, ptr: builder.store(val, ptr, align=al))


_FL = ("contract",)


@intrinsic
def _vq(typingctx, p, q):  # q = 1 - p
    def codegen(context, builder, sig, args):
        (pp, pq), load, store = _vptrs(context, builder, sig, args)
        one = ir.Constant(ir.VectorType(context.get_value_type(sig.args[0].dtype), _W), [1.0] * _W)
        store(builder.fsub(one, load(pp)), pq)
        return context.get_dummy_value()
    return types.void(p, q), codegen


@intrinsic
def _vmix(typingctx, ra, rc, q):  # t = q (c - a); a += t; c -= t
    def codegen(context, builder, sig, args):
        (pa, pc, pq), load, store = _vptrs(context, builder, sig, args)
        a, c = load(pa), load(pc)
        t = builder.fmul(load(pq), builder.fsub(c, a, flags=_FL), flags=_FL)
        store(builder.fadd(a, t, flags=_FL), pa)
        store(builder.fsub(c, t, flags=_FL), pc)
        return context.get_dummy_value()
    return types.void(ra, rc, q), codegen


@intrinsic
def _vmixd(typingctx, ra, rc, q, dr):  # dr = a - c, then _vmix
    def codegen(context, builder, sig, args):
        (pa, pc, pq, pd), load, store = _vptrs(context, builder, sig, args)
        a, c = load(pa), load(pc)
        store(builder.fsub(a, c, flags=_FL), pd)
        t = builder.fmul(load(pq), builder.fsub(c, a, flags=_FL), flags=_FL)
        store(builder.fadd(a, t, flags=_FL), pa)
        store(builder.fsub(c, t, flags=_FL), pc)
        return context.get_dummy_value()
    return types.void(ra, rc, q, dr), codegen


@intrinsic
def _vpush(typingctx, ga, gc, q, dr, acc):  # acc += (ga - gc) dr, then _vmix(ga, gc, q)
    def codegen(context, builder, sig, args):
        (pa, pc, pq, pd, pacc), load, store = _vptrs(context, builder, sig, args)
        a, c = load(pa), load(pc)
        store(builder.fadd(load(pacc), builder.fmul(builder.fsub(a, c, flags=_FL), load(pd), flags=_FL),
                           flags=_FL), pacc)
        t = builder.fmul(load(pq), builder.fsub(c, a, flags=_FL), flags=_FL)
        store(builder.fadd(a, t, flags=_FL), pa)
        store(builder.fsub(c, t, flags=_FL), pc)
        return context.get_dummy_value()
    return types.void(ga, gc, q, dr, acc), codegen


@intrinsic
def _vadj(typingctx, ga, gc, q, s0, s1, gp):  # gd = (ga - gc) s0 + gp s1; t = q (gc - ga) + gd; ga += t; gc -= t
    def codegen(context, builder, sig, args):
        (pa, pc, pq, p0, p1, pg), load, store = _vptrs(context, builder, sig, args)
        a, c = load(pa), load(pc)
        gd = builder.fadd(builder.fmul(builder.fsub(a, c, flags=_FL), load(p0), flags=_FL),
                          builder.fmul(load(pg), load(p1), flags=_FL), flags=_FL)
        t = builder.fadd(builder.fmul(load(pq), builder.fsub(c, a, flags=_FL), flags=_FL), gd, flags=_FL)
        store(builder.fadd(a, t, flags=_FL), pa)
        store(builder.fsub(c, t, flags=_FL), pc)
        return context.get_dummy_value()
    return types.void(ga, gc, q, s0, s1, gp), codegen


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
"""

KERNELS = '''@numba.njit(parallel=@@PAR@@, cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _fwd_vals@@SFX@@(x, stp, ca, cb, outs, values, ps, sv, ss, save, sgrad):
    # values by the forward sweep; ps[blk, i, j] = p of row blk * _W + j;
    # sv[blk, i, :, j] = (dp * d, dp) and ss[blk, i, :, j] = (dps * d, dps)
    # (without save / sgrad: one scratch slot, overwritten)
    B, n = x.shape
    size = ca.shape[0]
    k = outs.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        mx = _ftz_on()  # subnormals read and written as 0 on this thread (see _ftz_on)
        v = np.zeros((n, _W), dtype=@@NPT@@)  # padding rows (j >= nb) stay 0
        _load_block(x, b0, nb, v)
        qv = np.empty(_W, dtype=@@NPT@@)
        pj = ps[blk]
        for i in range(size):
            va = v[ca[i]]
            vc = v[cb[i]]
            pi = pj[i]
            sw = sv[blk, i if save else 0]
            sx = ss[blk, i if sgrad else 0]
            # two loops that LLVM vectorises (few pointers, no branches): the
            # swap probabilities and what backward needs, then the update
            for j in range(_W):
                d = va[j] - vc[j]
@@SWAP16@@
                pi[j] = p
                sw[0, j] = dp * d
                sw[1, j] = dp
                sx[0, j] = dps * d
                sx[1, j] = dps
            _vq(pi, qv)
            _vmix(va, vc, qv)
        for j in range(nb):
            for r in range(k):
                values[b0 + j, r] = v[outs[r], j]
        _ftz_off(mx)


@numba.njit(parallel=@@PAR@@, cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _fwd_P@@SFX@@(ca, cb, clo, chi, doff, outs, ps, P, D, save, grp):
    # P rows by the back-sweep R <- R M_l, last layer first, per (row
    # block, rank group) pair: R[w, r - g0, j] holds ranks g0..g1-1 only;
    # rows clo..chi (clipped to the group) only; with save
    # D[blk, doff[i] + r - clo[i], j] = R[a, r, j] - R[c, r, j]
    B, k, n = P.shape
    size = ca.shape[0]
    nblk = (B + _W - 1) // _W
    ngr = (k + grp - 1) // grp
    for t in numba.prange(nblk * ngr):
        blk = t // ngr
        g0 = (t % ngr) * grp
        g1 = min(k, g0 + grp)
        b0 = blk * _W
        nb = min(_W, B - b0)
        mx = _ftz_on()
        R = np.zeros((n, g1 - g0, _W), dtype=@@NPT@@)
        for r in range(g0, g1):
            R[outs[r], r - g0, :] = @@ONE@@
        pj = ps[blk]
        qv = np.empty(_W, dtype=@@NPT@@)
        for i in range(size - 1, -1, -1):
            lo = max(clo[i], g0)
            hi = min(chi[i], g1)
            if lo >= hi:
                continue
            Ra = R[ca[i]]
            Rc = R[cb[i]]
            _vq(pj[i], qv)
            o = doff[i] - clo[i]
            if save:
                Db = D[blk]
                for r in range(lo, hi):
                    _vmixd(Ra[r - g0], Rc[r - g0], qv, Db[o + r])
            else:
                for r in range(lo, hi):
                    _vmix(Ra[r - g0], Rc[r - g0], qv)
        for r in range(g0, g1):
            _store_block(R[:, r - g0], b0, nb, P[:, r])
        _ftz_off(mx)


@numba.njit(cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _vals_adjoint@@SFX@@(gv, use_gv, b0, nb, ca, cb, outs, pj, svb, ssb, sgrad, gpp, gx, gs):
    # the values' adjoint of one row block, swept back once: adds
    # dL/dp * dp/dd for the given dL/dp (gpp) and, with use_gv, dL/dvalues;
    # adds into gx[w, j] and gs[j] (dL/ds, with sgrad). Linear in (gv, gpp).
    size = ca.shape[0]
    k = outs.shape[0]
    n = gx.shape[0]
    g = np.zeros((n, _W), dtype=@@NPT@@)
    qv = np.empty(_W, dtype=@@NPT@@)
    if use_gv:
        for j in range(nb):
            for r in range(k):
                g[outs[r], j] += gv[b0 + j, r]
    for i in range(size - 1, -1, -1):
        ga_ = g[ca[i]]
        gc_ = g[cb[i]]
        pi = pj[i]
        sw = svb[i]
        gi = gpp[i]
        if sgrad:
            sx = ssb[i]
            for j in range(_W):
                gs[j] += (ga_[j] - gc_[j]) * sx[0, j] + gi[j] * sx[1, j]
        _vq(pi, qv)
        _vadj(ga_, gc_, qv, sw[0], sw[1], gi)
    for w in range(n):
        for j in range(_W):
            gx[w, j] += g[w, j]


@numba.njit(parallel=@@PAR@@, cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _bwd_rows@@SFX@@(gv, gP, has_gP, ca, cb, clo, chi, doff, outs, ps, sv, ss, sgrad, D, save, grp, gxt, gst):
    # The (row block, rank group) pairs t = blk * ngr + group are split into
    # nw = gxt.shape[0] contiguous runs, one per worker (prange). A worker
    # sums its groups' shares of dL/dp for the block at hand in gpp and,
    # when the block changes, sweeps the values' adjoint back once with it
    # (group 0 adds dL/dvalues), adding into gxt[w, blk] (wire-major) and
    # gst[w, blk] (dL/ds per row): the sweep is linear, so the workers'
    # results add up (the host sums over w).
    nblk = ps.shape[0]
    size = ca.shape[0]
    k = outs.shape[0]
    nw = gxt.shape[0]
    n = gxt.shape[2]
    B = gv.shape[0]
    ngr = (k + grp - 1) // grp if has_gP else 1
    total = nblk * ngr
    for w in numba.prange(nw):
        t0 = (total * w) // nw
        t1 = (total * (w + 1)) // nw
        if t0 >= t1:
            continue
        mx = _ftz_on()
        gpp = np.zeros((size, _W), dtype=@@NPT@@)  # dL/dp per comparator and row, this worker's groups
        qv = np.empty(_W, dtype=@@NPT@@)
        cur = t0 // ngr
        with_gv = False
        for t in range(t0, t1 + 1):
            blk = t // ngr if t < t1 else -1
            if blk != cur:  # flush the block finished
                b0 = cur * _W
                _vals_adjoint@@SFX@@(gv, with_gv, b0, min(_W, B - b0), ca, cb, outs, ps[cur], sv[cur], ss[cur],
                                     sgrad, gpp, gxt[w, cur], gst[w, cur])
                if t == t1:
                    break
                gpp[:] = @@ZERO@@
                cur = blk
                with_gv = False
            gi_ = t % ngr
            if gi_ == 0:
                with_gv = True
            if not has_gP:
                continue
            g0 = gi_ * grp
            g1 = min(k, g0 + grp)
            gw = g1 - g0
            b0 = blk * _W
            nb = min(_W, B - b0)
            pj = ps[blk]
            if save:
                Dg = D[blk]
            else:
                # recompute the group's back-sweep: its differences fill Dg
                # from the top (reverse comparator order), so the push below
                # reads them in order
                cnt = 0
                for i in range(size):
                    lo = max(clo[i], g0)
                    hi = min(chi[i], g1)
                    if lo < hi:
                        cnt += hi - lo
                Dg = np.empty((cnt, _W), dtype=@@NPT@@)
                R = np.zeros((n, gw, _W), dtype=@@NPT@@)
                for r in range(g0, g1):
                    R[outs[r], r - g0, :] = @@ONE@@
                pos = cnt
                for i in range(size - 1, -1, -1):
                    lo = max(clo[i], g0)
                    hi = min(chi[i], g1)
                    if lo >= hi:
                        continue
                    pos -= hi - lo
                    Ra = R[ca[i]]
                    Rc = R[cb[i]]
                    _vq(pj[i], qv)
                    for r in range(lo, hi):
                        _vmixd(Ra[r - g0], Rc[r - g0], qv, Dg[pos + r - lo])
            # dL/dP of the group pushed forward through the layers
            G = np.zeros((n, gw, _W), dtype=@@NPT@@)
            for r in range(g0, g1):
                _load_block(gP[:, r], b0, nb, G[:, r - g0])
            pos = 0
            for i in range(size):
                lo = max(clo[i], g0)
                hi = min(chi[i], g1)
                if lo >= hi:
                    continue
                Ga = G[ca[i]]
                Gc = G[cb[i]]
                _vq(pj[i], qv)
                o = doff[i] - clo[i] if save else pos - lo
                pos += hi - lo
                gi = gpp[i]  # accumulates over this worker's groups
                for r in range(lo, hi):
                    _vpush(Ga[r - g0], Gc[r - g0], qv, Dg[o + r], gi)
        _ftz_off(mx)


@numba.njit(parallel=@@PAR@@, cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _fwd_col@@SFX@@(x, y, stp, ca, cb, outs, col, cs, css, save, sgrad):
    # _W batch rows at a time, batch-innermost: vu[w, :_W] = v[w] and
    # vu[w, _W:] = u[w] of the block's rows, so a comparator's state is two
    # contiguous 2 * _W tiles and each comparator is two short loops that
    # LLVM vectorises (error_model="numpy": no exceptions on division).
    # cs[blk, i, :, j] = (p, dp * d, dp * (u[a] - u[c])) of row blk * _W + j:
    # all the adjoint needs; css[blk, i, :, j] = (dps * d, dps * du) for
    # dL/ds (without save / sgrad: one scratch slot, overwritten).
    B, n = x.shape
    size = ca.shape[0]
    k = outs.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        mx = _ftz_on()  # subnormals read and written as 0 on this thread (see _ftz_on)
        vu = np.zeros((n, 2 * _W), dtype=@@NPT@@)  # padding rows (j >= nb) stay 0
        _load_block(x, b0, nb, vu)
        for j in range(nb):
            vu[y[b0 + j], _W + j] = @@ONE@@
        q2 = np.empty(2 * _W, dtype=@@NPT@@)  # each row's 1 - p, for its v and its u
        for i in range(size):
            ta = vu[ca[i]]
            tc = vu[cb[i]]
            sw = cs[blk, i if save else 0]
            sx = css[blk, i if sgrad else 0]
            for j in range(_W):
                d = ta[j] - tc[j]
@@SWAP16@@
                q = @@ONE@@ - p
                q2[j] = q
                q2[_W + j] = q
                du = ta[_W + j] - tc[_W + j]
                sw[0, j] = p
                sw[1, j] = dp * d
                sw[2, j] = dp * du
                sx[0, j] = dps * d
                sx[1, j] = dps * du
            for e in range(2 * _W):
                a = ta[e]
                c = tc[e]
                t = q2[e] * (c - a)
                ta[e] = a + t
                tc[e] = c - t
        for j in range(nb):
            for r in range(k):
                col[b0 + j, r] = vu[outs[r], _W + j]
        _ftz_off(mx)


@numba.njit(parallel=@@PAR@@, cache=_CACHE, error_model="numpy", fastmath={"contract"})
def _bwd_col@@SFX@@(gcol, ca, cb, outs, cs, css, sgrad, gx, gsr):
    # gsr[b] = dL/ds of row b (with sgrad)
    B, n = gx.shape
    size = ca.shape[0]
    k = outs.shape[0]
    for blk in numba.prange((B + _W - 1) // _W):
        b0 = blk * _W
        nb = min(_W, B - b0)
        mx = _ftz_on()  # subnormals read and written as 0 on this thread (see _ftz_on)
        gg = np.zeros((n, 2 * _W), dtype=@@NPT@@)  # the adjoints of v and u, laid out like vu
        for j in range(nb):
            for r in range(k):
                gg[outs[r], _W + j] += gcol[b0 + j, r]
        q2 = np.empty(2 * _W, dtype=@@NPT@@)
        g2 = np.zeros(2 * _W, dtype=@@NPT@@)  # dL/dd per row; g2[_W:] stays 0 (u has no such term)
        gs = np.zeros(_W, dtype=@@NPT@@)
        for i in range(size - 1, -1, -1):
            ta = gg[ca[i]]
            tc = gg[cb[i]]
            sw = cs[blk, i]
            if sgrad:
                sx = css[blk, i]
                for j in range(_W):
                    gs[j] += (ta[j] - tc[j]) * sx[0, j] + (ta[_W + j] - tc[_W + j]) * sx[1, j]
            for j in range(_W):
                q = @@ONE@@ - sw[0, j]
                q2[j] = q
                q2[_W + j] = q
                g2[j] = (ta[j] - tc[j]) * sw[1, j] + (ta[_W + j] - tc[_W + j]) * sw[2, j]
            for e in range(2 * _W):
                a = ta[e]
                c = tc[e]
                t = q2[e] * (c - a) + g2[e]
                ta[e] = a + t
                tc[e] = c - t
        _store_block(gg, b0, nb, gx)
        for j in range(nb):
            gsr[b0 + j] = gs[j]
        _ftz_off(mx)
'''
