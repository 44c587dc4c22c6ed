"""Sorting and top-5 on the CPU: netgen's numba rows path (this checkout's
kernels and the kernels before issue 18, built from git) vs SoftSort,
NeuralSort (netgen.relax.baselines) and diffsort (its odd_even network),
forward+backward with ``(P * W).sum()``, float32.

    python benchmarks/sorting_cpu.py [--threads 2] [--reps 5] [--old-ref 8cf6035] [--cases sort32,...]
        [--no-rss] [--no-old] [--no-diffsort]

Cases: sorting n = 32, 256, 1024 (B = 64) and 2048, 4096 (B = 16) with the
odd-even merge sorter (``netgen.construct.build("oddeven", n, n)``), and
top-5 of 10450 (B = 64) with the portfolio/splitter network
(``build("splitter", 10450, 5)``); relaxation cauchy, steepness 10
(SoftSort / NeuralSort: tau 1; diffsort: cauchy, steepness 10).

Per case, one process times every method side by side: after a warm-up
calls of each (``WARMUP``: compiling or loading numba's cache), ``--reps`` rounds
(at least ``SHORT_REPS`` where every step is under ``SHORT_STEP``) call each
method once in a random order (interleaved, so a shared machine's noise spreads
over all of them); the table gives medians and new/old and new/SoftSort
ratios, and new/old of the fastest calls (on a loaded machine the medians
of small cases measure scheduling stalls more than the code) and of the
means (what a training loop pays: stalls included). Then each (case, method) runs again in a FRESH process (one warm-up
call, then two timed calls) for its peak RSS (VmHWM: everything the process
ever held, loading included) and working memory (peak minus RSS after
loading).

"old" = the numba module emitted by netgen at ``--old-ref`` (default
8cf6035, the kernels before issue 18), extracted with ``git archive`` into a
temporary folder and emitted there in a subprocess (``--old-ref 1892644``:
the engine with the back-sweep only, before the forward direction). Skipped
where known not to fit or finish: old (8cf6035) at n >= 2048 (13.3 GB at n = 2048 B = 16, ~4x
that at 4096: this machine has 24 GB), diffsort at n >= 256 (14.8 s per
pass at n = 256 on a quiet machine, 236 s at load ~10; its cost grows ~n^3), diffsort at top-5 (a
sorter, not a selection network). Modules are built once into
``$TMPDIR/netgen_bench_sorting`` and reused (numba's on-disk cache).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from netgen.bench.networks import cpu_model  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = {  # name: (kind, n, k, B)
    "sort32": ("oddeven", 32, 32, 64),
    "sort256": ("oddeven", 256, 256, 64),
    "sort1024": ("oddeven", 1024, 1024, 64),
    "sort2048": ("oddeven", 2048, 2048, 16),
    "sort4096": ("oddeven", 4096, 4096, 16),
    "top5of10450": ("splitter", 10450, 5, 64),
}
METHODS = ("new", "old", "softsort", "neuralsort", "diffsort")
WORK = Path(tempfile.gettempdir()) / "netgen_bench_sorting"
# untimed calls per method first: the new module runs its parallel kernels,
# then (third call) its serial copies once each, compiling both before timing
WARMUP = 5
SHORT_STEP, SHORT_REPS = 0.05, 101  # cases whose every step takes < 50 ms run at least 101 rounds


#: refs whose kernels save B x nnz floats (before issue 18's engine)
SAVES_B_NNZ = ("8cf6035",)


def skip_reason(method, case, old_ref="8cf6035"):
    kind, n, k, B = CASES[case]
    if method == "old" and n >= 2048 and kind == "oddeven" and old_ref in SAVES_B_NNZ:
        return "old kernels: B x nnz saved floats do not fit 24 GB (13.3 GB at n = 2048)"
    if method == "diffsort" and kind != "oddeven":
        return "diffsort sorts; not a top-k selection"
    if method == "diffsort" and n >= 256:
        return "diffsort: minutes per pass (n = 256: 14.8 s quiet, 236 s measured at load ~10)"
    return None


def _relaxation():
    from netgen.relax.distributions import Relaxation

    return Relaxation("cauchy", steepness=10.0)


def module_path(which, case, old_ref):
    """Build (once) the numba module of ``case`` for this checkout (``new``)
    or for ``old_ref`` (``old``); return its path."""
    kind, n, k, B = CASES[case]
    out = WORK / (which if which == "new" else f"old_{old_ref}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{case}.py"
    if which == "new":
        from netgen.codegen import emit
        from netgen.construct import build

        src = emit("numba", build(kind, n, k), _relaxation())
        if not path.exists() or path.read_text() != src:
            path.write_text(src)
        return path
    tree = WORK / f"tree_{old_ref}"
    if not (tree / "netgen").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        arch = subprocess.run(["git", "-C", str(ROOT), "archive", old_ref, "netgen"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=arch.stdout, check=True)
    code = (
        "import sys; from pathlib import Path\n"
        "from netgen.codegen import emit\nfrom netgen.construct import build\n"
        "from netgen.relax.distributions import Relaxation\n"
        f"src = emit('numba', build({kind!r}, {n!r}, {k!r}), Relaxation('cauchy', steepness=10.0))\n"
        "p = Path(sys.argv[1])\n"
        "if not p.exists() or p.read_text() != src: p.write_text(src)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tree))
    subprocess.run([sys.executable, "-c", code, str(path)], env=env, check=True, cwd=str(tree))
    return path


def make_step(method, case, old_ref, threads):
    """A zero-argument fwd+bwd step for (method, case) and its inputs."""
    import torch

    kind, n, k, B = CASES[case]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, generator=g).requires_grad_(True)
    W = torch.randn(B, k, n, generator=g)
    if method in ("new", "old"):
        from netgen import load

        layer = load(module_path(method, case, old_ref)).Layer()
        fn = lambda: layer(x)[1]  # noqa: E731
    elif method == "softsort":
        from netgen.relax.baselines.softsort import softsort

        fn = lambda: softsort(x, k, 1.0)[1]  # noqa: E731
    elif method == "neuralsort":
        from netgen.relax.baselines.neuralsort import neuralsort

        fn = lambda: neuralsort(x, k, 1.0)[1]  # noqa: E731
    else:
        from diffsort import DiffSortNet

        net = DiffSortNet("odd_even", n, steepness=10.0, distribution="cauchy")
        # diffsort's X[..., c, j] is netgen's P[..., n-1-j, c]; same loss up to a fixed permutation of W
        Wd = W.transpose(1, 2).flip(-1).contiguous()
        return (lambda: ((net(x)[1] * Wd).sum().backward(), setattr(x, "grad", None))), x
    return (lambda: ((fn() * W).sum().backward(), setattr(x, "grad", None))), x


def _configure(threads):
    import numba
    import torch

    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


def run_rss(method, case, old_ref, threads):
    """In a fresh process: peak RSS and working memory of (method, case)."""
    sys.path.insert(0, str(HERE))
    import measure

    _configure(threads)
    step, _ = make_step(method, case, old_ref, threads)
    step()  # warm-up: compile / load, first-touch buffers
    times, work, reset = measure.measure(step, 2)
    return {"peak": measure.status("VmHWM"), "work": work, "reset": reset, "time": statistics.median(times)}



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--old-ref", default="8cf6035")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--no-rss", action="store_true")
    ap.add_argument("--no-old", action="store_true")
    ap.add_argument("--no-diffsort", action="store_true")
    ap.add_argument("--_rss", nargs=2, metavar=("METHOD", "CASE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._rss:
        print("RSS " + json.dumps(run_rss(args._rss[0], args._rss[1], args.old_ref, args.threads)))
        return
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"unknown case(s) {', '.join(bad)}; choose from {', '.join(CASES)}")
    if args.threads < 1 or args.reps < 1:
        ap.error("--threads and --reps must be >= 1")
    methods = [m for m in METHODS if not (m == "old" and args.no_old) and not (m == "diffsort" and args.no_diffsort)]

    import numba
    import torch

    _configure(args.threads)
    print(f"CPU: {cpu_model()}, {os.cpu_count()} CPUs; torch {torch.__version__}, numba {numba.__version__}; "
          f"{args.threads} threads (torch and numba); float32, fwd+bwd of (P * W).sum(), median of {args.reps} "
          f"interleaved rounds; old = netgen at {args.old_ref}; load average at start "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    for case in cases:
        kind, n, k, B = CASES[case]
        steps, skipped, slowest = {}, {}, 0.0
        for m in methods:
            why = skip_reason(m, case, args.old_ref)
            if why:
                skipped[m] = why
                continue
            t0 = time.perf_counter()
            steps[m], _ = make_step(m, case, args.old_ref, args.threads)
            for _ in range(WARMUP):  # compiles numba kernels or loads them from the cache (new: both copies)
                t1 = time.perf_counter()
                steps[m]()
            slowest = max(slowest, time.perf_counter() - t1)
            print(f"  {case} {m}: ready in {time.perf_counter() - t0:.1f} s", flush=True)
        reps = args.reps
        if slowest < SHORT_STEP:
            reps = max(reps, SHORT_REPS)  # a millisecond step: a median of 5 is noise (sort32: 0.55 or 1.34 ms)
        if "diffsort" in steps and n >= 256:
            reps = min(reps, 2)  # ~15 s per diffsort pass at n = 256
        times = _interleaved(steps, reps)
        med = {m: statistics.median(ts) for m, ts in times.items()}
        fastest = {m: min(ts) for m, ts in times.items()}
        mean = {m: statistics.fmean(ts) for m, ts in times.items()}
        del steps
        mem = {}
        if not args.no_rss:
            for m in med:
                p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--_rss", m, case,
                                    "--old-ref", args.old_ref, "--threads", str(args.threads)],
                                   capture_output=True, text=True)
                line = [ln for ln in p.stdout.splitlines() if ln.startswith("RSS ")]
                mem[m] = json.loads(line[0][4:]) if p.returncode == 0 and line else {"error": p.stderr[-300:]}
        print(f"  {case}: median of {reps} rounds", flush=True)
        rows.append((case, kind, n, k, B, med, mem, skipped, fastest, mean))
        _print_case(rows[-1])
    print()
    _print_table(rows, methods)


def _interleaved(steps, reps):
    """Seconds of each ``steps[name]()`` over ``reps`` rounds, one call of
    every step per round (a shared machine's noise spreads over all), in a
    new random order each round (seeded): a call right after torch's own
    parallel ops pays for torch's spinning OpenMP threads (sort n = 32:
    1.26 ms right after diffsort, 0.82 ms after NeuralSort, same kernels),
    so no method may always follow the same one -- as a rotation of one
    fixed order would have it."""
    times = {name: [] for name in steps}
    names = list(steps)
    order = random.Random(0)
    for _ in range(reps):
        order.shuffle(names)
        for name in names:
            step = steps[name]
            t = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - t)
    return times


def _fmt_ms(s):
    if s < 0.01:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e3:,.1f} ms" if s < 10 else f"{s:,.2f} s"


def _fmt_mem(d):
    if not d:
        return ""
    if "error" in d:
        return "failed"
    return f"{d['peak'] / 2**30:.2f} GB"


def _print_case(row):
    case, kind, n, k, B, med, mem, skipped, fastest, mean = row
    print(f"{case}: {kind} n={n} k={k} B={B} (median, fastest, mean)", flush=True)
    for m, s in med.items():
        extra = ""
        if mem.get(m) and "error" not in mem[m]:
            extra = f"  peak RSS {mem[m]['peak'] / 2**20:,.0f} MB (working {mem[m]['work'] / 2**20:,.0f} MB)"
        elif mem.get(m):
            extra = f"  RSS run failed: {mem[m]['error'].strip().splitlines()[-1:]}"
        print(f"    {m:<11} {_fmt_ms(s):>12} {_fmt_ms(fastest[m]):>12} {_fmt_ms(mean[m]):>12}{extra}", flush=True)
    for m, why in skipped.items():
        print(f"    {m:<11} skipped: {why}", flush=True)


def _print_table(rows, methods):
    hdr = ("| case | B | " + " | ".join(methods)
           + " | new/old | new/old (fastest) | new/old (mean) | new/SoftSort | peak RSS new | peak RSS old |")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for case, kind, n, k, B, med, mem, skipped, fastest, mean in rows:
        cells = [_fmt_ms(med[m]) if m in med else "skipped" for m in methods]
        no = f"{med['new'] / med['old']:.2f}" if "new" in med and "old" in med else "-"
        nof = f"{fastest['new'] / fastest['old']:.2f}" if "new" in med and "old" in med else "-"
        nom = f"{mean['new'] / mean['old']:.2f}" if "new" in med and "old" in med else "-"
        ns = f"{med['new'] / med['softsort']:.2f}" if "new" in med and "softsort" in med else "-"
        print(f"| {case} | {B} | " + " | ".join(cells)
              + f" | {no} | {nof} | {nom} | {ns} | {_fmt_mem(mem.get('new'))} | {_fmt_mem(mem.get('old'))} |", flush=True)


if __name__ == "__main__":
    main()
