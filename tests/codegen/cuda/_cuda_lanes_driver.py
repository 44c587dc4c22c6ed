"""Run the cuda Layer's lane sweeps (``back``: W P, ``fwd``: P V, without
forming P) in Numba's CUDA simulator and compare them with the reference
executor (``reference.back`` / ``reference.fwd``). Run by
tests/codegen/cuda/test_cuda_lanes.py in a subprocess with
NUMBA_ENABLE_CUDASIM=1 (set before numba is imported).

Per network (odd n, k = n, k = 1, a selection network): float64, batches
B = 0 and 1 (``--full``: B = 3 and a 2-d batch instead), one steepness
each, a number and a tensor steepness, one W / V
for every row and one per row: the result and dL/dx, dL/ds, dL/dW (dL/dV)
against autograd through the reference; ``torch.autograd.gradcheck`` in x, W / V and s at n = 5 with k = n
and k = 1 (B = 1) and an empty batch; a row with a NaN gives a NaN row and leaves the others. Prints
one JSON object: ``rows`` ({"case", "quantity", "err", "norm",
"shape_ok"}), ``gradcheck`` (case -> bool), ``nan`` (case -> bool),
``launched`` (network -> the kernels its calls launched), ``groups``
(network -> the lane groups per row its lane kernels ran) and
``fallback`` (the torch sweeps past LANE_KERNEL_MAX lanes: launched
kernels, worst error).

The lane kernels (netgen/codegen/cuda/lane_ops.py) run every call here
with at most LANE_KERNEL_MAX lanes; the splitter's module gets LANE_CAP =
2, so its 3-lane calls run two groups per row (dL/dp added by both).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"

import torch  # noqa: E402

from netgen.codegen import emit  # noqa: E402
from netgen.codegen.cache import load  # noqa: E402
from netgen.construct import build  # noqa: E402
from netgen.relax import reference  # noqa: E402
from netgen.relax.distributions import Relaxation  # noqa: E402

NETS = [("oddeven", 7, 7), ("bitonic", 9, 1), ("splitter", 11, 3)]
#: the (batch, steepness) pairs run: QUICK by default; ``--full`` the
#: larger batches instead (slow: the simulator runs each block's threads as
#: Python threads), once each (B = 3 with one W / V for all rows, the 2-d
#: batch with one per row), and no gradcheck (the quick run's)
FULL = sys.argv[1:] == ["--full"]
QUICK = {((0,), 3.0), ((1,), 1.5)}
EXTRA = {((3,), 1.5), ((2, 2), 3.0)}
F64 = torch.float64


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def module(d, kind, n, k, r):
    net = build(kind, n, k)
    path = os.path.join(d, f"lanes_{kind}_{n}_{k}.py")
    with open(path, "w") as f:
        f.write(emit("cuda", net, r, {"threads": 32}))
    return net, load(path)


def row(case, q, got, want):
    got, want = got.detach(), want.detach()
    ok = got.shape == want.shape
    err = float((got - want).abs().max()) if ok and want.numel() else 0.0
    return {"case": case, "quantity": q, "err": err, "norm": float(want.abs().max()) if want.numel() else 0.0,
            "numel": want.numel(), "shape_ok": ok}


def compare(net, m, r, batch, steep, kind, lanes_shape, seed):
    """One call of back (kind "back", lanes W) or fwd (lanes V) and its
    gradients against the reference."""
    n = net.n
    x = rand(*batch, n, seed=seed)
    if x.numel():
        x.view(-1, n)[0, 1::2] = x.view(-1, n)[0, ::2][: n // 2]  # ties
    T = rand(*lanes_shape, seed=seed + 1)
    case = f"{kind} n={n} k={net.k} batch={tuple(batch)} lanes={tuple(lanes_shape)} s={steep}"
    ins, outs = [], []
    for which in ("cuda", "ref"):
        xg, Tg = x.clone().requires_grad_(True), T.clone().requires_grad_(True)
        s = torch.tensor(steep, dtype=F64, requires_grad=True) if isinstance(steep, float) and steep != 3.0 else steep
        if which == "cuda":
            fn = m.Layer().back if kind == "back" else m.Layer().fwd
            out = fn(xg, Tg, steepness=s)
        else:
            fn = reference.back if kind == "back" else reference.fwd
            out = fn(net, xg, Tg, r, steepness=s)
        outs.append(out)
        ins.append((xg, Tg, s))
    rows = [row(case, "result", outs[0], outs[1])]
    G = rand(*outs[1].shape, seed=seed + 2)
    grads = []
    for out, (xg, Tg, s) in zip(outs, ins):
        wrt = (xg, Tg) + ((s,) if isinstance(s, torch.Tensor) else ())
        grads.append(torch.autograd.grad((out * G).sum(), wrt, allow_unused=True))
    names = ("dL/dx", "dL/dW" if kind == "back" else "dL/dV", "dL/ds")
    for q, g, g0 in zip(names, *grads):
        rows.append(row(case, q, torch.zeros_like(g0) if g is None else g, g0))
    return rows


def main():
    r = Relaxation("cauchy", steepness=3.0)
    out, checks, nans, launched, groups = [], {}, {}, {}, {}
    with tempfile.TemporaryDirectory() as d:
        for kind, n, k in NETS:
            net, m = module(d, kind, n, k, r)
            if kind == "splitter":
                m.LANE_CAP = 2
            seed = 0
            for batch in ((0,), (1,), (3,), (2, 2)):
                for steep in (3.0, 1.5):
                    seed += 10
                    if (batch, steep) not in (EXTRA if FULL else QUICK):
                        continue
                    # --full: B = 3 with one W / V for all rows, the 2-d batch with one per row
                    shared = not FULL or batch == (3,)
                    per_row = not FULL or batch == (2, 2)
                    if shared:
                        out += compare(net, m, r, batch, steep, "back", (2, k), seed)
                    if per_row:
                        out += compare(net, m, r, batch, steep, "back", (*batch, 3, k), seed + 3)
                    if shared:
                        out += compare(net, m, r, batch, steep, "fwd", (n, 2), seed + 5)
                    if per_row:
                        out += compare(net, m, r, batch, steep, "fwd", (*batch, n, 1), seed + 7)
            # a NaN in row 0: row 0 NaN, row 1 as the reference
            x = rand(2, n, seed=99)
            x[0, 1] = float("nan")
            W, V = rand(2, k, seed=98), rand(n, 2, seed=97)
            lay = m.Layer()
            for what, got, want in (("back", lay.back(x, W), reference.back(net, x[1:], W, r)),
                                    ("fwd", lay.fwd(x, V), reference.fwd(net, x[1:], V, r))):
                nans[f"{what} {kind} {n} {k}"] = bool(torch.isnan(got[0]).all()) and bool(
                    torch.allclose(got[1:], want, atol=1e-12, rtol=0))
            launched[kind] = sorted({name for name, _ in m._VARIANTS})
            groups[kind] = sorted({got[1] for got in m._LANE_GEO.values()})
        # past LANE_KERNEL_MAX lanes: the torch sweeps, same results
        net, m = module(d, "bitonic", 9, 1, r)
        m.LANE_KERNEL_MAX = 1
        m._VARIANTS.clear()  # (the same module as above: load caches it)
        x, W, V = rand(2, 9, seed=5), rand(2, 1, seed=6), rand(9, 2, seed=7)
        lay = m.Layer()
        err = max(float((lay.back(x, W) - reference.back(net, x, W, r)).abs().max()),
                  float((lay.fwd(x, V) - reference.fwd(net, x, V, r)).abs().max()))
        fallback = {"launched": sorted({name for name, _ in m._VARIANTS}), "err": err}
        # gradcheck in x, W / V and s: k = n (B = 1), k = 1 (B = 1) and an empty batch
        s = torch.tensor(2.0, dtype=F64)
        for kind, n, k, B in () if FULL else (("oddeven", 5, 5, 1), ("bitonic", 5, 1, 1), ("oddeven", 5, 5, 0)):
            net, m = module(d, kind, n, k, r)
            lay = m.Layer()
            x, W, V = rand(B, n, seed=1), rand(B, 2, k, seed=2), rand(n, 2, seed=3)
            for what, fn, T in (("back", lambda x, T, s: lay.back(x, T, steepness=s), W),
                                ("fwd", lambda x, T, s: lay.fwd(x, T, steepness=s), V)):
                args = (x.clone().requires_grad_(True), T.clone().requires_grad_(True),
                        s.clone().requires_grad_(True))
                # fast mode (random directions: the simulator runs each launch's threads as Python threads)
                checks[f"{what} {kind} {n} {k} B={B}"] = bool(torch.autograd.gradcheck(
                    fn, args, atol=1e-7, raise_exception=False, fast_mode=True))
    json.dump({"rows": out, "gradcheck": checks, "nan": nans, "launched": launched, "groups": groups,
               "fallback": fallback}, sys.stdout)


if __name__ == "__main__":
    main()
