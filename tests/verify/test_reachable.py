"""The exact reachable-state method: sound and complete against brute force
(both state representations), witnesses replay, fires are exact."""

import numpy as np
import pytest
from verify_oracles import brute_force, drop, fails, random_network, transposition_sorter, with_prefix

from netgen.construct import KINDS, build, kinds_for
from netgen.network import Network
from netgen.verify import reachable
from netgen.verify.reachable import TooManyStates, analyze
from netgen.verify.sampling import sample

REPS = ["masks", "tokens"]


def _agree(net, rep):
    ok, _, fires = brute_force(net)
    r = analyze(net, representation=rep)
    assert r.method == "reachable states"
    if ok:
        assert r.status == "proved", (net, rep)
        assert np.array_equal(r.fires, fires), (net, rep)
    else:
        assert r.status == "counterexample", (net, rep)
        assert len(r.counterexample) == net.n
        assert 1 <= sum(r.counterexample) <= net.k
        assert fails(net, r.counterexample)
    return r


@pytest.mark.parametrize("rep", REPS)
@pytest.mark.parametrize("seed", range(30))
def test_random_networks_match_brute_force(seed, rep):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 11))
    k = int(rng.integers(1, n + 1))
    _agree(random_network(rng, n, int(rng.integers(0, 3 * n * n)), k), rep)


@pytest.mark.parametrize("rep", REPS)
@pytest.mark.parametrize("n", range(2, 11))
def test_correct_networks_and_their_single_removals(n, rep):
    rng = np.random.default_rng(n)
    net = with_prefix(rng, transposition_sorter(n), 2 * n)
    for k in sorted({1, 2, n // 2 or 1, n}):
        sel = net.with_(outputs=net.outputs[:k])
        assert _agree(sel, rep).status == "proved"
        for i in rng.choice(net.size, size=min(4, net.size), replace=False):
            _agree(drop(sel, int(i)), rep)


@pytest.mark.parametrize("kind", KINDS)
def test_constructions_small_all_k(kind):
    for n in (5, 8, 11):
        for k in range(1, n + 1):
            net = build(kind, n, k)
            rep = "tokens" if k <= 4 else "masks"
            assert _agree(net, rep).status == "proved"


@pytest.mark.parametrize("kind", kinds_for(1024, 5, max_size=1024 * 10 ** 2))  # n lg(n)^2: not the transposition sorter
def test_selection_1024_proved_and_broken(kind):
    net = build(kind, 1024, 5)
    r = analyze(net)
    assert r.status == "proved" and r.fires.shape == (net.size,)
    # removing a comparator that fires usually breaks the network (the
    # witness replays); when it is still proved, sampling must agree
    rng = np.random.default_rng(0)
    broken = 0
    for i in rng.choice(np.flatnonzero(r.fires), size=4, replace=False):
        bad = drop(net, int(i))
        rr = analyze(bad)
        if rr.status == "counterexample":
            broken += 1
            assert fails(bad, rr.counterexample)
        else:
            assert rr.status == "proved"
            assert sample(bad, samples=3_000).status == "sampled"
    assert broken >= 2
    # removing comparators that never fire keeps it correct
    cleaned = net.with_comparators(r.fires)
    assert analyze(cleaned).status == "proved"
    x = np.random.default_rng(1).standard_normal((200, 1024))
    assert np.array_equal(cleaned.select(x), -np.sort(-x, axis=1)[:, :5])


def test_large_n_tokens_match_masks_on_sorters_prefix():
    # n = 40 with k = 3: both representations, same fires
    rng = np.random.default_rng(7)
    net = with_prefix(rng, build("oddeven", 40, 3), 30)
    a = analyze(net, representation="masks")
    b = analyze(net, representation="tokens")
    assert a.status == b.status == "proved"
    assert np.array_equal(a.fires, b.fires)


def test_dead_wire_and_split_outputs():
    # an untouched non-output wire keeps its token
    net = Network.from_layers(3, [[(0, 1)]], outputs=[0, 1])
    for rep in REPS:
        r = analyze(net, representation=rep)
        assert r.status == "counterexample" and r.counterexample == [0, 0, 1]
    # outputs in two clusters that never meet
    net = Network.from_layers(4, [[(0, 1), (2, 3)]], outputs=[0, 2])
    for rep in REPS:
        r = analyze(net, representation=rep)
        assert r.status == "counterexample" and fails(net, r.counterexample)


def test_state_explosion_is_reported():
    net = build("oddeven", 40, 40)
    with pytest.raises(TooManyStates, match="states|combinations"):
        analyze(net, max_states=50)
    with pytest.raises(TooManyStates):
        analyze(build("oddeven", 70, 70))  # k > 16 tokens with n > 64
    with pytest.raises(ValueError, match="representation"):
        analyze(net, representation="bdd")
    with pytest.raises(ValueError, match="n <= 64"):
        analyze(build("oddeven", 70, 2), representation="masks")
    assert issubclass(TooManyStates, ValueError)
    assert reachable.METHOD == "reachable states"


@pytest.mark.parametrize("seed", range(12))
def test_bit_sliced_finish_matches_brute_force(seed, monkeypatch):
    # force the "finish by testing every combination" route at the first merge
    monkeypatch.setattr(reachable, "FINISH_MIN", 0)
    rng = np.random.default_rng(500 + seed)
    n = int(rng.integers(2, 11))
    k = int(rng.integers(1, n + 1))
    if seed % 2:
        net = with_prefix(rng, transposition_sorter(n), n).with_(outputs=tuple(range(k)))
    else:
        net = random_network(rng, n, int(rng.integers(1, 3 * n * n)), k)
    r = _agree(net, "masks")
    if r.status == "proved" and net.size:
        assert "finished bit-sliced" in r.detail

