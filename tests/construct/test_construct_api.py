"""The public API: argument checking, size refusals, records, determinism."""

import numpy as np
import pytest

from netgen.construct import KINDS, build, size_estimate


@pytest.mark.parametrize(
    "args,match",
    [
        (("bitonic", 0), "n must be >= 1"),
        (("bitonic", -3), "n must be >= 1"),
        (("bitonic", 2.5), "n must be an integer"),
        (("bitonic", True), "n must be an integer"),
        (("bitonic", "8"), "n must be an integer"),
        (("bitonic", 8, 0), "k must be >= 1"),
        (("bitonic", 8, 9), "k must be <= n"),
        (("bitonic", 8, 2.0), "k must be an integer"),
        (("quicksort", 8, 2), "unknown network kind"),
        ((None, 8, 2), "unknown network kind"),
        (("splitter", 8), "splitter network needs k"),
        (("splitter", 8, 0), "k must be >= 1"),
    ],
)
def test_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        build(*args)


@pytest.mark.parametrize(
    "args",
    [
        ("transposition", 100_000),
        ("transposition", 100_000, 5),
        ("bitonic", 1 << 24),
        ("oddeven", 1 << 22),
        ("pairwise", 1 << 24, 8),
        ("splitter", 1 << 24, 8),
        ("splitter", 20_000, 20_000),
        ("bitonic", 1 << 25, 1),
    ],
)
def test_too_large_is_refused_before_building(args):
    with pytest.raises(ValueError, match=r"too large"):
        build(*args)


def test_size_estimate_bounds_real_sizes():
    for kind in KINDS:
        for n, k in [(1, 1), (7, 3), (100, 100), (1000, 8), (4096, 64)]:
            if kind == "transposition" and n > 1000:
                continue
            assert build(kind, n, k).size <= size_estimate(kind, n, k), (kind, n, k)


def test_k_equal_n_splitter_is_a_sorter():
    net = build("splitter", 12, 12)
    x = np.random.default_rng(0).standard_normal((100, 12))
    assert np.array_equal(net.select(x), -np.sort(-x, axis=1))


@pytest.mark.parametrize("kind", KINDS)
def test_deterministic(kind):
    assert build(kind, 100, 5).key() == build(kind, 100, 5).key()


def test_numpy_integers_accepted():
    assert build("oddeven", np.int64(10), np.int32(3)) == build("oddeven", 10, 3)


def test_8_65536_is_compact():
    net = build("bitonic", 65536, 8)
    assert net.comparators.dtype == np.int32 and net.comparators.nbytes == 8 * net.size
