"""Every shipped best-known network (netgen/data/sorters-dobbelaere) is read (N, L, D
recomputed by netgen.io) and proved; single-comparator removals give a
counterexample that replays, or a proof that an independent check confirms."""

import glob
import os


import numpy as np
import pytest
from verify_oracles import brute_force, drop, fails

from netgen.construct.best import data_dir
from netgen.io import load
from netgen.verify import exhaustive, verify

DOB = str(data_dir())  # shipped package data
FILES = sorted(glob.glob(f"{DOB}/Sort_*.json"), key=lambda f: (int(os.path.basename(f).split("_")[1]), f))


def _nld(path):
    _, n, size, depth = os.path.basename(path)[:-5].split("_")
    return int(n), int(size), int(depth)


def test_the_files_cover_2_to_64_wires():
    assert len(FILES) >= 170
    assert min(_nld(f)[0] for f in FILES) == 2
    assert max(_nld(f)[0] for f in FILES) == 64


@pytest.mark.parametrize("path", FILES, ids=[os.path.basename(f)[:-5] for f in FILES])
def test_file_proved(path):
    net = load(path)
    assert (net.n, net.size, net.depth) == _nld(path)
    r = verify(net)
    assert r.status == "proved", str(r)
    # auto: exhaustive while 2^n is small, the reachable states beyond
    assert r.method == ("exhaustive" if net.n <= 24 else "reachable states")


@pytest.mark.parametrize("name", ["Sort_9_25_7.json", "Sort_12_39_9.json"])
def test_every_single_removal_small(name):
    # brute force decides each removal independently
    net = load(f"{DOB}/{name}")
    for i in range(net.size):
        bad = drop(net, i)
        ok, _, _ = brute_force(bad)
        r = verify(bad)
        assert r.status == ("proved" if ok else "counterexample"), (name, i)
        if not ok:
            assert fails(bad, r.counterexample)


def test_single_removals_large_sample():
    rng = np.random.default_rng(2024)
    picks = [f for f in FILES if _nld(f)[0] >= 20]
    picks = [picks[j] for j in rng.choice(len(picks), size=12, replace=False)]
    picks.append(f"{DOB}/Sort_64_521_21.json")
    for f in picks:
        net = load(f)
        for i in rng.choice(net.size, size=2, replace=False):
            bad = drop(net, int(i))
            r = verify(bad)
            if r.status == "counterexample":
                x = r.counterexample
                assert len(x) == net.n and fails(bad, x), (f, i)
            else:
                assert r.status == "proved", (f, i, str(r))
                if net.n <= 24:  # confirm with the other complete method
                    assert exhaustive.check(bad).status == "proved"
