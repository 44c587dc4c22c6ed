"""The figures of issue 29 (and a line per operator of issue 31) on a GPU,
each beside its target, in one table: the python part of
``benchmarks/gpu_check.sh``.

    python3 benchmarks/gpu_check.py --prepare [--modules gpu-modules]    # CPU machine with ptxas
    python3 benchmarks/gpu_check.py --modules gpu-modules [--reps 10] [--budget 110]
                                    [--tests-summary FILE] [--host-line FILE]
    python3 benchmarks/gpu_check.py --dry-run [--tests-summary FILE] [--host-line FILE]

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
its rows and targets (tested on CPU machines). The last block is the
table; its format is stable: ``| figure | measured | target | ok |``.
Every GPU figure is measured on the card named above the table; nothing
in it is an estimate.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' helpers
from measure import cuda_events  # noqa: E402

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


class StepTimeout(Exception):
    pass


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


def measure(mods, reps, res, budget, step_limit):
    """Fill ``res`` step by step (STEPS), within ``budget`` seconds."""
    import torch

    dev = torch.device("cuda")
    end = time.monotonic() + budget
    ctx = {}

    def topk():
        if "topk" not in ctx:
            ctx["topk"] = netgen_load(mods / "topk5.py")
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
            for key in keys:
                res.setdefault(key, f"error: {type(e).__name__}: {str(e)[:70]}")
        finally:
            signal.alarm(0)
            torch.cuda.empty_cache()
        print(f"step {name}: {time.monotonic() - t0:.1f} s", flush=True)


def step_first_call(topk, dev, reps, res):
    import torch

    mod = topk()
    layer = mod.Layer()
    x = torch.randn(3, mod._N, device=dev, requires_grad=True)
    errors = 0
    for fn in (lambda: sum(t.sum() for t in layer(x)), lambda: layer.values(x).sum(),
               lambda: layer.column(x, torch.zeros(3, dtype=torch.int64, device=dev)).sum()):
        try:
            fn().backward()
        except Exception as e:  # noqa: BLE001
            errors += 1
            print(f"first call: {type(e).__name__}: {e}", file=sys.stderr)
    torch.cuda.synchronize()
    res["first_call_errors"] = errors


def step_host(topk, dev, reps, res):
    import torch

    mod = topk()
    layer, n, k = mod.Layer(), mod._N, mod._K
    x = torch.randn(1, n, device=dev, requires_grad=True)
    y = torch.zeros(1, dtype=torch.int64, device=dev)
    gv, gP = torch.randn(1, k, device=dev), torch.randn(1, k, n, device=dev)
    for path in ("rows", "column"):
        step = (lambda: torch.autograd.backward(layer(x), (gv, gP))) if path == "rows" else \
            (lambda: torch.autograd.backward(layer.column(x, y), gv))
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        t = []
        for _ in range(reps):
            c0 = time.process_time()
            for _ in range(50):
                step()
            t.append((time.process_time() - c0) / 50 * 1e3)  # host CPU time: the GPU runs behind
            torch.cuda.synchronize()
        res[f"host_{path}"] = statistics.median(t)


def kernel_steps(mod, B, dev, gen):
    """(rows, column): one fwd+bwd each of ``mod``'s layer on B random rows
    (the rows: values and P, dL/dx from a random dL/dP; the column at
    random labels), the inputs made once from ``gen``. The kernels step
    and ``gpu_profile.py`` run these."""
    import torch

    layer, n, k = mod.Layer(), mod._N, mod._K
    x = torch.randn(B, n, generator=gen).to(dev).requires_grad_(True)
    W = torch.randn(B, k, n, generator=gen).to(dev)
    y = torch.randint(0, n, (B,), generator=gen).to(dev)
    w = torch.randn(B, k, generator=gen).to(dev)
    return (lambda: torch.autograd.grad((layer(x)[1] * W).sum(), x),
            lambda: torch.autograd.grad((layer.column(x, y) * w).sum(), x))


def step_kernels(topk, dev, reps, res):
    import torch

    gen = torch.Generator().manual_seed(0)
    for B in (64, 500, 4096):
        rows, column = kernel_steps(topk(), B, dev, gen)
        res[f"kern_rows_{B}"] = kernel_ms(rows, reps, ("_fwd_f", "_bwd_f"))
        res[f"kern_column_{B}"] = kernel_ms(column, reps, ("_fwd_col_f", "_bwd_col_f"))
        del rows, column


def step_user(topk, dev, reps, res):
    import torch

    from netgen.relax.loss import TopKCrossEntropyLoss

    mod = topk()
    n, k = mod._N, mod._K
    loss = TopKCrossEntropyLoss(mod.Layer(), [1.0 / k] * k)  # what topk_loss(target="cuda") wraps
    for B in (64, 500, 4096):
        head = torch.nn.Linear(512, n).to(dev)
        feats = torch.randn(B, 512, device=dev)
        y = torch.randint(0, n, (B,), device=dev)
        ce = cuda_events(lambda: torch.nn.functional.cross_entropy(head(feats), y).backward(), reps)
        ours = cuda_events(lambda: loss(head(feats), y).backward(), reps)
        res[f"user_ratio_{B}"] = ours / ce


def step_first_call_process(topk, dev, reps, res):
    code = ("import logging, sys, time; t0 = time.perf_counter(); import torch, netgen; t1 = time.perf_counter(); "
            "logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format='%%(message)s'); "
            "logging.getLogger('netgen').setLevel(logging.DEBUG); "
            "m = netgen.load(%r); x = torch.randn(64, m._N, device='cuda', requires_grad=True); "
            "torch.autograd.grad(m.Layer()(x)[1].sum(), x); torch.cuda.synchronize(); "
            "print(t1 - t0, time.perf_counter() - t1)") % str(MODS[0] / "topk5.py")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    phases = [line for line in out.stderr.splitlines() if line.startswith("netgen")]
    print("first call in a new process, the netgen logger at DEBUG:", *phases[:40], sep="\n  ", flush=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed")
    import_s, first = (float(v) for v in out.stdout.split()[-2:])
    print(f"new process: import torch + netgen {import_s:.2f} s, then load + first fwd+bwd {first:.2f} s",
          flush=True)
    res["first_call_s"] = first


def step_torch_target(topk, dev, reps, res):
    import torch

    from netgen.bench.gpu import make_step

    xt, step = make_step("netgen-torch-rows", 500, 10450, 5, dev)
    xt.requires_grad_(True)
    res["torch_rows_500"] = cuda_events(lambda: torch.autograd.grad(step(xt), xt), reps)


def step_operators(topk, dev, reps, res):
    import torch

    from netgen.ops import soft_rank, soft_sort, soft_topk, topk_mask
    from netgen.ops.backends import backend_name

    backend = backend_name("auto", dev)
    cases = (("op_soft_rank", 64, 4096, lambda x: soft_rank(x)),
             ("op_soft_sort", 64, 1024, lambda x: soft_sort(x).values),
             ("op_soft_topk", 64, 10450, lambda x: soft_topk(x, 5).values),
             ("op_topk_mask", 64, 10450, lambda x: topk_mask(x, 5)))
    for key, B, n, fn in cases:
        x = torch.randn(B, n, device=dev, requires_grad=True)
        w = torch.randn(B, n, device=dev)
        try:
            res[key] = (cuda_events(lambda: torch.autograd.grad((fn(x) * w).sum(), x), max(3, reps // 2)), backend)
        except StepTimeout:
            raise
        except Exception as e:  # noqa: BLE001
            res[key] = f"error: {type(e).__name__}: {str(e)[:70]}"
    try:  # the lane kernels of soft_rank (docs/cuda-rounds7-8.md, Round 8), their device time alone
        x = torch.randn(64, 4096, device=dev, requires_grad=True)
        w = torch.randn(64, 4096, device=dev)
        res["op_soft_rank_kern"] = kernel_ms(lambda: torch.autograd.grad((soft_rank(x) * w).sum(), x),
                                             max(3, reps // 2), ("_wp_fwd_", "_wp_bwd_", "_fwd_f", "_vals_bwd_"))
    except StepTimeout:
        raise
    except Exception as e:  # noqa: BLE001
        res["op_soft_rank_kern"] = f"error: {type(e).__name__}: {str(e)[:70]}"
    try:
        import torchsort
    except ImportError:
        res["op_soft_rank_ratio"] = "torchsort not installed"
        return
    x = torch.randn(64, 4096, device=dev, requires_grad=True)
    w = torch.randn(64, 4096, device=dev)
    theirs = cuda_events(lambda: torch.autograd.grad((torchsort.soft_rank(x) * w).sum(), x), max(3, reps // 2))
    if isinstance(res.get("op_soft_rank"), tuple):
        res["op_soft_rank_ratio"] = res["op_soft_rank"][0] / theirs


def _sort_case(name, B, reps):
    import torch

    from netgen.bench.gpu import make_step

    mod = netgen_load(MODS[0] / f"{name}.py")
    lay, nn = mod.Layer(), mod._N
    xs = torch.randn(B, nn, device="cuda", requires_grad=True)
    Ws = torch.randn(B, nn, nn, device="cuda")
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    ours = cuda_events(lambda: torch.autograd.grad((lay(xs)[1] * Ws).sum(), xs), max(3, reps // 2))
    mem = (torch.cuda.max_memory_allocated() - base) / (4 * B * nn * nn)
    del Ws
    xb, soft = make_step("softsort", B, nn, nn, torch.device("cuda"))
    xb.requires_grad_(True)
    theirs = cuda_events(lambda: torch.autograd.grad(soft(xb), xb), max(3, reps // 2))
    return ours, ours / theirs, mem


def step_sort1024(topk, dev, reps, res):
    res["sort1024_ms"], res["sort1024_ratio"], _ = _sort_case("sort1024", 64, reps)


def step_sort4096(topk, dev, reps, res):
    _, res["sort4096_ratio"], res["sort4096_mem"] = _sort_case("sort4096", 16, reps)


STEP_FUNCS = {"first call": step_first_call, "host cost": step_host, "kernels": step_kernels,
              "first call, new process": step_first_call_process, "user step": step_user,
              "torch target": step_torch_target, "operators": step_operators, "sorting 1024": step_sort1024,
              "sorting 4096": step_sort4096}
MODS: list[Path] = []


def netgen_load(path):
    import netgen

    if not Path(path).exists():
        raise FileNotFoundError(f"{path} (run: bash benchmarks/gpu_check.sh --prepare)")
    return netgen.load(path)


def prepare(folder: Path) -> int:
    """Build the modules and their cubins (a CPU machine with ptxas)."""
    import importlib.util

    from netgen.codegen import write_module
    from netgen.compiler import compile_network
    from netgen.construct import build
    from netgen.relax.distributions import default_relaxation

    folder.mkdir(parents=True, exist_ok=True)
    for stem, (kind, n, k) in MODULES.items():
        t0 = time.perf_counter()
        net = build(kind, n, k)
        if kind == "splitter":
            net = compile_network(net).network
        write_module("cuda", net, default_relaxation(net), folder, name=stem, required=True)
        print(f"built {stem}.py with its cubins in {time.perf_counter() - t0:.0f} s", flush=True)
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


def table(res):
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
            good = ("yes" if ok(v) else "NO") if ok else ""
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
        measure(Path(args.modules), args.reps, res, args.budget, args.step_limit)
    table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
