"""``netgen verify FILE``: prove a network (0-1 principle) or find a
counterexample. Exit 0 proved, 1 counterexample or not proved, 2 bad input."""

from __future__ import annotations

import json
import sys
import time

import click

from .common import escape, handle_errors, log, max_size_option


@click.command("verify")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a line.")
@click.option(
    "--method",
    type=click.Choice(["auto", "exhaustive", "reachable", "sample"]),
    default="auto",
    show_default=True,
    help="exhaustive 0-1 testing, reachable states, random sampling, or pick automatically.",
)
@click.option("--samples", type=click.IntRange(min=1), default=None,
              help="Random inputs when sampling (default 100,000, fewer for networks so large that it would take "
                   "more than about a minute).")
@max_size_option
@handle_errors
def command(file, as_json, method, samples):
    """Prove FILE (netgen JSON, Dobbelaere JSON or layer text) sorts / selects
    its top k correctly, or print an input it gets wrong."""
    from ..io import load
    from ..verify import verify

    net = load(file)
    t0 = time.perf_counter()

    def progress(done, total, states):
        if time.perf_counter() - t0 > 1.0:
            log(f"netgen verify: {done}/{total} comparators, {states} states")

    if net.size > 5000 or net.n > 26:
        log(f"netgen verify: n={net.n} k={net.k} depth={net.depth} size={net.size}, method {method}")
    report = verify(net, method=method, samples=samples, progress=progress)
    if as_json:
        d = report.to_dict()
        d.update(n=net.n, k=net.k)
        click.echo(json.dumps(d))
    else:
        click.echo(escape(f"{file}: {report} in {report.seconds:.3f} s"))
    sys.exit(0 if report.status == "proved" else 1)
