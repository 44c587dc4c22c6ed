"""Kernel sources of the ``cuda`` target (Numba CUDA), generated per float
type and *variant* by :func:`kernel_sources` (trusted text only: nothing
from a network or a user reaches these strings; the tables are kernel
arguments).

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

Bad rows without a host synchronisation: a row of ``x`` with a NaN or inf,
a steepness that is not finite and > 0, a ``steepness * (max(x) - min(x))``
that overflows the float type, or (column) a ``y`` outside 0..n-1 is
flagged in ``bad[b]``; every output of that row (values, P, column, dL/dx,
the row's share of dL/ds) is NaN.
"""

from __future__ import annotations

import textwrap

#: kernel name -> argument kinds, in order: "f1"/"f2" float arrays of that
#: rank (the compute dtype), "w1" wire vector (uint16 or uint32, the
#: module's ``WIRE_DTYPE``), "u1" uint32 vector, "i1" int64 vector, "b1"
#: int32 vector, "bool" a flag. Launchers, signatures, the packing and the
#: compile check use these. The last argument is the wire-array scratch.
KERNEL_ARGS = {
    "fwd": ("f2", "f1", "w1", "w1", "u1", "w1", "w1", "u1", "w1", "f2", "f2", "f2", "b1", "f2", "f2", "bool",
            "bool", "f2"),
    "bwd": ("f1", "w1", "w1", "u1", "w1", "w1", "u1", "w1", "f2", "f2", "f2", "f2", "f2", "f2", "b1", "f2", "f1",
            "bool", "bool", "bool", "bool", "f2"),
    "fwd_col": ("f2", "i1", "f1", "w1", "w1", "u1", "w1", "f2", "f2", "f2", "b1", "bool", "f2"),
    "bwd_col": ("f1", "w1", "w1", "u1", "w1", "f2", "f2", "f2", "b1", "f2", "f1", "bool", "f2"),
}

#: the smallest wire-array use of each kernel, in rows of n floats (the
#: shared variant is emitted where this fits the shared-memory limit)
MIN_ROWS = {"fwd": 1, "bwd": 1, "fwd_col": 2, "bwd_col": 2}

WARP = 32

_PROLOGUE = """\
b = np.uint32(cuda.blockIdx.x)
tx = np.uint32(cuda.threadIdx.x)
nt = np.uint32(cuda.blockDim.x)
U0 = np.uint32(0)
U1 = np.uint32(1)
U2 = np.uint32(2)
WARP = np.uint32(32)
L = np.uint32(offs.shape[0]) - U1
k = np.uint32(outs.shape[0])
s = sv[0]"""


def _loop(body: str, reverse: bool) -> str:
    """The layer loop around ``body`` (code for comparator ``i``): threads
    stride over a layer's comparators; a layer of <= 32 comparators is run
    by warp 0 and closed with syncwarp when the next layer is narrow too,
    else every layer ends with syncthreads."""
    if reverse:
        order = "l = L - U1 - li"
        nxt = "nxt_narrow = l > U0 and offs[l] - offs[l - U1] <= WARP"
    else:
        order = "l = li"
        nxt = "nxt_narrow = l + U1 < L and offs[l + U2] - offs[l + U1] <= WARP"
    return (
        f"for li in range(U0, L, U1):\n"
        f"    {order}\n"
        f"    ls = offs[l]\n"
        f"    le = offs[l + U1]\n"
        f"    narrow = le - ls <= WARP\n"
        f"    if narrow:\n"
        f"        i0 = ls + tx if tx < WARP else le\n"
        f"        di = WARP\n"
        f"    else:\n"
        f"        i0 = ls + tx\n"
        f"        di = nt\n"
        f"    i = i0\n"
        f"    while i < le:\n"
        + textwrap.indent(body, " " * 8) + "\n"
        f"        i += di\n"
        f"    {nxt}\n"
        f"    if narrow and nxt_narrow:\n"
        f"        if tx < WARP:\n"
        f"            cuda.syncwarp()\n"
        f"    else:\n"
        f"        cuda.syncthreads()"
    )


