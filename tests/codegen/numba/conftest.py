"""Fixtures shared by the numba engine's test files."""

from __future__ import annotations

import os
from unittest import mock

import pytest

from netgen.codegen import module_name

from netgen.codegen import TARGETS
from netgen.codegen.cache import load
from netgen.network import Network
from netgen.relax.distributions import Relaxation


@pytest.fixture(scope="module")
def make_engine(tmp_path_factory):
    """make_engine(net, r, mode=, group=, direction=): the loaded numba module
    (serial kernels), built once per module of tests."""
    cache = {}
    root = tmp_path_factory.mktemp("numba_engine")

    def _make(net: Network, r: Relaxation, mode=None, group=None, direction=None):
        key = (net.key(), tuple(sorted(r.to_dict().items())), mode, group, direction)
        if key not in cache:
            path = root / f"{module_name(net, r, 'numba')}_{mode}_{group}_{direction}.py"
            path.write_text(TARGETS["numba"].emit(net, r, {"mode": mode, "group": group, "direction": direction}))
            with mock.patch.dict(os.environ, {"NETGEN_NUMBA_PARALLEL": "0"}):  # read at import
                mod = load(path)
            cache[key] = mod
        return cache[key]

    return _make
