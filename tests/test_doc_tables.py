"""The docs' tables of constructions and distributions name exactly what the
registries hold: a construction or distribution added to (or removed from)
:data:`netgen.construct.registry.REGISTRY` or
:data:`netgen.relax.formulas.REGISTRY` without its docs row fails here,
naming the page and the missing or stale names.

Checked: the constructions table of docs/concepts.md, the distribution
tables of docs/relaxations.md and docs/design.md, and the ``--network`` and
``--distribution`` rows of docs/cli.md's option table (the CLI's choices
come from the same registries)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from netgen.construct.registry import REGISTRY as CONSTRUCTIONS
from netgen.relax.formulas import REGISTRY as DISTRIBUTIONS

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"`([a-z_]+)`")


def table_names(page: str, header: str) -> list[str]:
    """The backticked names in the first column of the Markdown table whose
    header row starts with ``| header |``."""
    lines = (ROOT / page).read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(rf"\|\s*{re.escape(header)}\s*\|", line)]
    assert len(starts) == 1, f"{page}: expected one table headed '| {header} |', found {len(starts)}"
    names = []
    for line in lines[starts[0] + 2:]:  # the header and the |---| row
        if not line.startswith("|"):
            break
        first = line.split("|")[1]
        names += NAME.findall(first)[:1]
    return names


def row_names(page: str, option: str) -> list[str]:
    """The backticked names in the second cell of the table row for ``option``."""
    rows = [line for line in (ROOT / page).read_text().splitlines() if line.startswith(f"| `{option} ")]
    assert len(rows) == 1, f"{page}: expected one row for {option}, found {len(rows)}"
    return NAME.findall(rows[0].split("|")[2])


def same(page: str, what: str, documented: list[str], registered) -> None:
    registered = list(registered)
    assert len(documented) == len(set(documented)), f"{page}: {what} named twice: {documented}"
    missing = [n for n in registered if n not in documented]
    stale = [n for n in documented if n not in registered]
    assert not missing and not stale, (
        f"{page}: the {what} table is out of date: missing {missing}, not registered {stale}")


@pytest.mark.parametrize("page, header", [("docs/concepts.md", "kind")])
def test_construction_tables(page, header):
    same(page, "constructions", table_names(page, header), CONSTRUCTIONS)


@pytest.mark.parametrize("page, header", [("docs/relaxations.md", "distribution"), ("docs/design.md", "name")])
def test_distribution_tables(page, header):
    same(page, "distributions", table_names(page, header), DISTRIBUTIONS)


def test_cli_option_rows():
    same("docs/cli.md", "--network", row_names("docs/cli.md", "--network"), CONSTRUCTIONS)
    same("docs/cli.md", "--distribution", row_names("docs/cli.md", "--distribution"), DISTRIBUTIONS)


def test_the_check_can_fail():
    """A table with a name left out, or one the registry lacks, is reported."""
    with pytest.raises(AssertionError, match=r"missing \['record'\]"):
        same("x.md", "constructions", [n for n in CONSTRUCTIONS if n != "record"], CONSTRUCTIONS)
    with pytest.raises(AssertionError, match=r"not registered \['softplus'\]"):
        same("x.md", "distributions", [*DISTRIBUTIONS, "softplus"], DISTRIBUTIONS)
