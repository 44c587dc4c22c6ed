"""The measuring steps of ``benchmarks/gpu_check.py``: one function per
step of its ``STEPS`` (``STEP_FUNCS``), each filling its keys of the
table's results from a GPU (``step(topk, dev, reps, res)``; ``topk()``
loads the prebuilt (5, 10450) module once). ``kernel_steps`` is the rows
and column fwd+bwd that the kernels step times and
``benchmarks/gpu_profile.py`` profiles; ``netgen_load`` loads a prebuilt
module or says how to build it. Imported by ``gpu_check.py``.

The sizes come from ``SIZES`` (issue 29's); ``gpu_check.py --rehearse``
runs every step on the CPU with ``REHEARSAL_SIZES`` and small torch-target
modules, so that a GPU session's few minutes are not lost to an error in
this script (the CUDA events, the profiler's device times and the memory
counters then read the CPU: nothing it prints is a GPU figure).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' helpers
from measure import cuda_events, interleaved  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: the folder of the prebuilt modules (gpu_check.py's --modules), set by its main
MODS: list[Path] = []


#: the sizes the steps measure at: issue 29's figures
SIZES = {
    "batches": (64, 500, 4096),  # the kernels and the user step
    "head": 512,  # the user step's linear head: features -> classes
    "torch_target": (500, 10450, 5),  # B, n, k
    "ops": {"op_soft_rank": (64, 4096), "op_soft_sort": (64, 1024), "op_soft_topk": (64, 10450),
            "op_topk_mask": (64, 10450)},  # B, n
    "sort": {"sort1024": 64, "sort4096": 16},  # B
    "host_calls": 50,
}
#: the rehearsal's (gpu_check.py --rehearse, on the CPU): every step, small
REHEARSAL_SIZES = {
    "batches": (2, 3, 4),
    "head": 8,
    "torch_target": (3, 40, 3),
    "ops": {"op_soft_rank": (2, 24), "op_soft_sort": (2, 16), "op_soft_topk": (2, 40), "op_topk_mask": (2, 40)},
    "sort": {"sort1024": 2, "sort4096": 2},
    "host_calls": 3,
}


class StepTimeout(Exception):
    pass


def error_text(e: Exception) -> str:
    """What a table row shows for a step (or a figure of one) that raised."""
    return f"error: {type(e).__name__}: {str(e)[:70]}"


def _figure(res, key, measure):
    """``res[key] = measure()``, or its error (a step's other figures still run)."""
    try:
        res[key] = measure()
    except StepTimeout:
        raise
    except Exception as e:  # noqa: BLE001 - shown in the table
        res[key] = error_text(e)


def _sync(dev):
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def timed_ms(step, reps, dev):
    """Median ms of ``step()`` after a warm-up: CUDA events on a GPU
    (``measure.cuda_events``), the wall clock on the CPU (a rehearsal)."""
    if dev.type == "cuda":
        return cuda_events(step, reps)
    step()
    return interleaved({"step": step}, reps)["step"] * 1e3


def kernel_ms(step, reps, names, dev):
    """Median per call of the summed device time of the netgen kernels
    whose names contain one of ``names`` (on the CPU, a rehearsal: the
    CPU time of ops so named, none in a torch-target module: 0)."""
    from torch.profiler import ProfilerActivity, profile

    step()
    cuda = dev.type == "cuda"
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        for _ in range(reps):
            step()
    total = sum(ev.device_time_total if cuda else ev.self_cpu_time_total for ev in prof.key_averages()
                if any(nm in ev.key for nm in names))
    return total / reps / 1000.0


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
    _sync(dev)
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
        calls = SIZES["host_calls"]
        for _ in range(20):
            step()

        def many():
            for _ in range(calls):
                step()

        # host CPU time: the GPU runs behind; it catches up, untimed, before each round
        sec = interleaved({"calls": many}, reps, before=lambda: _sync(dev), clock=time.process_time)["calls"]
        res[f"host_{path}"] = sec / calls * 1e3


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
    for key, B in zip((64, 500, 4096), SIZES["batches"]):
        rows, column = kernel_steps(topk(), B, dev, gen)
        res[f"kern_rows_{key}"] = kernel_ms(rows, reps, ("_fwd_f", "_bwd_f"), dev)
        res[f"kern_column_{key}"] = kernel_ms(column, reps, ("_fwd_col_f", "_bwd_col_f"), dev)
        del rows, column


def step_user(topk, dev, reps, res):
    import torch

    from netgen.relax.loss import TopKCrossEntropyLoss

    mod = topk()
    n, k = mod._N, mod._K
    loss = TopKCrossEntropyLoss(mod.Layer(), [1.0 / k] * k)  # what topk_loss(target="cuda") wraps
    features = SIZES["head"]
    for key, B in zip((64, 500, 4096), SIZES["batches"]):
        head = torch.nn.Linear(features, n).to(dev)
        feats = torch.randn(B, features, device=dev)
        y = torch.randint(0, n, (B,), device=dev)
        ce = timed_ms(lambda: torch.nn.functional.cross_entropy(head(feats), y).backward(), reps, dev)
        ours = timed_ms(lambda: loss(head(feats), y).backward(), reps, dev)
        res[f"user_ratio_{key}"] = ours / ce


def step_first_call_process(topk, dev, reps, res):
    code = ("import logging, sys, time; t0 = time.perf_counter(); import torch, netgen; t1 = time.perf_counter(); "
            "logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format='%%(message)s'); "
            "logging.getLogger('netgen').setLevel(logging.DEBUG); "
            "m = netgen.load(%r); x = torch.randn(%d, m._N, device=%r, requires_grad=True); "
            "torch.autograd.grad(m.Layer()(x)[1].sum(), x); torch.cuda.synchronize() if x.is_cuda else None; "
            "print(t1 - t0, time.perf_counter() - t1)") % (str(MODS[0] / "topk5.py"), SIZES["batches"][0], dev.type)
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

    xt, step = make_step("netgen-torch-rows", *SIZES["torch_target"], dev)
    xt.requires_grad_(True)
    res["torch_rows_500"] = timed_ms(lambda: torch.autograd.grad(step(xt), xt), reps, dev)


def step_operators(topk, dev, reps, res):
    import torch

    from netgen.ops import soft_rank, soft_sort, soft_topk, topk_mask
    from netgen.ops.backends import backend_name

    backend = backend_name("auto", dev)
    few = max(3, reps // 2)
    fns = {"op_soft_rank": lambda x: soft_rank(x), "op_soft_sort": lambda x: soft_sort(x).values,
           "op_soft_topk": lambda x: soft_topk(x, 5).values, "op_topk_mask": lambda x: topk_mask(x, 5)}

    def op_ms(fn, x):
        w = torch.randn_like(fn(x))  # the output's shape: (B, n), or (B, k) for soft_topk's values
        return timed_ms(lambda: torch.autograd.grad((fn(x) * w).sum(), x), few, dev), backend

    for key, fn in fns.items():
        x = torch.randn(*SIZES["ops"][key], device=dev, requires_grad=True)
        _figure(res, key, lambda: op_ms(fn, x))
    B, n = SIZES["ops"]["op_soft_rank"]
    x = torch.randn(B, n, device=dev, requires_grad=True)
    w = torch.randn(B, n, device=dev)
    # the lane kernels of soft_rank (docs/cuda-rounds7-8.md, Round 8), their device time alone
    _figure(res, "op_soft_rank_kern", lambda: kernel_ms(lambda: torch.autograd.grad((soft_rank(x) * w).sum(), x),
                                                       few, ("_wp_fwd_", "_wp_bwd_", "_fwd_f", "_vals_bwd_"), dev))
    try:
        import torchsort
    except ImportError:
        res["op_soft_rank_ratio"] = "torchsort not installed"
        return
    theirs = timed_ms(lambda: torch.autograd.grad((torchsort.soft_rank(x) * w).sum(), x), few, dev)
    if isinstance(res.get("op_soft_rank"), tuple):
        res["op_soft_rank_ratio"] = res["op_soft_rank"][0] / theirs


def _sort_case(name, dev, reps):
    """(ms, ms / SoftSort's, peak memory / the output P) of the sorting
    module ``name``'s rows fwd+bwd at its batch of ``SIZES``."""
    import torch

    from netgen.bench.gpu import make_step

    B = SIZES["sort"][name]
    mod = netgen_load(MODS[0] / f"{name}.py")
    lay, nn = mod.Layer(), mod._N
    xs = torch.randn(B, nn, device=dev, requires_grad=True)
    Ws = torch.randn(B, nn, nn, device=dev)
    _sync(dev)
    cuda = dev.type == "cuda"  # the CPU (a rehearsal) has no allocator counters: memory 0
    base = torch.cuda.memory_allocated(dev) if cuda else 0
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    few = max(3, reps // 2)
    ours = timed_ms(lambda: torch.autograd.grad((lay(xs)[1] * Ws).sum(), xs), few, dev)
    mem = ((torch.cuda.max_memory_allocated(dev) if cuda else 0) - base) / (4 * B * nn * nn)
    del Ws
    xb, soft = make_step("softsort", B, nn, nn, dev)
    xb.requires_grad_(True)
    theirs = timed_ms(lambda: torch.autograd.grad(soft(xb), xb), few, dev)
    return ours, ours / theirs, mem


def step_sort1024(topk, dev, reps, res):
    res["sort1024_ms"], res["sort1024_ratio"], _ = _sort_case("sort1024", dev, reps)


def step_sort4096(topk, dev, reps, res):
    _, res["sort4096_ratio"], res["sort4096_mem"] = _sort_case("sort4096", dev, reps)


STEP_FUNCS = {"first call": step_first_call, "host cost": step_host, "kernels": step_kernels,
              "first call, new process": step_first_call_process, "user step": step_user,
              "torch target": step_torch_target, "operators": step_operators, "sorting 1024": step_sort1024,
              "sorting 4096": step_sort4096}


def netgen_load(path):
    import netgen

    if not Path(path).exists():
        raise FileNotFoundError(f"{path} (run: bash benchmarks/gpu_check.sh --prepare)")
    return netgen.load(path)
