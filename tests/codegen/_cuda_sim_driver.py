"""Run a generated CUDA module's Layer in Numba's CUDA simulator and compare
it with the reference executor. Run by tests/codegen/test_cuda_sim.py in a
subprocess with NUMBA_ENABLE_CUDASIM=1 (it must be set before numba is
imported). ``NETGEN_SIM_CASES=0,2`` runs only those cases. Under the simulator the module's launcher runs the kernels on CPU
tensors' memory, so this drives the very code path a GPU user runs: the
torch.library ops, their autograd, the launcher. Prints one JSON object:

* ``rows``: {"case", "dtype", "quantity", "max_abs_err", "scale", "shape_ok"};
* ``launches``: kernel launches per direction, counted in ``_launch``;
* ``variants``: which variant (wire arrays in shared memory or in a global
  scratch) each kernel ran in;
* ``syncs``: calls that would synchronise the host with a GPU (Tensor.item,
  bool, int, float, tolist), counted outside ``_launch``;
* ``bad_rows``: which rows came out NaN for non-finite x / out-of-range y;
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

import numpy as np  # noqa: E402
import torch  # noqa: E402

from netgen.codegen.cuda_target import emit  # noqa: E402
from netgen.codegen.loader import load  # noqa: E402
from netgen.construct import build  # noqa: E402
from netgen.relax import reference  # noqa: E402
from netgen.relax.distributions import Relaxation  # noqa: E402

CASES = [
    # (kind, n, k, distribution, shared_limit, threads, B, dtype)
    ("splitter", 16, 5, "logistic_phi", 48 * 1024, 8, 3, "float64"),  # wires in shared memory
    ("bitonic", 8, 8, "cauchy", 0, 4, 2, "float64"),  # every wire array in global scratch rows
    ("oddeven", 12, 3, "optimal", 120, 16, 2, "float64"),  # column: v shared, u global
    ("splitter", 10, 3, "cauchy", 48 * 1024, 8, 2, "float32"),  # float32 kernels (inlined atan)
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


def run_case(kind, n, k, dist, shared_limit, threads, B, dtype, out_dir):
    net = build(kind, n, k)
    r = Relaxation(dist, steepness=5.0)
    path = os.path.join(out_dir, f"sim_{kind}_{n}_{k}_{shared_limit}.py")
    with open(path, "w") as f:
        f.write(emit(net, r, shared_limit=shared_limit, threads=threads))
    m = load(path)
    layer = m.Layer()
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(B, n, generator=gen, dtype=dt)
    x[0, 1::2] = x[0, ::2][: n // 2]  # ties
    y = torch.randint(0, n, (B,), generator=gen)
    gv, gP, gc = (torch.randn(*s, generator=gen, dtype=dt) for s in ((B, net.k), (B, net.k, n), (B, net.k)))

    probe = Probe(m)
    with probe:
        xg = x.clone().requires_grad_(True)
        probe.phase = "rows forward"
        values, P = layer(xg)
        probe.phase = "rows backward"
        (gx,) = torch.autograd.grad((values * gv).sum() + (P * gP).sum(), xg)
        probe.phase = "rows backward (values only)"
        values_b, _ = layer(xg)
        (gx_v,) = torch.autograd.grad((values_b * gv).sum(), xg)
        probe.phase = "column forward"
        col = layer.column(xg, y)
        probe.phase = "column backward"
        (gxc,) = torch.autograd.grad((col * gc).sum(), xg)
        probe.phase = "no grad"
        with torch.no_grad():
            values_ng, P_ng = layer(x)

    xt = x.clone().requires_grad_(True)  # the reference runs in x's dtype
    v0, P0 = reference.forward(net, xt, r)
    (g0,) = torch.autograd.grad((v0 * gv).sum() + (P0 * gP).sum(), xt)
    v0b, _ = reference.forward(net, xt, r)
    (g0v,) = torch.autograd.grad((v0b * gv).sum(), xt)
    c0 = reference.column(net, xt, y, r)
    (g0c,) = torch.autograd.grad((c0 * gc).sum(), xt)
    case = f"{kind}({n},{k}) {dist} {dtype} shared_limit={shared_limit} threads={threads} B={B}"
    rows = [
        {"case": case, "dtype": dtype, "quantity": q, "max_abs_err": float((a.detach() - b.detach()).abs().max()),
         "scale": max(1.0, float(b.abs().max())), "shape_ok": tuple(a.shape) == tuple(b.shape)}
        for q, a, b in (
            ("values", values, v0),
            ("P", P, P0),
            ("grad values+P", gx, g0),
            ("grad values only", gx_v, g0v),
            ("column", col, c0),
            ("grad column", gxc, g0c),
            ("values (no grad)", values_ng, v0),
            ("P (no grad)", P_ng, P0),
        )
    ]
    launches = {f"{phase}: {name}": c for (phase, name), c in sorted(probe.launches.items())}
    variants = {f"{dt}:{name}": variant for (_, dt, name), (variant, _) in m._PLANS.items()}
    syncs = {f"{phase}: {meth}": c for (phase, meth), c in sorted(probe.syncs.items())}
    return rows, launches, syncs, variants, m, net, r


def bad_rows(m, n):
    """Rows 1 (NaN) and 3 (inf) of x and row 2 of y (out of range) are bad."""
    layer = m.Layer()
    x = torch.randn(4, n, dtype=torch.float64)
    x[1, 0] = float("nan")
    x[3, n - 1] = float("inf")
    x.requires_grad_(True)
    y = torch.tensor([0, 1, n, n - 1])
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
    out = {"rows": [], "launches": {}, "syncs": {}, "variants": {}}
    only = os.environ.get("NETGEN_SIM_CASES")  # e.g. "0,2": run only those cases
    cases = [CASES[int(i)] for i in only.split(",")] if only else CASES
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            rows, launches, syncs, variants, m, net, r = run_case(*case, tmp)
            out["variants"][rows[0]["case"]] = variants
            out["rows"] += rows
            out["launches"][rows[0]["case"]] = launches
            out["syncs"][rows[0]["case"]] = syncs
            if case[0] == "splitter" and case[-1] == "float64":
                out["bad_rows"] = bad_rows(m, net.n)
                out["compiled"] = compiled(m, net.n)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
