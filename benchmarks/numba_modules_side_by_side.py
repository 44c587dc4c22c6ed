"""Two generated numba modules (e.g. one built by an older netgen, one by
this one) timed side by side: rows and column fwd+bwd, interleaved passes in
one process, medians and the ratios.

    python benchmarks/numba_modules_side_by_side.py OLD.py NEW.py [--B 500] [--reps 7] [--threads 2]

Build the modules with ``netgen build --target numba`` (or
``netgen.codegen.write_module``) from the two checkouts, for the same
network and relaxation; each is loaded from its file (numba's on-disk cache
next to it is reused). Loss: ``(P * W).sum()`` for the rows,
``(column * w).sum()`` for the column path; float32 inputs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import _rss  # benchmarks/_rss.py: interleaved timing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--B", type=int, default=500)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    for p in (args.old, args.new):
        if not p.is_file():
            ap.error(f"{p}: no such file")
    if args.B < 1 or args.reps < 1:
        ap.error("--B and --reps must be >= 1")

    import numba
    import torch

    torch.set_num_threads(args.threads)
    numba.set_num_threads(args.threads)
    from netgen.codegen.cache import load  # registers each module under its own name (numba's cache needs it)

    mods = {"old": load(args.old), "new": load(args.new)}
    n, k = mods["old"]._N, mods["old"]._K
    if (mods["new"]._N, mods["new"]._K) != (n, k):
        ap.error("the two modules are for different (n, k)")
    B = args.B
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, generator=g).requires_grad_(True)
    W = torch.randn(B, k, n, generator=g)
    y = torch.randint(0, n, (B,), generator=g)
    w = torch.randn(B, k, generator=g)
    steps = {}
    for tag, mod in mods.items():
        layer = mod.Layer()
        steps[f"{tag} rows"] = lambda L=layer: (L(x)[1] * W).sum().backward()
        steps[f"{tag} column"] = lambda L=layer: (L.column(x, y) * w).sum().backward()
    for step in steps.values():  # warm-up (compiles or loads the cached kernels)
        step()
    med = _rss.interleaved(steps, args.reps, before=lambda: setattr(x, "grad", None))
    print(f"B = {B}, n = {n}, k = {k}, float32, {args.threads} threads; fwd+bwd, median of {args.reps} "
          f"interleaved passes; old = {args.old}, new = {args.new}")
    for name, m in med.items():
        print(f"{name:<12} {m:>8.3f} s  {m / B * 1e3:>7.3f} ms/row")
    for path in ("rows", "column"):
        print(f"{path}: new / old = {med[f'new {path}'] / med[f'old {path}']:.2f}")
    for tag in mods:
        print(f"{tag}: column {med[f'{tag} rows'] / med[f'{tag} column']:.2f}x faster than rows")


if __name__ == "__main__":
    main()
