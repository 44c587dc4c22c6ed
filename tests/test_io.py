"""Interchange format: canonical JSON round trip, Dobbelaere and layer text."""

import json
from pathlib import Path

import numpy as np
import pytest

from netgen import io
from netgen.network import Network

from netgen.construct.best import data_dir

DOBBELAERE = Path(str(data_dir()))  # shipped package data


def sample():
    return Network.from_layers(
        5, [[(0, 4), (1, 3)], [(0, 1)], [(2, 0)]], outputs=[2, 0], construction={"kind": "custom", "n": 5, "k": 2}
    )


def test_dict_matches_the_documented_format():
    d = json.loads(io.dumps(sample()))
    assert d == {
        "format": "netgen-network/1",
        "n": 5,
        "outputs": [2, 0],
        "layers": [[[0, 4], [1, 3]], [[0, 1]], [[2, 0]]],
        "construction": {"kind": "custom", "n": 5, "k": 2},
        "stats": {"depth": 3, "size": 4},
    }
    assert d == io.to_dict(sample())


def test_json_round_trip_is_byte_identical():
    text = io.dumps(sample())
    net = io.loads(text)
    assert net == sample()
    assert io.dumps(net) == text


def test_round_trip_through_a_file(tmp_path):
    p = tmp_path / "net.json"
    io.save(sample(), p)
    assert io.load(p) == sample()
    assert p.read_text() == io.dumps(sample())
    assert not [f for f in tmp_path.iterdir() if f.name.endswith(".tmp")]


def test_large_round_trip_is_fast_and_exact():
    rng = np.random.default_rng(0)
    n, depth = 4096, 40
    comps = np.concatenate([rng.permutation(n).reshape(-1, 2) for _ in range(depth)])
    net = Network.from_arrays(n, comps, np.arange(depth + 1) * (n // 2), outputs=[3, 1, 4])
    text = io.dumps(net)
    assert io.dumps(io.loads(text)) == text


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(stats={"depth": 99, "size": 4}), "stats say depth = 99"),
        (lambda d: d.update(format="other/1"), "unknown format"),
        (lambda d: d.pop("layers"), "missing field 'layers'"),
        (lambda d: d.update(layers=[[[0, 9]]]), "outside 0..4"),
        (lambda d: d.update(layers=[[[0, 1, 2]]]), "pair of integer wires"),
        (lambda d: d.update(outputs="x"), "outputs must be a list"),
        (lambda d: d.update(n="5"), "n must be an integer"),
    ],
)
def test_inconsistent_files_are_rejected(mutate, message):
    d = io.to_dict(sample())
    mutate(d)
    with pytest.raises(ValueError, match=message):
        io.loads(json.dumps(d))


def test_unreadable_input():
    with pytest.raises(ValueError, match="not valid JSON"):
        io.loads("{oops")
    with pytest.raises(ValueError, match="not a network file"):
        io.loads("hello")
    with pytest.raises(ValueError, match="no such file"):
        io.load("/nonexistent/net.json")


def test_dobbelaere_conversion_and_stats():
    d = {"N": 4, "L": 5, "D": 3, "nw": [[0, 1], [2, 3], [0, 2], [1, 3], [1, 2]]}
    net = io.from_dict(d)
    # min -> i, max -> j: netgen comparator (j, i); ranks descend from wire n-1
    assert net.comparators[:2].tolist() == [[1, 0], [3, 2]]
    assert net.outputs == (3, 2, 1, 0)
    x = np.random.default_rng(0).normal(size=(50, 4))
    assert np.array_equal(net.select(x), -np.sort(-x, axis=1))
    with pytest.raises(ValueError, match="D = 2 but the comparators give 3"):
        io.from_dict({**d, "D": 2})


def test_every_dobbelaere_file_loads_with_recomputed_stats():
    files = sorted(DOBBELAERE.glob("*.json"))
    assert len(files) >= 170
    for f in files:
        raw = json.loads(f.read_text())
        net = io.load(f)  # raises if N, L or D disagree
        assert (net.n, net.size, net.depth) == (raw["N"], raw["L"], raw["D"])


def test_layer_text():
    net = io.loads("[(0,1),(2,3)]\n[(0,2),(1,3)]\n[(1,2)]\n")
    assert (net.n, net.depth, net.size) == (4, 3, 5)
    assert net.comparators[0].tolist() == [1, 0]
    x = np.random.default_rng(0).normal(size=(50, 4))
    assert np.array_equal(net.select(x), -np.sort(-x, axis=1))
    with pytest.raises(ValueError, match="line 2"):
        io.loads("[(0,1)]\n[(0,1) junk]\n")


