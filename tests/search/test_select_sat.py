"""The SAT model of small selection problems (netgen.search.select_sat):
known optimal depths come out SAT at that depth and UNSAT one below, and
every network it returns is checked on all 0-1 inputs."""

import itertools
import sys

import numpy as np
import pytest

from netgen.search import select_sat


def _meets(net, targets):
    for bits in itertools.product([0, 1], repeat=net.n):
        v = np.array(bits)
        for t, layer in enumerate(net.layers, start=1):
            for a, b in layer.tolist():
                v[a], v[b] = max(v[a], v[b]), min(v[a], v[b])
            for r, d in targets.items():
                if d == t and v[r] != (sum(bits) > r):
                    return False
    return True


@pytest.mark.parametrize(
    "m,targets,optimal",
    [
        (8, {0: 3}, 3),  # the maximum of 8: ceil(lg 8) layers
        (4, {0: 3, 1: 3}, 3),  # the top 2 of 4, sorted
        (6, {r: 5 for r in range(6)}, 5),  # sorting 6: optimal depth 5 (Knuth, TAOCP 5.3.4)
    ],
)
def test_optimal_depths(m, targets, optimal):
    pytest.importorskip("pysat")
    found = select_sat.solve(m, targets, depth=optimal)
    assert found.status == "SAT" and _meets(found.network, targets)
    below = {r: min(d, optimal - 1) for r, d in targets.items()}
    assert select_sat.solve(m, below, depth=optimal - 1).status == "UNSAT"


def test_missing_pysat_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pysat.solvers", None)
    with pytest.raises(ValueError, match="python-sat"):
        select_sat.solve(4, {0: 2})


def test_bad_targets():
    pytest.importorskip("pysat")
    with pytest.raises(ValueError, match="targets"):
        select_sat.solve(4, {4: 2})
