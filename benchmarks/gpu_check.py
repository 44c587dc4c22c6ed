"""The figures of issue 29 on a GPU, each beside its target, in one table
(the python part of benchmarks/gpu_check.sh; DRAFT: the implementer of
issue 29 completes it).

    python3 benchmarks/gpu_check.py --modules gpu-modules [--reps 10] [--dry-run] [--tests-summary FILE]

Loads the modules ``gpu_check.sh --prepare`` built (with their cubins:
nothing compiles here) through ``netgen.load``: ``topk5.py`` (the (5,
10450) splitter), ``sort1024.py`` and ``sort4096.py`` (odd-even sorters).
Each figure is measured in a ``try`` of its own (a failure is printed as
``error: ...`` in its row, the others still run), with CUDA events (median
of ``--reps`` after a warm-up) or, for kernel times, the torch profiler.
``--dry-run`` prints the table's rows and targets without measuring (no
GPU needed: checks the script). The last block is the table; its format is
stable: ``figure | measured | target | ok``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (key, figure, target text, test of the measured value against the target or None)
FIGURES = [
    ("first_call_errors", "cuda layer first call: rows, values, column (errors)", "0", lambda v: v == 0),
    ("host_rows", "host ms per rows fwd+bwd, eager, B = 1", "<= 0.10", lambda v: v <= 0.10),
    ("host_column", "host ms per column fwd+bwd, eager, B = 1", "<= 0.10", lambda v: v <= 0.10),
    *[(f"kern_rows_{B}", f"rows kernels ms, B = {B}", f"<= {t}", (lambda t: lambda v: v <= t)(t))
      for B, t in ((64, 0.12), (500, 0.50), (4096, 4.0))],
    *[(f"kern_column_{B}", f"column kernels ms, B = {B}", f"<= {t}", (lambda t: lambda v: v <= t)(t))
      for B, t in ((64, 0.05), (500, 0.15), (4096, 1.2))],
    *[(f"user_ratio_{B}", f"user step DiffTopK / CE, B = {B}", "<= 1.5", lambda v: v <= 1.5) for B in (64, 500, 4096)],
    ("sort1024_ms", "sorting n = 1024, B = 64, rows fwd+bwd ms", "<= SoftSort (3.49 measured)", None),
    ("sort1024_ratio", "  ... / SoftSort same card", "<= 1.0", lambda v: v <= 1.0),
    ("sort4096_ratio", "sorting n = 4096, B = 16 / SoftSort", "<= 2.0", lambda v: v <= 2.0),
    ("sort4096_mem", "  ... peak memory / output P", "<= 2.0", lambda v: v <= 2.0),
    ("first_call_s", "first call s, new process, cubins present", "<= 1.0", lambda v: v <= 1.0),
    ("torch_rows_500", "torch target rows fwd+bwd ms, B = 500", "<= 5.0 (or auto says why not)",
     lambda v: v <= 5.0),
    ("gpu_tests", "GPU tests (-m gpu): failed", "0", lambda v: v == 0),
]


def events(step, reps):
    import torch

    step()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def kernel_ms(step, reps, names):
    """Median per call of the summed device time of the netgen kernels
    whose names contain one of ``names``."""
    from torch.profiler import ProfilerActivity, profile

    step()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            step()
    total = sum(ev.device_time_total for ev in prof.key_averages() if any(nm in ev.key for nm in names))
    return total / reps / 1000.0


def measure(mods, reps, res):
    import torch

    dev = torch.device("cuda")
    topk = netgen_load(mods / "topk5.py")
    layer = topk.Layer()
    n, k = topk._N, topk._K
    gen = torch.Generator().manual_seed(0)

    def run(key, fn):
        try:
            res[key] = fn()
        except Exception as e:  # noqa: BLE001 - reported in the table
            res[key] = f"error: {type(e).__name__}: {str(e)[:80]}"

    def first_call():
        x = torch.randn(3, n, device=dev, requires_grad=True)
        errors = 0
        for fn in (lambda: sum(t.sum() for t in layer(x)), lambda: layer.values(x).sum(),
                   lambda: layer.column(x, torch.zeros(3, dtype=torch.int64, device=dev)).sum()):
            try:
                fn().backward()
            except Exception as e:  # noqa: BLE001
                errors += 1
                print(f"first call: {type(e).__name__}: {e}", file=sys.stderr)
        return errors

    run("first_call_errors", first_call)

    def host(path):
        x = torch.randn(1, n, device=dev, requires_grad=True)
        y = torch.zeros(1, dtype=torch.int64, device=dev)
        gv, gP = torch.randn(1, k, device=dev), torch.randn(1, k, n, device=dev)
        step = (lambda: torch.autograd.backward(layer(x), (gv, gP))) if path == "rows" else \
            (lambda: torch.autograd.backward(layer.column(x, y), gv))
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        t = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(50):
                step()
            t.append((time.perf_counter() - t0) / 50 * 1e3)
            torch.cuda.synchronize()
        return statistics.median(t)

    run("host_rows", lambda: host("rows"))
    run("host_column", lambda: host("column"))
    for B in (64, 500, 4096):
        x = torch.randn(B, n, generator=gen).to(dev).requires_grad_(True)
        W = torch.randn(B, k, n, generator=gen).to(dev)
        y = torch.randint(0, n, (B,), generator=gen).to(dev)
        w = torch.randn(B, k, generator=gen).to(dev)
        run(f"kern_rows_{B}", lambda: kernel_ms(lambda: torch.autograd.grad((layer(x)[1] * W).sum(), x), reps,
                                                ("_fwd_f", "_bwd_f")))
        run(f"kern_column_{B}", lambda: kernel_ms(lambda: torch.autograd.grad((layer.column(x, y) * w).sum(), x),
                                                  reps, ("_fwd_col_f", "_bwd_col_f")))

        def ratio():
            head = torch.nn.Linear(512, n).to(dev)
            feats = torch.randn(B, 512, device=dev)
            loss = netgen_topk_loss(n, k, dev)
            ce = events(lambda: torch.nn.functional.cross_entropy(head(feats), y).backward(), reps)
            ours = events(lambda: loss(head(feats), y).backward(), reps)
            return ours / ce

        run(f"user_ratio_{B}", ratio)
    del x, W

    def sort_case(name, B):
        from netgen.bench.gpu import make_step

        mod = netgen_load(mods / f"{name}.py")
        lay, nn = mod.Layer(), mod._N
        xs = torch.randn(B, nn, device=dev, requires_grad=True)
        Ws = torch.randn(B, nn, nn, device=dev)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        ours = events(lambda: torch.autograd.grad((lay(xs)[1] * Ws).sum(), xs), max(3, reps // 2))
        mem = (torch.cuda.max_memory_allocated() - base) / (4 * B * nn * nn)
        xb, soft = make_step("softsort", B, nn, nn, dev)
        xb.requires_grad_(True)
        theirs = events(lambda: torch.autograd.grad(soft(xb), xb), max(3, reps // 2))
        return ours, ours / theirs, mem

    try:
        ms, r, _ = sort_case("sort1024", 64)
        res["sort1024_ms"], res["sort1024_ratio"] = ms, r
    except Exception as e:  # noqa: BLE001
        res["sort1024_ms"] = f"error: {type(e).__name__}: {str(e)[:80]}"
    try:
        _, r, mem = sort_case("sort4096", 16)
        res["sort4096_ratio"], res["sort4096_mem"] = r, mem
    except Exception as e:  # noqa: BLE001
        res["sort4096_ratio"] = f"error: {type(e).__name__}: {str(e)[:80]}"

    def first_call_s():
        code = ("import time; t0 = time.perf_counter(); import torch, netgen; t1 = time.perf_counter(); "
                "m = netgen.load(%r); x = torch.randn(64, m._N, device='cuda', requires_grad=True); "
                "torch.autograd.grad(m.Layer()(x)[1].sum(), x); torch.cuda.synchronize(); "
                "print(t1 - t0, time.perf_counter() - t1)") % str(mods / "topk5.py")
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)))
        import_s, first = (float(v) for v in out.stdout.split()[-2:])
        print(f"new process: import torch + netgen {import_s:.2f} s, then load + first fwd+bwd {first:.2f} s",
              flush=True)
        return first

    run("first_call_s", first_call_s)

    def torch_rows():
        from netgen.bench.gpu import make_step

        xt, step = make_step("netgen-torch-rows", 500, n, k, dev)
        xt.requires_grad_(True)
        return events(lambda: torch.autograd.grad(step(xt), xt), reps)

    run("torch_rows_500", torch_rows)


def netgen_load(path):
    import netgen

    if not Path(path).exists():
        raise FileNotFoundError(f"{path} (run: bash benchmarks/gpu_check.sh --prepare)")
    return netgen.load(path)


def netgen_topk_loss(n, k, dev):
    """DiffTopK's loss with netgen's cuda layer (the user's call)."""
    from netgen.layers import topk_loss

    return topk_loss(n, [1.0 / k] * k, target="cuda", device=dev)


def table(res, tests_failed):
    if tests_failed is not None:
        res["gpu_tests"] = tests_failed
    print("\n| figure | measured | target | ok |")
    print("|---|---|---|---|")
    for key, figure, target, ok in FIGURES:
        v = res.get(key, "-")
        if isinstance(v, float):
            shown, good = f"{v:.3f}", ("yes" if ok(v) else "NO") if ok else ""
        elif isinstance(v, int):
            shown, good = str(v), ("yes" if ok(v) else "NO") if ok else ""
        else:
            shown, good = str(v), "-"
        print(f"| {figure} | {shown} | {target} | {good} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", default="gpu-modules")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--dry-run", action="store_true", help="print the table without measuring (no GPU needed)")
    ap.add_argument("--tests-summary", default=None, help="pytest's output: its failed count goes in the table")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    failed = None
    if args.tests_summary and Path(args.tests_summary).exists():
        import re

        text = Path(args.tests_summary).read_text()
        m = re.search(r"(\d+) failed", text)
        failed = int(m.group(1)) if m else (0 if re.search(r"\d+ passed", text) else None)
    res = {}
    if not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            print("benchmarks/gpu_check.py: no CUDA GPU here (--dry-run prints the table)", file=sys.stderr)
            return 2
        print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
        measure(Path(args.modules), args.reps, res)
    table(res, failed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
