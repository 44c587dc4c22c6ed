"""The shipped top-k selection record table (issue 22, netgen/data/records):
every network re-proved by netgen's verifier and, independently, by an
exhaustive 0-1 evaluation written here (bit-sliced numpy, n <= 24); the
index agrees with the files; a SAT lower bound is re-derived; the
``--network record`` path of the CLI and of the portfolio."""

from __future__ import annotations

import functools
import itertools
import json

import numpy as np
import pytest
from click.testing import CliRunner

from netgen import io
from netgen.cli import main
from netgen.construct import build
from netgen.portfolio import choose
from netgen.construct.record import cells, data_dir, record
from netgen.network import Network
from netgen.verify import verify

CELLS = cells()
FILES = sorted({c[obj]["file"] for c in CELLS.values() for obj in ("depth", "size")})
EXHAUSTIVE_N = 24

pytestmark = pytest.mark.skipif(not CELLS, reason="no record table shipped")


def _load(name: str) -> Network:
    return io.loads((data_dir() / name).read_text(encoding="utf-8"), source=name)


# ------------------------------------------------- independent 0-1 evaluation
@functools.lru_cache(maxsize=2)
def _sliced_inputs(n: int):
    """Wire w's bits over all 2^n inputs x (bit x of the array = bit w of x),
    and for each r the bits [popcount(x) > r], as uint64 words."""
    x = np.arange(1 << n, dtype=np.uint32)
    pad = max(0, 64 - (1 << n))

    def pack(bits):
        b = np.packbits(np.concatenate([bits, np.zeros(pad, bool)]), bitorder="little")
        return b.view(np.uint64)

    wires = [pack(((x >> np.uint32(w)) & np.uint32(1)).astype(bool)) for w in range(n)]
    pc = np.bitwise_count(x) if hasattr(np, "bitwise_count") else np.array([bin(int(v)).count("1") for v in x])
    ranks = [pack(pc > r) for r in range(n)]
    valid = pack(np.ones(1 << n, bool))
    return wires, ranks, valid


def exhaustive_ok(net: Network) -> bool:
    """True iff on every one of the 2^n 0-1 inputs, output wire r holds
    [number of ones > r] for all r < k (rank 0 = the largest)."""
    wires, ranks, valid = _sliced_inputs(net.n)
    v = list(wires)
    for a, b in net.comparators.tolist():  # execution order; max to a, min to b
        v[a], v[b] = v[a] | v[b], v[a] & v[b]
    return all(np.array_equal(v[w] & valid, ranks[r] & valid) for r, w in enumerate(net.outputs))


def exhaustive_set_ok(net: Network) -> bool:
    """The unsorted variant: on every 0-1 input the outputs hold min(c, k)
    ones (the k largest, in any order)."""
    wires, ranks, valid = _sliced_inputs(net.n)
    v = list(wires)
    for a, b in net.comparators.tolist():
        v[a], v[b] = v[a] | v[b], v[a] & v[b]
    # "at least r + 1 ones among the outputs" must equal "more than r ones in the input", r < k
    outs = [v[w] for w in net.outputs]
    for r in range(net.k):
        at_least = np.zeros_like(valid)
        for combo in itertools.combinations(outs, r + 1):
            t = valid.copy()
            for o in combo:
                t &= o
            at_least |= t
        if not np.array_equal(at_least & valid, ranks[r] & valid):
            return False
    return True


SET_FILES = sorted(c["set"]["file"] for c in CELLS.values() if "set" in c)


@pytest.mark.parametrize("name", SET_FILES)
def test_every_unsorted_set_network_is_checked_exhaustively(name):
    net = _load(name)
    c = CELLS[(net.n, net.k)]
    assert net.construction["kind"] == "record-set"
    assert (net.depth, net.size) == (c["set"]["depth"], c["set"]["size"])
    assert c["set"]["depth_lb"]["value"] <= net.depth <= c["depth"]["depth"]
    assert exhaustive_set_ok(net)


def test_the_set_check_can_fail():
    if not SET_FILES:
        pytest.skip("no unsorted-set networks shipped")
    net = next(n for n in map(_load, SET_FILES) if n.size >= 2)
    keep = np.ones(net.size, bool)
    keep[-1] = False
    assert not exhaustive_set_ok(net.with_comparators(keep))
    sorted_net = record(net.n, net.k, "depth")  # a sorted selector is a set selector
    assert exhaustive_set_ok(sorted_net)


def test_the_independent_check_can_fail():
    good = next(net for net in map(_load, FILES) if net.size >= 2)
    assert exhaustive_ok(good)
    keep = np.ones(good.size, bool)
    keep[-1] = False  # the last comparator swaps on some input and touches an output: now wrong
    assert not exhaustive_ok(good.with_comparators(keep))
    assert not exhaustive_ok(good.with_(outputs=good.outputs[::-1])) or good.k == 1


