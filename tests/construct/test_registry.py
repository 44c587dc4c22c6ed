"""The construction registry is the one place a construction is named:
``construct``, the kind lists, the portfolio and the build-time estimate
follow a registration, and nothing else needs an edit."""

from __future__ import annotations

import pytest

from netgen import construct as construct_pkg
from netgen import portfolio
from netgen.construct import ALL_KINDS, BATCHER, KINDS, size_estimate
from netgen.construct.registry import REGISTRY, Construction, Proposal, STAGE_SELECTION, get, kinds_for, register
from netgen.construct.selection import selection
from netgen.construct.sorters import sorter
from netgen.estimate import build_seconds


def test_kind_lists_come_from_the_registry():
    assert ALL_KINDS == tuple(REGISTRY)
    assert set(KINDS) == {c.name for c in REGISTRY.values() if c.any_n}
    assert BATCHER and all(REGISTRY[kind].family == "batcher" for kind in BATCHER)
    assert "best" not in kinds_for(65) and "best" in kinds_for(64)
    assert "splitter" not in kinds_for(16) and "splitter" in kinds_for(16, 5)
    with pytest.raises(ValueError, match="unknown network kind 'nope'; choose one of splitter, "):
        get("nope")
    with pytest.raises(ValueError, match="registered twice"):
        register(REGISTRY["splitter"])


def _toy_build(n, k, objective):  # odd-even parts under another name
    net = sorter("oddeven", n) if k is None or k == n else selection("oddeven", n, k)
    return net.with_(construction={**net.construction, "kind": "toy"})


def _toy_proposals(n, k, objective):
    if k >= n:
        return []
    return [Proposal("toy", "toy selection", None, 10 * n, lambda: _toy_build(n, k, objective), STAGE_SELECTION,
                     is_construct=True)]


TOY = Construction("toy", "toy", build=_toy_build, size_estimate=lambda n, k: 10 * n, proposals=_toy_proposals)


def test_a_registration_is_all_a_construction_needs(monkeypatch):
    monkeypatch.setitem(REGISTRY, "toy", TOY)
    net = construct_pkg.construct("toy", 16, 5)
    assert net.construction["kind"] == "toy" and size_estimate("toy", 16, 5) == 160
    assert "toy" in kinds_for(16, 5)
    labels = [c.label for c in portfolio.candidates(16, 5)]
    assert "toy selection" in labels and labels.index("toy selection") > labels.index("splitter")
    assert any(label.startswith("toy selection:") for label, _ in build_seconds(16, 5).parts)
    assert build_seconds(16, 5, "toy").seconds > 0
    _, cands = portfolio.choose(16, 5)
    (toy,) = [c for c in cands if c.kind == "toy"]
    assert toy.compiled.report.status == "proved"
