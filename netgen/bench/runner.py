"""Run a benchmark grid: one subprocess per configuration (``netgen.bench.worker``),
timeouts recorded as such, ratios against a reference method, JSON + CSV +
plots written to an output folder.

``results.json`` and ``results.csv`` are rewritten after every
configuration (``"complete": false`` until the last one), so a long run
that is interrupted keeps what it measured. A method name ending in
:data:`DEFAULT_THREADS` (``netgen-torch@default-threads``) runs that method
with torch's and numba's default thread counts (no ``set_num_threads``, the
thread variables as the user's environment has them): what a script gets
that never sets them, next to the ``--threads`` rows."""

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

#: suffix of a method name: run it with the default thread counts
DEFAULT_THREADS = "@default-threads"
#: the thread variables as this process started (a forked configuration with
#: the default threads gets these back)
_START_ENV = {v: os.environ.get(v) for v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")}


def split_method(name: str) -> tuple[str, bool]:
    """``(method, default_threads)`` of a method name (see DEFAULT_THREADS)."""
    if name.endswith(DEFAULT_THREADS):
        return name[: -len(DEFAULT_THREADS)], True
    return name, False


def _thread_env(env, threads) -> None:
    """Set the thread variables of ``env`` for ``threads`` (None: as this
    process started)."""
    for var, start in _START_ENV.items():
        if threads:
            env[var] = str(threads)
        elif start is None:
            env.pop(var, None)
        else:
            env[var] = start

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

    _thread_env(os.environ, threads)
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
    configuration may use (the worker estimates first and skips above it).
    ``threads`` None: the default thread counts (see DEFAULT_THREADS)."""
    cfg = {
        "method": method, "B": B, "n": n, "k": k, "device": device, "threads": threads,
        "options": BENCH_OPTIONS.get(method, {}) if options is None else options,
        "warmup": grid.warmup, "repeats": grid.repeats, "seed": seed,
        "cache_dir": None if cache_dir is None else str(cache_dir),
        "network": None if network is None else str(network),
        "memory_budget": memory_budget,
    }
    env = dict(os.environ)
    _thread_env(env, threads)
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
             progress=None, plots=True, options=None, isolation=None, memory_budget=None, echo=None,
             report=None) -> dict:
    """Run every configuration, write ``results.json``, ``results.csv`` and
    the plots into ``out_dir``; return the JSON document.

    The netgen methods run, for each (n, k), the network ``netgen build``
    chooses there (the portfolio), built once here; ``echo`` (if given)
    receives one line per (n, k) naming it. ``memory_budget``: bytes one
    configuration may use (None: no guard). ``progress``: a tqdm-like bar
    factory (networks built, then configurations run); ``report(row, done,
    total)`` is called as each configuration finishes, after the partial
    results were written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    opts = {m: dict(BENCH_OPTIONS.get(split_method(m)[0], {})) for m in methods}
    for m, o in (options or {}).items():
        opts.setdefault(m, {}).update(o)
        for full in methods:  # a method's options apply to its default-threads rows too
            if full != m and split_method(full)[0] == m:
                opts[full].update(o)
    if isolation is None:
        isolation = "fork" if hasattr(os, "fork") and sys.platform.startswith("linux") else "subprocess"
    if isolation == "fork":
        import torch  # noqa: F401 - loaded once here, inherited by every forked configuration
    configs = grid.configs(methods)
    networks = {}  # (n, k) -> (path, description)
    needs_networks = any(m.startswith("netgen-") for m in methods)
    pairs = grid.pairs() if needs_networks else []
    bar = progress(total=len(pairs) + len(configs), desc="netgen bench") if progress else None
    if needs_networks:
        from .methods import default_cache_dir
        from .networks import describe, portfolio_network

        folder = Path(cache_dir or default_cache_dir()) / "networks"
        for n, k in pairs:
            if bar is not None:
                bar.set_postfix_str(f"building the network n={n} k={k}")
            path, net = portfolio_network(n, k, folder)
            networks[(n, k)] = (str(path), describe(net))
            if echo is not None:
                echo(f"# n={n} k={k}: netgen runs the network `netgen build --n {n} --k {k}` chooses: "
                     f"{networks[(n, k)][1]}")
            if bar is not None:
                bar.update(1)
    rows = []
    t0 = time.perf_counter()
    setup = dict(grid=grid, methods=methods, reference=reference, device=device, threads=threads, opts=opts,
                 isolation=isolation, memory_budget=memory_budget, networks=networks)
    for i, (method, B, n, k, skip) in enumerate(configs):
        if bar is not None:
            bar.set_postfix_str(f"{method} B={B} n={n} k={k}")
        if skip is not None:
            rows.append({"method": method, "B": B, "n": n, "k": k, "status": "skipped", "reason": skip})
        else:
            base, default_threads = split_method(method)
            net = networks.get((n, k)) if base.startswith("netgen-") else None
            rows.append(run_one(base, B, n, k, grid, device=device, threads=None if default_threads else threads,
                                cache_dir=cache_dir, options=opts.get(method, {}), isolation=isolation,
                                network=None if net is None else net[0], memory_budget=memory_budget))
            rows[-1]["method"] = method
            if net is not None:
                rows[-1]["network"] = net[1]
        done = i + 1 == len(configs)
        doc = _document(rows, setup, time.perf_counter() - t0, complete=done)
        _write_results(out, doc)
        if report is not None:
            report(doc["results"][-1], i + 1, len(configs))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    if not configs:
        doc = _document(rows, setup, time.perf_counter() - t0, complete=True)
        _write_results(out, doc)
    if plots:
        from .plots import plot_all

        doc["plots"] = [str(p) for p in plot_all(doc, out)]
    return doc


def _document(rows, setup, total_s, *, complete) -> dict:
    """The results document of the rows so far (ratios against the
    reference among them)."""
    grid, reference = setup["grid"], setup["reference"]
    rows = [dict(r) for r in rows]
    if reference is not None:
        add_ratios(rows, reference)
    return {
        "format": "netgen-bench/1",
        "complete": complete,
        "reference": reference,
        "grid": {"batch": list(grid.batch), "n": list(grid.n), "k": list(grid.k), "sort": grid.sort,
                 "timeout_s": grid.timeout_s, "repeats": grid.repeats, "warmup": grid.warmup},
        "networks": {f"n={n} k={k}": d for (n, k), (_, d) in setup["networks"].items()},
        "memory_budget_bytes": setup["memory_budget"],
        "methods": list(setup["methods"]),
        "options": setup["opts"],
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpu": cpu_model(),
                    "cpus": os.cpu_count(), "device": setup["device"], "threads": setup["threads"],
                    "default_threads": _default_threads(), "isolation": setup["isolation"]},
        "total_s": total_s,
        "results": [_clean(r) for r in rows],
    }


def _default_threads() -> dict:
    """The thread counts a process gets without setting any (what the
    ``@default-threads`` rows ran with): torch's default intra-op threads
    (the physical cores, unless OMP_NUM_THREADS says otherwise) and the
    thread variables."""
    return {"cpus": os.cpu_count(), **{v.lower(): s for v, s in _START_ENV.items()}}


def _write_results(out: Path, doc: dict) -> None:
    """results.json and results.csv, each replaced in one step (a reader or
    an interrupt never sees half a file)."""
    tmp = out / ".results.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, out / "results.json")
    tmp = out / ".results.csv.tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in doc["results"]:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in FIELDS})
    os.replace(tmp, out / "results.csv")


def _clean(r: dict) -> dict:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
