"""Run generated CUDA kernels in Numba's CUDA simulator and compare them with
the reference executor (float64). Run by tests/codegen/test_cuda_sim.py in a
subprocess with NUMBA_ENABLE_CUDASIM=1 (it must be set before numba is
imported). Prints one JSON line: a list of
{"case", "quantity", "max_abs_err"} records."""

from __future__ import annotations

import json
import os
import sys
import tempfile

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


def run_case(kind, n, k, dist, shared_limit, threads, B, dtype, out_dir):
    net = build(kind, n, k)
    r = Relaxation(dist, steepness=5.0)
    path = os.path.join(out_dir, f"sim_{kind}_{n}_{k}_{shared_limit}.py")
    with open(path, "w") as f:
        f.write(emit(net, r, shared_limit=shared_limit, threads=threads))
    m = load(path)
    gen = np.random.default_rng(n)
    x = gen.standard_normal((B, n)).astype(dtype)
    x[0, 1::2] = x[0, ::2][: n // 2]  # ties
    y = gen.integers(0, n, B).astype(np.int64)
    gv = gen.standard_normal((B, net.k)).astype(dtype)
    gP = gen.standard_normal((B, net.k, n)).astype(dtype)
    gc = gen.standard_normal((B, net.k)).astype(dtype)
    tabs = m.TABLES
    S, K, NNZ = m._SIZE, m._K, m._NNZ
    e = lambda *s: np.zeros(s, dtype=dtype)  # noqa: E731
    values, P, ps, ds, dps, D = e(B, K), e(B, K, n), e(B, S), e(B, S), e(B, S), e(B, max(NNZ, 1))
    scratch = e(B, n)
    m.launch_rows_forward(x, tabs, values, P, ps, ds, dps, D, True, scratch, 0, threads)
    G = gP.copy()
    gpp, gx = e(B, S), e(B, n)
    m.launch_rows_backward(tabs, gv, G, ps, ds, dps, D, gpp, True, gx, scratch, 0, threads)
    gx_v = e(B, n)
    m.launch_rows_backward(tabs, gv, np.zeros((1, 1, 1)), ps, ds, dps, D, e(1, 1), False, gx_v, scratch, 0, threads)
    col, cps, cds, cdps, cdus = e(B, K), e(B, S), e(B, S), e(B, S), e(B, S)
    m.launch_column_forward(x, y, tabs, col, cps, cds, cdps, cdus, True, e(B, n), e(B, n), 0, threads)
    gxc = e(B, n)
    m.launch_column_backward(tabs, gc, cps, cds, cdps, cdus, gxc, e(B, n), e(B, n), 0, threads)

    xt = torch.tensor(x, requires_grad=True)  # the reference runs in x's dtype
    v0, P0 = reference.forward(net, xt, r)
    (g0,) = torch.autograd.grad((v0 * torch.from_numpy(gv)).sum() + (P0 * torch.from_numpy(gP)).sum(), xt)
    v0b, _ = reference.forward(net, xt, r)
    (g0v,) = torch.autograd.grad((v0b * torch.from_numpy(gv)).sum(), xt)
    c0 = reference.column(net, xt, torch.tensor(y), r)
    (g0c,) = torch.autograd.grad((c0 * torch.from_numpy(gc)).sum(), xt)
    case = f"{kind}({n},{k}) {dist} {dtype} shared_limit={shared_limit} threads={threads} B={B}"
    d = lambda a, b: float(np.abs(np.asarray(a) - b.detach().numpy()).max())  # noqa: E731
    return [
        {"case": case, "dtype": dtype, "quantity": q, "max_abs_err": d(a, b),
         "scale": max(1.0, float(b.abs().max())), "shape_ok": tuple(np.shape(a)) == tuple(b.shape)}
        for q, a, b in (
            ("values", values, v0),
            ("P", P, P0),
            ("grad values+P", gx, g0),
            ("grad values only", gx_v, g0v),
            ("column", col, c0),
            ("grad column", gxc, g0c),
        )
    ]


def main():
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            out += run_case(*case, tmp)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