def _load_row(ft: str, col: bool) -> str:
    """Load row b of x into ``sm[:n]`` (zeros for a bad row), flag bad rows:
    non-finite entries, a steepness not finite and > 0, an overflowing
    steepness * (max - min), and for the column a y outside 0..n-1."""
    y_check = "nonfinite = 1 if yb < 0 or yb >= n else 0\n" if col else "nonfinite = 0\n"
    zero_u = "    sm[n + w] = ZERO\n" if col else ""
    return (
        "mm = cuda.shared.array(2, dtype=numba." + ft + ")\n"
        "if tx == U0:\n"
        "    mm[0] = -INF\n"
        "    mm[1] = INF\n"
        "cuda.syncthreads()\n"
        + y_check +
        "hx = -INF\n"
        "lx = INF\n"
        "for w in range(tx, n, nt):\n"
        "    xw = x[b, w]\n"
        "    if not math.isfinite(xw):\n"
        "        nonfinite = 1\n"
        "    hx = max(hx, xw)\n"
        "    lx = min(lx, xw)\n"
        "    sm[w] = xw\n"
        + zero_u +
        "cuda.atomic.max(mm, 0, hx)\n"
        "cuda.atomic.min(mm, 1, lx)\n"
        "anybad = cuda.syncthreads_or(nonfinite)\n"
        "spread = s * (mm[0] - mm[1])\n"
        "isbad = anybad != 0 or not (s > ZERO and math.isfinite(s) and math.isfinite(spread))\n"
        "if isbad:\n"
        "    for w in range(tx, n, nt):\n"
        "        sm[w] = ZERO\n"
        "    cuda.syncthreads()\n"
    )


def _backsweep(swap: str, save: str) -> str:
    """R (k x n, wire-major, in ``sm``) <- R M_l from the last layer to the
    first over the planned ranks; saves D when ``save`` (a flag name)."""
    body = (
        "lo = clo[i]\n"
        "hi = chi[i]\n"
        "if lo < hi:\n"
        "    a = wa[i] * k\n"
        "    c = wb[i] * k\n"
        "    p = psb[i]\n"
        "    q = ONE - p\n"
        "    ia = a + lo\n"
        "    ic = c + lo\n"
        "    ie = a + hi\n"
        f"    if {save}:\n"
        "        j = doff[i] + U0\n"
        "        while ia < ie:\n"
        "            ra = sm[ia]\n"
        "            rc = sm[ic]\n"
        "            Db[j] = ra - rc\n"
        "            sm[ia] = p * ra + q * rc\n"
        "            sm[ic] = q * ra + p * rc\n"
        "            ia += U1\n"
        "            ic += U1\n"
        "            j += U1\n"
        "    else:\n"
        "        while ia < ie:\n"
        "            ra = sm[ia]\n"
        "            rc = sm[ic]\n"
        "            sm[ia] = p * ra + q * rc\n"
        "            sm[ic] = q * ra + p * rc\n"
        "            ia += U1\n"
        "            ic += U1"
    )
    return (
        "for j in range(tx, kn, nt):\n"
        "    sm[j] = ZERO\n"
        "cuda.syncthreads()\n"
        "for r in range(tx, k, nt):\n"
        "    sm[outs[r] * k + r] = ONE\n"
        "cuda.syncthreads()\n"
        + _loop(body, reverse=True) + "\n"
    )


def _fwd(swap: str) -> str:
    values = (
        "a = wa[i]\n"
        "c = wb[i]\n"
        "xa = sm[a]\n"
        "xc = sm[c]\n"
        "d = xa - xc\n"
        + swap + "\n"
        "q = ONE - p\n"
        "sm[a] = p * xa + q * xc\n"
        "sm[c] = q * xa + p * xc\n"
        "dsb[i] = d\n"
        "psb[i] = p"
    )
    return (
        "def _fwd@SFX@(x, sv, wa, wb, offs, clo, chi, doff, outs, values, ds, ps, bad, P, D, do_P, save_D,"
        " scratch):\n"
        + textwrap.indent(
            _PROLOGUE + "\n"
            "n = np.uint32(x.shape[1])\n"
            "kn = k * n\n"
            "dsb = ds[b]\n"
            "psb = ps[b]\n"
            "Db = D[b if save_D else U0]\n"
            "@ALLOC@\n"
            + _load_row("@FT@", col=False)
            + _loop(values, reverse=False) + "\n"
            "for r in range(tx, k, nt):\n"
            "    values[b, r] = NAN if isbad else sm[outs[r]]\n"
            "if tx == U0:\n"
            "    bad[b] = 1 if isbad else 0\n"
            "if do_P:\n"
            "    cuda.syncthreads()\n"
            + textwrap.indent(
                _backsweep(swap, "save_D")
                + "for j in range(tx, kn, nt):\n"
                "    r = j // n\n"
                "    P[b, j] = NAN if isbad else sm[(j - r * n) * k + r]\n", "    "),
            "    ")
    )


