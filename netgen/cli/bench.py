"""``netgen bench``: time (forward, forward+backward), peak memory and error
against the hard top-k of every method over a grid of (B, n, k), one
process per configuration; JSON, CSV and plots into ``-o DIR`` (refused
when DIR already holds results, unless ``--force``; the JSON and CSV are
rewritten after every configuration, one stderr line each)."""

from __future__ import annotations

import dataclasses
import os

import click

from .common import BadInput, escape, handle_errors, log, progress


def _fmt(v, spec):
    width = int(spec.split(".")[0])
    return f"{'-':>{width}}" if v is None else format(v, spec)


@click.command("bench")
@click.option("-o", "--out", "out_dir", default="bench-out", show_default=True,
              type=click.Path(file_okay=False),
              help="folder for results.json, results.csv and the plots (refused if it holds results: see --force)")
@click.option("--force", is_flag=True, help="overwrite the results already in the -o folder")
@click.option("--quick", is_flag=True, help="small grid (B=16, n=64,256,1024, k=5; under 3 minutes)")
@click.option("--sorting", is_flag=True,
              help="full sorting, k = n (default B=64, n=32,256,1024; --n and --batch change it, --k is refused)")
@click.option("--max-memory", "max_memory", type=float, default=None, metavar="GB",
              help="memory one configuration may use (default: 60%% of the memory available at the start); "
                   "a method estimated above it is skipped with the estimate")
@click.option("--methods", default=None, help="comma-separated methods (default: all); see --list")
@click.option("--reference", default=None,
              help="method the ratios are relative to (default: netgen-numba if run, else the first method)")
@click.option("--batch", "batch", default=None, help="batch sizes B, e.g. 64 or 16,64")
@click.option("--n", "ns", default=None, help="input sizes n, e.g. 16,256,1024,10450")
@click.option("--k", "ks", default=None, help="k values, e.g. 1,5")
@click.option("--timeout", type=float, default=None, help="seconds per configuration (recorded as timeout)")
@click.option("--repeats", type=int, default=None, help="timed repetitions per measurement (median)")
@click.option("--warmup", type=int, default=None, help="untimed warm-up runs")
@click.option("--threads", type=int, default=1, show_default=True, help="torch / numba threads per worker")
@click.option("--default-threads/--no-default-threads", "default_threads", default=True, show_default=True,
              help="also run netgen-torch with torch's default thread count (rows netgen-torch@default-threads: "
                   "what a script that never calls torch.set_num_threads gets; slow on a busy machine). "
                   "Any method can be named METHOD@default-threads in --methods")
@click.option("--device", default="cpu", show_default=True, type=click.Choice(["cpu", "cuda"]),
              help="cuda: the GPU table instead of the grid (netgen/bench/gpu.py; B 64,500,4096, n 1000,10450, k 5)")
@click.option("--temperature", "temps", multiple=True, metavar="METHOD=VALUE",
              help="override a baseline's temperature (repeatable)")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="netgen's cache root for this run: generated modules (checked before they run) and the "
                   "benchmark's network files (default: netgen's cache, $NETGEN_CACHE_DIR or ~/.cache/netgen)")
@click.option("--no-plots", is_flag=True, help="skip the matplotlib plots")
@click.option("--subprocess", "use_subprocess", is_flag=True,
              help="start a fresh interpreter per configuration instead of forking (slower start-up)")
