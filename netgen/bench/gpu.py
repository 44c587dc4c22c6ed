"""The GPU benchmark: every differentiable top-k on one GPU, one table.

    python benchmarks/gpu_bench.py [--B 64 500 4096] [--n 1000 10450] [--k 5] [--reps 20]
    netgen bench --device cuda [--batch 64,500,4096] [--n 1000,10450] [--k 5] [--repeats 20]

Per (B, n, k), in one process, float32 N(0, 1) scores, forward + backward of

* ``netgen-cuda-rows`` / ``netgen-torch-rows``: ``(P * W).sum()`` (the cuda and
  torch targets' layers for the network ``netgen build --n N --k K`` chooses,
  the portfolio, named in the output; default relaxation);
* ``netgen-cuda-column`` / ``netgen-torch-column``: ``(layer.column(x, y) * w).sum()``
  (what the DiffTopK loss computes);
* ``netgen-torch-compiled``: the torch rows step under ``torch.compile(fullgraph=True)``
  (only for B in ``--compile-B``: every new shape compiles again);
* every baseline of :mod:`netgen.relax.baselines` (default temperatures; its
  P, indicator or loss, weighted by a fixed random tensor);
* ``difftopk-splitter``: difftopk's own splitter_selection network and sparse
  executor on the GPU (:mod:`netgen.bench.difftopk_sparse`);
* floors: ``torch.topk`` (values, backward) and softmax cross-entropy.

Time: CUDA events around each step, median of ``reps`` after a warm-up.
Memory: peak ``torch.cuda.max_memory_allocated`` during the steps minus the
memory allocated before them. ``graph``: the same step captured in a CUDA
graph and replayed (netgen layers; ``eager / graph`` is the launch
overhead). ``host``: host time per eager call at B = 1 (the calls are queued
without waiting for the GPU). A method that runs out of GPU memory or takes
longer than ``--budget`` seconds per step is reported and skipped for larger
sizes. ``--device cpu`` runs the same table on the CPU (for checking the
script; no CUDA targets, no graphs).
"""

from __future__ import annotations

import statistics
import time

__all__ = ["all_methods", "gpu_problem", "run_table"]

def _netgen_methods() -> tuple[str, ...]:
    """netgen's GPU methods: rows and column of every target that runs on a
    CUDA device, most preferred first, and the torch rows step compiled."""
    from ..codegen import TARGETS

    on_gpu = sorted((t for t in TARGETS.values() if t.runs_on("cuda")), key=lambda t: -t.preference)
    return tuple(f"netgen-{t.name}-{what}" for t in on_gpu for what in ("rows", "column")) + ("netgen-torch-compiled",)


NETGEN = _netgen_methods()
FLOORS = ("torch.topk", "softmax-ce")


def _baselines():
    from ..relax.baselines import BASELINES

    return tuple(sorted(BASELINES))


def all_methods():
    return list(NETGEN) + list(_baselines()) + ["difftopk-splitter"] + list(FLOORS)


def gpu_problem() -> str | None:
    """Why the GPU table cannot run here (None when it can)."""
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU here (torch.cuda.is_available() is False)"
    return None


class Skip(Exception):
    """The method cannot run in this configuration (the message says why)."""


_NETWORKS = {}  # (n, k) -> the portfolio's network, built once per process


def portfolio(n, k):
    """The network ``netgen build --n n --k k`` chooses (cached per process)."""
    if (n, k) not in _NETWORKS:
        from ..compiler import build

        _NETWORKS[(n, k)] = build(n, k, verify=False).network
    return _NETWORKS[(n, k)]


def _netgen_layer(target, n, k, dev):
    from ..codegen.auto import build_layer
    from ..relax.distributions import default_relaxation

    net = portfolio(n, k)
    return build_layer(net, default_relaxation(net), target).to(dev)


