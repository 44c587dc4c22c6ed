"""The torch target's P engine (issue 18) on the CPU: time and peak memory of
the generated torch module before (``--old-ref``, default 1892644: the
backward kept the back-sweep's differences, B x size x k floats) and after
(this checkout), forward+backward of ``(P * W).sum()``, float32.

    python benchmarks/torch_memory.py [--threads 2] [--reps N] [--old-ref 1892644] [--cases sort256,...]
        [--no-old]

Cases (B = 64, relaxation cauchy, steepness 10): sorting n = 256 and 1024
with the odd-even merge sorter (``netgen.construct.build("oddeven", n, n)``)
and top-5 of 10450 with the splitter network (``build("splitter", 10450,
5)``). Each (case, module) runs in a FRESH process, old and new in turn:
load the module, one untimed call, then ``--reps`` timed calls (default:
21 top-5, 11 sort256, 3 sort1024: the old sort1024 takes minutes); it reports
their median and fastest wall time, the median CPU time of the process
(``time.process_time``: on a shared machine, time spent waiting for a core
is not counted), the peak RSS during the timed calls (VmHWM, reset after
the untimed call where the kernel allows it; see ``_rss.py``) and the
working memory (that peak minus the RSS before the timed calls).

"old" = the torch module emitted by netgen at ``--old-ref``, extracted with
``git archive`` into a temporary folder and emitted there in a subprocess.
Modules are written to ``$TMPDIR/netgen_bench_torch_memory``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = {  # name: (kind, n, k, B, timed calls unless --reps)
    "sort256": ("oddeven", 256, 256, 64, 11),
    "sort1024": ("oddeven", 1024, 1024, 64, 3),
    "top5of10450": ("splitter", 10450, 5, 64, 21),
}
WORK = Path(tempfile.gettempdir()) / "netgen_bench_torch_memory"
EMIT = (
    "import sys; from pathlib import Path\n"
    "from netgen.codegen import emit\nfrom netgen.construct import build\n"
    "from netgen.relax.distributions import Relaxation\n"
    "kind, n, k = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])\n"
    "src = emit('torch', build(kind, n, k), Relaxation('cauchy', steepness=10.0))\n"
    "p = Path(sys.argv[1])\n"
    "if not p.exists() or p.read_text() != src: p.write_text(src)\n"
)


def module_path(which: str, case: str, old_ref: str) -> Path:
    """Emit (once) the torch module of ``case`` with this checkout (``new``)
    or with netgen at ``old_ref`` (``old``); return its path."""
    kind, n, k, _, _ = CASES[case]
    out = WORK / (which if which == "new" else f"old_{old_ref}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{case}.py"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if which == "old":
        tree = WORK / f"tree_{old_ref}"
        if not (tree / "netgen").is_dir():
            tree.mkdir(parents=True, exist_ok=True)
            arch = subprocess.run(["git", "-C", str(ROOT), "archive", old_ref, "netgen"], capture_output=True,
                                  check=True)
            subprocess.run(["tar", "-x", "-C", str(tree)], input=arch.stdout, check=True)
        env["PYTHONPATH"] = str(tree)
    subprocess.run([sys.executable, "-c", EMIT, str(path), kind, str(n), str(k)], env=env, check=True,
                   cwd=str(env["PYTHONPATH"]))
    return path


def run_one(path: str, case: str, threads: int, reps: int) -> dict:
    """In a fresh process: time and memory of fwd+bwd of the module at path."""
    sys.path.insert(0, str(HERE))
    import _rss
    import torch

    from netgen.codegen.cache import load

    torch.set_num_threads(threads)
    _, n, k, B, _ = CASES[case]
    mod = load(path)
    layer = mod.Layer()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, generator=g).requires_grad_(True)
    W = torch.randn(B, k, n, generator=g)

    def step():
        (layer(x)[1] * W).sum().backward()
        x.grad = None

    step()  # untimed: first touch of every buffer
    cpu = []

    def timed():
        c = time.process_time()
        step()
        cpu.append(time.process_time() - c)

    times, work, reset = _rss.measure(timed, reps)
    return {"median": statistics.median(times), "fastest": min(times), "cpu": statistics.median(cpu),
            "peak": _rss.status("VmHWM"), "work": work, "reset": reset,
            "mode": getattr(mod, "_MODE", "save (no engine)")}


def _ms(s: float) -> str:
    return f"{s * 1e3:,.1f} ms" if s < 1 else f"{s:,.2f} s"


def _mb(b: int) -> str:
    return f"{b / 2**20:,.0f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--old-ref", default="1892644")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--no-old", action="store_true")
    ap.add_argument("--_run", nargs=2, metavar=("PATH", "CASE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threads < 1 or (args.reps is not None and args.reps < 1):
        ap.error("--threads and --reps must be >= 1")
    if args._run:
        reps = args.reps or CASES[args._run[1]][4]
        print("RESULT " + json.dumps(run_one(args._run[0], args._run[1], args.threads, reps)), flush=True)
        return
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"unknown case(s) {', '.join(bad)}; choose from {', '.join(CASES)}")
    which = ["new"] if args.no_old else ["old", "new"]

    import torch
    from netgen.bench.networks import cpu_model

    print(f"CPU: {cpu_model()}, {os.cpu_count()} CPUs; torch {torch.__version__}, {args.threads} torch thread(s); "
          f"float32, fwd+bwd of (P * W).sum(), one untimed call then the median of the timed ones "
          f"({args.reps or 'per case: ' + ', '.join(f'{c} {CASES[c][4]}' for c in cases)}) in a fresh process per "
          f"(case, module); old = netgen at {args.old_ref}; load average at start {os.getloadavg()[0]:.1f}",
          flush=True)
    rows = []
    for case in cases:
        kind, n, k, B, _ = CASES[case]
        res = {}
        for w in which:
            path = module_path(w, case, args.old_ref)
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--_run", str(path), case,
                                "--threads", str(args.threads)] + (["--reps", str(args.reps)] if args.reps else []),
                               capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            if p.returncode or not line:
                res[w] = {"error": (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]}
                print(f"  {case} {w}: failed: {res[w]['error']}", flush=True)
                continue
            res[w] = r = json.loads(line[0][len("RESULT "):])
            print(f"  {case} {w} ({r['mode']}): median {_ms(r['median'])}, fastest {_ms(r['fastest'])}, "
                  f"cpu {_ms(r['cpu'])}; peak RSS {_mb(r['peak'])}, working {_mb(r['work'])}"
                  f"{'' if r['reset'] else ' (peak not reset: includes loading)'}; "
                  f"{time.perf_counter() - t0:.0f} s in all, load {os.getloadavg()[0]:.1f}", flush=True)
        rows.append((case, kind, n, k, B, res))
    print()
    print("| case | B | old median | new median | new/old | old cpu | new cpu | old peak RSS | new peak RSS "
          "| old working | new working |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case, kind, n, k, B, res in rows:
        o, nw = res.get("old", {}), res.get("new", {})

        def cell(r, key, fmt):
            return fmt(r[key]) if key in r else ("failed" if "error" in r else "-")

        ratio = f"{nw['median'] / o['median']:.3f}" if "median" in o and "median" in nw else "-"
        print(f"| {case} | {B} | {cell(o, 'median', _ms)} | {cell(nw, 'median', _ms)} | {ratio} | "
              f"{cell(o, 'cpu', _ms)} | {cell(nw, 'cpu', _ms)} | {cell(o, 'peak', _mb)} | {cell(nw, 'peak', _mb)} | "
              f"{cell(o, 'work', _mb)} | {cell(nw, 'work', _mb)} |", flush=True)
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
