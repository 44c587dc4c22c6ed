"""``netgen build``: construct (or read) a network, run the passes, prove it,
and write it as JSON or as a generated layer module."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import click

from .common import BadInput, handle_errors, log

TARGETS = ("json", "torch", "numba", "cuda")
KINDS = ("splitter", "bitonic", "oddeven", "pairwise", "transposition", "best", "record")
OBJECTIVES = ("size", "depth")


@click.command("build")
@click.option("--n", "n", type=int, help="Number of wires (inputs).")
@click.option("--k", "k", type=int, help="Outputs (top-k); omitted or k = n: a full sorter.")
@click.option("--network", "kind", type=click.Choice(KINDS), help="Construction; best: the best-known sorter (2 <= n <= 64), pruned to the top k. Default: every cheap construction, each proved, the best by --objective kept.")
@click.option("--objective", type=click.Choice(OBJECTIVES), help="size: fewest comparators, then depth; depth: shallowest, then fewest. Default: depth for the portfolio, size for --network best.")
@click.option("--from", "from_file", type=click.Path(dir_okay=False), help="Compile a network file (netgen JSON, Dobbelaere JSON, layer text) instead of constructing one.")
@click.option("--target", type=click.Choice(TARGETS), default="json", show_default=True)
@click.option("-o", "--output", type=click.Path(), help="json: the file (default stdout); code targets: the folder (default generated/).")
@click.option("--name", help="Module name for code targets (default: derived from the network).")
@click.option("--passes/--no-passes", "passes", default=None, help="Run prune, clean, schedule (default: on when constructing, off with --from).")
@click.option("--verify/--no-verify", "verify", default=True, show_default=True, help="Prove the network before writing it.")
@click.option("--distribution", help="Relaxation: logistic, logistic_phi, cauchy, reciprocal, gaussian, optimal.")
@click.option("--steepness", type=float, help="Relaxation steepness (default tied to depth).")
@click.option("--art-lambda", "art_lambda", type=float, help="ART lambda for logistic_phi.")
@click.option("--art-epsilon", "art_epsilon", type=float, help="ART tie epsilon; 1e-10 reproduces difftopk/diffsort (default 0: netgen's formula).")
@click.option("--no-compile", "no_compile", is_flag=True, help="cuda: skip the PTX/cubin compile check.")
@handle_errors
def command(n, k, kind, objective, from_file, target, output, name, passes, verify, distribution, steepness, art_lambda, art_epsilon, no_compile):
    """Construct, prune, prove and emit a network.

    \b
    netgen build --n 10450 --k 5 --target cuda
    netgen build --n 16 --k 5 --network splitter -o net.json
    netgen build --from Sort_24_123_12.json --target torch
    """
    from ..compiler import build, compile_network

    if target in ("torch", "cuda"):  # before the (possibly long) build
        from ..extras import require

        require("torch", f"--target {target}")
        if target == "cuda":
            require("numba_cuda", "--target cuda")
    options = dict(steepness=steepness, art_lambda=art_lambda, art_epsilon=art_epsilon)
    if target != "json":  # check relaxation options before the (possibly long) build
        from ..relax.distributions import Relaxation

        Relaxation(**({"distribution": distribution} if distribution else {}), **{k: v for k, v in options.items() if v is not None})
    t0 = time.perf_counter()
    if from_file is not None:
        if n is not None or k is not None or kind is not None or objective is not None:
            raise BadInput("--from takes the network from the file: do not combine it with --n, --k, --network or --objective")
        from ..io import load

        net = load(from_file)
        log(f"read {net!r} in {time.perf_counter() - t0:.2f} s")
        compiled = compile_network(net, passes=("prune", "clean", "schedule") if passes else None, verify=verify)
    else:
        if n is None:
            raise BadInput("give --n N (and --k K), or --from FILE")
        passes = True if passes is None else passes
        compiled = build(n, k, kind, objective=objective, passes=("prune", "clean", "schedule") if passes else None,
                         verify=verify, log=log)
        if kind is None:
            c = compiled.network.construction
            what = f"{c.get('kind')}{' (sorter, pruned)' if c.get('from') == 'sorter' else ''}"
            log(f"portfolio chose {what} (best by {objective or 'depth'} among the candidates above)")
        else:
            log(f"constructed {kind} in {time.perf_counter() - t0:.2f} s")
    net = compiled.network
    for rec in compiled.passes:
        log(f"  pass {rec}")
    report = compiled.report
    if report is not None:
        log(f"verify: {report} ({report.seconds:.2f} s)")
        if report.status == "counterexample":
            click.echo(f"netgen: error: the network is wrong, nothing written: {report}", err=True)
            raise SystemExit(1)
        if report.status != "proved":
            log("warning: the network was sampled, not proved")
        net = net.with_(construction={**net.construction, "verified": str(report)})

    if target == "json":
        _write_json(net, output)
    else:
        _write_module(target, net, output, name, distribution, options, no_compile)
    log(f"done in {time.perf_counter() - t0:.2f} s")


def _write_json(net, output):
    from ..io import dumps, save

    if output is None or output == "-":
        click.echo(dumps(net), nl=False)
        return
    save(net, output)
    click.echo(f"wrote {output}: n={net.n} k={net.k} depth={net.depth} size={net.size}")


def _write_module(target, net, output, name, distribution, options, no_compile):
    from ..codegen import write_module
    from ..relax.distributions import default_relaxation

    relax = default_relaxation(net, distribution)
    changes = {key: value for key, value in options.items() if value is not None}
    if changes:
        relax = dataclasses.replace(relax, **changes)
    out_dir = Path(output) if output else Path("generated")
    t = time.perf_counter()
    path = write_module(target, net, relax, out_dir=out_dir, name=name)
    log(f"emitted {target} module in {time.perf_counter() - t:.2f} s")
    if target == "cuda" and not no_compile:
        from ..codegen.cuda_target import compile_check

        t = time.perf_counter()
        try:
            info = compile_check(path)
        except RuntimeError as e:
            path.unlink()
            click.echo(f"netgen: error: {e}\nnothing written (use --no-compile to keep an unchecked module)", err=True)
            raise SystemExit(1)
        log(f"compile check passed in {time.perf_counter() - t:.2f} s: {info['summary']}")
    click.echo(f"wrote {path}")
    if out_dir.resolve() == (Path.cwd() / "generated").resolve():
        click.echo(f"from generated.{path.stem} import Layer")
    else:
        click.echo(f"import netgen; Layer = netgen.load({os.fspath(path)!r}).Layer")
