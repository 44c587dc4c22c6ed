"""One benchmark configuration in its own process:

    python -m netgen.bench.worker '{"method": "lapsum", "B": 64, "n": 1024, "k": 5, ...}'

prints one JSON object (the last line of stdout) with ``status`` ``ok``,
``skipped`` (with ``reason``) or ``error`` (with ``reason``) and, when ok:

* ``t_fwd_ms``, ``t_fwdbwd_ms``: medians over ``repeats`` timed runs after
  ``warmup`` untimed ones (forward with the autograd graph built; forward
  plus backward of a fixed random linear functional of the outputs);
* ``peak_mem_mb``: CPU: the peak rise of the process RSS during one
  forward+backward after warm-up (heap trimmed first, sampled every ms by a
  thread: a lower bound, short-lived peaks can be missed); CUDA: the
  rise of ``torch.cuda.max_memory_allocated``;
* ``saved_mb``: bytes of tensors autograd keeps for the backward pass
  (``saved_tensors_hooks``; distinct storages; arrays a custom Function
  keeps outside ``save_for_backward`` are not seen), plus the outputs;
* ``mem_estimate_mb``: with a ``memory_budget`` (bytes) in the
  configuration and B above the probe batch, the estimated peak of the
  full batch, from one forward+backward at the probe batch (the RSS rise,
  scaled linearly in B; per-call fixed costs make it an over-estimate).
  Above the budget the configuration is ``skipped`` with both numbers, so
  a method that would ask for tens of GB is reported, never attempted; a
  ``MemoryError`` during the run is reported as ``skipped`` too;
* ``err_values``: mean |values - hard top-k values|; ``err_P``: mean total
  variation ``1/2 ||P[r] - e_{argtop r}||_1`` over batch and ranks (for an
  indicator: ``1/2 ||A - hard||_1 / k``); NaN where the method defines none.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import threading
import time
import traceback


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _trim_heap() -> None:
    """Give freed heap memory back to the OS (glibc), so the RSS rise of the
    next run reflects what it allocates rather than what the allocator kept."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class _PeakRSS:
    def __init__(self):
        _trim_heap()
        self.base = _rss_bytes()
        self.peak = self.base
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_bytes())
            time.sleep(0.001)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss_bytes())


def run(cfg: dict) -> dict:
    import torch

    from .methods import Unavailable, make

    method, B, n, k = cfg["method"], int(cfg["B"]), int(cfg["n"]), int(cfg["k"])
    device = cfg.get("device", "cpu")
    if method.startswith("netgen-"):  # a target that runs on an accelerator only runs there, whatever --device says
        try:
            from ..codegen import TARGETS
        except ImportError:  # make() reports it as the reason the method is skipped
            TARGETS = {}
        t = TARGETS.get(method[len("netgen-"):])
        if t is not None and t.devices is not None and "cpu" not in t.devices:
            device = t.devices[0]
    dtype = getattr(torch, cfg.get("dtype", "float32"))
    warmup, repeats = int(cfg.get("warmup", 2)), int(cfg.get("repeats", 10))
    budget = float(cfg.get("budget_s", 5.0))
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg["threads"]))
    out = {"threads": torch.get_num_threads(), "device": device}
    budget_bytes = cfg.get("memory_budget") if device == "cpu" else None
    if budget_bytes:
        from .networks import dense_bytes

        est = dense_bytes(method, B, n, k)
        if est is not None:
            out["mem_estimate_mb"] = est / 2**20
            if est > budget_bytes:
                return {**out, "status": "skipped",
                        "reason": f"memory: B={B} needs ~{est / 2**30:.1f} GiB (dense {method}: n x n matrices per "
                                  f"layer) > budget {budget_bytes / 2**30:.1f} GiB (--max-memory)"}
    t0 = time.perf_counter()
    try:
        fn, kind = make(method, n, k, device, cfg.get("cache_dir"), cfg.get("options"), network=cfg.get("network"))
    except Unavailable as e:
        return {**out, "status": "skipped", "reason": str(e)}
    out["setup_s"] = time.perf_counter() - t0
    out["kind"] = kind
    if budget_bytes and "mem_estimate_mb" not in out and B > PROBE_B:
        est = _probe_bytes(fn, kind, n, k, dtype) * B / PROBE_B
        out["mem_estimate_mb"] = est / 2**20
        if est > budget_bytes:
            return {**out, "status": "skipped",
                    "reason": f"memory: B={B} needs ~{est / 2**30:.1f} GiB (fwd+bwd at B={PROBE_B} raised the RSS by "
                              f"{est * PROBE_B / B / 2**20:.0f} MiB; scaled to B) > budget {budget_bytes / 2**30:.1f} GiB "
                              f"(--max-memory)"}
    try:
        return _measure(out, fn, kind, cfg, B, n, k, device, dtype, warmup, repeats, budget)
    except MemoryError as e:
        return {**out, "status": "skipped", "reason": f"memory: {e}"[:300]}


