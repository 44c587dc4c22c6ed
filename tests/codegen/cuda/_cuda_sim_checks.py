"""The layer's contract checks that the simulator driver
(_cuda_sim_driver.py) runs on one module besides its cases: bad rows,
wide rows against the reference, inputs left unwritten and refusals,
the self-check, and torch.compile against eager. Imported by the driver
after it has made sure the simulator is on."""

from __future__ import annotations

import logging
import os

import torch

from netgen.relax import reference
from netgen.relax.distributions import Relaxation


def max_abs_err(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max()) if a.numel() else 0.0


def error_of(call, exc=Exception):
    """The message of the ``exc`` that ``call()`` raises, or "no error"."""
    try:
        call()
    except exc as e:
        return str(e)
    return "no error"


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
            errs[f"{q} row {row}"] = [max_abs_err(a[row], b[row]) / max(scale, 1e-300), scale,
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
    out["second order"] = error_of(lambda: g.pow(2).sum().backward(), RuntimeError)
    out["torch.func"] = error_of(lambda: torch.func.vmap(layer)(x.detach()), ValueError)
    out["bad steepness"] = error_of(lambda: m.Layer(steepness=-1.0), ValueError)
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

    def first_call():  # as a new process's: no launch record, not self-checked yet
        m._RECORDS.clear()
        m._SELF_CHECKED.clear()
        m.Layer()(x)

    first_call()
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
    out["wrong packing"] = error_of(first_call, RuntimeError)
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
    out["swapped pointers"] = error_of(first_call, RuntimeError)
    m._slots = good_slots
    os.environ["NETGEN_CUDA_SELFCHECK"] = "0"
    try:
        first_call()
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