def _bwd(swap: str) -> str:
    gsweep = (
        "lo = clo[i]\n"
        "hi = chi[i]\n"
        "acc = ZERO\n"
        "if lo < hi:\n"
        "    a = wa[i] * k\n"
        "    c = wb[i] * k\n"
        "    p = psb[i]\n"
        "    q = ONE - p\n"
        "    j = doff[i] + U0\n"
        "    ia = a + lo\n"
        "    ic = c + lo\n"
        "    ie = a + hi\n"
        "    while ia < ie:\n"
        "        ga = sm[ia]\n"
        "        gc = sm[ic]\n"
        "        acc += (ga - gc) * Db[j]\n"
        "        sm[ia] = p * ga + q * gc\n"
        "        sm[ic] = q * ga + p * gc\n"
        "        ia += U1\n"
        "        ic += U1\n"
        "        j += U1\n"
        "gpb[i] = acc"
    )
    gvals = (
        "a = wa[i]\n"
        "c = wb[i]\n"
        "d = dsb[i]\n"
        + swap + "\n"
        "q = ONE - p\n"
        "ga = sm[a]\n"
        "gc = sm[c]\n"
        "gpi = (ga - gc) * d\n"
        "if has_gP:\n"
        "    gpi += gpb[i]\n"
        "acc_s += gpi * dps\n"
        "gd = gpi * dp\n"
        "sm[a] = p * ga + q * gc + gd\n"
        "sm[c] = q * ga + p * gc - gd"
    )
    return (
        "def _bwd@SFX@(sv, wa, wb, offs, clo, chi, doff, outs, gv, gP, ds, ps, D, gp, bad, gx, gs,"
        " has_gv, has_gP, recompute, want_gs, scratch):\n"
        + textwrap.indent(
            _PROLOGUE + "\n"
            "n = np.uint32(gx.shape[1])\n"
            "kn = k * n\n"
            "dsb = ds[b]\n"
            "psb = ps[b]\n"
            "Db = D[b if has_gP else U0]\n"
            "gpb = gp[b if has_gP else U0]\n"
            "@ALLOC@\n"
            "if has_gP:\n"
            "    if recompute:\n"
            + textwrap.indent(_backsweep(swap, "recompute"), "        ")
            + "    for j in range(tx, kn, nt):\n"
            "        r = j // n\n"
            "        sm[(j - r * n) * k + r] = gP[b, j]\n"
            "    cuda.syncthreads()\n"
            + textwrap.indent(_loop(gsweep, reverse=False), "    ") + "\n"
            "for w in range(tx, n, nt):\n"
            "    sm[w] = ZERO\n"
            "cuda.syncthreads()\n"
            "if has_gv:\n"
            "    for r in range(tx, k, nt):\n"
            "        sm[outs[r]] = gv[b, r]\n"
            "    cuda.syncthreads()\n"
            "acc_s = ZERO\n"
            + _loop(gvals, reverse=True) + "\n"
            "isbad = bad[b] != 0\n"
            "for w in range(tx, n, nt):\n"
            "    gx[b, w] = NAN if isbad else sm[w]\n"
            "if want_gs:\n"
            "    cuda.atomic.add(gs, b, NAN if isbad else acc_s)\n",
            "    ")
    )


