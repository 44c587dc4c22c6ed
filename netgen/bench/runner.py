"""Run a benchmark grid: one subprocess per configuration (``netgen.bench.worker``),
timeouts recorded as such, ratios against a reference method, JSON + CSV +
plots written to an output folder."""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from .grid import BENCH_OPTIONS, Grid
from .networks import cpu_model

FIELDS = [
    "method", "B", "n", "k", "status", "reason", "kind", "t_fwd_ms", "t_fwdbwd_ms", "peak_mem_mb",
    "mem_kind", "saved_mb", "err_values", "err_P", "ratio_fwd", "ratio_fwdbwd", "ratio_mem", "repeats_fwd",
    "repeats_fwdbwd", "setup_s", "wall_s", "device", "threads", "mem_estimate_mb", "network",
]


def _child(cfg, conn):  # pragma: no cover - runs in the forked process
    # stdout carries only the harness's results: anything a method prints
    # (difftopk announces a missing torch_sparse) goes to stderr
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        from .worker import run

        res = run(cfg)
    except BaseException as e:  # noqa: BLE001
        res = {"status": "error", "reason": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
    try:
        conn.send(res)
    finally:
        conn.close()
        os._exit(0)


def _run_forked(cfg, timeout_s, threads):
    """The configuration in a forked child of this process (torch already
    imported here, so no interpreter start-up per configuration)."""
    import multiprocessing

    os.environ["NUMBA_NUM_THREADS"] = str(threads)
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(cfg, send), daemon=True)
    proc.start()
    send.close()
    try:
        if not recv.poll(timeout_s):
            proc.kill()
            proc.join()
            return None
        try:
            res = recv.recv()
        except EOFError:
            res = {"status": "error", "reason": f"worker died (exit code {proc.join() or proc.exitcode})"}
        proc.join()
        return res
    finally:
        recv.close()


def run_one(method, B, n, k, grid: Grid, *, device="cpu", threads=1, cache_dir=None, seed=0, options=None,
            isolation="fork", network=None, memory_budget=None) -> dict:
    """Run one configuration in its own process; never raises.

    ``isolation="fork"`` forks this process for each configuration (fast:
    the interpreter and torch are already loaded; the parent never runs a
    torch op, so no thread pool or CUDA context is inherited);
    ``"subprocess"`` starts ``python -m netgen.bench.worker`` afresh.
    ``network``: the network file the netgen methods run (default: the
    portfolio's choice, built in the worker); ``memory_budget``: bytes the
    configuration may use (the worker estimates first and skips above it)."""
    cfg = {
        "method": method, "B": B, "n": n, "k": k, "device": device, "threads": threads,
        "options": BENCH_OPTIONS.get(method, {}) if options is None else options,
        "warmup": grid.warmup, "repeats": grid.repeats, "seed": seed,
        "cache_dir": None if cache_dir is None else str(cache_dir),
        "network": None if network is None else str(network),
        "memory_budget": memory_budget,
    }
    env = dict(os.environ)
    env["NUMBA_NUM_THREADS"] = str(threads)
    env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("PYTHONWARNINGS", "ignore")
    row = {"method": method, "B": B, "n": n, "k": k}
    t0 = time.perf_counter()
    if isolation == "fork":
        res = _run_forked(cfg, grid.timeout_s, threads)
        row["wall_s"] = time.perf_counter() - t0
        if res is None:
            row.update(status="timeout", reason=f"exceeded {grid.timeout_s:g} s")
        else:
            row.update(res)
        return row
    if isolation != "subprocess":
        raise ValueError(f"isolation must be 'fork' or 'subprocess', got {isolation!r}")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "netgen.bench.worker", json.dumps(cfg)],
            capture_output=True, text=True, timeout=grid.timeout_s, env=env,
        )
    except subprocess.TimeoutExpired:
        row.update(status="timeout", reason=f"exceeded {grid.timeout_s:g} s")
        row["wall_s"] = time.perf_counter() - t0
        return row
    row["wall_s"] = time.perf_counter() - t0
    res = None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            try:
                res = json.loads(line)
            except json.JSONDecodeError:
                pass
            break
    if res is None:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        row.update(status="error", reason=f"worker exited with code {proc.returncode}: {tail}")
        return row
    row.update(res)
    return row


