"""verify(): method choice, fallbacks, Report fields; sampling."""

import json

import numpy as np
import pytest
from verify_oracles import drop, fails, transposition_sorter

from netgen.construct import build
from netgen.network import Network
from netgen.verify import METHODS, Report, verify
from netgen.verify.sampling import sample


def test_auto_picks_a_complete_method():
    assert verify(transposition_sorter(12)).method == "exhaustive"
    r = verify(build("oddeven", 40))  # 2^40 inputs: reachable states
    assert r.status == "proved" and r.method == "reachable states"
    r = verify(build("splitter", 300, 4))
    assert r.status == "proved" and r.method == "reachable states"
    assert r.fires is not None and r.fires.shape == (r.fires.size,)


def test_no_complete_method_means_sampled_never_proved():
    net = build("oddeven", 70)  # sorter past 64 wires: no complete method here
    r = verify(net, samples=2000)
    assert r.status == "sampled" and r.checked == 2000
    assert str(r) == "sampled 2000 inputs, not proved"
    assert "no complete method" in r.detail
    bad = drop(net, net.size - 1)
    r = verify(bad, samples=2000)
    assert r.status == "counterexample" and fails(bad, r.counterexample)


def test_forced_methods():
    net = transposition_sorter(10)
    for m in METHODS:
        r = verify(net, method=m, samples=500)
        assert r.status == ("sampled" if m == "sample" else "proved")
    with pytest.raises(ValueError, match="method"):
        verify(net, method="sat")
    with pytest.raises(ValueError, match="exhaustive"):
        verify(build("oddeven", 40), method="exhaustive")
    with pytest.raises(ValueError, match="reachable"):
        verify(build("oddeven", 70), method="reachable")
    with pytest.raises(ValueError, match="Network"):
        verify([[0, 1]])
    with pytest.raises(ValueError, match="samples"):
        verify(net, method="sample", samples=0)


def test_report_text_and_json():
    r = verify(transposition_sorter(6))
    assert str(r) == "proved (exhaustive)"
    d = r.to_dict()
    json.dumps(d)
    assert d["status"] == "proved" and d["method"] == "exhaustive" and d["seconds"] >= 0
    assert "counterexample" not in d
    r = verify(build("splitter", 100, 3))
    assert str(r) == "proved (reachable states)"
    bad = Network.from_layers(3, [[(1, 0)]], outputs=[0, 1, 2])
    r = verify(bad)
    d = r.to_dict()
    assert d["status"] == "counterexample" and fails(bad, d["counterexample"])
    assert str(r) == f"counterexample: {d['counterexample']}"
    with pytest.raises(ValueError, match="status"):
        Report("maybe", "x", 0.0)


def test_sampling_finds_real_valued_and_zero_one_failures():
    net = transposition_sorter(8)
    assert sample(net, samples=1000).status == "sampled"
    bad = drop(net, 0)
    r = sample(bad, samples=1000, seed=3)
    assert r.status == "counterexample" and fails(bad, r.counterexample)
    # a top-1 network wrong only when the single largest sits on wire 5
    one = Network.from_layers(6, [[(0, 1), (2, 3)], [(0, 2)]], outputs=[0])
    r = sample(one, samples=5000, seed=1)
    assert r.status == "counterexample"
    x = np.asarray(r.counterexample)
    assert fails(one, x) and x.argmax() in (4, 5)
