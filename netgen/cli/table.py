"""``netgen table``: Table 6 of the DiffTopK paper rebuilt from real
constructions (after prune, clean and ASAP scheduling), our depth and size
beside the paper's depth."""

from __future__ import annotations

import json

import click

from .common import handle_errors, progress

# DiffTopK paper, Table 6 (depths). "sel" = odd-even / bitonic / pairwise
# Wah-Chen selection networks, which the paper gives one column for.
PAPER = {
    16: {"sort": 10, "sel": [4, 7, 9, 9, 10, 10, 10, 10], "splitter": [4, 6, 7, 8, 10, 11, 12, 13]},
    1024: {"sort": 55, "sel": [10, 19, 27, 27, 34, 34, 34, 34], "splitter": [10, 14, 16, 18, 22, 25, 27, 29]},
    10450: {"sort": 105, "sel": [14, 27, 39, 39, 50, 50, 50, 50], "splitter": [14, 18, 20, 23, 27, 30, 32, 34]},
    65536: {"sort": 136, "sel": [16, 31, 45, 45, 58, 58, 58, 58], "splitter": [16, 20, 22, 25, 29, 32, 34, 36]},
}


def columns() -> list[tuple[str, str]]:
    """(kind, column) for every construction compared in Table 6, from the
    construction registry (``table6``), in the paper's column order (then
    registry order); column "sort" is the kind's full sorter (k = n), any
    other a top-k column."""
    from ..construct.registry import REGISTRY

    order = list(next(iter(PAPER.values())))
    return sorted(((c.name, col) for c in REGISTRY.values() for col in c.table6), key=lambda kc: order.index(kc[1]))


def sorter_kinds() -> list[str]:
    """The kinds with a full-sorter cell (column "sort")."""
    return [kind for kind, col in columns() if col == "sort"]


def column_of(kind: str, k: int, n: int) -> str | None:
    """The Table 6 column in which ``construct(kind, n, k)`` is a cell, or None."""
    cols = [col for kd, col in columns() if kd == kind and (col == "sort") == (k == n)]
    return cols[0] if cols else None


def cells(ns=tuple(PAPER), ks=range(1, 9)):
    """(n, k, kind, column) for every cell: full sorters per kind, then per
    k the top-k cells of every kind (selection networks, splitter)."""
    cols = columns()
    for n in ns:
        for kind, col in cols:
            if col == "sort":
                yield n, n, kind, col
        for k in ks:
            for kind, col in cols:
                if col != "sort":
                    yield n, k, kind, col


def measure(n, k, kind, column, clean=True, built=None):
    """One cell; ``built`` maps (n, k, kind, column) to networks the best
    column already built with the same passes (reused, not rebuilt)."""
    from ..compiler import build_network, compile_network
    from ..passes.pipeline import DEFAULT_PASSES, STRUCTURAL_PASSES

    net = (built or {}).get((n, k, kind, column)) if clean else None
    if net is None:
        passes = DEFAULT_PASSES if clean else STRUCTURAL_PASSES
        net = compile_network(build_network(n, k, kind), passes=passes, verify=False).network
    paper = PAPER[n]["sort"] if column == "sort" else PAPER[n][column][k - 1]
    return {"n": n, "k": k, "kind": kind, "column": column, "depth": net.depth, "size": net.size, "paper_depth": paper}


def best_cells(ns=tuple(PAPER), ks=range(1, 9), built=None, sort=True):
    """The best proven network per cell (the portfolio of ``netgen build``,
    objective depth): the full sorter where a proof exists (n <= 64) and
    every k. ``paper_depth`` is the paper's best for that cell (selection
    or splitter). The candidates the portfolio built are stored in
    ``built`` under their cell of the main table.

    The proof is the one the cleanup pass runs (a complete verifier on the
    network before its never-swapping comparators are removed, which changes
    no output); the second proof ``netgen build`` runs after the passes is
    skipped here, it would double the time at n = 65536."""
    from ..portfolio import choose

    for n in ns:
        for k in ([n] if n <= 64 and sort else []) + list(ks):
            compiled, cands = choose(n, k, "depth", verify=False)
            for c in cands:
                column = column_of(c.kind, k, n) if c.proposal.is_construct else None
                if c.compiled is not None and built is not None and column is not None:
                    built[(n, k, c.kind, column)] = c.network
            net = compiled.network
            clean = [r for r in compiled.passes if r.name == "clean"]
            proof = (f"proved ({clean[0].fires_from}, by the cleanup)"
                     if clean and clean[0].applied else f"not proved ({clean[0].note if clean else 'no cleanup'})")
            paper = PAPER[n]["sort"] if k == n else min(PAPER[n]["sel"][k - 1], PAPER[n]["splitter"][k - 1])
            yield {"n": n, "k": k, "kind": net.construction.get("kind"), "column": "best", "depth": net.depth,
                   "size": net.size, "paper_depth": paper, "proof": proof}


