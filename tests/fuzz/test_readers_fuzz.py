"""Fuzzing every network reader (issue 19): any bytes or text, and near-valid
JSON (the right shape with bad values), give a Network or a ValueError that
names the problem, within a time bound: never another exception, a hang or
unbounded memory. Bounded for CI (2 cores): few examples per property and a
per-example deadline; derandomized so a run is reproducible."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netgen import io
from netgen.network import Network

FUZZ = settings(max_examples=150, deadline=2000, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

VALID = io.dumps(Network.from_layers(5, [[(0, 4), (1, 3)], [(0, 1)], [(2, 0)]], outputs=[2, 0],
                                     construction={"kind": "custom", "n": 5, "k": 2}))
DOBBELAERE = json.dumps({"N": 4, "L": 5, "D": 3, "nw": [[0, 1], [2, 3], [0, 2], [1, 3], [1, 2]]})
LAYERS = "[(0,1),(2,3)]\n[(0,2),(1,3)]\n[(1,2)]\n"


def accepts_or_names(parse) -> Network | None:
    """``parse()`` gives a Network or a ValueError with a message; nothing else."""
    try:
        net = parse()
    except ValueError as e:
        assert str(e).strip(), "a ValueError must name the problem"
        assert "\n" not in str(e).rstrip() or "JSON" in str(e), str(e)
        return None
    assert isinstance(net, Network)
    assert io.loads(io.dumps(net)) == net  # whatever is accepted is a valid, writable network
    return net


# --------------------------------------------------------------- raw input
@FUZZ
@given(st.binary(max_size=2000))
def test_load_any_bytes(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("fuzz") / "f.json"
    p.write_bytes(data)
    accepts_or_names(lambda: io.load(p))


@FUZZ
@given(st.text(max_size=2000))
def test_loads_any_text(text):
    accepts_or_names(lambda: io.loads(text))


@FUZZ
@given(st.sampled_from([VALID, DOBBELAERE, LAYERS]), st.data())
def test_mutated_valid_files(text, data):
    """Valid files with bytes replaced, inserted or cut."""
    chars = list(text)
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(chars)))
        op = data.draw(st.sampled_from(["replace", "insert", "cut"]))
        junk = data.draw(st.sampled_from(list('{}[](),:"-0123456789 \n\\etruefalsnNaInfity.') + ["\x00", "\x1b"]))
        if op == "insert" or i == len(chars):
            chars.insert(i, junk)
        elif op == "replace":
            chars[i] = junk
        else:
            del chars[i: i + data.draw(st.integers(1, 20))]
    accepts_or_names(lambda: io.loads("".join(chars)))


# ------------------------------------------------------------ near-valid JSON
big_ints = st.sampled_from([2**31, 2**32, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, 1 << 24, (1 << 24) - 1])
wire = st.one_of(st.integers(-3, 12), big_ints, st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
                 st.sampled_from(["1", "", None, 1.0, 1.9, [], {}]))
json_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
json_value = st.recursive(json_scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                              st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                          max_leaves=20)
pair = st.one_of(st.lists(wire, min_size=2, max_size=2), st.lists(wire, max_size=3), wire)


@FUZZ
@given(
    n=st.one_of(st.integers(-2, 14), big_ints, wire),
    outputs=st.one_of(st.lists(wire, max_size=6), json_value),
    layers=st.one_of(st.lists(st.lists(pair, max_size=5), max_size=6), json_value),
    construction=st.one_of(st.dictionaries(st.text(max_size=10), json_value, max_size=4), json_value),
    stats=st.one_of(st.none(), st.fixed_dictionaries({"depth": wire, "size": wire}), json_value),
)
def test_netgen_json_with_bad_values(n, outputs, layers, construction, stats):
    d = {"format": io.FORMAT, "n": n, "outputs": outputs, "layers": layers, "construction": construction}
    if stats is not None:
        d["stats"] = stats
    accepts_or_names(lambda: io.from_dict(json.loads(json.dumps(d))))
    accepts_or_names(lambda: io.loads(json.dumps(d)))


@FUZZ
@given(N=st.one_of(st.integers(-2, 14), big_ints, wire), nw=st.one_of(st.lists(pair, max_size=8), json_value),
       L=st.one_of(st.none(), wire), D=st.one_of(st.none(), wire))
def test_dobbelaere_json_with_bad_values(N, nw, L, D):
    d = {"N": N, "nw": nw, **({"L": L} if L is not None else {}), **({"D": D} if D is not None else {})}
    accepts_or_names(lambda: io.loads(json.dumps(d)))


layer_wire = st.one_of(st.integers(-2, 20), big_ints, st.sampled_from(["9" * 30, "x", "", "1.5", "-0"]))


@FUZZ
@given(st.lists(st.lists(st.tuples(layer_wire, layer_wire), max_size=5), max_size=6),
       st.sampled_from(["", "#c\n", "junk\n", "[]\n", "\n\n"]))
def test_layer_text_with_bad_values(layers, extra):
    text = "".join("[" + ",".join(f"({a},{b})" for a, b in layer) + "]\n" for layer in layers) + extra
    accepts_or_names(lambda: io.loads(text))


def test_fuzz_strategies_reach_valid_networks():
    """The near-valid strategies are near enough: the valid samples parse."""
    assert accepts_or_names(lambda: io.loads(VALID)) is not None
    assert accepts_or_names(lambda: io.loads(DOBBELAERE)) is not None
    assert accepts_or_names(lambda: io.loads(LAYERS)) is not None
    assert np.array_equal(io.loads(LAYERS).layer(0), [[1, 0], [3, 2]])