def _fwd_col(swap: str) -> str:
    body = (
        "a = wa[i]\n"
        "c = wb[i]\n"
        "xa = sm[a]\n"
        "xc = sm[c]\n"
        "d = xa - xc\n"
        + swap + "\n"
        "q = ONE - p\n"
        "sm[a] = p * xa + q * xc\n"
        "sm[c] = q * xa + p * xc\n"
        "ua = sm[n + a]\n"
        "uc = sm[n + c]\n"
        "sm[n + a] = p * ua + q * uc\n"
        "sm[n + c] = q * ua + p * uc\n"
        "if save:\n"
        "    ds[b, i] = d\n"
        "    dus[b, i] = ua - uc"
    )
    return (
        "def _fwd_col@SFX@(x, y, sv, wa, wb, offs, outs, col, ds, dus, bad, save, scratch):\n"
        + textwrap.indent(
            _PROLOGUE + "\n"
            "n = np.uint32(x.shape[1])\n"
            "yb = y[b]\n"
            "@ALLOC@\n"
            + _load_row("@FT@", col=True)
            + "if tx == U0 and not isbad:\n"
            "    sm[n + np.uint32(yb)] = ONE\n"
            "cuda.syncthreads()\n"
            + _loop(body, reverse=False) + "\n"
            "for r in range(tx, k, nt):\n"
            "    col[b, r] = NAN if isbad else sm[n + outs[r]]\n"
            "if tx == U0:\n"
            "    bad[b] = 1 if isbad else 0\n",
            "    ")
    )


def _bwd_col(swap: str) -> str:
    body = (
        "a = wa[i]\n"
        "c = wb[i]\n"
        "d = ds[b, i]\n"
        + swap + "\n"
        "q = ONE - p\n"
        "ga = sm[a]\n"
        "gc = sm[c]\n"
        "ua = sm[n + a]\n"
        "uc = sm[n + c]\n"
        "gpi = (ga - gc) * d + (ua - uc) * dus[b, i]\n"
        "acc_s += gpi * dps\n"
        "gd = gpi * dp\n"
        "sm[a] = p * ga + q * gc + gd\n"
        "sm[c] = q * ga + p * gc - gd\n"
        "sm[n + a] = p * ua + q * uc\n"
        "sm[n + c] = q * ua + p * uc"
    )
    return (
        "def _bwd_col@SFX@(sv, wa, wb, offs, outs, gcol, ds, dus, bad, gx, gs, want_gs, scratch):\n"
        + textwrap.indent(
            _PROLOGUE + "\n"
            "n = np.uint32(gx.shape[1])\n"
            "@ALLOC@\n"
            "for w in range(tx, n, nt):\n"
            "    sm[w] = ZERO\n"
            "    sm[n + w] = ZERO\n"
            "cuda.syncthreads()\n"
            "for r in range(tx, k, nt):\n"
            "    sm[n + outs[r]] = gcol[b, r]\n"
            "cuda.syncthreads()\n"
            "acc_s = ZERO\n"
            + _loop(body, reverse=True) + "\n"
            "isbad = bad[b] != 0\n"
            "for w in range(tx, n, nt):\n"
            "    gx[b, w] = NAN if isbad else sm[w]\n"
            "if want_gs:\n"
            "    cuda.atomic.add(gs, b, NAN if isbad else acc_s)\n",
            "    ")
    )


_BUILDERS = {"fwd": _fwd, "bwd": _bwd, "fwd_col": _fwd_col, "bwd_col": _bwd_col}


def kernel_sources(ft: str, variant: str, swap: str, lit) -> dict[str, str]:
    """Source of each kernel for float type ``ft`` and ``variant``
    ("shared" or "global"), named ``_<kernel>_f32_s`` etc. ``swap``: the
    swap code (:func:`netgen.codegen._swap_code.swap_code` with
    ``steepness="s"``, indent 0); ``lit``: the float-literal function."""
    sfx = f"_f{32 if ft == 'float32' else 64}_{variant[0]}"
    alloc = (f"sm = cuda.shared.array(0, dtype=numba.{ft})" if variant == "shared" else "sm = scratch[b]")
    consts = {
        "@SFX@": sfx,
        "@FT@": ft,
        "@ALLOC@": alloc,
    }
    out = {}
    for name, build in _BUILDERS.items():
        src = build(swap)
        for key, val in consts.items():  # trusted text only (see the module doc)
            src = src.replace(key, val)
        src = (src.replace("ZERO", lit(0.0, ft)).replace("ONE", lit(1.0, ft))
               .replace("NAN", "np.float32(math.nan)" if ft == "float32" else "math.nan")
               .replace("-INF", "-" + ("np.float32(math.inf)" if ft == "float32" else "math.inf"))
               .replace("INF", "np.float32(math.inf)" if ft == "float32" else "math.inf"))
        out[name] = "@cuda.jit\n" + src.rstrip() + "\n"
    return out
