"""Run a generated CUDA module's Layer in Numba's CUDA simulator and compare
it with the reference executor. Run by tests/codegen/cuda/test_cuda_sim.py in a
subprocess with NUMBA_ENABLE_CUDASIM=1 (it must be set before numba is
imported). ``NETGEN_SIM_CASES=0,2`` runs only those cases. Under the
simulator the module's launcher runs the kernels on CPU tensors' memory
(the fast path through the packed kernel arguments, unpacked back into
arrays), so this drives the very code path a GPU user runs: the
torch.library ops, their autograd, the launcher. Prints one JSON object:

* ``rows``: {"case", "dtype", "quantity", "max_abs_err", "scale", "shape_ok"};
* ``launches``: kernel launches per direction, counted in ``_launch``;
* ``variants``: which variant (shared memory or global scratch) each
  (kernel, rows of n floats) ran in;
* ``syncs``: calls that would synchronise the host with a GPU (Tensor.item,
  bool, int, float, tolist), counted outside ``_launch``;
* ``steepness``: dL/ds of the layer vs central differences of the float64
  reference (rows and column), per case;
* ``save_d``: whether the case kept D or recomputed the P sweep;
* ``bad_rows``: which rows came out NaN for non-finite x / overflowing
  range / out-of-range y;
* ``wide_rows``: the row codes (tame, bad, wide) the forwards write, and
  a wide row (finite, s (max - min) past the tame bound) against the
  reference, per selection-network case in shared memory;
* ``contract``: inputs not written, second order and torch.func refused;
* ``selfcheck``: the self-check passes and logs, catches a deliberately
  wrong packing (naming NETGEN_CUDA_LAUNCH=numba), and can be skipped;
* ``compiled``: torch.compile(fullgraph=True, backend="aot_eager") of forward
  and backward equals eager (max abs error), for rows and column.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections import Counter

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"

import torch  # noqa: E402

from netgen.codegen import emit  # noqa: E402
from netgen.codegen.cache import load  # noqa: E402
from netgen.construct import build  # noqa: E402
from netgen.relax import reference  # noqa: E402
from netgen.relax.distributions import Relaxation  # noqa: E402

K48 = 48 * 1024
CASES = [
    # (kind, n, k, distribution, shared_limit, threads, B, dtype, mode[, direction]; None = the plan's rule)
    ("splitter", 16, 5, "logistic_phi", K48, 32, 3, "float64", None),  # wires in shared memory, D kept
    ("bitonic", 8, 8, "cauchy", 0, 32, 2, "float64", "recompute"),  # sorting k = n, global scratch, back-sweep recomputed
    ("oddeven", 13, 13, "optimal", K48, 32, 2, "float64", None),  # odd n, sorting, shared
    ("splitter", 100, 5, "cauchy", K48, 32, 2, "float64", None),  # layers of 48 comparators > 32 threads
    ("splitter", 101, 1, "gaussian", 0, 64, 1, "float64", "recompute"),  # odd n, k = 1, B = 1, 2 warps, global
    ("splitter", 40, 5, "reciprocal", 600, 64, 2, "float32", None),  # float32; fwd values shared, fwd P global
    ("splitter", 16, 5, "logistic", K48, 32, 2, "float16", None),  # half-precision inputs (float32 kernels)
    ("splitter", 16, 5, "cauchy", K48, 32, 2, "bfloat16", None),  # bfloat16 inputs
    # float32 (prefetching layer loops) with layers wider than the block (two iterations: the peeled first
    # and the loop) and narrow layers on warp 0 while warp 1 idles, then works again
    ("splitter", 200, 5, "cauchy", K48, 64, 2, "float32", None),
    # the P sweep forward over the input columns (sorters): global scratch, the sweep recomputed
    ("oddeven", 24, 24, "cauchy", 0, 32, 2, "float64", "recompute"),
    # forward, float32, shared (80 x 80 floats), layers of up to 40 comparators on 32 threads, B = 1, recomputed
    ("oddeven", 80, 80, "logistic", K48, 32, 1, "float32", None),
    # forward forced on a selection network (k < n: P's rows are 5 of the 16 wires), D kept
    ("splitter", 16, 5, "cauchy", K48, 32, 2, "float64", "save", "forward"),
]

SYNC_METHODS = ("item", "__bool__", "__int__", "__float__", "tolist")


class Probe:
    """Counts kernel launches (by wrapping the module's ``_launch``) and
    host-synchronising tensor calls made outside the launcher."""

    def __init__(self, mod):
        self.mod = mod
        self.launches = Counter()
        self.syncs = Counter()
        self.inside = False
        self.phase = None

    def __enter__(self):
        launch = self.mod._launch

        def counted(name, *args):
            self.launches[(self.phase, name)] += 1
            self.inside = True
            try:
                return launch(name, *args)
            finally:
                self.inside = False

        self.saved = {"_launch": launch}
        self.mod._launch = counted
        for meth in SYNC_METHODS:
            orig = getattr(torch.Tensor, meth)
            self.saved[meth] = orig

            def wrapped(t, *a, _orig=orig, _meth=meth, **kw):
                if not self.inside:
                    self.syncs[(self.phase, _meth)] += 1
                return _orig(t, *a, **kw)

            setattr(torch.Tensor, meth, wrapped)
        return self

    def __exit__(self, *exc):
        self.mod._launch = self.saved.pop("_launch")
        for meth, orig in self.saved.items():
            setattr(torch.Tensor, meth, orig)


def _err(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max()) if a.numel() else 0.0


def _steepness_grad(net, m, r, x, y, gv, gP, gc, dtype):
    """dL/ds of the layer (a tensor steepness) vs central differences of the
    float64 reference, for the rows (values + P) and the column losses."""
    s0 = float(r.steepness)
    sp = torch.nn.Parameter(torch.tensor(s0, dtype=torch.float64))
    layer = m.Layer(steepness=sp)
    v, P = layer(x)
    (gs,) = torch.autograd.grad((v * gv).sum() + (P * gP).sum(), sp)
    (gsc,) = torch.autograd.grad((layer.column(x, y) * gc).sum(), sp)
    h = 1e-5 * s0
    xd = x.detach().double()

    def rows_loss(s):
        rr = Relaxation(r.distribution, s, r.art_lambda, r.art_epsilon)
        v0, P0 = reference.forward(net, xd, rr)
        return float((v0 * gv.double()).sum() + (P0 * gP.double()).sum())

    def col_loss(s):
        rr = Relaxation(r.distribution, s, r.art_lambda, r.art_epsilon)
        return float((reference.column(net, xd, y, rr) * gc.double()).sum())

    fd = (rows_loss(s0 + h) - rows_loss(s0 - h)) / (2 * h)
    fdc = (col_loss(s0 + h) - col_loss(s0 - h)) / (2 * h)
    return {"rows": [float(gs), fd], "column": [float(gsc), fdc]}


def run_case(kind, n, k, dist, shared_limit, threads, B, dtype, mode, direction=None, out_dir=None, big=None):
    net = build(kind, n, k)
    r = Relaxation(dist, steepness=5.0)
    path = os.path.join(out_dir, f"sim_{kind}_{n}_{k}_{dist}_{shared_limit}_{threads}_{dtype}.py")
    with open(path, "w") as f:
        f.write(emit("cuda", net, r, {"shared_limit": shared_limit, "threads": threads, "mode": mode,
                                      "direction": direction}))
    m = load(path)
    if big is not None:  # launches with more shared memory than big[0] bytes run big[1] threads
        m.SM_SHARED, m.BIG_THREADS = big
    layer = m.Layer()
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(B, n, generator=gen, dtype=torch.float64)
    x[0, 1::2] = x[0, ::2][: n // 2]  # ties
    x = x.to(dt)
    y = torch.randint(0, n, (B,), generator=gen)
    gv, gP, gc = (torch.randn(*s, generator=gen, dtype=torch.float64).to(dt)
                  for s in ((B, net.k), (B, net.k, n), (B, net.k)))
    # first use (not counted below) without the launch self-check, which
    # selfcheck() tests on case 0: run per case it ran every path twice, most
    # of this driver's time; each case's results are checked against the
    # reference below
    before = os.environ.get("NETGEN_CUDA_SELFCHECK")
    os.environ["NETGEN_CUDA_SELFCHECK"] = "0"
    try:
        with torch.no_grad():
            layer(x[:1])
    finally:
        if before is None:
            del os.environ["NETGEN_CUDA_SELFCHECK"]
        else:
            os.environ["NETGEN_CUDA_SELFCHECK"] = before

    probe = Probe(m)
    with probe:
        xg = x.clone().requires_grad_(True)
        probe.phase = "rows forward"
        values, P = layer(xg)
        probe.phase = "rows backward"
        (gx,) = torch.autograd.grad((values * gv).sum() + (P * gP).sum(), xg)
        probe.phase = "values only"
        values_o = layer.values(xg)
        (gx_v,) = torch.autograd.grad((values_o * gv).sum(), xg)
        probe.phase = "column forward"
        col = layer.column(xg, y)
        probe.phase = "column backward"
        (gxc,) = torch.autograd.grad((col * gc).sum(), xg)
        probe.phase = "no grad"
        with torch.no_grad():
            values_ng, P_ng = layer(x)

    # the reference in float64 for float64 cases, in float32 on the same
    # (rounded) inputs for the others
    rdt = torch.float64 if dtype == "float64" else torch.float32
    xt = x.to(rdt).requires_grad_(True)
    v0, P0 = reference.forward(net, xt, r)
    (g0,) = torch.autograd.grad((v0 * gv.to(rdt)).sum() + (P0 * gP.to(rdt)).sum(), xt)
    (g0v,) = torch.autograd.grad((reference.forward(net, xt, r)[0] * gv.to(rdt)).sum(), xt)
    c0 = reference.column(net, xt, y, r)
    (g0c,) = torch.autograd.grad((c0 * gc.to(rdt)).sum(), xt)
    case = f"{kind}({n},{k}) {dist} {dtype} shared_limit={shared_limit} threads={threads} B={B} {m._DIRECTION}"
    rows = [
        {"case": case, "dtype": dtype, "quantity": q, "max_abs_err": _err(a, b),
         "scale": max(1.0, float(b.detach().abs().max())), "shape_ok": tuple(a.shape) == tuple(b.shape)
         and a.dtype == dt}
        for q, a, b in (
            ("values", values, v0),
            ("P", P, P0),
            ("grad values+P", gx, g0),
            ("grad values only", gx_v, g0v),
            ("values (values only)", values_o, v0),
            ("column", col, c0),
            ("grad column", gxc, g0c),
            ("values (no grad)", values_ng, v0),
            ("P (no grad)", P_ng, P0),
        )
    ]
    launches = {f"{phase}: {name}": c for (phase, name), c in sorted(probe.launches.items())}
    variants = {f"{name}/{rows_}": v for (name, rows_), v in sorted(m._VARIANTS.items())}
    syncs = {f"{phase}: {meth}": c for (phase, meth), c in sorted(probe.syncs.items())}
    steep = _steepness_grad(net, m, r, x, y, gv, gP, gc, dt) if dtype == "float64" else None
    return rows, launches, syncs, variants, steep, bool(m.SAVE_D), m, net


def bad_rows(m, n):
    """Rows 1 (NaN), 3 (inf) and 4 (steepness * range overflows float64) of
    x and row 2 of y (out of range) are bad."""
    layer = m.Layer()
    x = torch.randn(5, n, dtype=torch.float64)
    x[1, 0] = float("nan")
    x[3, n - 1] = float("inf")
    x[4, 0], x[4, 1] = 1e308, -1e308
    x.requires_grad_(True)
    y = torch.tensor([0, 1, n, n - 1, 0])
    values, P = layer(x)
    (gx,) = torch.autograd.grad(values.sum() + P.sum(), x)
    col = layer.column(x, y)
    (gxc,) = torch.autograd.grad(col.sum(), x)
    nan_rows = lambda t: [i for i in range(t.shape[0]) if bool(t[i].isnan().all())]  # noqa: E731
    finite_rows = lambda t: [i for i in range(t.shape[0]) if bool(t[i].isfinite().all())]  # noqa: E731
    return {
        "values": [nan_rows(values), finite_rows(values)],
        "P": [nan_rows(P), finite_rows(P)],
        "grad": [nan_rows(gx), finite_rows(gx)],
        "column": [nan_rows(col), finite_rows(col)],
        "grad column": [nan_rows(gxc), finite_rows(gxc)],
    }


def wide_rows(m, net, dtype):
    """The row codes the forwards write (``bad``: 0 tame, 1 bad, 2 wide;
    netgen.codegen.cuda.updates.ROW_*) for row 0 (ordinary), row 1 (finite
    but s (max - min) 2^16 times past the tame bound: the swap code with
    its clamps) and row 2 (a NaN); rows 0 and 1 of values, P, dL/dx, the
    column and its dL/dx against the reference, as errors relative to each
    quantity's largest entry."""
    from netgen.codegen.cuda.row_io import tame_bound

    r = Relaxation(**m.RELAXATION)
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(3, net.n, generator=gen, dtype=torch.float64)
    x[1] *= tame_bound(dtype) * 2.0 ** 16 / float(r.steepness)
    x[2, 0] = float("nan")
    x = x.to(dt)
    y = torch.tensor([0, net.n - 1, 1])
    s = torch.full((1,), float(r.steepness), dtype=dt)
    codes = {"rows": m._rows_forward(x, s, False, True)[5].tolist(),
             "column": m._column_forward(x, y, s, True)[2].tolist()}
    xg = x[:2].clone().requires_grad_(True)
    layer = m.Layer()
    gen = torch.Generator().manual_seed(8)
    gv, gc = (torch.randn(2, net.k, generator=gen, dtype=torch.float64).to(dt) for _ in range(2))
    values, P = layer(xg)
    (gx,) = torch.autograd.grad((values * gv).sum() + P.sum(), xg)
    col = layer.column(xg, y[:2])
    (gxc,) = torch.autograd.grad((col * gc).sum(), xg)
    xt = x[:2].clone().requires_grad_(True)
    v0, P0 = reference.forward(net, xt, r)
    (g0,) = torch.autograd.grad((v0 * gv).sum() + P0.sum(), xt)
    c0 = reference.column(net, xt, y[:2], r)
    (g0c,) = torch.autograd.grad((c0 * gc).sum(), xt)
    errs = {}
    for q, a, b in (("values", values, v0), ("P", P, P0), ("grad", gx, g0), ("column", col, c0),
                    ("grad column", gxc, g0c)):
        for row in (0, 1):
            scale = float(b[row].detach().abs().max())
            errs[f"{q} row {row}"] = [_err(a[row], b[row]) / max(scale, 1e-300), scale,
                                      bool(a[row].isfinite().all())]
    return {"codes": codes, "errors": errs}


def contract(m, n):
    """Inputs are never written (unbatched, B = 1, transposed, expanded);
    second-order gradients and torch.func transforms are refused."""
    layer = m.Layer()
    out = {}
    base = torch.randn(n, 2, dtype=torch.float64)
    inputs = {"unbatched": torch.randn(n, dtype=torch.float64), "B=1": torch.randn(1, n, dtype=torch.float64),
              "transposed": base.t(), "expanded": torch.randn(1, n, dtype=torch.float64).expand(2, n)}
    for name, xin in inputs.items():
        before = xin.clone()
        v, P = layer(xin)
        layer.column(xin, torch.zeros(xin.shape[:-1], dtype=torch.int64))
        v_ref, _ = layer(before.contiguous())
        out[f"unchanged {name}"] = bool(torch.equal(xin, before)) and bool(torch.equal(v, v_ref))
    x = torch.randn(2, n, dtype=torch.float64, requires_grad=True)
    v, P = layer(x)
    (g,) = torch.autograd.grad((v ** 2).sum() + (P ** 2).sum(), x, create_graph=True)
    try:
        g.pow(2).sum().backward()
        out["second order"] = "no error"
    except RuntimeError as e:
        out["second order"] = str(e)
    try:
        torch.func.vmap(layer)(x.detach())
        out["torch.func"] = "no error"
    except ValueError as e:
        out["torch.func"] = str(e)
    try:
        m.Layer(steepness=-1.0)
        out["bad steepness"] = "no error"
    except ValueError as e:
        out["bad steepness"] = str(e)
    return out


def selfcheck(m, n):
    """The self-check logs once, catches a wrong packing (strides in
    elements instead of bytes), and NETGEN_CUDA_SELFCHECK=0 skips it."""
    records = []

    class H(logging.Handler):
        def emit(self, rec):
            records.append(rec.getMessage())

    log = logging.getLogger("netgen")
    log.addHandler(H())
    log.setLevel(logging.INFO)
    out = {}
    x = torch.randn(2, n)
    m._SELF_CHECKED.clear()
    m.Layer()(x)
    m.Layer()(x)
    out["passed logs"] = [r for r in records if "self-check passed" in r]
    good_abi = m._abi

    def wrong_abi(args):
        words = good_abi(args)
        pos = 0
        for a in args:  # strides in elements, not bytes
            if isinstance(a, torch.Tensor):
                nd = a.dim()
                for j in range(pos + 5 + nd, pos + 5 + 2 * nd):
                    words[j] //= a.element_size()
                pos += 5 + 2 * nd
            else:
                pos += 1
        return words

    m._abi = wrong_abi
    m._RECORDS.clear()
    m._SELF_CHECKED.clear()
    try:
        m.Layer()(x)
        out["wrong packing"] = "not caught"
    except RuntimeError as e:
        out["wrong packing"] = str(e)

    m._abi = good_abi
    good_slots = m._slots

    def swapped_slots(args):
        slots = good_slots(args)
        if not (args and isinstance(args[0], torch.Tensor) and args[0].dim() == 2 and args[0].is_floating_point()):
            return slots  # only the forwards (x first): a swap in every kernel alike would cancel out
        tabs = [(i, args[j]) for i, (_, j) in enumerate(slots)]
        for i, a1 in tabs:  # the data pointers of the first two same-shaped arrays swapped (the rows
            for i2, a2 in tabs:  # forward's ds <-> ps: the backward then reads p for d and d for p)
                if i2 > i and a1.dtype == a2.dtype and a1.shape == a2.shape:
                    slots[i], slots[i2] = (slots[i][0], slots[i2][1]), (slots[i2][0], slots[i][1])
                    return slots
        return slots

    m._slots = swapped_slots  # a launch record rewrites the wrong words with each launch's pointers
    m._RECORDS.clear()
    m._SELF_CHECKED.clear()
    try:
        m.Layer()(x)
        out["swapped pointers"] = "not caught"
    except RuntimeError as e:
        out["swapped pointers"] = str(e)
    m._slots = good_slots
    m._RECORDS.clear()
    m._SELF_CHECKED.clear()
    os.environ["NETGEN_CUDA_SELFCHECK"] = "0"
    try:
        m.Layer()(x)
        out["skipped"] = [r for r in records if "self-check skipped" in r]
    finally:
        del os.environ["NETGEN_CUDA_SELFCHECK"]
    return out


def compiled(m, n):
    """torch.compile(fullgraph=True) of forward + backward equals eager."""
    layer = m.Layer()
    x = torch.randn(2, n, dtype=torch.float64)
    y = torch.tensor([1, n - 2])

    def rows_step(x):
        v, P = layer(x)
        return (v * v).sum() + (P * P).sum()

    def col_step(x, y):
        return (layer.column(x, y) ** 2).sum()

    out = {}
    for name, fn, args in (("rows", rows_step, (x,)), ("column", col_step, (x, y))):
        xe = x.clone().requires_grad_(True)
        le = fn(xe, *args[1:])
        (ge,) = torch.autograd.grad(le, xe)
        xc = x.clone().requires_grad_(True)
        lc = torch.compile(fn, fullgraph=True, backend="aot_eager")(xc, *args[1:])
        (gc,) = torch.autograd.grad(lc, xc)
        out[name] = max(float((le - lc).abs()), float((ge - gc).abs().max()))
    return out


def main():
    out = {"rows": [], "launches": {}, "syncs": {}, "variants": {}, "steepness": {}, "save_d": {}, "wide_rows": {}}
    only = os.environ.get("NETGEN_SIM_CASES")  # e.g. "0,2": run only those cases
    idx = [int(i) for i in only.split(",")] if only else range(len(CASES))
    with tempfile.TemporaryDirectory() as tmp:
        for i in idx:
            # case 3: an "SM" of 8000 bytes of shared memory: launches run 64 threads, not 32
            big = (8000, 64) if i == 3 else None
            rows, launches, syncs, variants, steep, save_d, m, net = run_case(*CASES[i], out_dir=tmp, big=big)
            case = rows[0]["case"]
            out["variants"][case] = variants
            out["rows"] += rows
            out["launches"][case] = launches
            out["syncs"][case] = syncs
            out["save_d"][case] = save_d
            if steep is not None:
                out["steepness"][case] = steep
            if CASES[i][4] == K48 and CASES[i][7] in ("float64", "float32") and CASES[i][2] != CASES[i][1]:
                out["wide_rows"][case] = wide_rows(m, net, CASES[i][7])  # selection networks, shared
            if i == 0:
                out["bad_rows"] = bad_rows(m, net.n)
                out["contract"] = contract(m, net.n)
                out["selfcheck"] = selfcheck(m, net.n)
                out["compiled"] = compiled(m, net.n)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