# ----------------------------------------------------- untrusted input (issue 19)
import os
import time

from netgen.network import DEFAULT_MAX_SIZE, SizeLimitError


def _fast(fn, limit=5.0):
    t = time.perf_counter()
    try:
        fn()
    finally:
        assert time.perf_counter() - t < limit, "refusal was not early"


def test_huge_declared_n_is_refused_before_allocating():
    d = {"N": 10**9, "L": 1, "D": 1, "nw": [[0, 1]]}
    with pytest.raises(ValueError, match="too large"):
        _fast(lambda: io.from_dict(d))
    with pytest.raises(ValueError, match="outside 0..9999"):
        _fast(lambda: io.loads(json.dumps({**d, "N": 10**4, "nw": [[0, 10**9 - 1]]})))
    with pytest.raises(ValueError, match="too large"):
        _fast(lambda: io.loads("[(0,999999999)]\n"))


def test_size_budget_names_the_flag_and_can_be_raised():
    text = "[(0,1048575)]\n"  # 2^20 wires, one comparator
    with pytest.raises(SizeLimitError, match=r"--max-size.*max_size="):
        io.loads(text, max_size=1_000_000)
    assert io.loads(text, max_size=2_000_000).n == 1 << 20
    assert DEFAULT_MAX_SIZE == 10_000_000
    with pytest.raises(ValueError, match="max_size"):
        io.loads(text, max_size=0)


def test_file_limit_is_checked_before_parsing(tmp_path):
    p = tmp_path / "big.json"
    p.write_bytes(b" " * (io.file_limit(1000) + 1))
    with pytest.raises(SizeLimitError, match="too large"):
        io.load(p, max_size=1000)


def test_non_regular_files_are_refused(tmp_path):
    with pytest.raises(ValueError, match="not a regular file"):
        _fast(lambda: io.load("/dev/zero"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="FIFO"):
        _fast(lambda: io.load(fifo))  # no writer: must not block
    with pytest.raises(ValueError, match="directory"):
        io.load(tmp_path)


def _net(layers, **kw):
    return json.dumps({"format": io.FORMAT, "n": 3, "outputs": [0], "layers": layers, **kw})


@pytest.mark.parametrize(
    "text, match",
    [
        (_net([[[0, 2**63]]]), "64 bits"),
        (_net([[[0, 2**64 + 5]]]), "64 bits"),
        (_net([[["1", 2]]]), "integers.*'1'"),
        (_net([[[1.9, 0]]]), "integers.*1.9"),
        (_net([[[1.0, 0]]]), "integers.*1.0"),
        (_net([[[True, 2]]]), "integers.*True"),
        (_net([[[0, 1]]]).replace('"outputs": [0]', '"outputs": [true]'), "integers"),
        (_net([[[0, 1]]]).replace('"n": 3', '"n": 3.0'), "n must be an integer"),
        (_net([[[0, 1]]]).replace('"n": 3', '"n": Infinity'), "Infinity"),
        (_net([[[0, 1]]]).replace('"n": 3', '"n": NaN'), "NaN"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        (_net([[[0, 1]]], construction={"x": json.loads("[" * 40 + "]" * 40)}), "nested"),
        ('{"N": 4, "nw": [[0, true]]}', "integer"),
        ('{"N": 4, "nw": [[0, 1.5]]}', "integer"),
        ('{"N": 4, "nw": [[0, 1]], "L": true}', "L = True"),
        ('{"N": true, "nw": [[0, 1]]}', "N must be an integer"),
        ("[(0," + "9" * 5000 + ")]", "too large"),
        ('{"format": "netgen-network/1", "n": ' + "9" * 5000 + "}", "not valid JSON"),
    ],
)
def test_malformed_values_are_named_not_coerced(text, match):
    with pytest.raises(ValueError, match=match):
        io.loads(text)


def test_network_constructors_do_not_coerce_wires():
    for bad in ([[(0, 1.0)]], [[(0, True)]], [[("0", 1)]], [[(0, 2**63)]]):
        with pytest.raises(ValueError, match="wires"):
            Network.from_layers(3, bad)
    with pytest.raises(ValueError, match="integers"):
        Network.from_comparators(3, np.array([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="integers"):
        Network.from_layers(3, [[(0, 1)]], outputs=[0.0])
