"""Random testing: a smoke layer, never a proof. Real-valued inputs (with
ties) and random 0-1 inputs with at most k ones, run through ``net.apply``
in vectorised batches and compared with numpy's sort."""

from __future__ import annotations

import time

import numpy as np

from ..network import Network
from .report import Report

_BATCH_ELEMENTS = 1 << 22  # values per batch (batch * n)
#: with ``samples=None``: at most AUTO_SAMPLES inputs, fewer for large networks
#: so that inputs x (comparators + wires) stays within AUTO_WORK (bounded time),
#: but never fewer than MIN_AUTO_SAMPLES
AUTO_SAMPLES = 100_000
AUTO_WORK = 200_000_000
MIN_AUTO_SAMPLES = 100


def auto_samples(net: Network) -> int:
    """How many random inputs ``samples=None`` tests on ``net``."""
    return max(MIN_AUTO_SAMPLES, min(AUTO_SAMPLES, AUTO_WORK // (net.size + net.n)))


def _wrong(net: Network, x: np.ndarray) -> np.ndarray:
    """Row indices of ``x`` whose top-k the network gets wrong."""
    want = -np.sort(-x, axis=1)[:, : net.k]
    got = net.select(x)
    return np.flatnonzero((got != want).any(axis=1))


def sample(net: Network, *, samples: int | None = None, seed: int = 0) -> Report:
    """Test ``samples`` random inputs (None: :func:`auto_samples`, 100,000
    or fewer for large networks so the work stays bounded): half real-valued
    (some with ties), half 0-1 with 1..k ones (the inputs that decide
    correctness, docs/design.md section 5). Status "sampled" when all pass, else
    "counterexample"."""
    if samples is None:
        samples = auto_samples(net)
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    n, k = net.n, net.k
    batch = max(1, _BATCH_ELEMENTS // max(n, 1))
    done = 0
    while done < samples:
        m = min(batch, samples - done)
        half = m // 2
        real = rng.standard_normal((half, n))
        if half:
            real[: half // 4] = np.round(real[: half // 4])  # ties
        ones = rng.integers(1, k + 1, size=m - half)
        keys = rng.random((m - half, n))
        # the `ones` smallest keys of each row become 1
        thresh = np.take_along_axis(np.sort(keys, axis=1), (ones - 1)[:, None], axis=1)
        zero_one = (keys <= thresh).astype(np.int8)
        for x in (real, zero_one):
            if len(x) == 0:
                continue
            bad = _wrong(net, x)
            if len(bad):
                cex = x[bad[0]]
                cex = cex.astype(int).tolist() if x.dtype == np.int8 else cex.tolist()
                return Report("counterexample", "random", time.perf_counter() - t0, done + int(bad[0]) + 1, cex, None)
        done += m
    return Report("sampled", "random", time.perf_counter() - t0, done, None, None)
