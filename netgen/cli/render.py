"""``netgen render``: draw a network (Knuth diagram, comparator DAG or
summary view) to svg/png/pdf, or write its DAG as graphviz dot source."""

from __future__ import annotations

import click

from ..construct import ALL_KINDS as KINDS
from ..construct.best import OBJECTIVES
from .common import BadInput, handle_errors, log


@click.command("render")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--n", "n", type=int, help="Construct a network with N wires instead of reading FILE.")
@click.option("--k", "k", type=int, help="Outputs (top-k) of the constructed network; omitted: a full sorter.")
@click.option("--network", "kind", type=click.Choice(KINDS), help="Construction (default as in netgen build: the portfolio's best).")
@click.option("--objective", type=click.Choice(OBJECTIVES), help="As in netgen build: what the portfolio or --network best minimises first.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Output file; the suffix picks the format: .svg, .png, .pdf, or .dot (DAG source).")
@click.option("--dag", is_flag=True, help="Draw the comparator DAG laid out by graphviz dot (needs the dot binary).")
@click.option("--summary/--full", "summary", default=None,
              help="Force the summary view or the full Knuth diagram (default: full up to 64 wires "
                   "and 1500 comparators, summary above).")
@click.option("--min-ranks", is_flag=True, help="Label wires with their exact minimum ranks, mark discarded "
                                                "wires and fixed ranks (Knuth diagram; DiffTopK Figure 5).")
@click.option("--passes/--no-passes", "passes", default=True, show_default=True,
              help="With --n: run prune, clean, schedule as netgen build does.")
@click.option("--title", help="Title line (default: kind, n, k, depth, size).")
@handle_errors
def command(file, n, k, kind, objective, output, dag, summary, min_ranks, passes, title):
    """Draw a network.

    \b
    netgen render --n 16 --k 5 --network splitter --min-ranks -o splitter_16_5.png
    netgen render --n 10450 --k 5 -o splitter_10450_5.png      (summary view)
    netgen render net.json --dag -o net.svg                    (needs graphviz)
    netgen render net.json -o net.dot                          (dot source)
    """
    from ..render import DotMissing, output_format, render

    if not dag and output_format(output) != "dot":  # before a possibly long build
        from ..extras import require

        require("matplotlib", f"netgen render -o {output}")
    net = _network(file, n, k, kind, objective, passes)
    view = {None: "auto", True: "summary", False: "full"}[summary]
    try:
        used = render(net, output, view=view, dag=dag, min_ranks=min_ranks, title=title)
    except DotMissing as e:
        raise BadInput(str(e)) from None
    if min_ranks and used != "knuth":
        log("note: minimum ranks are drawn only in the Knuth diagram (not the summary view or the DAG)")
    click.echo(f"wrote {output} ({_describe(used)}): n={net.n} k={net.k} depth={net.depth} size={net.size}")


def _network(file, n, k, kind, objective, passes):
    if file is not None:
        if n is not None or k is not None or kind is not None or objective is not None:
            raise BadInput("FILE gives the network: do not combine it with --n, --k or --network")
        from ..io import load

        return load(file)
    if n is None:
        raise BadInput("give a network FILE, or --n N (with --k K and --network KIND)")
    from ..compiler import DEFAULT_PASSES, build, build_network, compile_network

    if kind is None:  # the portfolio proves its candidates while choosing
        return build(n, k, objective=objective, passes=DEFAULT_PASSES if passes else None).network
    net = build_network(n, k, kind, objective)
    if passes:
        net = compile_network(net, verify=False).network
    return net


def _describe(view: str) -> str:
    return {
        "knuth": "Knuth diagram",
        "summary": "summary view",
        "dag": "comparator DAG",
        "dot": "dot source",
    }[view]
