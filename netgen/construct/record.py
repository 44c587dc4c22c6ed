"""The record table (issue 22): the shallowest and the smallest proved sorted
top-k selection networks netgen knows, shipped as package data in
``netgen/data/records/`` (``index.json`` plus one netgen-network/1 file per
network, each with its provenance).

Semantics: ``outputs[r]`` holds rank r (rank 0 = the largest) of the n
inputs for r < k, i.e. the k largest as a *sorted* list (netgen's outputs
convention). The table and its lower bounds are produced by
``tools/records/records.py``; ``docs/records.md`` is rendered from it.

``record(n, k, objective)`` returns the cell's network ("depth": the
shallowest, then smallest; "size": the smallest, then shallowest);
ValueError for a cell that is not in the table.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

from ..network import Network
from ._common import check_nk

DATA = ("data", "records")
INDEX = "index.json"
FORMAT = "netgen-records/1"
OBJECTIVES = ("depth", "size")


def data_dir():
    root = resources.files("netgen")
    for part in DATA:
        root = root / part
    return root


@functools.lru_cache(maxsize=1)
def table() -> dict:
    """The parsed index (empty cells dict when no table is shipped)."""
    f = data_dir() / INDEX
    if not f.is_file():
        return {"format": FORMAT, "cells": {}}
    d = json.loads(f.read_text(encoding="utf-8"))
    if d.get("format") != FORMAT:
        raise ValueError(f"records index: unknown format {d.get('format')!r}")
    return d


def cell_key(n: int, k: int) -> str:
    return f"{n},{k}"


def cells() -> dict[tuple[int, int], dict]:
    """Every finished cell: (n, k) -> its index entry."""
    return {tuple(int(x) for x in key.split(",")): c for key, c in table()["cells"].items() if c.get("depth")}


def has_record(n: int, k: int | None) -> bool:
    return k is not None and (n, k) in cells()


def _coverage() -> str:
    have = cells()
    if not have:
        return "no record table is shipped"
    ns = sorted({n for n, _ in have})
    return f"the table has {len(have)} cells for {ns[0]} <= n <= {ns[-1]}, 1 <= k <= min(8, n - 1) (see docs/records.md)"


def record(n: int, k: int | None, objective: str = "depth") -> Network:
    """The record network of cell (n, k) by ``objective`` ("depth" or
    "size"), with construction ``{"kind": "record", "n", "k", "objective",
    "source", "method", "proof"}``."""
    from ..io import loads

    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    n, k = check_nk(n, k)
    if k is None or k >= n:
        raise ValueError(f"record networks are top-k selectors with k < n; got n = {n}, k = {k} "
                         "(for a sorter use --network best)")
    entry = cells().get((n, k))
    if entry is None:
        raise ValueError(f"no record network for n = {n}, k = {k}: {_coverage()}")
    rec = entry[objective]
    text = (data_dir() / rec["file"]).read_text(encoding="utf-8")
    net = loads(text, source=f"records/{rec['file']}")
    if net.n != n or net.k != k or net.depth != rec["depth"] or net.size != rec["size"]:
        raise ValueError(f"records/{rec['file']}: does not match the index entry for n = {n}, k = {k}")
    return net
