"""``netgen build``: construct (or read) a network, run the passes, prove it,
and write it as JSON or as a generated layer module."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import click

from ..codegen import TARGETS as CODE_TARGETS
from ..codegen import BuildError
from ..construct import ALL_KINDS as KINDS
from ..construct.best import OBJECTIVES
from ..estimate import DEFAULT_MAX_SECONDS
from ..passes.pipeline import DEFAULT_PASSES, PASSES
from ..relax.formulas import DEFAULT_DISTRIBUTION
from ..relax.formulas import REGISTRY as DISTRIBUTIONS
from .common import BadInput, check_output, current_bar, escape, handle_errors, log, max_size_option

# the choices come from the registries: a new construction, target, pass or distribution appears here by itself
TARGETS = ("json", *CODE_TARGETS)
#: the code targets with a build step, and what it does (for --help)
_BUILDS = "; ".join(f"{t.name}: {t.build.summary}" for t in CODE_TARGETS.values() if t.build is not None)


@click.command("build")
@click.option("--n", "n", type=int, help="Number of wires (inputs).")
@click.option("--k", "k", type=int, help="Outputs (top-k); omitted or k = n: a full sorter.")
@click.option("--network", "kind", type=click.Choice(KINDS), help="Construction; best: the best-known sorter (2 <= n <= 64), pruned to the top k. Default: every cheap construction, each proved, the best by --objective kept.")
@click.option("--objective", type=click.Choice(OBJECTIVES), help="size: fewest comparators, then depth; depth: shallowest, then fewest. Default: depth for the portfolio, size for --network best.")
@click.option("--from", "from_file", type=click.Path(dir_okay=False), help="Compile a network file (netgen JSON, Dobbelaere JSON, layer text) instead of constructing one.")
@click.option("--target", type=click.Choice(TARGETS), default="json", show_default=True)
@click.option("-o", "--output", type=click.Path(), help="json: the file (default stdout); code targets: the folder (default generated/).")
@click.option("--name", help="Module name for code targets (default: derived from the network).")
@click.option("--passes/--no-passes", "passes", default=None, help=f"Run the passes {', '.join(DEFAULT_PASSES)} (default: on when constructing, off with --from).")
@click.option("--pass", "only", type=click.Choice(tuple(PASSES)), multiple=True, help="Run only this pass (repeatable, in the order given): " + "; ".join(f"{p.name}: {p.summary}" for p in PASSES.values()) + ".")
@click.option("--verify/--no-verify", "verify", default=True, show_default=True, help="Prove the network before writing it.")
@click.option("--distribution", type=click.Choice(tuple(DISTRIBUTIONS)), help=f"Relaxation (default {DEFAULT_DISTRIBUTION}).")
@click.option("--steepness", type=float, help="Relaxation steepness (default tied to depth).")
@click.option("--art-lambda", "art_lambda", type=float, help="ART lambda for logistic_phi.")
@click.option("--art-epsilon", "art_epsilon", type=float, help="ART tie epsilon; 1e-10 reproduces difftopk/diffsort (default 0: netgen's formula).")
@click.option("--no-compile", "no_compile", is_flag=True, help=f"Skip the target's build step ({_BUILDS}).")
@click.option("--compile-check", "compile_check", is_flag=True, help="Require the target's build step in full (exit 2, nothing written, when it cannot run completely, e.g. no ptxas to assemble cubins).")
@click.option("--max-seconds", "max_seconds", type=click.FloatRange(min=0, min_open=True), default=None,
              help=f"Refuse builds estimated above this many CPU seconds (default {DEFAULT_MAX_SECONDS:.0f}); "
                   "see docs/security.md.")
@max_size_option
@handle_errors
def command(n, k, kind, objective, from_file, target, output, name, passes, only, verify, distribution, steepness, art_lambda, art_epsilon, no_compile, compile_check, max_seconds):
    """Construct, prune, prove and emit a network.

    \b
    netgen build --n 10450 --k 5 --target cuda
    netgen build --n 16 --k 5 --network splitter -o net.json
    netgen build --from net.json --target torch
    """
    from .. import compiler
    from ..portfolio import PortfolioError

    check_output(output, folder=target != "json")
    if name is not None:  # before the (possibly long) build
        from ..codegen import check_module_name

        try:
            check_module_name(name)
        except ValueError as e:
            raise BadInput(f"--name: {e}") from None
    if target != "json":  # before the (possibly long) build
        CODE_TARGETS[target].require(f"--target {target}")
    options = dict(steepness=steepness, art_lambda=art_lambda, art_epsilon=art_epsilon)
    if target != "json":  # check relaxation options before the (possibly long) build
        from ..relax.distributions import Relaxation

        Relaxation(**({"distribution": distribution} if distribution else {}), **{k: v for k, v in options.items() if v is not None})
    if only and passes is False:
        raise BadInput("--pass and --no-passes contradict each other")
    # every step below logs its own time as it finishes; together they make up "done in"
    t0 = time.perf_counter()
    if from_file is not None:
        if n is not None or k is not None or kind is not None or objective is not None:
            raise BadInput("--from takes the network from the file: do not combine it with --n, --k, --network or --objective")
        from ..io import load

        net = load(from_file)
        log(f"read {net!r} in {time.perf_counter() - t0:.2f} s")
        chosen = only or (DEFAULT_PASSES if passes else None)
        from ..estimate import Estimate, check_time, network_seconds

        check_time(network_seconds(net.n, net.k, net.size, passes=bool(chosen), verify=verify,
                                   est=Estimate(f"building the network of {from_file} (n = {net.n}, k = {net.k}, "
                                                f"{net.size} comparators)")), max_seconds)
        compiled = compiler.compile_network(net, passes=chosen, verify=verify, log=log)
    else:
        if n is None:
            raise BadInput("give --n N (and --k K), or --from FILE")
        chosen = only or (DEFAULT_PASSES if passes is None or passes else None)
        try:
            compiled = compiler.compile(n, k, kind, objective=objective, passes=chosen, verify=verify, log=log,
                                        progress=current_bar(), max_seconds=max_seconds)
        except PortfolioError as e:
            click.echo(f"netgen: internal error: {e}", err=True)
            raise SystemExit(1)
        if kind is None:
            c = compiled.network.construction
            what = f"{c.get('kind')}{' (sorter, pruned)' if c.get('from') == 'sorter' else ''}"
            log(f"portfolio chose {what} (best by {objective or 'depth'} among the candidates above)")
    net = compiled.network
    report = compiled.report
    if report is not None:
        if report.status == "counterexample":
            click.echo(f"netgen: error: the network is wrong, nothing written: {report}", err=True)
            raise SystemExit(1)
        if report.status != "proved":
            log("warning: the network was sampled, not proved")
        # the proof is in net.construction already (netgen.compiled.record_proof), as from Python

    if target == "json":
        _write_json(net, output)
    else:
        _write_module(target, net, output, name, distribution, options, no_compile, compile_check)
    log(f"done in {time.perf_counter() - t0:.2f} s")


def _write_json(net, output):
    from ..io import dumps, save

    t = time.perf_counter()
    if output is None or output == "-":
        click.echo(dumps(net), nl=False)
        log(f"wrote JSON to stdout in {time.perf_counter() - t:.2f} s")
        return
    save(net, output)
    log(f"wrote JSON in {time.perf_counter() - t:.2f} s")
    click.echo(f"wrote {output}: n={net.n} k={net.k} depth={net.depth} size={net.size}")


def _write_module(target, net, output, name, distribution, options, no_compile, compile_check):
    from ..codegen import write_module
    from ..relax.distributions import default_relaxation

    relax = default_relaxation(net, distribution)
    changes = {key: value for key, value in options.items() if value is not None}
    if changes:
        relax = dataclasses.replace(relax, **changes)
    out_dir = Path(output) if output else Path("generated")
    try:  # the target's build step runs too (cuda: the module is written only after its kernels compiled)
        path = write_module(target, net, relax, out_dir=out_dir, name=name, build=not no_compile,
                            required=compile_check, log=lambda line: log(escape(line)),
                            progress=current_bar())  # the bar: PTX per kernel, then each arch's cubins
    except BuildError as e:
        click.echo(f"netgen: error: {e} (use --no-compile to keep an unchecked module)", err=True)
        raise SystemExit(1) from None
    click.echo(f"wrote {path}")
    if out_dir.resolve() == (Path.cwd() / "generated").resolve():
        click.echo(f"from generated.{path.stem} import Layer")
    else:
        click.echo(f"import netgen; Layer = netgen.load({os.fspath(path)!r}).Layer")