@click.option("--list", "list_methods", is_flag=True, help="list the method names and exit")
@handle_errors
def command(out_dir, force, quick, sorting, max_memory, methods, reference, batch, ns, ks, timeout, repeats, warmup,
            threads, default_threads, device, temps, cache_dir, no_plots, use_subprocess, list_methods):
    """Benchmark netgen's generated layers against the baselines.

    \b
    Examples:
      netgen bench --quick -o bench-out
      netgen bench --methods lapsum,softsort,netgen-numba --n 1024,10450 --k 5 -o out
      netgen bench --sorting -o sort-out

    The netgen methods run, for each (n, k), the network `netgen build --n N
    --k K` chooses (the portfolio); the output names it.
    """
    from ..bench.grid import DEFAULT, QUICK, SORTING, parse_ints
    from ..bench.networks import cpu_model, memory_budget
    from ..bench.methods import all_names
    from ..bench.runner import DEFAULT_THREADS, split_method

    if device == "cuda" and not list_methods:
        _check_out(out_dir, force, ("gpu_results.json",))
        return _gpu_table(out_dir, methods, batch, ns, ks, repeats)
    names = all_names()
    if list_methods:
        click.echo("\n".join(names))
        return
    chosen = names if methods is None else [m.strip() for m in methods.split(",") if m.strip()]
    if default_threads and "netgen-torch" in chosen and "netgen-torch" + DEFAULT_THREADS not in chosen:
        chosen.insert(chosen.index("netgen-torch") + 1, "netgen-torch" + DEFAULT_THREADS)
    unknown = [m for m in chosen if split_method(m)[0] not in names]
    if unknown or not chosen:
        raise BadInput(f"unknown method(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(names)}")
    if reference is None:
        from ..codegen import TARGETS

        cpu = max((t for t in TARGETS.values() if t.runs_on("cpu")), key=lambda t: t.preference)  # numba
        reference = f"netgen-{cpu.name}" if f"netgen-{cpu.name}" in chosen else chosen[0]
    if reference not in chosen:
        raise BadInput(f"--reference {reference!r} is not among the methods being run")
    cpus = os.cpu_count() or 1
    if not 1 <= threads <= cpus:
        raise BadInput(f"--threads must be between 1 and {cpus} (the CPUs of this machine), got {threads}")
    if sorting and quick:
        raise BadInput("--sorting and --quick are two different grids; pass one")
    if sorting and ks is not None:
        raise BadInput("--sorting sorts fully (k = n); --k does not apply")
    grid = SORTING if sorting else QUICK if quick else DEFAULT
    budget = memory_budget(max_memory)
    changes = {}
    if batch is not None:
        changes["batch"] = parse_ints(batch, "--batch")
    if ns is not None:
        changes["n"] = parse_ints(ns, "--n")
    if ks is not None:
        changes["k"] = parse_ints(ks, "--k")
    if timeout is not None:
        if not timeout > 0:
            raise BadInput(f"--timeout must be positive, got {timeout}")
        changes["timeout_s"] = timeout
    if repeats is not None:
        if repeats < 1:
            raise BadInput(f"--repeats must be >= 1, got {repeats}")
        changes["repeats"] = repeats
    if warmup is not None:
        if warmup < 0:
            raise BadInput(f"--warmup must be >= 0, got {warmup}")
        changes["warmup"] = warmup
    grid = dataclasses.replace(grid, **changes)
    if not grid.configs(chosen):
        raise BadInput("the grid is empty (every k exceeds every n)")
    options = {}
    for t in temps:
        name, sep, value = t.partition("=")
        if not sep or name not in names:
            raise BadInput(f"--temperature expects METHOD=VALUE with a known method, got {t!r}")
        try:
            options[name] = {"temperature": float(value)}
        except ValueError:
            raise BadInput(f"--temperature value must be a number, got {t!r}") from None
    _check_out(out_dir, force, RESULT_FILES)
    if not no_plots:  # before the (long) run, not after it
        from ..extras import require

        require("matplotlib", "netgen bench's plots (or pass --no-plots)", "bench")
    from ..bench.runner import run_grid

    click.echo(f"# CPU: {cpu_model()}; {threads} thread(s) per configuration; memory budget per configuration: "
               + ("none" if budget is None else f"{budget / 2**30:.1f} GiB"))
    doc = run_grid(grid, chosen, out_dir, reference=reference, device=device, threads=threads,
                   cache_dir=cache_dir, progress=progress, plots=not no_plots, options=options,
                   isolation="subprocess" if use_subprocess else None, memory_budget=budget, echo=click.echo,
                   report=_report)
    w = max([18] + [len(r["method"]) for r in doc["results"]])
    head = f"{'method':<{w}} {'B':>4} {'n':>6} {'k':>3} {'status':<8} {'fwd ms':>9} {'f+b ms':>9} " \
           f"{'peak MiB':>8} {'saved':>8} {'err P':>7} {'x ref':>7}"
    click.echo(f"# reference: {reference}; 'x ref' = fwd+bwd time / reference's; peak = RSS rise (MiB), "
               "saved = outputs + tensors saved for backward (MiB); err P = mean TV distance to the hard top-k")
    click.echo(head)
    for r in doc["results"]:
        click.echo(
            f"{r['method']:<{w}} {r['B']:>4} {r['n']:>6} {r['k']:>3} {r['status']:<8} "
            f"{_fmt(r.get('t_fwd_ms'), '9.3f')} {_fmt(r.get('t_fwdbwd_ms'), '9.3f')} "
            f"{_fmt(r.get('peak_mem_mb'), '8.1f')} {_fmt(r.get('saved_mb'), '8.1f')} {_fmt(r.get('err_P'), '7.3f')} {_fmt(r.get('ratio_fwdbwd'), '7.2f')}"
            + ("" if r["status"] == "ok" else f"  {r.get('reason', '')}")
        )
    log(f"netgen bench: {len(doc['results'])} configurations in {doc['total_s']:.0f} s; wrote "
        f"{out_dir}/results.json, results.csv" + (", plots" if not no_plots else ""))