# ------------------------------------------------------------------- the data
def test_index_matches_files_and_bounds():
    idx = json.loads((data_dir() / "index.json").read_text(encoding="utf-8"))
    assert "sorted" in idx["semantics"]
    for (n, k), c in CELLS.items():
        assert 1 <= k < n and (c["n"], c["k"]) == (n, k)
        d, s = c["depth"], c["size"]
        assert d["depth"] <= s["depth"] and s["size"] <= d["size"]
        assert c["depth_lb"]["value"] <= d["depth"], (n, k)
        assert c["size_lb"]["value"] <= s["size"], (n, k)
        assert c["optimal_depth"] == (c["depth_lb"]["value"] == d["depth"])
        assert c["depth_lb"]["source"] in ("sat", "sat-implied", "fan-in")
        if c["depth_lb"]["source"] == "sat":  # the UNSAT answer is in the cell's log
            assert any(a["status"] == "UNSAT" and a["depth"] == c["depth_lb"]["value"] - 1 for a in c["sat"])
        for obj in ("depth", "size"):
            net = record(n, k, obj)
            assert (net.n, net.k, net.depth, net.size) == (n, k, c[obj]["depth"], c[obj]["size"])
            assert net.outputs == tuple(range(k)) or len(set(net.outputs)) == k
            assert net.construction["kind"] == "record" and net.construction["proof"].startswith("proved")


@pytest.mark.parametrize("name", FILES)
def test_every_shipped_network_is_proved(name):
    net = _load(name)
    assert verify(net).status == "proved"
    if net.n <= EXHAUSTIVE_N:
        assert exhaustive_ok(net)


def test_depth_lower_bounds_carry_over_consistently():
    # depth(n, k) >= depth(n', k') for n' <= n, k' <= k: a proved bound of a
    # smaller cell can never exceed a network found for a larger one
    for (n, k), c in CELLS.items():
        for (m, j), e in CELLS.items():
            if m <= n and j <= k:
                assert e["depth_lb"]["value"] <= c["depth"]["depth"], ((m, j), (n, k))


# ------------------------------------------------------------------ SAT bound
def test_a_sat_lower_bound_is_rederived():
    pytest.importorskip("pysat")
    from netgen.search.select_depth import search

    small = sorted((n, k) for (n, k), c in CELLS.items()
                   if c["depth_lb"]["source"] == "sat" and n <= 6 and c["depth_lb"]["value"] >= 3)
    assert small, "no SAT-proved small cell in the table"
    n, k = small[-1]
    lb = CELLS[(n, k)]["depth_lb"]["value"]
    assert search(n, k, lb - 1, time_limit=60).status == "UNSAT"
    found = search(n, k, CELLS[(n, k)]["depth"]["depth"], time_limit=60)
    assert found.status == "SAT" and exhaustive_ok(found.network)


# ---------------------------------------------------------- build, CLI, portfolio
def test_build_record_and_missing_cell():
    n, k = min(CELLS)
    assert build("record", n, k, "depth").construction["kind"] == "record"
    with pytest.raises(ValueError, match="no record network for n = 33, k = 2"):
        build("record", 33, 2)
    with pytest.raises(ValueError, match="k < n"):
        build("record", 6, 6)
    with pytest.raises(ValueError, match="objective"):
        record(n, k, "speed")


def test_cli_network_record(tmp_path):
    (n, k) = max((c for c in CELLS if c[0] <= 8), key=lambda c: (c[0], c[1]))
    out = tmp_path / "r.json"
    r = CliRunner().invoke(main, ["build", "--n", str(n), "--k", str(k), "--network", "record",
                                  "--objective", "depth", "-o", str(out)])
    assert r.exit_code == 0, r.output
    net = io.load(out)
    want = CELLS[(n, k)]["depth"]
    assert (net.depth, net.size) == (want["depth"], want["size"])
    assert net.construction["kind"] == "record" and net.construction["verified"].startswith("proved")
    x = np.random.default_rng(0).normal(size=(300, n))
    assert np.array_equal(net.select(x), -np.sort(-x, axis=1)[:, :k])
    bad = CliRunner().invoke(main, ["build", "--n", "40", "--k", "3", "--network", "record"])
    assert bad.exit_code == 2 and "no record network for n = 40, k = 3" in bad.output
    assert "Traceback" not in bad.output


def test_portfolio_uses_the_record():
    # the cell where the record is strictly shallower than the other candidates
    better = [(n, k) for (n, k), c in CELLS.items() if n <= 12 and c["portfolio"].get("depth")
              and c["depth"]["depth"] < c["portfolio"]["depth"][0]]
    if not better:
        pytest.skip("no cell improves on the portfolio")
    n, k = min(better)
    compiled, cands = choose(n, k, "depth")
    assert compiled.network.depth == CELLS[(n, k)]["depth"]["depth"]
    assert compiled.network.construction["kind"] == "record"
    assert any(c.kind == "record" for c in cands)