def add_ratios(rows, reference: str) -> None:
    ref = {(r["B"], r["n"], r["k"]): r for r in rows if r["method"] == reference and r.get("status") == "ok"}
    for r in rows:
        base = ref.get((r["B"], r["n"], r["k"]))
        for key, ratio in (("t_fwd_ms", "ratio_fwd"), ("t_fwdbwd_ms", "ratio_fwdbwd"), ("peak_mem_mb", "ratio_mem")):
            a = r.get(key)
            b = None if base is None else base.get(key)
            r[ratio] = (a / b) if (r.get("status") == "ok" and a is not None and b) else None


def run_grid(grid: Grid, methods, out_dir, *, reference=None, device="cpu", threads=1, cache_dir=None,
             progress=None, plots=True, options=None, isolation=None, memory_budget=None, echo=None) -> dict:
    """Run every configuration, write ``results.json``, ``results.csv`` and
    the plots into ``out_dir``; return the JSON document.

    The netgen methods run, for each (n, k), the network ``netgen build``
    chooses there (the portfolio), built once here; ``echo`` (if given)
    receives one line per (n, k) naming it. ``memory_budget``: bytes one
    configuration may use (None: no guard)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    opts = {m: dict(BENCH_OPTIONS.get(m, {})) for m in methods}
    for m, o in (options or {}).items():
        opts.setdefault(m, {}).update(o)
    if isolation is None:
        isolation = "fork" if hasattr(os, "fork") and sys.platform.startswith("linux") else "subprocess"
    if isolation == "fork":
        import torch  # noqa: F401 - loaded once here, inherited by every forked configuration
    configs = grid.configs(methods)
    networks = {}  # (n, k) -> (path, description)
    if any(m.startswith("netgen-") for m in methods):
        from .methods import default_cache_dir
        from .networks import describe, portfolio_network

        folder = Path(cache_dir or default_cache_dir()) / "networks"
        for n, k in grid.pairs():
            path, net = portfolio_network(n, k, folder)
            networks[(n, k)] = (str(path), describe(net))
            if echo is not None:
                echo(f"# n={n} k={k}: netgen runs the network `netgen build --n {n} --k {k}` chooses: "
                     f"{networks[(n, k)][1]}")
    rows = []
    bar = progress(total=len(configs), desc="netgen bench") if progress else None
    t0 = time.perf_counter()
    for method, B, n, k, skip in configs:
        if bar is not None:
            bar.set_postfix_str(f"{method} B={B} n={n} k={k}")
        if skip is not None:
            rows.append({"method": method, "B": B, "n": n, "k": k, "status": "skipped", "reason": skip})
        else:
            net = networks.get((n, k)) if method.startswith("netgen-") else None
            rows.append(run_one(method, B, n, k, grid, device=device, threads=threads, cache_dir=cache_dir,
                                options=opts.get(method, {}), isolation=isolation,
                                network=None if net is None else net[0], memory_budget=memory_budget))
            if net is not None:
                rows[-1]["network"] = net[1]
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    if reference is not None:
        add_ratios(rows, reference)
    doc = {
        "format": "netgen-bench/1",
        "reference": reference,
        "grid": {"batch": list(grid.batch), "n": list(grid.n), "k": list(grid.k), "sort": grid.sort,
                 "timeout_s": grid.timeout_s, "repeats": grid.repeats, "warmup": grid.warmup},
        "networks": {f"n={n} k={k}": d for (n, k), (_, d) in networks.items()},
        "memory_budget_bytes": memory_budget,
        "methods": list(methods),
        "options": opts,
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpu": cpu_model(),
                    "cpus": os.cpu_count(), "device": device, "threads": threads, "isolation": isolation},
        "total_s": time.perf_counter() - t0,
        "results": [_clean(r) for r in rows],
    }
    (out / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in doc["results"]:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in FIELDS})
    if plots:
        from .plots import plot_all

        doc["plots"] = [str(p) for p in plot_all(doc, out)]
    return doc


def _clean(r: dict) -> dict:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