def make_step(method, B, n, k, dev):
    """``(x, step)``: scores (B, n) and ``step(x) -> scalar loss``."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, n, generator=gen).to(dev)
    W = lambda *shape: torch.randn(*shape, generator=gen).to(dev)  # noqa: E731
    y = torch.randint(0, n, (B,), generator=gen).to(dev)
    if method.startswith("netgen-"):
        target = method.split("-")[1]
        from ..codegen import TARGETS

        if not TARGETS[target].runs_on(dev.type):
            raise Skip(f"the {target} target does not run on {dev.type}")
        layer = _netgen_layer(target, n, k, dev)
        if method.endswith("column"):
            w = W(B, k)
            return x, lambda x: (layer.column(x, y) * w).sum()
        Wp = W(B, k, n)
        step = lambda x: (layer(x)[1] * Wp).sum()  # noqa: E731
        if method.endswith("compiled"):
            step = torch.compile(step, fullgraph=True)
        return x, step
    if method == "difftopk-splitter":
        from .difftopk_sparse import splitter_selection

        try:
            run = splitter_selection(n, k, dev)
        except ImportError as e:
            raise Skip(f"difftopk is not installed ({e})") from None
        Wx = W(B, n, k)
        return x, lambda x: (run(x) * Wx).sum()
    if method == "torch.topk":
        w = W(B, k)
        return x, lambda x: (torch.topk(x, k, dim=-1).values * w).sum()
    if method == "softmax-ce":
        return x, lambda x: torch.nn.functional.cross_entropy(x, y)
    from ..relax import baselines

    layer = baselines.get(method, k=k)
    layer = layer.to(dev) if hasattr(layer, "to") else layer
    if layer.kind == "permutation":
        Wp = W(B, k, n)
        return x, lambda x: (layer(x)[1] * Wp).sum()
    if layer.kind == "indicator":
        Wi = W(B, n)
        return x, lambda x: (layer(x) * Wi).sum()
    return x, lambda x: layer(x, y)


class _Clock:
    """Elapsed seconds of ``fn()``: CUDA events on a GPU, perf_counter on CPU."""

    def __init__(self, dev):
        import torch

        self.torch, self.cuda = torch, dev.type == "cuda"

    def times(self, fn, reps):
        torch = self.torch
        if not self.cuda:
            out = []
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t)
            return out
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for a, b in ev:
            a.record()
            fn()
            b.record()
        torch.cuda.synchronize()
        return [a.elapsed_time(b) / 1e3 for a, b in ev]


def _graph_time(step, x, clock, reps):
    """Median replay time of the fwd+bwd step captured in a CUDA graph."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graph asks
        for _ in range(2):
            torch.autograd.grad(step(x), x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        torch.autograd.grad(step(x), x)
    return statistics.median(clock.times(graph.replay, reps))


def _host_time(method, k, n, dev, reps=50):
    """Host seconds per eager fwd+bwd call at B = 1 (calls queued, no waits)."""
    import torch

    x, step = make_step(method, 1, n, k, dev)
    x.requires_grad_(True)
    for _ in range(3):
        torch.autograd.grad(step(x), x)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        torch.autograd.grad(step(x), x)
    host = (time.perf_counter() - t) / reps
    torch.cuda.synchronize()
    return host


def measure(method, B, n, k, dev, reps, graphs):
    """One row of the table (a dict); raises Skip or torch.OutOfMemoryError."""
    import torch

    cuda = dev.type == "cuda"
    clock = _Clock(dev)
    t0 = time.perf_counter()
    x, step = make_step(method, B, n, k, dev)
    x.requires_grad_(True)
    torch.autograd.grad(step(x), x)  # warm-up: compiles kernels, uploads tables
    if cuda:
        torch.cuda.synchronize()
    load_s = time.perf_counter() - t0
    if cuda:
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    times = clock.times(lambda: torch.autograd.grad(step(x), x), reps)
    row = {"method": method, "B": B, "n": n, "k": k, "ms": 1e3 * statistics.median(times), "load_s": load_s}
    if cuda:
        row["gpu_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
        if graphs and method.startswith("netgen-") and not method.endswith("compiled"):
            row["graph_ms"] = 1e3 * _graph_time(step, x, clock, reps)
    return row


def _fmt(v, spec):
    return f"{'-':>{int(spec.split('.')[0])}}" if v is None else format(v, spec)


def run_table(Bs, ns, k, methods, reps=20, device="cuda", compile_B=(500,), graphs=True, budget_s=30.0,
              echo=print):
    """Measure every (B, n, method); print the table as it goes; return the rows."""
    import torch

    dev = torch.device(device)
    cuda = dev.type == "cuda"
    rows, gone = [], {}  # gone: method -> why it is skipped from here on
    methods = sorted(methods, key=lambda m: m != "softsort")  # the reference of the last column first
    echo(f"# {torch.cuda.get_device_name() if cuda else 'CPU'}; torch {torch.__version__}; float32; k = {k}; "
         f"fwd+bwd median of {reps} ({'CUDA events' if cuda else 'perf_counter'})")
    head = f"{'method':<22} {'B':>5} {'n':>6} {'fwd+bwd ms':>10} {'graph ms':>9} {'eager/graph':>11} " \
           f"{'GPU MB':>8} {'load s':>7} {'x softsort':>10}"
    echo(head)
    for n in ns:
        if k <= n and any(m.startswith("netgen-") for m in methods):
            from .networks import describe

            echo(f"# n={n} k={k}: netgen runs the network `netgen build --n {n} --k {k}` chooses: "
                 f"{describe(portfolio(n, k))}")
        for B in Bs:
            if k > n:
                continue
            ref = None
            for method in methods:
                if method in gone:
                    continue
                if method == "netgen-torch-compiled" and B not in compile_B:
                    continue
                try:
                    r = measure(method, B, n, k, dev, reps if method != "difftopk-splitter" else max(3, reps // 5),
                                graphs and cuda)
                except Skip as e:
                    gone[method] = str(e)
                    echo(f"{method:<22} {B:>5} {n:>6}  skipped: {e}")
                    continue
                except torch.OutOfMemoryError:
                    gone[method] = f"out of GPU memory at B={B}, n={n}"
                    echo(f"{method:<22} {B:>5} {n:>6}  out of GPU memory: skipped for larger sizes")
                    torch.cuda.empty_cache()
                    continue
                except Exception as e:  # noqa: BLE001 - report and go on with the others
                    echo(f"{method:<22} {B:>5} {n:>6}  FAILED: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
                    continue
                if r["ms"] > 1e3 * budget_s:
                    gone[method] = f"over {budget_s:.0f} s per step at B={B}, n={n}"
                if method == "softsort":
                    ref = r["ms"]
                rows.append(r)
                g = r.get("graph_ms")
                echo(f"{method:<22} {B:>5} {n:>6} {r['ms']:>10.3f} {_fmt(g, '9.3f')} "
                     f"{_fmt(None if g is None else r['ms'] / g, '11.2f')} {_fmt(r.get('gpu_mb'), '8.1f')} "
                     f"{r['load_s']:>7.1f} {_fmt(None if ref is None else r['ms'] / ref, '10.2f')}")
            if cuda:
                torch.cuda.empty_cache()
    if cuda and any(m.startswith("netgen-") for m in methods):
        for m in (m for m in NETGEN if not m.endswith("compiled")):
            if m in methods and m not in gone:
                try:
                    h = _host_time(m, k, max(ns), dev)
                except Exception as e:  # noqa: BLE001
                    echo(f"# host time {m}: FAILED: {type(e).__name__}: {e}")
                    continue
                echo(f"# host time per eager fwd+bwd call at B = 1, n = {max(ns)}: {m} {1e3 * h:.3f} ms")
                rows.append({"method": m, "B": 1, "n": max(ns), "k": k, "host_ms": 1e3 * h})
    _summary(rows, echo)
    return rows


def _summary(rows, echo):
    """netgen's best vs the fastest baseline, per (B, n)."""
    cells = {}
    for r in rows:
        if "ms" in r:
            cells.setdefault((r["B"], r["n"]), []).append(r)
    for (B, n), rs in sorted(cells.items()):
        ours = [r for r in rs if r["method"].startswith("netgen-")]
        theirs = [r for r in rs if not r["method"].startswith("netgen-") and r["method"] not in FLOORS]
        if not ours or not theirs:
            continue
        a, b = min(ours, key=lambda r: r["ms"]), min(theirs, key=lambda r: r["ms"])
        echo(f"# B={B} n={n}: fastest netgen {a['method']} {a['ms']:.3f} ms, fastest baseline {b['method']} "
             f"{b['ms']:.3f} ms; baseline / netgen = {b['ms'] / a['ms']:.2f} (> 1: netgen is faster)")
