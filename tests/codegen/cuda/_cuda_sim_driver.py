"""Run a generated CUDA module's Layer in Numba's CUDA simulator and compare
it with the reference executor. Run by tests/codegen/cuda/test_cuda_sim.py in a
subprocess with NUMBA_ENABLE_CUDASIM=1 (it must be set before numba is
imported). ``NETGEN_SIM_CASES=0,2`` runs only those cases. Under the
simulator the module's launcher runs the kernels on CPU tensors' memory
(the fast path through the packed kernel arguments, unpacked back into
arrays), so this drives the very code path a GPU user runs: the
torch.library ops, their autograd, the launcher. The checks run on case 0's
module besides the cases (bad, wide rows, the contract, the self-check,
torch.compile) are in _cuda_sim_checks.py. Prints one JSON object:

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

from _cuda_sim_checks import bad_rows, compiled, contract, max_abs_err, selfcheck, wide_rows  # noqa: E402

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
        {"case": case, "dtype": dtype, "quantity": q, "max_abs_err": max_abs_err(a, b),
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
