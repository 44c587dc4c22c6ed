"""The construction registry: every construction netgen builds, registered
once with what the rest of netgen needs to know about it.

A :class:`Construction` is a name (the ``kind`` of ``construct`` and of
``netgen build --network``), a family, a build function, an upper bound on
the comparators it creates (checked before anything is allocated), its
typical size (what the time estimate charges), its **portfolio rule** (the
candidates it proposes at (n, k), each a :class:`Proposal`) and the columns
of the DiffTopK paper's Table 6 it is compared in (``netgen table``).

``construct``, :mod:`netgen.portfolio`, :mod:`netgen.estimate`,
``netgen table``, the CLI's ``--network`` choices and the tests' kind lists
all iterate :data:`REGISTRY`; nothing outside this file dispatches on a
construction's name.

Adding a construction: its file in ``netgen/construct/`` (a build function
and a size bound) and one :func:`register` call below. Its row in the
constructions table of docs/concepts.md and its name in docs/cli.md's
``--network`` row follow (``tests/test_doc_tables.py`` checks both against
this registry).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ..network import Network
from ._common import ceil_lg, select_top
from .best import N_MAX, N_MIN, best
from .record import has_record, record
from .selection import selection, selection_depth, selection_size_estimate
from .sorters import sorter, sorter_size_estimate
from .splitter import splitter_size_estimate
from .splitter_tail import shallowest_splitter

__all__ = ["Construction", "Proposal", "REGISTRY", "register", "get", "kinds_for", "family",
           "KINDS", "ALL_KINDS", "BATCHER"]

# The portfolio's stages, tried in this order: the likely winners first (a
# candidate proved early lets the portfolio skip larger ones that cannot
# win), the record table last so that it is chosen only where it is strictly
# better (ties keep the construction that built it).
STAGE_BEST_KNOWN, STAGE_SPLITTER, STAGE_SELECTION, STAGE_SORTER, STAGE_RECORD = range(5)


@dataclass(frozen=True)
class Proposal:
    """One candidate a construction puts into the portfolio at (n, k)."""

    kind: str  # the construction proposing it
    label: str  # e.g. "oddeven selection", "best (SorterHunter, pruned)"
    est_depth: int | None  # depth formula before cleanup (None: not known before building)
    est_size: int  # comparators built (an upper bound)
    make: Callable[[], Network]
    stage: int  # the portfolio tries lower stages first (STAGE_*)
    typical_depth: float | None = None  # the time estimate's depth (None: est_depth)
    typical_size: float | None = None  # the time estimate's size (None: est_size)
    is_construct: bool = False  # make() is construct(kind, n, k) itself (netgen table reuses it)
    #: (depth, size) of the network the portfolio gets after the passes, where known without building it
    exact: tuple[int, int] | None = None


def _no_proposals(n: int, k: int, objective: str) -> list[Proposal]:
    return []


@dataclass(frozen=True)
class Construction:
    """A construction: see the module doc. ``build(n, k, objective)`` gets a
    checked n and k (None: a sorter); ``size_estimate(n, k)`` and
    ``typical_size(n, k)`` get k filled in (k = n for a sorter)."""

    name: str
    family: str  # "splitter", "batcher", "transposition", "best-known", "record"
    build: Callable[[int, int | None, str], Network]
    size_estimate: Callable[[int, int], int]  # comparators built, an upper bound
    proposals: Callable[[int, int, str], list[Proposal]] = _no_proposals  # the portfolio rule
    typical_size: Callable[[int, int], float] | None = None  # fitted (the time estimate); None: size_estimate
    available: Callable[[int, int | None], bool] = lambda n, k: True  # where it exists (checked n, k)
    any_n: bool = True  # builds for every n >= 1 (and every k unless needs_k)
    needs_k: bool = False  # k = None is refused (it is no sorter construction)
    few_states: bool = False  # few reachable states: its proof is much cheaper (netgen.estimate)
    table6: tuple[str, ...] = ()  # Table 6 columns ("sort": k = n; others: k < n) it is compared in

    def estimated_size(self, n: int, k: int) -> float:
        """What the time estimate charges for building it at (n, k)."""
        upper = self.size_estimate(n, k)
        return upper if self.typical_size is None else min(upper, self.typical_size(n, k))


REGISTRY: dict[str, Construction] = {}


def register(c: Construction) -> Construction:
    if c.name in REGISTRY:
        raise ValueError(f"construction {c.name!r} registered twice")
    REGISTRY[c.name] = c
    return c


def get(kind: object) -> Construction:
    """The construction named ``kind``; ValueError naming the choices."""
    if not isinstance(kind, str) or kind not in REGISTRY:
        raise ValueError(f"unknown network kind {kind!r}; choose one of {', '.join(REGISTRY)}")
    return REGISTRY[kind]


def family(name: str) -> tuple[str, ...]:
    """The kinds of one family, in registry order."""
    return tuple(c.name for c in REGISTRY.values() if c.family == name)


def kinds_for(n: int, k: int | None = None, *, max_size: int | None = None) -> tuple[str, ...]:
    """The kinds ``construct(kind, n, k)`` builds (k None: a sorter), in
    registry order; with ``max_size``, those whose size estimate is at most
    that many comparators."""
    kk = n if k is None else k
    return tuple(c.name for c in REGISTRY.values()
                 if c.available(n, k) and not (c.needs_k and k is None)
                 and (max_size is None or c.size_estimate(n, kk) <= max_size))


# ------------------------------------------------------------------ splitter
def splitter_typical_depth(n: int, k: int) -> float:
    """A fit of the splitter network's depth after cleanup (within a few
    layers for 256 <= n <= 65536, 2 <= k <= 64): lg n + f(k)."""
    lk = math.log2(max(k, 1))
    return math.log2(max(n, 2)) + max(lk * (lk + 5) / 1.5, k + 6 if k > 8 else 0)


def splitter_typical_size(n: int, k: int) -> float:
    """A fit of the splitter network's size after construction: about
    n (lg k + 1) comparators (measured 2n at k = 2, 3n at k = 4, 4n at
    k = 8, 7.2n at k = 64; its size estimate is a loose upper bound)."""
    return 1.1 * n * (math.log2(max(k, 1)) + 1)


def _splitter_proposals(n: int, k: int, objective: str) -> list[Proposal]:
    if k >= n:
        return []
    return [Proposal("splitter", "splitter", None, splitter_size_estimate(n, k),
                     lambda: shallowest_splitter(n, k), STAGE_SPLITTER,
                     typical_depth=splitter_typical_depth(n, k), typical_size=splitter_typical_size(n, k),
                     is_construct=True)]


register(Construction(
    "splitter", "splitter",
    build=lambda n, k, objective: shallowest_splitter(n, k),
    size_estimate=splitter_size_estimate,
    typical_size=splitter_typical_size,
    proposals=_splitter_proposals,
    needs_k=True,
    table6=("splitter",),
))


# ----------------------------------------------- Batcher sorters and Wah-Chen
def _batcher_build(kind: str):
    def build(n: int, k: int | None, objective: str) -> Network:
        return sorter(kind, n) if k is None or k == n else selection(kind, n, k)
    return build


def _batcher_size(kind: str):
    def size(n: int, k: int) -> int:
        return sorter_size_estimate(kind, n) if k == n else selection_size_estimate(n, k)
    return size


def _pruned_sorter(kind: str, n: int, k: int) -> Network:
    """The full ``kind`` sorter cone-pruned to its top k outputs."""
    return select_top(sorter(kind, n), k, {"kind": kind, "n": n, "k": k, "from": "sorter"})


def sorter_exact(kind: str, n: int) -> tuple[int, int] | None:
    """(depth, size) of the ``kind`` sorter after the passes at n = 2^L > 64
    (None elsewhere): no padding, already ASAP (depth L (L + 1) / 2), and no
    pass changes a sorter there (every wire is an output: nothing to prune;
    no complete method, so no cleanup). Sizes: bitonic N/2 L (L + 1) / 2,
    odd-even merge and pairwise (L^2 - L + 4) N/4 - 1 (Knuth 5.3.4). Checked
    against built networks in tests/construct/test_large_sorters.py."""
    L = ceil_lg(n)
    if n <= N_MAX or n != 1 << L:
        return None
    size = n // 2 * (L * (L + 1) // 2) if kind == "bitonic" else (L * L - L + 4) * n // 4 - 1
    return L * (L + 1) // 2, size


def _batcher_proposals(kind: str):
    def proposals(n: int, k: int, objective: str) -> list[Proposal]:
        L = ceil_lg(n)
        sorter_depth = L * (L + 1) // 2
        if k == n:
            return [Proposal(kind, f"{kind} sorter", sorter_depth, sorter_size_estimate(kind, n),
                             lambda: sorter(kind, n), STAGE_SORTER, is_construct=True,
                             exact=sorter_exact(kind, n))]
        return [Proposal(kind, f"{kind} selection", selection_depth(n, k), selection_size_estimate(n, k),
                         lambda: selection(kind, n, k), STAGE_SELECTION, is_construct=True),
                Proposal(kind, f"{kind} sorter, pruned", sorter_depth, sorter_size_estimate(kind, n),
                         lambda: _pruned_sorter(kind, n, k), STAGE_SORTER)]
    return proposals


for _kind in ("bitonic", "oddeven", "pairwise"):
    register(Construction(
        _kind, "batcher",
        build=_batcher_build(_kind),
        size_estimate=_batcher_size(_kind),
        proposals=_batcher_proposals(_kind),
        few_states=True,
        table6=("sort", "sel"),
    ))


# -------------------------------------------------------------- transposition
def _transposition_build(n: int, k: int | None, objective: str) -> Network:
    full = sorter("transposition", n)  # checks the size first
    if k is None or k == n:
        return full
    return select_top(full, k, {"kind": "transposition", "n": n, "k": k})


register(Construction(
    "transposition", "transposition",
    build=_transposition_build,
    size_estimate=lambda n, k: sorter_size_estimate("transposition", n),
))


# ------------------------------------------------------------------ best-known
def best_typical_size(n: int, k: int) -> float:
    """About the size of the best-known sorter on n <= 64 wires (521 at
    n = 64), an upper bound for its pruned top-k networks."""
    return n * math.log2(max(n, 2)) ** 2 / 4 + n


def _best_proposals(n: int, k: int, objective: str) -> list[Proposal]:
    if not N_MIN <= n <= N_MAX:
        return []
    label = "best (SorterHunter" + (", pruned)" if k < n else ")")
    return [Proposal("best", label, None, n * n, lambda: best(n, k, objective), STAGE_BEST_KNOWN,
                     typical_size=best_typical_size(n, k))]


register(Construction(
    "best", "best-known",
    build=best,
    size_estimate=lambda n, k: n * n,
    typical_size=best_typical_size,
    proposals=_best_proposals,
    available=lambda n, k: N_MIN <= n <= N_MAX,
    any_n=False,
))


# ---------------------------------------------------------------- record table
def record_typical_size(n: int, k: int) -> float:
    """The record networks are at most about twice the splitter's size."""
    return 2 * splitter_typical_size(n, k)


def _record_proposals(n: int, k: int, objective: str) -> list[Proposal]:
    if k >= n or not has_record(n, k):
        return []
    return [Proposal("record", "record (docs/records.md)", None, n * n, lambda: record(n, k, objective),
                     STAGE_RECORD, typical_size=record_typical_size(n, k))]


register(Construction(
    "record", "record",
    build=record,
    size_estimate=lambda n, k: n * n,
    typical_size=record_typical_size,
    proposals=_record_proposals,
    available=lambda n, k: has_record(n, k),
    any_n=False,
))


#: constructions for any n >= 1
KINDS = tuple(c.name for c in REGISTRY.values() if c.any_n)
#: everything ``construct`` accepts: the constructions, the shipped best-known networks (2 <= n <= 64)
#: and the shipped record table (its cells only)
ALL_KINDS = tuple(REGISTRY)
#: the Batcher-type sorters (and their Wah-Chen selection networks)
BATCHER = family("batcher")