def _job(job, clean):
    """One unit of parallel work: ``("sort", n, kind)`` -> the full-sorter
    cell of ``kind``; ``("k", n, k)`` -> the best-proven row of (n, k) (with
    ``clean``) and the selection and splitter cells of (n, k), which reuse
    the networks the portfolio built for the best row. Returns
    ``(rows, best)``: lists of cell dicts."""
    if job[0] == "sort":
        _, n, kind = job
        return [measure(n, n, kind, "sort", clean=clean)], []
    _, n, k = job
    built = {}
    if k == n:  # the best-proven sorter (n <= 64): no main-table cell of its own
        return [], list(best_cells((n,), [], built=built)) if clean else []
    best = list(best_cells((n,), [k], built=built, sort=False)) if clean else []
    rows = [measure(n, k, kind, col, clean=clean, built=built) for kind, col in columns() if col != "sort"]
    return rows, best


def jobs(ns, clean, ks=range(1, 9)):
    """The work of the table, largest first (so the slowest jobs start first)."""
    out = [("sort", n, kind) for n in ns for kind in sorter_kinds()]
    out += [("k", n, k) for n in ns for k in ks]
    if clean:
        out += [("k", n, n) for n in ns if n <= 64]
    return sorted(out, key=lambda j: -j[1])


def workers(n_jobs: int) -> int:
    """Processes for the table: the cores this process may use (at most one
    per job); 1 means in this process."""
    import os

    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, n_jobs))


def run_table(ns, clean, progress=None, max_workers=None):
    """``(rows, best)`` in the table's order, computed in parallel over jobs
    (a process pool sized to the cores) with the built networks reused within
    each (n, k)."""
    todo = jobs(ns, clean)
    nproc = max_workers or workers(len(todo))
    results = {}
    bar = progress(total=len(todo), desc="netgen table") if progress else None
    if nproc <= 1:
        for j in todo:
            results[j] = _job(j, clean)
            if bar is not None:
                bar.update(1)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        ctx = multiprocessing.get_context("fork") if hasattr(__import__("os"), "fork") else None
        with ProcessPoolExecutor(max_workers=nproc, mp_context=ctx) as pool:
            futures = {pool.submit(_job, j, clean): j for j in todo}
            for f in as_completed(futures):
                results[futures[f]] = f.result()
                if bar is not None:
                    bar.update(1)
    if bar is not None:
        bar.close()
    order = {cell: i for i, cell in enumerate(cells(ns))}
    rows = sorted((r for rs, _ in results.values() for r in rs),
                  key=lambda r: order[(r["n"], r["k"], r["kind"], r["column"])])
    best_order = {(n, k): i for i, (n, k) in enumerate((n, k) for n in ns for k in ([n] if n <= 64 else []) + list(range(1, 9)))}
    best = sorted((b for _, bs in results.values() for b in bs), key=lambda b: best_order[(b["n"], b["k"])])
    return rows, best


@click.command("table")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line of cells.")
@click.option("--n", "ns", type=click.Choice([str(n) for n in PAPER]), multiple=True, help="Only these n (repeatable).")
@click.option("--no-clean", "no_clean", is_flag=True, help="Skip the never-swapping cleanup (construction + ASAP only: fast; "
              "leaves out the best-proven column, which needs proofs).")
@click.option("--jobs", "n_jobs", type=int, default=None,
              help="worker processes (default: one per core this process may use; 1: no pool)")
@handle_errors
def command(as_json, ns, no_clean, n_jobs):
    """Rebuild Table 6 (DiffTopK paper) from netgen's own constructions, with
    the best proven network per cell.

    Cells run in parallel (a process pool, one process per core) and the
    networks the best-proven column builds are reused for the other columns
    of the same (n, k). A progress bar shows on a terminal (stderr)."""
    if n_jobs is not None and n_jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {n_jobs}")
    ns = tuple(int(n) for n in ns) or tuple(PAPER)
    rows, best = run_table(ns, not no_clean, progress=progress, max_workers=n_jobs)
    if as_json:
        click.echo(json.dumps({"cells": rows, "best": best}, indent=1))
        return
    click.echo(render(rows))
    if best:
        click.echo("")
        click.echo(render_best(best))


def render(rows) -> str:
    """A Markdown table: per n and column kind, 'ours/paper' depths for k = 1..8
    and sizes."""
    lines = ["| n | network | depth: ours / paper | size |", "|---|---|---|---|"]
    by = {}
    for r in rows:
        by.setdefault((r["n"], r["kind"], r["column"]), []).append(r)
    for (n, kind, column), rs in by.items():
        label = f"{kind} sorter" if column == "sort" else f"{kind} (k=1..{len(rs)})"
        depth = " ".join(f"{r['depth']}/{r['paper_depth']}" for r in rs)
        size = " ".join(str(r["size"]) for r in rs)
        lines.append(f"| {n} | {label} | {depth} | {size} |")
    return "\n".join(lines)


def render_best(best) -> str:
    """The best proven network per (n, k): kind, depth (ours / the paper's
    best column) and size; bold where netgen is shallower than the paper."""
    lines = ["| n | k | best proven | depth: ours / paper's best | size |", "|---|---|---|---|---|"]
    for r in best:
        k = "n (sort)" if r["k"] == r["n"] else str(r["k"])
        depth = f"{r['depth']}/{r['paper_depth']}"
        if r["depth"] < r["paper_depth"]:
            depth = f"**{depth}**"
        lines.append(f"| {r['n']} | {k} | {r['kind']} | {depth} | {r['size']} |")
    return "\n".join(lines)
