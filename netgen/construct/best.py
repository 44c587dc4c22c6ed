"""The best-known sorting networks for 2 <= n <= 64, shipped as package data.

The files are Bert Dobbelaere's SorterHunter networks (MIT license, see
``netgen/data/sorters-dobbelaere/``): for each n the smallest and the
shallowest network anyone has found. ``best_sorter(n, objective)`` picks one
by ``objective`` ("size": fewest comparators, then depth; "depth": shallowest,
then fewest) and ``best(n, k, objective)`` cone-prunes every file for n to
the top k and picks among the pruned networks the same way.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

from ..network import Network
from ._common import check_nk, select_top

DATA = ("data", "sorters-dobbelaere")
OBJECTIVES = ("size", "depth")
N_MIN, N_MAX = 2, 64


@dataclass(frozen=True)
class Entry:
    """One shipped file: its name and the (n, size, depth) its name states."""

    name: str
    n: int
    size: int
    depth: int


def data_dir():
    """The folder holding the shipped files (a Traversable inside the package)."""
    root = resources.files("netgen")
    for part in DATA:
        root = root / part
    return root


@functools.lru_cache(maxsize=1)
def index() -> tuple[Entry, ...]:
    """Every shipped network, sorted by (n, size, depth)."""
    entries = []
    for f in data_dir().iterdir():
        if f.name.startswith("Sort_") and f.name.endswith(".json"):
            _, n, size, depth = f.name[: -len(".json")].split("_")
            entries.append(Entry(f.name, int(n), int(size), int(depth)))
    return tuple(sorted(entries, key=lambda e: (e.n, e.size, e.depth)))


def check_objective(objective: object) -> str:
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    return objective


def objective_key(objective: str):
    """Sort key for networks (or anything with .size and .depth)."""
    check_objective(objective)
    if objective == "size":
        return lambda net: (net.size, net.depth)
    return lambda net: (net.depth, net.size)


def entries_for(n: int) -> list[Entry]:
    """The shipped files for n wires; ValueError outside 2..64."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"n must be an integer, got {n!r}")
    found = [e for e in index() if e.n == n]
    if not found:
        raise ValueError(
            f"best-known networks exist for {N_MIN} <= n <= {N_MAX} only, got n = {n}; "
            "the other constructions (--network) build any n"
        )
    return found


def load_entry(entry: Entry) -> Network:
    """Read one shipped file (N, L and D are rechecked by the reader)."""
    from ..io import loads

    text = (data_dir() / entry.name).read_text(encoding="utf-8")
    net = loads(text, source=entry.name)
    construction = {"kind": "best", "n": entry.n, "k": entry.n, "source": f"SorterHunter {entry.name[:-5]}"}
    return net.with_(construction=construction)


def best_sorter(n: int, objective: str = "size") -> Network:
    """The best-known sorter on n wires by ``objective``."""
    check_objective(objective)
    entry = min(entries_for(n), key=objective_key(objective))
    return load_entry(entry)


def best(n: int, k: int | None = None, objective: str = "size") -> Network:
    """The best-known sorter for n wires, cone-pruned to the top k outputs
    (k None or n: the sorter itself). Every shipped file for n is pruned and
    the best by ``objective`` is kept (the file that is best as a sorter need
    not be best as a top-k selector)."""
    check_objective(objective)
    n, k = check_nk(n, k)
    entries = entries_for(n)
    if k is None or k == n:
        return best_sorter(n, objective)
    pruned = []
    for entry in entries:
        sorter = load_entry(entry)
        pruned.append(select_top(sorter, k, {**sorter.construction, "k": k}))
    return min(pruned, key=objective_key(objective))
