"""The P engine's plan: its build-time decisions, made once per emit and
handed to the target's emitter (docs/targets.md, "the P engine").

P (k x n per batch row) is computed by one sweep over *lanes*: back over the
k output ranks (``R <- R M_l``, last comparator first: P's rows) or forward
over the n input columns (``A <- M_l A`` from the identity, first comparator
first: P's columns). Each comparator touches only the lanes of its range in
:func:`netgen.codegen.runtime.tables.plan` (its output cone going back, its
input cone going forward); ``nnz`` counts those (comparator, lane) pairs.

:func:`choose` decides, for a network and a target's :class:`Budget`:

* **direction**: forward where k > n / 2 (its
  state is n x n per row instead of k x n) and it needs at most
  :data:`FORWARD_MAX_RATIO` times the back-sweep's pairs; else back. A
  target whose engine cannot sweep forward (``Budget.forward`` False: the
  torch target, whose engine computes P's rows by rank groups) always
  sweeps back, and forcing ``direction="forward"`` on it is a ValueError;
* **mode** (:func:`keeps_differences`, the one save rule): ``"save"`` keeps
  the sweep's differences D from the forward for the backward, where the
  floats D holds per batch row (``stored``: the plan's nnz, or size x lanes
  for an engine that keeps every lane of every comparator, ``Budget.dense``)
  are at most ``save_per_kn`` k n or at most ``save_floats``; otherwise
  ``"recompute"``: the backward runs the sweep again;
* **group**: lanes per group, by the target's rule (``Budget.group``; None:
  chosen per call by the module), a forced group clipped to the lanes.

Each target's numbers (the budgets) sit in its package with their
measurements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # pragma: no cover
    from ..network import Network

__all__ = ["DIRECTIONS", "MODES", "FORWARD_MAX_RATIO", "Budget", "Plan", "check_overrides", "choose", "keeps_differences",
           "pairs", "sweep_ranges"]

DIRECTIONS = ("back", "forward")
MODES = ("save", "recompute")
# Sorters have far smaller input cones in their early layers than output
# cones: the odd-even merge sorter needs 0.75 (n = 32), 0.52 (256), 0.43
# (1024) and 0.36 (4096) times the back-sweep's (comparator, lane) pairs
# going forward, while a top-5 network's forward sweep would carry all n
# columns (2,100x the pairs at (5, 10450)).
FORWARD_MAX_RATIO = 0.8


def _all_lanes(direction: str, mode: str, n: int, lanes: int) -> int | None:
    return lanes


@dataclass(frozen=True)
class Budget:
    """A target's numbers for the plan (see the module docstring)."""

    save_per_kn: float  # keep D where the floats it holds per row are <= save_per_kn * k * n ...
    save_floats: int = 0  # ... or <= save_floats
    dense: bool = False  # D holds every lane of every comparator (size x lanes), not the plan's nnz
    forward: bool = True  # the engine can sweep forward over the input columns
    #: lanes per group from (direction, mode, n, lanes); None: chosen per call by the module
    group: Callable[[str, str, int, int], int | None] = _all_lanes


@dataclass(frozen=True)
class Plan:
    """The engine's build-time decisions for one network and target."""

    direction: str  # "back" or "forward"
    mode: str  # "save" or "recompute"
    group: int | None  # lanes per group; None: chosen per call by the module
    nnz: int  # (comparator, lane) pairs of the sweep (runtime.tables.plan)
    lanes: int  # k going back, n going forward
    stored: int  # floats D holds per batch row in mode "save"


def keeps_differences(stored: int, k: int, n: int, budget: Budget) -> bool:
    """The save rule: keep the sweep's differences from the forward where
    they hold at most ``budget.save_per_kn`` k n or ``budget.save_floats``
    floats per batch row (then writing and reading them costs less than a
    second sweep)."""
    return stored <= budget.save_per_kn * k * n or stored <= budget.save_floats


#: the last (network, direction, ranges) computed, by identity (a network's
#: content key hashes all its comparators: ~5 ms at n = 16,384)
_RECENT: list = []


def sweep_ranges(net: "Network", direction: str) -> tuple:
    """(clo, chi, doff) of the P sweep in ``direction``
    (:func:`netgen.codegen.runtime.tables.plan`), kept for the last two
    (network, direction) pairs: :func:`choose` counts them, a layer built
    right after uses them (the numba operator layers' tables)."""
    from .runtime.tables import plan  # imports torch: only when building

    for got, d, ranges in list(_RECENT):
        if got is net and d == direction:
            return ranges
    ranges = plan(net.n, net.comparators, net.layer_offsets, list(net.outputs), direction)
    _RECENT[:] = [(net, direction, ranges)] + _RECENT[:1]
    return ranges


def pairs(net: "Network", direction: str) -> int:
    """The (comparator, lane) pairs of the P sweep in ``direction``."""
    return int(sweep_ranges(net, direction)[2][-1])


def check_overrides(direction: str | None, mode: str | None, group: int | None) -> None:
    """ValueError unless each forced choice (None: the rule's) is valid."""
    if direction is not None and direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if group is not None and (isinstance(group, bool) or not hasattr(group, "__index__") or int(group) < 1):
        raise ValueError(f"group must be a positive integer, got {group!r}")


def choose(net: "Network", budget: Budget, direction: str | None = None, mode: str | None = None,
           group: int | None = None) -> Plan:
    """The plan for ``net`` under ``budget``; ``direction`` / ``mode`` /
    ``group`` force those choices (tests, benchmarks). The sweep's pairs are
    counted once per direction looked at."""
    check_overrides(direction, mode, group)
    k, n = net.k, net.n
    if not budget.forward:
        if direction == "forward":
            raise ValueError("this target sweeps back only (its engine computes P's rows): direction must be 'back'")
        direction = "back"
    if direction is None:  # forward where k > n / 2 and FORWARD_MAX_RATIO allows; each direction counted once
        nnz = pairs(net, "back")
        direction = "back"
        if k * 2 > n:
            forward = pairs(net, "forward")
            if forward <= FORWARD_MAX_RATIO * nnz:
                direction, nnz = "forward", forward
    else:
        nnz = pairs(net, direction)
    lanes = n if direction == "forward" else k
    stored = net.size * lanes if budget.dense else nnz
    if mode is None:
        mode = "save" if keeps_differences(stored, k, n, budget) else "recompute"
    if group is None:
        group = budget.group(direction, mode, n, lanes)
    else:
        group = min(int(group), max(lanes, 1))
    return Plan(direction, mode, group, nnz, lanes, stored)