#: batch of the memory probe: 16 rows, one block of the numba kernels
PROBE_B = 16


def _probe_bytes(fn, kind, n, k, dtype) -> float:
    """Peak RSS rise of one forward+backward at B = PROBE_B (after one
    untimed call, which also compiles what needs compiling)."""
    import torch

    gen = torch.Generator().manual_seed(1)
    x = torch.randn(PROBE_B, n, generator=gen, dtype=dtype)
    y = torch.randint(0, n, (PROBE_B,), generator=gen)

    def step():
        xr = x.detach().requires_grad_(True)
        o = fn(xr, y) if kind == "loss" else fn(xr)
        if kind == "loss":
            s = o
        elif kind == "indicator":
            s = o.sum()
        else:
            s = o[1].sum() + (0 if o[0] is None else o[0].sum())
        s.backward()

    step()
    with _PeakRSS() as pk:
        step()
    return max(pk.peak - pk.base, 1)


def _measure(out, fn, kind, cfg, B, n, k, device, dtype, warmup, repeats, budget):
    import torch

    gen = torch.Generator().manual_seed(int(cfg.get("seed", 0)))
    x = torch.randn(B, n, generator=gen, dtype=dtype).to(device)
    y = torch.randint(0, n, (B,), generator=gen).to(device)
    gv = torch.randn(B, k, generator=gen, dtype=dtype).to(device)
    gP = torch.randn(B, k, n, generator=gen, dtype=dtype).to(device)
    gA = torch.randn(B, n, generator=gen, dtype=dtype).to(device)
    cuda = device.startswith("cuda")

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def forward(xr):
        return fn(xr, y) if kind == "loss" else fn(xr)

    def objective(o):
        if kind == "loss":
            return o
        if kind == "indicator":
            return (o * gA).sum()
        values, P = o
        s = (P * gP).sum()
        return s if values is None else s + (values * gv).sum()

    def fwd():
        xr = x.detach().requires_grad_(True)
        o = forward(xr)
        sync()
        return o

    def fwdbwd():
        xr = x.detach().requires_grad_(True)
        objective(forward(xr)).backward()
        sync()

    def timed(f):
        for _ in range(warmup):
            f()
        t = time.perf_counter()
        f()
        first = time.perf_counter() - t
        reps = max(1, min(repeats - 1, int(budget / max(first, 1e-6))))
        ts = [first]
        for _ in range(reps):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts) * 1e3, len(ts)

    out["t_fwd_ms"], out["repeats_fwd"] = timed(fwd)
    out["t_fwdbwd_ms"], out["repeats_fwdbwd"] = timed(fwdbwd)

    if cuda:
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.max_memory_allocated()
        fwdbwd()
        out["peak_mem_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
        out["mem_kind"] = "cuda_allocated"
    else:
        with _PeakRSS() as pk:
            fwdbwd()
        out["peak_mem_mb"] = (pk.peak - pk.base) / 2**20
        out["mem_kind"] = "rss_rise"

    seen = {}

    def pack(t):
        try:
            st = t.untyped_storage()
            seen[(st.data_ptr(), t.device)] = st.nbytes()
        except Exception:  # noqa: BLE001 - e.g. tensors without storage
            pass
        return t

    xr = x.detach().requires_grad_(True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        o = forward(xr)
    outs = o if isinstance(o, tuple) else (o,)
    out_bytes = sum(t.numel() * t.element_size() for t in outs if isinstance(t, torch.Tensor))
    out["saved_mb"] = (sum(seen.values()) + out_bytes) / 2**20
    del o, outs, xr

    nan = float("nan")
    out["err_values"] = out["err_P"] = nan
    if kind != "loss":
        with torch.no_grad():
            o = forward(x)
            top = torch.topk(x, k, dim=-1)
            if kind == "indicator":
                hard = torch.zeros_like(x).scatter(-1, top.indices, 1.0)
                out["err_P"] = float(0.5 * (o - hard).abs().sum(-1).mean() / k)
            else:
                values, P = o
                hit = P.gather(-1, top.indices.unsqueeze(-1)).squeeze(-1)  # P[r, argtop r]
                out["err_P"] = float((0.5 * (P.abs().sum(-1) - hit + (1 - hit).abs())).mean())
                if values is not None:
                    out["err_values"] = float((values - top.values).abs().mean())
    out["status"] = "ok"
    for key in ("err_values", "err_P"):
        if isinstance(out[key], float) and math.isnan(out[key]):
            out[key] = None
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cfg = json.loads(argv[0])
    try:
        res = run(cfg)
    except Exception as e:  # noqa: BLE001 - reported to the harness as an error row
        msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        traceback.print_exc(file=sys.stderr)
        res = {"status": "error", "reason": msg}
    sys.stdout.write("\n" + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
