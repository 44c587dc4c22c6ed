"""Fixtures for the render tests."""

from __future__ import annotations

import pytest
from render_nets import random_layered, transposition_sorter

from netgen.network import Network


@pytest.fixture
def small_net() -> Network:
    return transposition_sorter(6)


@pytest.fixture
def large_net() -> Network:
    """Too large for the full diagram: gets the summary view."""
    return random_layered(3000, 12, seed=1, k=5)
