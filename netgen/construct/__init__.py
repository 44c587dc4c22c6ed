"""Constructions: sorting networks, Wah-Chen selection networks and splitter
selection networks, for any n >= 1 and 1 <= k <= n.

``construct(kind, n, k)`` builds the network and nothing else: no passes
(beyond the cone pruning and ASAP packing every construction ends with) and
no proof; :func:`netgen.compiler.compile` adds those. ``build`` is its old
name, kept as an alias.

* ``k`` None or ``k == n``: the full sorter of ``kind`` (outputs 0..n-1:
  wire r holds rank r). ``splitter`` needs ``k``; ``k == n`` is allowed and
  gives the splitter construction run to the end, which is a sorter.
* ``k < n``: bitonic / oddeven / pairwise give the Wah-Chen selection network
  made of that kind's sorter and merger (:mod:`.selection`); transposition
  gives its sorter cone-pruned to the k outputs; splitter the DiffTopK
  splitter network (:mod:`.splitter`), or the splitter-tail network
  (:mod:`.splitter_tail`: same first cascade, a shallower finish) where
  that is shallower.
* ``best`` (2 <= n <= 64): the best-known sorter (SorterHunter, shipped in
  the package; :mod:`.best`) by ``objective``, cone-pruned to the top k.
* ``record`` (the cells of the shipped record table, k < n): the
  shallowest ("depth") or smallest ("size") proved top-k selector netgen
  knows for (n, k) (:mod:`.record`, docs/records.md); ValueError for a cell
  the table does not have.

Every result is cone-pruned to its outputs where that can remove anything,
packed ASAP, never touches padding wires and has construction record
``{"kind": kind, "n": n, "k": k}``.
"""

from __future__ import annotations

from ..network import Network, check_budget
from ._common import MAX_COMPARATORS, check_nk, select_top
from .selection import selection, selection_depth, selection_size_estimate
from .sorters import sorter, sorter_size_estimate
from .splitter import splitter_size_estimate, splitter_trace
from .splitter_tail import shallowest_splitter

#: constructions for any n >= 1
KINDS = ("splitter", "bitonic", "oddeven", "pairwise", "transposition")
#: everything ``construct`` accepts: the constructions, the shipped best-known networks (2 <= n <= 64)
#: and the shipped record table (its cells only)
ALL_KINDS = KINDS + ("best", "record")


def size_estimate(kind: str, n: int, k: int | None = None) -> int:
    """Roughly how many comparators ``construct(kind, n, k)`` creates while
    building (an upper bound for all kinds but splitter)."""
    _check_kind(kind)
    n, k = check_nk(n, k)
    k = n if k is None else k
    if kind == "splitter":
        return splitter_size_estimate(n, k)
    if kind in ("best", "record"):
        return n * n
    if k == n or kind == "transposition":
        return sorter_size_estimate(kind, n)
    return selection_size_estimate(n, k)


def smallest_estimate(n: int, k: int | None = None) -> int:
    """The smallest :func:`size_estimate` over the constructions for any n."""
    return min(size_estimate(kind, n, k) for kind in KINDS if kind != "splitter" or k is not None)


def construct(kind: str, n: int, k: int | None = None, objective: str = "size", *,
          max_size: int | None = None) -> Network:
    """Construct the network of ``kind`` (one of :data:`ALL_KINDS`) on n wires
    with k outputs (None: a sorter). ``objective`` ("size" or "depth")
    chooses among the best-known networks for ``best`` and is ignored by the
    other kinds. ValueError for bad arguments; :class:`netgen.network.SizeLimitError`
    (a ValueError), before anything is allocated, when :func:`size_estimate`
    plus n is over ``max_size`` (default :data:`netgen.network.DEFAULT_MAX_SIZE`,
    10 million; the CLI's ``--max-size``)."""
    _check_kind(kind)
    n, k = check_nk(n, k)
    if kind == "splitter" and k is None:
        raise ValueError("the splitter network needs k (1 <= k <= n)")
    check_budget(f"{kind} network at n = {n}, k = {n if k is None else k}", size_estimate(kind, n, k) + n, max_size)
    if kind == "best":
        from .best import best

        return best(n, k, objective)
    if kind == "record":
        from .record import record

        return record(n, k, objective)
    if kind == "splitter":
        return shallowest_splitter(n, k)
    if k is None or k == n:
        return sorter(kind, n)
    if kind == "transposition":
        full = sorter(kind, n)  # checks the size first
        return select_top(full, k, {"kind": kind, "n": n, "k": k})
    return selection(kind, n, k)


#: the old name of :func:`construct`
build = construct


def _check_kind(kind: object) -> None:
    if not isinstance(kind, str) or kind not in ALL_KINDS:
        raise ValueError(f"unknown network kind {kind!r}; choose one of {', '.join(ALL_KINDS)}")


__all__ = [
    "KINDS",
    "ALL_KINDS",
    "construct",
    "build",
    "size_estimate",
    "smallest_estimate",
    "selection_depth",
    "splitter_trace",
    "MAX_COMPARATORS",
]
