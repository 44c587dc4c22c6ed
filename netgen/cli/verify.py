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
@click.option("--max-seconds", "max_seconds", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Refuse proofs estimated above this many CPU seconds (default 60); see docs/security.md.")
@max_size_option
@handle_errors
def command(file, as_json, method, samples, max_seconds):
    """Prove FILE (netgen JSON, Dobbelaere JSON or layer text) sorts / selects
    its top k correctly, or print an input it gets wrong."""
    from ..io import load
    from ..verify import verify

    net = load(file)
    _check_time(net, file, method, samples, max_seconds)
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


def _check_time(net, file, method, samples, max_seconds) -> None:
    """Refuse, before it starts, a proof estimated past the time budget
    (:mod:`netgen.estimate`; ``--max-seconds``)."""
    from ..estimate import SAMPLE_PER_UNIT, STARTUP, Estimate, check_time, proof_seconds, sample_seconds

    est = Estimate(f"verifying {file} (n = {net.n}, k = {net.k}, {net.size} comparators)")
    est.add("start-up", STARTUP)
    if method == "sample":
        est.add("sampling", sample_seconds(net.n, net.size) if samples is None
                else SAMPLE_PER_UNIT * samples * (net.size + net.n))
    elif method in ("auto", "reachable"):
        chosen, seconds = proof_seconds(net.n, net.k, net.size)
        if method == "reachable" or chosen != "sample":
            est.add(f"verify ({chosen if method == 'auto' else 'reachable'})", seconds)
        else:
            est.add("verify (sampling)", sample_seconds(net.n, net.size) if samples is None
                    else SAMPLE_PER_UNIT * samples * (net.size + net.n))
    check_time(est, max_seconds)  # exhaustive: bounded by the method's own input limits
