"""Run the lane-group kernels (netgen/codegen/cuda/groups.py) in Numba's
CUDA simulator and compare them with the reference executor. Run by
tests/codegen/cuda/test_cuda_groups.py in a subprocess with
NUMBA_ENABLE_CUDASIM=1 (set before numba is imported).

Per case: a generated cuda module (its tables and its ``fwd`` kernel for
the values, d, p and bad), the group kernels' source executed in the
module's namespace, then the launches the host makes: ``fwd`` (no P) and
``grp_fwd`` on a grid of rows x groups; ``gp`` zeroed, ``grp_bwd`` on a
persistent grid smaller than the items (each block its own scratch D),
``vals_bwd`` per row. P, dL/dx and dL/ds against ``reference.forward``
and autograd through it (float64). Then the same through a generated
Layer (``LAYER_CASES``: sorters whose n x n floats do not fit the shared
limit, and a selection network built with ``lane_groups=True`` whose k x n
do not: the launcher runs the rows with P in lane groups). Prints one
JSON object: ``rows`` ({"case", "quantity", "err", "scale", "norm"}) and
``launches`` (per Layer case, the kernels each direction launched: name,
blocks, rows of n floats).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"

import numpy as np  # noqa: E402
import torch  # noqa: E402

from netgen.codegen import emit  # noqa: E402
from netgen.codegen.cache import load  # noqa: E402
from netgen.codegen.cuda.kernels import GROUP_KERNELS  # noqa: E402
from netgen.codegen.swap_code import swap_code  # noqa: E402
from netgen.construct import build  # noqa: E402
from netgen.relax import reference  # noqa: E402
from netgen.relax.distributions import Relaxation  # noqa: E402

# (kind, n, k, distribution, direction, G, slots, threads, B, dtype)
CASES = [
    ("oddeven", 12, 12, "cauchy", "forward", 5, 3, 32, 2, "float64"),  # sorting: groups of 5 of 12 columns
    ("bitonic", 8, 8, "logistic", "forward", 3, 2, 32, 2, "float32"),  # float32, last group of 2
    ("splitter", 40, 5, "cauchy", "back", 2, 2, 32, 2, "float64"),  # rank groups: 2 + 2 + 1 of 5 ranks
    ("oddeven", 70, 70, "optimal", "forward", 16, 4, 32, 1, "float64"),  # layers of 35 > 32 threads
    ("pairwise", 16, 16, "logistic", "forward", 4, 2, 32, 2, "float64"),  # early layers' wide wire pairs
]


def run_case(out_dir, kind, n, k, dist, direction, G, slots, threads, B, dtype):
    net = build(kind, n, k)
    r = Relaxation(dist, steepness=3.0)
    path = os.path.join(out_dir, f"grp_{kind}_{n}_{k}_{direction}.py")
    with open(path, "w") as f:
        f.write(emit("cuda", net, r, {"shared_limit": 48 * 1024, "threads": threads, "direction": direction}))
    m = load(path)
    m._prepare_simulator()
    fwd = direction == "forward"
    if not fwd:  # a module swept back holds no group kernels: the rank groups' kernels rendered here
        src = "\n\n".join(kern.render(ft, "shared", swap_code(r, 0, ft, steepness="s"), k, n, fwd)
                           for kern in GROUP_KERNELS for ft in ("float32", "float64"))
        exec(compile(src, "<group kernels>", "exec"), m.__dict__)
    f = "f32" if dtype == "float32" else "f64"
    npt = np.float32 if dtype == "float32" else np.float64
    isz = np.dtype(npt).itemsize
    T = m.TABLES
    S = net.size
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(B, n, generator=gen, dtype=torch.float64)
    x[0, 1::2] = x[0, ::2][: n // 2]  # ties
    s0 = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    xr = x.clone().requires_grad_(True)
    vals_ref, P_ref = reference.forward(net, xr, r, steepness=s0)

    xs = x.numpy().astype(npt)
    sv = np.array([3.0], npt)
    values, ds, ps = np.zeros((B, k), npt), np.zeros((B, S), npt), np.zeros((B, S), npt)
    bad = np.zeros(B, np.int32)
    one = np.zeros((1, 1), npt)
    m.KERNELS[(np.dtype(npt), "fwd", "shared")][B, threads, 0, n * isz](
        xs, sv, T["wab"], T["offs"], T["rtab"], T["dix"], T["outs"], values, ds.reshape(-1),
        ps.reshape(-1), bad, one, one.reshape(-1), False, False, one)
    lanes = n if fwd else k
    groups = -(-lanes // G)
    items = B * groups
    geo = np.array([G, groups, items], np.uint32)
    spn = m.spans(m._CLO, m._CHI, m._OFFSETS, lanes, G).reshape(-1).astype(np.uint32)
    P = np.zeros((B, k * n), npt)
    m.__dict__[f"_grp_fwd_{f}_s"][items, threads, 0, G * n * isz](
        P, sv, T["wa"], T["wb"], T["offs"], T["clo"], T["chi"], T["outs"], ps, bad, geo, spn, one)
    gP = torch.randn(B, k, n, generator=gen, dtype=torch.float64)
    gv = torch.randn(B, k, generator=gen, dtype=torch.float64)
    grid = min(items, slots)
    D = np.full(grid * G * S, np.nan, npt)  # every entry read is written first
    gp = np.zeros((B, S), npt)
    m.__dict__[f"_grp_bwd_{f}_s"][grid, threads, 0, G * n * isz](
        gP.reshape(B, k * n).numpy().astype(npt), sv, T["wa"], T["wb"], T["offs"], T["clo"], T["chi"], T["outs"],
        ps, D, gp, geo, spn, one)
    gx, gs = np.zeros((B, n), npt), np.zeros(B, npt)
    m.__dict__[f"_vals_bwd_{f}_s"][B, threads, 0, n * isz](
        sv, T["wa"], T["wb"], T["offs"], T["outs"], gv.numpy().astype(npt), ds, ps, gp, bad, gx, gs, True, True, True,
        one)
    gx_ref, gs_ref = torch.autograd.grad((vals_ref * gv).sum() + (P_ref * gP).sum(), (xr, s0))
    rows = []
    for q, got, want in (("values", values, vals_ref), ("P", P.reshape(B, k, n), P_ref), ("dL/dx", gx, gx_ref),
                         ("dL/ds", gs.sum(keepdims=True), gs_ref.reshape(1))):
        want = want.detach().numpy()
        rows.append({"case": f"{kind} {n} {k} {direction} G={G} {dtype}", "quantity": q, "norm": float(np.abs(want).max()),
                     "err": float(np.abs(got.astype(np.float64) - want).max()),
                     "scale": float(max(1.0, np.abs(want).max()))})
    return rows


# through the Layer (the launcher picks the groups): (kind, n, k, shared_limit, B, dtype); P's sweep (k n
# floats back, n n forward) does not fit the limit
LAYER_CASES = [
    ("oddeven", 40, 40, 40 * 8 * 12, 3, "float64"),  # 12 columns a block: 4 groups, the last of 4
    ("bitonic", 16, 16, 16 * 4 * 5, 2, "float32"),  # float32, 5 columns: 4 groups, the last of 1
    ("splitter", 40, 5, 40 * 8 * 2, 2, "float64"),  # swept back, lane_groups=True: rank groups of 2, 2, 1
]


def run_layer(out_dir, kind, n, k, shared_limit, B, dtype):
    """The Layer's rows with P (forward and backward, dL/dvalues and dL/dP
    given, a tensor steepness) in lane groups, against the reference; the
    kernels each direction launched."""
    net = build(kind, n, k)
    r = Relaxation("cauchy", steepness=3.0)
    path = os.path.join(out_dir, f"layer_{kind}_{n}_{dtype}.py")
    opts = {"direction": "forward"} if n == k else {"lane_groups": True}
    with open(path, "w") as f:
        f.write(emit("cuda", net, r, {"shared_limit": shared_limit, "threads": 32, **opts}))
    m = load(path)
    with torch.no_grad():
        m.Layer()(torch.zeros(1, n, dtype=getattr(torch, dtype)))  # first use (not counted; the self-check is off: NETGEN_CUDA_SELFCHECK=0)
    launched = []
    real = m._launch

    def probe(name, like, blocks, args, rows):
        launched.append([name, int(blocks), int(rows)])
        return real(name, like, blocks, args, rows)

    m._launch = probe
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(B, n, generator=gen, dtype=torch.float64)
    x[0, 1::2] = x[0, ::2][: n // 2]  # ties
    gv, gP = torch.randn(B, k, generator=gen, dtype=torch.float64), torch.randn(B, k, n, generator=gen,
                                                                                dtype=torch.float64)
    s = torch.tensor(3.0, dtype=dt, requires_grad=True)
    xg = x.to(dt).requires_grad_(True)
    layer = m.Layer(steepness=s)
    values, P = layer(xg)
    fwd = list(launched)
    gx, gs = torch.autograd.grad((values * gv.to(dt)).sum() + (P * gP.to(dt)).sum(), (xg, s))
    bwd = launched[len(fwd):]
    s0 = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    xr = x.to(dt).to(torch.float64).requires_grad_(True)
    v0, P0 = reference.forward(net, xr, r, steepness=s0)
    g0, gs0 = torch.autograd.grad((v0 * gv).sum() + (P0 * gP).sum(), (xr, s0))
    rows = []
    for q, got, want in (("values", values, v0), ("P", P, P0), ("dL/dx", gx, g0), ("dL/ds", gs.reshape(1),
                                                                                   gs0.reshape(1))):
        got, want = got.detach().to(torch.float64).numpy(), want.detach().numpy()
        rows.append({"case": f"layer {kind} {n} {k} shared_limit={shared_limit} {dtype}", "quantity": q,
                     "norm": float(np.abs(want).max()), "err": float(np.abs(got - want).max()),
                     "scale": float(max(1.0, np.abs(want).max())), "shape_ok": got.shape == want.shape})
    return rows, {"forward": fwd, "backward": bwd}


def main():
    cases = os.environ.get("NETGEN_GROUP_CASES")
    picked = [CASES[int(i)] for i in cases.split(",")] if cases else CASES
    out, launches = [], {}
    with tempfile.TemporaryDirectory() as d:
        for case in picked:
            out += run_case(d, *case)
        for case in LAYER_CASES:
            rows, launched = run_layer(d, *case)
            out += rows
            launches[rows[0]["case"]] = launched
    json.dump({"rows": out, "launches": launches}, sys.stdout)


if __name__ == "__main__":
    main()
