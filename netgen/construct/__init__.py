"""Constructions: sorting networks, Wah-Chen selection networks and splitter
selection networks, for any n >= 1 and 1 <= k <= n.

``build(kind, n, k)``:

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

from ..network import Network
from ._common import MAX_COMPARATORS, check_nk
from .selection import selection, selection_depth, selection_size_estimate
from .sorters import sorter, sorter_size_estimate
from .splitter import splitter_size_estimate, splitter_trace
from .splitter_tail import shallowest_splitter

#: constructions for any n >= 1
KINDS = ("splitter", "bitonic", "oddeven", "pairwise", "transposition")
#: everything ``build`` accepts: the constructions, the shipped best-known networks (2 <= n <= 64)
#: and the shipped record table (its cells only)
ALL_KINDS = KINDS + ("best", "record")


def size_estimate(kind: str, n: int, k: int | None = None) -> int:
    """Roughly how many comparators ``build(kind, n, k)`` creates while
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


def build(kind: str, n: int, k: int | None = None, objective: str = "size") -> Network:
    """Construct the network of ``kind`` (one of :data:`ALL_KINDS`) on n wires
    with k outputs (None: a sorter). ``objective`` ("size" or "depth")
    chooses among the best-known networks for ``best`` and is ignored by the
    other kinds. ValueError for bad arguments or sizes that would exhaust
    memory."""
    _check_kind(kind)
    n, k = check_nk(n, k)
    if kind == "best":
        from .best import best

        return best(n, k, objective)
    if kind == "record":
        from .record import record

        return record(n, k, objective)
    if kind == "splitter":
        if k is None:
            raise ValueError("the splitter network needs k (1 <= k <= n)")
        return shallowest_splitter(n, k)
    if k is None or k == n:
        return sorter(kind, n)
    if kind == "transposition":
        from ..passes.prune import prune
        from ..passes.schedule import asap

        full = sorter(kind, n)  # checks the size first
        return asap(prune(full.with_(outputs=full.outputs[:k], construction={"kind": kind, "n": n, "k": k})))
    return selection(kind, n, k)


def _check_kind(kind: object) -> None:
    if not isinstance(kind, str) or kind not in ALL_KINDS:
        raise ValueError(f"unknown network kind {kind!r}; choose one of {', '.join(ALL_KINDS)}")


__all__ = [
    "KINDS",
    "ALL_KINDS",
    "build",
    "size_estimate",
    "selection_depth",
    "splitter_trace",
    "MAX_COMPARATORS",
]
