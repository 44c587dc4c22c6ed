"""Two generated torch modules (e.g. one emitted by an older netgen, one by
this one) timed side by side: values+P and column, forward+backward,
interleaved passes in one process, medians and the ratios.

    python benchmarks/torch_modules_side_by_side.py OLD.py NEW.py [--B 64] [--reps 15] [--threads 1] [--clock cpu]

``--clock cpu`` times with the process's CPU time (``time.process_time``)
instead of the wall clock: with one thread on a machine shared with other
busy processes, time spent waiting for a core is then not counted.

Build the two modules with ``netgen.codegen.write_module`` (or ``netgen
build --target torch``) from the two checkouts for the same network and
relaxation. Loss: ``(P * W).sum() + values.sum()`` for the rows,
``(column * w).sum()`` for the column; float32 inputs.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import statistics
import time


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--B", type=int, default=64)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args()
    for p in (args.old, args.new):
        if not p.is_file():
            ap.error(f"{p}: no such file")
    if args.B < 1 or args.reps < 1:
        ap.error("--B and --reps must be >= 1")

    import torch

    torch.set_num_threads(args.threads)
    from netgen.codegen.cache import load

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

        def rows(L=layer):
            v, P = L(x)
            ((P * W).sum() + v.sum()).backward()

        steps[f"{tag} rows"] = rows
        steps[f"{tag} column"] = lambda L=layer: (L.column(x, y) * w).sum().backward()
    for step in steps.values():  # warm-up
        step()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    times = {name: [] for name in steps}
    for _ in range(args.reps):  # one call of every step per round, in turn
        for name, step in steps.items():
            x.grad = None
            t = clock()
            step()
            times[name].append(clock() - t)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"{cpu_model()}; torch {torch.__version__}, {args.threads} thread(s)")
    print(f"B = {B}, n = {n}, k = {k}, float32; fwd+bwd, {args.clock} clock, median of {args.reps} interleaved passes; "
          f"old = {args.old.name}, new = {args.new.name}")
    for name, m in med.items():
        print(f"{name:<12} {m * 1e3:>9.2f} ms")
    for path in ("rows", "column"):
        print(f"{path}: new / old = {med[f'new {path}'] / med[f'old {path}']:.3f}")


if __name__ == "__main__":
    main()
