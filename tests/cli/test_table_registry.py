"""``netgen table`` iterates the construction registry: its cells are the
registered constructions' Table 6 columns, and a construction registered
with a column gets its cells without an edit to the table's code (small n
only: the full table takes minutes)."""

from __future__ import annotations

import dataclasses

from netgen.cli import table
from netgen.construct.registry import REGISTRY


def test_columns_are_the_registered_ones():
    cols = table.columns()
    assert set(cols) == {(c.name, col) for c in REGISTRY.values() for col in c.table6}
    assert {col for _, col in cols} == set(table.PAPER[16])  # every paper column has a construction
    cells = list(table.cells((16,), range(1, 3)))
    assert [c for c in cells if c[3] == "sort"] == [(16, 16, kind, "sort") for kind in table.sorter_kinds()]
    for k in (1, 2):
        assert [c[2:] for c in cells if c[1] == k] == [kc for kc in cols if kc[1] != "sort"]


def test_a_registered_construction_gets_its_cells(monkeypatch):
    toy = dataclasses.replace(REGISTRY["oddeven"], name="toy", proposals=lambda n, k, objective: [])
    monkeypatch.setitem(REGISTRY, "toy", toy)
    rows, best = table.run_table((16,), False, max_workers=1)
    assert best == []  # --no-clean: no proofs, no best column
    by = {(r["k"], r["kind"], r["column"]): (r["depth"], r["size"]) for r in rows}
    assert by[(16, "toy", "sort")] == by[(16, "oddeven", "sort")]
    for k in range(1, 9):
        assert by[(k, "toy", "sel")] == by[(k, "oddeven", "sel")]
    assert len(rows) == len(list(table.cells((16,))))
    assert table.column_of("toy", 5, 16) == "sel" and table.column_of("toy", 16, 16) == "sort"
    assert table.column_of("transposition", 5, 16) is None
