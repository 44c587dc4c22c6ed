"""The figures of issue 29 (and a line per operator of issue 31) on a GPU,
each beside its target, in one table: the python part of
``benchmarks/gpu_check.sh``. The steps that measure are in
``benchmarks/gpu_steps.py``; this file holds the table (its rows, their
targets, the order they are measured in), the step runner, ``--prepare``
and the command line.

    python3 benchmarks/gpu_check.py --prepare [--modules gpu-modules]    # CPU machine with ptxas
    python3 benchmarks/gpu_check.py --modules gpu-modules [--reps 10] [--budget 110]
                                    [--tests-summary FILE] [--host-line FILE]
    python3 benchmarks/gpu_check.py --dry-run [--tests-summary FILE] [--host-line FILE]
    python3 benchmarks/gpu_check.py --rehearse                          # CPU: every step, small

``--prepare`` builds, with their cubins (``netgen.codegen.write_module``,
the build step of ``netgen build --target cuda``; ptxas needed), into
``--modules``: ``topk5.py`` (the (5, 10450) splitter), ``sort1024.py`` and
``sort4096.py`` (odd-even sorters), and under ``tests/`` every module the
GPU tests build (``tests/codegen/cuda/test_gpu.py``'s ``prebuild``; the
tests find them through ``NETGEN_GPU_MODULES``). Carry the folder to the
GPU machine: nothing compiles there.

The measuring run loads those modules with ``netgen.load``. Each figure is
measured in a ``try`` of its own (a failure is ``error: ...`` in its row,
the others still run), most important first, each under an alarm of
``--step-limit`` seconds and all within ``--budget`` seconds (a figure
left out is ``skipped: time budget``): CUDA events (median of ``--reps``
after a warm-up) or, for kernel times, the torch profiler. ``--dry-run``
measures nothing and needs no GPU: it prints the plan and the table with
its rows and targets (tested on CPU machines). ``--rehearse`` runs every
measuring step on the CPU, at ``gpu_steps.REHEARSAL_SIZES`` with small
torch-target modules built into a temporary folder: it checks this
script's code paths (a step that raises is ``error: ...`` in its row, its
traceback on stderr), so that a GPU session is not spent finding a bug
here; its table's ok column says ``rehearsal``, and none of its figures
is a GPU's. The last block is the
table; its format is stable: ``| figure | measured | target | ok |``.
Every GPU figure is measured on the card named above the table; nothing
in it is an estimate.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' helpers
import gpu_steps  # noqa: E402
from gpu_steps import MODS, STEP_FUNCS, StepTimeout, error_text, netgen_load  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _le(t):
    return lambda v: v <= t


#: (key, figure, target text, test of the measured value against the target or None), in table order
FIGURES = [
    ("first_call_errors", "cuda layer first call: rows, values, column (errors)", "0", lambda v: v == 0),
    ("host_stub_rows", "host ms per rows fwd+bwd, launch stubbed (gpu_host.py)", "<= 0.10", _le(0.10)),
    ("host_stub_column", "host ms per column fwd+bwd, launch stubbed (gpu_host.py)", "<= 0.10", _le(0.10)),
    ("host_rows", "host ms per rows fwd+bwd, eager, B = 1", "<= 0.10", _le(0.10)),
    ("host_column", "host ms per column fwd+bwd, eager, B = 1", "<= 0.10", _le(0.10)),
    *[(f"kern_rows_{B}", f"rows kernels ms, B = {B}", f"<= {t}", _le(t)) for B, t in ((64, 0.12), (500, 0.50),
                                                                                        (4096, 4.0))],
    *[(f"kern_column_{B}", f"column kernels ms, B = {B}", f"<= {t}", _le(t)) for B, t in ((64, 0.05), (500, 0.15),
                                                                                            (4096, 1.2))],
    *[(f"user_ratio_{B}", f"user step DiffTopK / CE, B = {B}", "<= 1.5", _le(1.5)) for B in (64, 500, 4096)],
    ("sort1024_ms", "sorting n = 1024, B = 64, rows fwd+bwd ms", "<= SoftSort (3.49 measured)", None),
    ("sort1024_ratio", "  ... / SoftSort same card", "<= 1.0", _le(1.0)),
    ("sort4096_ratio", "sorting n = 4096, B = 16 / SoftSort", "<= 2.0", _le(2.0)),
    ("sort4096_mem", "  ... peak memory / output P", "<= 2.0", _le(2.0)),
    ("first_call_s", "first call s, new process, cubins present", "<= 1.0", _le(1.0)),
    ("torch_rows_500", "torch target rows fwd+bwd ms, B = 500", "<= 5.0 (or auto says why not)", _le(5.0)),
    ("op_soft_rank", "soft_rank fwd+bwd ms, n = 4096, B = 64 (auto)", "< torchsort CUDA", None),
    ("op_soft_rank_ratio", "  ... / torchsort soft_rank same card", "< 1.0", lambda v: v < 1.0),
    ("op_soft_rank_kern", "  ... its lane kernels' device time ms (wp_fwd, wp_bwd, fwd, vals_bwd)",
     "<= 0.42 (Round 8 estimate)", None),
    ("op_soft_sort", "soft_sort fwd+bwd ms, n = 1024, B = 64 (auto)", "-", None),
    ("op_soft_topk", "soft_topk fwd+bwd ms, (5, 10450), B = 64 (auto)", "-", None),
    ("op_topk_mask", "topk_mask fwd+bwd ms, (5, 10450), B = 64 (auto)", "-", None),
    ("gpu_tests", "GPU tests (-m gpu): failed", "0", lambda v: v == 0),
]

#: the measuring order: (step, keys it fills), most important first
STEPS = [
    ("first call", ("first_call_errors",)),
    ("host cost", ("host_rows", "host_column")),
    ("kernels", tuple(k for k, *_ in FIGURES if k.startswith("kern_"))),
    ("first call, new process", ("first_call_s",)),
    ("user step", ("user_ratio_64", "user_ratio_500", "user_ratio_4096")),
    ("torch target", ("torch_rows_500",)),
    ("operators", ("op_soft_rank", "op_soft_rank_ratio", "op_soft_rank_kern", "op_soft_sort", "op_soft_topk",
                   "op_topk_mask")),
    ("sorting 1024", ("sort1024_ms", "sort1024_ratio")),
    ("sorting 4096", ("sort4096_ratio", "sort4096_mem")),
]

#: the modules --prepare builds: file stem -> (construction, n, k)
MODULES = {"topk5": ("splitter", 10450, 5), "sort1024": ("oddeven", 1024, 1024), "sort4096": ("oddeven", 4096, 4096)}
#: the rehearsal's modules (--rehearse: torch target, on the CPU), the same stems
REHEARSAL_MODULES = {"topk5": ("splitter", 40, 3), "sort1024": ("oddeven", 8, 8), "sort4096": ("oddeven", 16, 16)}


def measure(reps, res, budget, step_limit, dev=None):
    """Fill ``res`` step by step (STEPS), within ``budget`` seconds, on
    ``dev`` (the GPU; the CPU in a rehearsal), with the modules in
    ``MODS[0]``."""
    import torch

    dev = dev or torch.device("cuda")
    end = time.monotonic() + budget
    ctx = {}

    def topk():
        if "topk" not in ctx:
            ctx["topk"] = netgen_load(MODS[0] / "topk5.py")
        return ctx["topk"]

    def alarm(signum, frame):
        raise StepTimeout(f"over {step_limit} s")

    signal.signal(signal.SIGALRM, alarm)
    for name, keys in STEPS:
        left = end - time.monotonic()
        if left < 5:
            for key in keys:
                res.setdefault(key, "skipped: time budget")
            continue
        t0 = time.monotonic()
        signal.alarm(max(1, int(min(step_limit, left))))
        try:
            STEP_FUNCS[name](topk, dev, reps, res)
        except Exception as e:  # noqa: BLE001 - reported in the table, the other steps still run
            traceback.print_exc(limit=4, file=sys.stderr)
            for key in keys:
                res.setdefault(key, error_text(e))
        finally:
            signal.alarm(0)
            if dev.type == "cuda":
                torch.cuda.empty_cache()
        print(f"step {name}: {time.monotonic() - t0:.1f} s", flush=True)


def build_modules(folder: Path, modules: dict, target: str, **options) -> None:
    """Write ``modules`` (stem -> (construction, n, k); a splitter pruned
    and packed by the compiler) for ``target`` into ``folder``
    (``write_module``'s ``options``)."""
    from netgen.codegen import write_module
    from netgen.compiler import compile_network
    from netgen.construct import build
    from netgen.relax.distributions import default_relaxation

    folder.mkdir(parents=True, exist_ok=True)
    for stem, (kind, n, k) in modules.items():
        t0 = time.perf_counter()
        net = build(kind, n, k)
        if kind == "splitter":
            net = compile_network(net).network
        write_module(target, net, default_relaxation(net), folder, name=stem, **options)
        print(f"built {stem}.py ({target}) in {time.perf_counter() - t0:.0f} s", flush=True)


def prepare(folder: Path) -> int:
    """Build the modules and their cubins (a CPU machine with ptxas)."""
    import importlib.util

    build_modules(folder, MODULES, "cuda", required=True)
    spec = importlib.util.spec_from_file_location("netgen_test_gpu", ROOT / "tests/codegen/cuda/test_gpu.py")
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    tests.prebuild(folder / "tests")
    return 0


def read_tests_failed(path):
    if not path or not Path(path).exists():
        return None
    text = Path(path).read_text()
    m = re.search(r"(\d+) failed", text)
    errors = re.search(r"(\d+) errors?\b", text)
    if m or errors:
        return (int(m.group(1)) if m else 0) + (int(errors.group(1)) if errors else 0)
    return 0 if re.search(r"\d+ passed", text) else None


def read_host_line(path, res):
    """gpu_host.py's last line (``host ms per fwd+bwd: rows X column Y values Z``)."""
    if not path or not Path(path).exists():
        return
    lines = Path(path).read_text().strip().splitlines()
    m = re.fullmatch(r"host ms per fwd\+bwd: rows (\S+) column (\S+) values (\S+)", lines[-1] if lines else "")
    if m:
        res["host_stub_rows"], res["host_stub_column"] = float(m.group(1)), float(m.group(2))


def rehearse(reps, res, budget, step_limit) -> None:
    """Every step on the CPU at ``gpu_steps.REHEARSAL_SIZES``, with small
    torch-target modules (``REHEARSAL_MODULES``) in a temporary folder."""
    import torch

    gpu_steps.SIZES.clear()
    gpu_steps.SIZES.update(gpu_steps.REHEARSAL_SIZES)
    with tempfile.TemporaryDirectory(prefix="gpu-check-rehearsal-") as tmp:
        folder = Path(tmp)
        build_modules(folder, REHEARSAL_MODULES, "torch")
        MODS[:] = [folder]
        print(f"REHEARSAL on the CPU (torch {torch.__version__}): every step at small sizes with torch-target "
              "modules; it checks this script, it measures no GPU", flush=True)
        measure(reps, res, budget, step_limit, dev=torch.device("cpu"))


def table(res, rehearsal=False):
    print("\n| figure | measured | target | ok |")
    print("|---|---|---|---|")
    for key, figure, target, ok in FIGURES:
        v = res.get(key, "-")
        note = ""
        if isinstance(v, tuple):  # (value, backend)
            v, note = v[0], f" ({v[1]})"
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, (int, float)):
            shown = (f"{v:.3f}" if isinstance(v, float) else str(v)) + note
            good = "rehearsal" if rehearsal else ("yes" if ok(v) else "NO") if ok else ""
        else:
            shown, good = str(v), "-"
        print(f"| {figure} | {shown} | {target} | {good} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", default="gpu-modules")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--budget", type=float, default=110.0, help="seconds for all the measuring steps")
    ap.add_argument("--step-limit", type=float, default=45.0, help="seconds for one step")
    ap.add_argument("--prepare", action="store_true", help="build the modules and cubins (CPU machine, ptxas)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and the table without measuring")
    ap.add_argument("--rehearse", action="store_true",
                    help="run every step on the CPU at small sizes (checks this script; measures no GPU)")
    ap.add_argument("--tests-summary", default=None, help="pytest's output: its failed count goes in the table")
    ap.add_argument("--host-line", default=None, help="gpu_host.py's output: its last line goes in the table")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    MODS[:] = [Path(args.modules)]
    if args.prepare:
        return prepare(Path(args.modules))
    res = {}
    failed = read_tests_failed(args.tests_summary)
    if failed is not None:
        res["gpu_tests"] = failed
    read_host_line(args.host_line, res)
    if args.rehearse:
        rehearse(min(args.reps, 3), res, args.budget, args.step_limit)
        table(res, rehearsal=True)
        return 0
    if args.dry_run:
        have = {stem: (Path(args.modules) / f"{stem}.py").exists() for stem in MODULES}
        print(f"dry run: no GPU used; modules in {args.modules}: "
              + ", ".join(f"{s} {'present' if h else 'missing'}" for s, h in have.items()))
        print(f"plan ({args.budget:.0f} s budget, {args.step_limit:.0f} s per step): "
              + "; ".join(f"{name} -> {', '.join(keys)}" for name, keys in STEPS))
    else:
        import torch

        if not torch.cuda.is_available():
            print("benchmarks/gpu_check.py: no CUDA GPU here (--dry-run prints the table)", file=sys.stderr)
            return 2
        print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
        measure(args.reps, res, args.budget, args.step_limit)
    table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
