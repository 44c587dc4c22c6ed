"""The published diffsort / difftopk 0.2.0 as oracles for tests/compat
(float64 throughout: their matrices made double, their eye() in the default
dtype)."""

import contextlib
import io

import pytest
import torch

with contextlib.redirect_stdout(io.StringIO()):  # difftopk prints at import
    diffsort = pytest.importorskip("diffsort")
    difftopk = pytest.importorskip("difftopk")


@contextlib.contextmanager
def float64_default():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def sort_net(kind, n, steepness, distribution="cauchy"):
    m = diffsort.DiffSortNet(kind, n, steepness=steepness, distribution=distribution)
    m.sorting_network = [[t.double() for t in layer] for layer in m.sorting_network]
    return m


def topk_net(kind, n, k, steepness, distribution="cauchy"):
    with contextlib.redirect_stdout(io.StringIO()):
        m = difftopk.DiffTopkNet(kind, n, k, steepness=steepness, distribution=distribution)
    m.sorting_network = [[t.double() for t in layer] for layer in m.sorting_network]
    return m


def run_topk(m, x):
    with float64_default():
        return m(x)
