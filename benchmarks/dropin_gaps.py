"""Issue 34's reproductions, one line per check: what a user script does with
the published diffsort/difftopk 0.2.0, done with netgen.compat (and, where
it says so, with the published packages beside it).

Run it against any netgen checkout (the before/after of issue 34)::

    PYTHONPATH=CHECKOUT NETGEN_CACHE_DIR=/tmp/cache python benchmarks/dropin_gaps.py [--items 1,2,...]

Each line: item, check, and ``ok`` or ``FAIL: <the exception or the
difference>``. The script uses only what a user would (the published API of
the two packages through netgen.compat; the documented swap), so it runs
unchanged on netgen before and after the fix.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import traceback
import warnings

import torch

with contextlib.redirect_stdout(io.StringIO()):  # difftopk prints at import
    import diffsort
    import difftopk

import netgen.compat as C

torch.set_num_threads(1)
warnings.simplefilter("ignore")
RESULTS: list[tuple[str, str, str]] = []


def check(item: str, name: str):
    def wrap(f):
        try:
            out = f()
            RESULTS.append((item, name, "ok" if out is None else f"ok ({out})"))
        except Exception as e:  # noqa: BLE001 - the point is to report it
            msg = f"{type(e).__name__}: {e}".splitlines()[0][:150]
            if os.environ.get("DROPIN_TRACE"):
                traceback.print_exc()
            RESULTS.append((item, name, f"FAIL: {msg}"))
        return f
    return wrap


def published_topk(kind, n, k, s, x):
    with contextlib.redirect_stdout(io.StringIO()):
        m = difftopk.DiffTopkNet(kind, n, k, steepness=s)
    m.sorting_network = [[t.double() for t in layer] for layer in m.sorting_network]
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return m(x)
    finally:
        torch.set_default_dtype(old)


def close(a, b, tol=1e-9):
    err = (a - b).abs().max().item()
    if not err <= tol:
        raise AssertionError(f"differs from published by {err:.3g}")


# ----------------------------------------------------------------- item 1
def item1():
    for target in ("numba", "torch"):
        for warm in (True, False):
            for cls, args in (("DiffSortNet", ("odd_even", 6)), ("DiffTopkNet", ("bitonic", 8, 3))):
                @check("1", f"torch.compile {cls} target={target} {'after eager warm-up' if warm else 'cold'}")
                def _():
                    m = getattr(C, cls)(*args, target=target)
                    x = torch.randn(4, args[1], requires_grad=True)
                    want = m(x)[1] if warm else None
                    torch._dynamo.reset()
                    got = torch.compile(m, backend="aot_eager")(x)[1]
                    got.sum().backward()
                    close(got, m(x)[1] if want is None else want, 1e-6)

    @check("1", "torch.compile AutoLayer target=auto (numba) after warm-up")
    def _():
        from netgen.codegen.auto import AutoLayer
        from netgen.construct import build
        from netgen.relax.distributions import Relaxation

        layer = AutoLayer(build("splitter", 9, 3), Relaxation(), "auto")
        x = torch.randn(3, 9)
        want = layer(x)[1]
        torch._dynamo.reset()
        close(torch.compile(layer, backend="aot_eager")(x)[1], want, 1e-6)

    @check("1", "torch.compile TopKCrossEntropyLoss (splitter, auto)")
    def _():
        loss = C.TopKCrossEntropyLoss("splitter_selection", 5.0, [0.5, 0.5], 10)
        x, y = torch.randn(4, 10, requires_grad=True), torch.tensor([1, 2, 3, 4])
        want = loss(x, y)
        torch._dynamo.reset()
        got = torch.compile(loss, backend="aot_eager")(x, y)
        got.backward()
        close(got, want, 1e-6)


# ----------------------------------------------------------------- item 2
def item2():
    x = torch.randn(4, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    shapes = {
        "float": lambda: 6.0,
        "(1,)": lambda: torch.ones(1, dtype=torch.float64) * 6,
        "nn.Parameter(torch.ones(1) * 10)": lambda: torch.nn.Parameter(torch.ones(1, dtype=torch.float64) * 10),
        "(B, 1) per sample": lambda: torch.tensor([[6.0], [2.0], [11.0], [0.5]], dtype=torch.float64),
        "s = 0": lambda: 0.0,
        "s = -2": lambda: -2.0,
        "s = NaN": lambda: math.nan,
    }
    for name, make in shapes.items():
        @check("2", f"DiffTopkNet steepness {name} equals published")
        def _():
            _, X = C.DiffTopkNet("odd_even", 10, 3, steepness=make())(x)
            _, tX = published_topk("odd_even", 10, 3, make(), x)
            if tX.isnan().all():
                assert X.isnan().all(), "published gives NaN, netgen does not"
                return
            close(X, tX)

    for name in ("nn.Parameter(torch.ones(1) * 10)", "(B, 1) per sample"):
        @check("2", f"dL/ds of steepness {name} equals finite differences")
        def _():
            s0 = shapes[name]().detach()
            w = torch.randn(4, 10, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
            p = torch.nn.Parameter(s0.clone())
            (C.DiffTopkNet("odd_even", 10, 3, steepness=p)(x)[1] * w).sum().backward()
            fd = torch.zeros_like(s0).view(-1)
            for i in range(s0.numel()):
                e = torch.zeros_like(s0).view(-1)
                e[i] = 1e-6
                e = e.view(s0.shape)
                with torch.no_grad():
                    f = [(C.DiffTopkNet("odd_even", 10, 3, steepness=s0 + d, target="torch")(x)[1] * w).sum()
                         for d in (e, -e)]
                fd[i] = (f[0] - f[1]) / 2e-6
            close(p.grad.reshape(-1), fd, 1e-6)

    @check("2", "learnable steepness pushed through 0 by SGD: the run goes on")
    def _():
        m = C.DiffTopkNet("odd_even", 6, 2, steepness=torch.nn.Parameter(torch.ones(1) * 0.3))
        opt = torch.optim.SGD(m.parameters(), lr=1.0)
        xx = torch.randn(8, 6, generator=torch.Generator().manual_seed(0))
        for _ in range(6):
            opt.zero_grad()
            m(xx)[1][..., -1].square().sum().backward()
            opt.step()
        return f"s = {float(m.steepness):.4f}"


# ----------------------------------------------------------------- item 3
def item3():
    x = torch.randn(5, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    x[1, 3] = math.nan
    x[3, 0] = math.inf

    @check("3", "DiffTopkNet on scores with NaN/inf rows: NaN rows like published, no raise")
    def _():
        _, X = C.DiffTopkNet("odd_even", 10, 3)(x)
        _, tX = published_topk("odd_even", 10, 3, 10.0, x)
        bad = X.isnan().flatten(1).all(1)
        assert torch.equal(bad, tX.isnan().flatten(1).all(1)), "NaN rows differ"
        close(X[~bad], tX[~bad])

    @check("3", "training loop that skips non-finite losses")
    def _():
        model = torch.nn.Sequential(torch.nn.Linear(4, 10), C.DiffTopkNet("odd_even", 10, 2))
        skipped = 0
        for step in range(3):
            f = torch.randn(6, 4)
            if step == 1:
                f[0, 0] = math.nan
            loss = model(f)[1][..., -1].square().mean()
            if not torch.isfinite(loss):
                skipped += 1
                continue
            loss.backward()
        return f"{skipped} batch skipped"

    @check("3", "strict check one flag away: DiffTopkNet(..., check_finite=True) raises ValueError")
    def _():
        try:
            C.DiffTopkNet("odd_even", 10, 3, check_finite=True)(x)
        except ValueError as e:
            return str(e)[:40]
        raise AssertionError("no ValueError")


# ----------------------------------------------------------------- item 4
SWAP = '''
import contextlib, importlib, io, sys
import netgen.compat
if hasattr(netgen.compat, "install"):
    netgen.compat.install()
else:  # the swap docs/migrating.md documented before
    sys.modules["diffsort"] = netgen.compat.diffsort
    sys.modules["difftopk"] = netgen.compat.difftopk
paths = {
    "diffsort": ["DiffSortNet", "sort", "bitonic_network", "odd_even_network", "get_sorting_network"],
    "diffsort.diffsort": ["DiffSortNet"], "diffsort.functional": ["sort", "execute_sort", "s_best", "NormalCDF"],
    "diffsort.networks": ["bitonic_network", "odd_even_network", "get_sorting_network"],
    "difftopk": ["DiffTopkNet", "TopKCrossEntropyLoss", "topk", "SmoothTopKLoss", "NeuralSort", "SoftSort"],
    "difftopk.difftopk": ["DiffTopkNet"], "difftopk.functional": ["topk", "execute_topk", "execute_sparse_topk"],
    "difftopk.losses": ["TopKCrossEntropyLoss"], "difftopk.networks": ["get_sorting_network", "get_sparse_net"],
    "difftopk.neuralsort": ["NeuralSort"], "difftopk.softsort": ["SoftSort"],
    "difftopk.smooth_topk": ["SmoothTopKLoss", "SmoothHardTopKLoss", "Topk_Smooth_SVM", "detect_large"],
}
ok = bad = 0
failed = []
for mod, names in paths.items():
    for n in names:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                obj = getattr(importlib.import_module(mod), n)
            assert getattr(obj, "__module__", "netgen").startswith("netgen"), f"{mod}.{n} is the published one"
            ok += 1
        except Exception as e:
            bad += 1
            failed.append(f"{mod}.{n}")
print(ok, bad, " ".join(failed[:4]))
'''


def item4():
    @check("4", "every import path of the published packages after the documented swap (published installed too)")
    def _():
        # run outside any checkout (python -c puts the working directory first on sys.path)
        out = subprocess.run([sys.executable, "-c", SWAP], capture_output=True, text=True, timeout=300,
                             cwd=tempfile.gettempdir())
        if out.returncode:
            raise RuntimeError(out.stderr.strip().splitlines()[-1])
        ok, bad, *failed = out.stdout.split()
        if int(bad):
            raise AssertionError(f"{bad} of {int(ok) + int(bad)} import paths fail, e.g. {' '.join(failed)}")
        return f"{ok} import paths"


# ----------------------------------------------------------------- item 5
def item5():
    x = torch.randn(3, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))

    @check("5", "gradient penalty (create_graph=True) through DiffTopkNet equals published")
    def _():
        def pen(runner):
            xx = x.clone().requires_grad_()
            (g,) = torch.autograd.grad(runner(xx).square().sum(), xx, create_graph=True)
            p = g.square().sum()
            p.backward()
            return xx.grad
        m = C.DiffTopkNet("bitonic", 8, 2, steepness=5.0)
        close(pen(lambda t: m(t)[1]), pen(lambda t: published_topk("bitonic", 8, 2, 5.0, t)[1]))

    @check("5", "gradgradcheck through DiffSortNet")
    def _():
        m = C.DiffSortNet("odd_even", 5, steepness=3.0)
        assert torch.autograd.gradgradcheck(lambda t: m(t)[1], (x[:, :5].clone().requires_grad_(),))

    for name, tr in (("grad", lambda f: torch.func.grad(lambda t: f(t).square().sum())),
                     ("jacrev", lambda f: torch.func.jacrev(f)),
                     ("vmap", lambda f: torch.func.vmap(lambda r: f(r.unsqueeze(0)).squeeze(0)))):
        @check("5", f"torch.func.{name} through DiffTopkNet equals published")
        def _():
            m = C.DiffTopkNet("bitonic", 8, 2, steepness=5.0)
            close(tr(lambda t: m(t)[1])(x), tr(lambda t: published_topk("bitonic", 8, 2, 5.0, t)[1])(x))


# ----------------------------------------------------------------- item 6
def _model(ns):
    with contextlib.redirect_stdout(io.StringIO()):
        m = torch.nn.Sequential(torch.nn.Linear(4, 8), ns.DiffTopkNet("bitonic", 8, 2),
                                ns.DiffSortNet("odd_even", 2))
        m.loss = ns.TopKCrossEntropyLoss("odd_even", 5.0, [0.5, 0.5], 8)
    return m


PUBLISHED = type("published", (), {**vars(difftopk), **vars(diffsort)})


def item6():
    @check("6", "torch.load(weights_only=True) of a model: allowlisted globals, netgen vs published")
    def _():
        counts = {}
        for name, ns in (("netgen", C), ("published", PUBLISHED)):
            buf = io.BytesIO()
            m = _model(ns)
            m[1](torch.randn(2, 8))
            torch.save(m, buf)
            buf.seek(0)
            counts[name] = torch.serialization.get_unsafe_globals_in_checkpoint(buf)
        numpy = [g for g in counts["netgen"] if g.startswith("numpy")]
        summary = f"netgen {len(counts['netgen'])} ({len(numpy)} numpy), published {len(counts['published'])}"
        if len(counts["netgen"]) > len(counts["published"]):
            raise AssertionError(summary + ": " + ", ".join(counts["netgen"]))
        buf = io.BytesIO()
        torch.save(_model(C), buf)
        buf.seek(0)
        import importlib
        classes = [getattr(importlib.import_module(g.rsplit(".", 1)[0]), g.rsplit(".", 1)[1]) for g in counts["netgen"]]
        with torch.serialization.safe_globals(classes):
            m = torch.load(buf, weights_only=True)
        m[1](m[0](torch.randn(2, 4)))
        return summary


# ----------------------------------------------------------------- item 7
def item7():
    @check("7", "sorting_network can be assigned (and is used)")
    def _():
        m = C.DiffSortNet("bitonic", 8)
        m.sorting_network = C.get_sorting_network("odd_even", 8, "cpu")
        x = torch.randn(2, 8, dtype=torch.float64)
        close(m(x)[1], C.DiffSortNet("odd_even", 8)(x)[1])

    @check("7", "print(model) equals published (no extra child module)")
    def _():
        a, b = str(_model(C)), str(_model(PUBLISHED))
        assert a == b, a.replace("\n", " ")[:150]

    @check("7", "SmoothHardTopKLoss has fn_smooth / fn_hard")
    def _():
        m = C.SmoothHardTopKLoss(10, 2)
        x, y = torch.randn(3, 10), torch.tensor([1, 2, 3])
        m.fn_smooth(x, y), m.fn_hard(x, y)

    @check("7", "docs/migrating.md: the serial threshold is the code's (2^17), exceptions listed")
    def _():
        root = pathlib.Path(C.__file__).resolve().parents[2]
        text = (root / "docs" / "migrating.md").read_text()
        assert "below 2^21" not in text, "migrating.md says serial below 2^21"
        assert "2^17" in text and "AssertionError" in text and "NotImplementedError" in text, "not listed"


ITEMS = {"1": item1, "2": item2, "3": item3, "4": item4, "5": item5, "6": item6, "7": item7}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", default=",".join(ITEMS), help="comma-separated items (default: all)")
    args = ap.parse_args()
    for item in args.items.split(","):
        ITEMS[item]()
    print(f"netgen at {pathlib.Path(C.__file__).resolve().parents[2]}")
    width = max(len(r[1]) for r in RESULTS)
    for item, name, result in RESULTS:
        print(f"{item}  {name:<{width}}  {result}")
    print(f"{sum(r[2].startswith('ok') for r in RESULTS)} of {len(RESULTS)} checks ok")


if __name__ == "__main__":
    main()