#: what a run writes into its folder (an existing one is not overwritten without --force)
RESULT_FILES = ("results.json", "results.csv", "time_fwd.png", "time_fwdbwd.png", "memory.png", "saved.png",
                "error.png")


def _check_out(out_dir, force, files) -> None:
    """Refuse (exit 2) to overwrite earlier results in ``out_dir`` unless ``force``."""
    from pathlib import Path

    there = [f for f in files if (Path(out_dir) / f).exists()]
    if there and not force:
        raise BadInput(f"{out_dir} already holds results ({', '.join(there)}); pass --force to overwrite them, "
                       f"or choose another folder with -o")


def _report(row, done, total) -> None:
    """One stderr line per finished configuration (the results files were
    just rewritten with it)."""
    what = f"[{done}/{total}] {row['method']} B={row['B']} n={row['n']} k={row['k']}: {row['status']}"
    if row["status"] == "ok":
        what += f", fwd {row.get('t_fwd_ms') or 0:.3f} ms, f+b {row.get('t_fwdbwd_ms') or 0:.3f} ms"
    elif row.get("reason"):
        what += f" ({escape(str(row['reason']))[:120]})"
    log(what + (f" [{row['wall_s']:.0f} s]" if row.get("wall_s") is not None else ""))


def _gpu_table(out_dir, methods, batch, ns, ks, repeats):
    """``--device cuda``: the one GPU table of :mod:`netgen.bench.gpu`."""
    import json
    from pathlib import Path

    from ..bench.grid import parse_ints
    from ..bench.gpu import all_methods, gpu_problem, run_table

    names = all_methods()
    chosen = names if methods is None else [m.strip() for m in methods.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in names]
    if unknown or not chosen:
        raise BadInput(f"unknown method(s) {', '.join(unknown) or '(none given)'} for --device cuda; "
                       f"choose from {', '.join(names)}")
    Bs = parse_ints(batch, "--batch") if batch else (64, 500, 4096)
    n_list = parse_ints(ns, "--n") if ns else (1000, 10450)
    k_list = parse_ints(ks, "--k") if ks else (5,)
    if len(k_list) != 1:
        raise BadInput("--device cuda takes one k")
    if repeats is not None and repeats < 1:
        raise BadInput(f"--repeats must be >= 1, got {repeats}")
    why = gpu_problem()
    if why:
        raise BadInput(f"--device cuda: {why}")
    rows = run_table(Bs, n_list, k_list[0], chosen, reps=repeats or 20, echo=click.echo)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "gpu_results.json").write_text(json.dumps(rows, indent=1))
    log(f"netgen bench --device cuda: wrote {out_dir}/gpu_results.json")
