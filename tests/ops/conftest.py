"""Fixtures of the operator tests."""

from __future__ import annotations

import pytest

from netgen.ops import networks as nw


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """netgen's cache in a fresh folder and no network in memory (before and after)."""
    monkeypatch.setenv("NETGEN_CACHE_DIR", str(tmp_path))
    nw.clear_memory()
    yield tmp_path
    nw.clear_memory()
