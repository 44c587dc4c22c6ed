"""The shipped best-known sorters (netgen/data/sorters-dobbelaere) and
``--network best``: the data is complete inside the package, every n in
2..64 gives the file the objective asks for, pruned networks select."""

import json
import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from netgen import io
from netgen.cli import main
from netgen.construct import build
from netgen.construct.best import best, best_sorter, data_dir, index

ROOT = Path(__file__).resolve().parents[2]


def test_data_is_inside_the_package_and_complete():
    d = Path(str(data_dir()))
    assert d.is_dir() and ROOT / "netgen" in d.parents
    files = sorted(p.name for p in d.glob("Sort_*.json"))
    assert len(files) == len(index()) == 177
    assert {e.n for e in index()} == set(range(2, 65))
    assert "MIT License" in (d / "LICENSE").read_text() and "SorterHunter" in (d / "README.md").read_text()
    # pyproject ships every file with a non-editable install too
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["netgen"]
    for name in files + ["LICENSE", "README.md"]:
        assert any(fnmatch(f"data/sorters-dobbelaere/{name}", g) for g in globs), name


def test_nothing_reads_data_outside_the_package():
    # the data tests used to read ../shared/data and skip without it
    pattern = re.compile(r"""["']shared["']\s*/\s*["']data|\.\./shared|parents\[\d\]\s*/\s*["']shared""")
    offenders = []
    for folder in ("netgen", "tests", "benchmarks", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.resolve() != Path(__file__).resolve() and pattern.search(path.read_text(encoding="utf-8")):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


@pytest.mark.parametrize("objective", ["size", "depth"])
def test_best_sorter_is_the_objectives_file_for_every_n(objective):
    for n in range(2, 65):
        entries = [e for e in index() if e.n == n]
        key = (lambda e: (e.size, e.depth)) if objective == "size" else (lambda e: (e.depth, e.size))
        want = min(entries, key=key)
        net = best_sorter(n, objective)
        assert (net.n, net.k, net.size, net.depth) == (n, n, want.size, want.depth)
        assert net.construction["kind"] == "best" and want.name[:-5] in net.construction["source"]


def test_both_objectives_differ_where_the_data_does():
    assert (best_sorter(16, "size").size, best_sorter(16, "size").depth) == (60, 10)
    assert (best_sorter(16, "depth").size, best_sorter(16, "depth").depth) == (61, 9)


@pytest.mark.parametrize("n, k", [(16, 8), (13, 3), (33, 5), (64, 2), (2, 1)])
def test_pruned_best_selects_the_top_k(n, k):
    for objective in ("size", "depth"):
        net = build("best", n, k, objective=objective)
        assert (net.n, net.k) == (n, k)
        assert net.size < best_sorter(n, objective).size or n == 2
        x = np.random.default_rng(n * k).normal(size=(500, n))
        assert np.array_equal(net.select(x), -np.sort(-x, axis=1)[:, :k])


def test_pruned_best_picks_among_all_files_by_objective():
    # at (16, 8) the shallow sorter stays shallower after pruning, the small one smaller
    s, d = best(16, 8, "size"), best(16, 8, "depth")
    assert (s.depth, s.size) == (10, 54) and (d.depth, d.size) == (9, 56)


@pytest.mark.parametrize("n", [1, 65, 1000])
def test_outside_2_to_64_is_a_clear_message(n):
    with pytest.raises(ValueError, match="2 <= n <= 64"):
        build("best", n, 1)
    r = CliRunner().invoke(main, ["build", "--n", str(n), "--network", "best"])
    assert r.exit_code == 2 and "2 <= n <= 64" in r.output and len(r.output.strip().splitlines()) == 1


def test_bad_objective():
    with pytest.raises(ValueError, match="objective"):
        build("best", 8, 3, objective="speed")
    r = CliRunner().invoke(main, ["build", "--n", "8", "--objective", "speed"])
    assert r.exit_code == 2 and "speed" in r.output


@pytest.mark.parametrize("n", [2, 5, 10, 16, 24, 40, 64])
def test_cli_best_writes_the_files_network_proved(tmp_path, n):
    out = tmp_path / "f.json"
    r = CliRunner().invoke(main, ["build", "--n", str(n), "--network", "best", "-o", str(out)])
    assert r.exit_code == 0, r.output
    net = io.load(out)
    want = min((e for e in index() if e.n == n), key=lambda e: (e.size, e.depth))
    assert (net.size, net.depth) == (want.size, want.depth)
    assert net.construction["verified"].startswith("proved")
    assert json.loads(out.read_text())["construction"]["kind"] == "best"


def test_a_shipped_network_with_a_comparator_that_never_swaps():
    # Sort_27_153_13 (the shallowest 27-wire sorter shipped) has one comparator
    # that swaps on no input: both complete methods say so, and the cleanup
    # (hence --network best --objective depth) drops it
    import numpy as np

    from netgen.compiler import compile_network
    from netgen.verify import exhaustive, verify

    net = best_sorter(27, "depth")
    assert (net.size, net.depth) == (153, 13)
    idle_reach = np.flatnonzero(~np.asarray(verify(net).fires))
    idle_exh = np.flatnonzero(~np.asarray(exhaustive.check(net).fires))
    assert idle_reach.tolist() == idle_exh.tolist() == [87]
    cleaned = compile_network(net).network
    assert (cleaned.size, cleaned.depth) == (152, 13)
