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

Each construction is registered once in :mod:`.registry` (its build,
size bound, family and portfolio rule); this module only dispatches
through it.

Every result is cone-pruned to its outputs where that can remove anything,
packed ASAP, never touches padding wires and has construction record
``{"kind": kind, "n": n, "k": k}``.
"""

from __future__ import annotations

from ..network import Network, check_budget
from ._common import MAX_COMPARATORS, check_nk
from .registry import ALL_KINDS, BATCHER, KINDS, REGISTRY, Construction, get, kinds_for
from .selection import selection_depth
from .splitter import splitter_trace


def size_estimate(kind: str, n: int, k: int | None = None) -> int:
    """Roughly how many comparators ``construct(kind, n, k)`` creates while
    building (an upper bound for all kinds but splitter)."""
    c = get(kind)
    n, k = check_nk(n, k)
    return c.size_estimate(n, n if k is None else k)


def smallest_estimate(n: int, k: int | None = None) -> int:
    """The smallest :func:`size_estimate` over the constructions for any n."""
    n, k = check_nk(n, k)
    return min(c.size_estimate(n, n if k is None else k) for c in REGISTRY.values()
               if c.any_n and not (c.needs_k and k is None))


def construct(kind: str, n: int, k: int | None = None, objective: str = "size", *,
          max_size: int | None = None) -> Network:
    """Construct the network of ``kind`` (one of :data:`ALL_KINDS`, the
    names of :data:`netgen.construct.registry.REGISTRY`) on n wires with k
    outputs (None: a sorter). ``objective`` ("size" or "depth") chooses
    among the best-known networks for ``best`` (and the record table's for
    ``record``) and is ignored by the other kinds. ValueError for bad
    arguments; :class:`netgen.network.SizeLimitError` (a ValueError), before
    anything is allocated, when :func:`size_estimate` plus n is over
    ``max_size`` (default :data:`netgen.network.DEFAULT_MAX_SIZE`, 10
    million; the CLI's ``--max-size``)."""
    c = get(kind)
    n, k = check_nk(n, k)
    if c.needs_k and k is None:
        raise ValueError(f"the {kind} network needs k (1 <= k <= n)")
    check_budget(f"{kind} network at n = {n}, k = {n if k is None else k}",
                 c.size_estimate(n, n if k is None else k) + n, max_size)
    return c.build(n, k, objective)


#: the old name of :func:`construct`
build = construct


def _check_kind(kind: object) -> None:
    """ValueError for a name that is not a registered construction
    (:func:`netgen.construct.registry.get`; netgen.compiler checks with it)."""
    get(kind)


__all__ = [
    "KINDS",
    "ALL_KINDS",
    "BATCHER",
    "REGISTRY",
    "Construction",
    "kinds_for",
    "construct",
    "build",
    "size_estimate",
    "smallest_estimate",
    "selection_depth",
    "splitter_trace",
    "MAX_COMPARATORS",
]
