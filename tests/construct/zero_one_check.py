"""A small, independent correctness checker for the construction tests
(the real verifier lives in netgen.verify; this one is deliberately simple).

0-1 inputs are given as integer bitmasks (bit w = the value on wire w). They
are run bit-sliced: wire w holds one bit per input, packed 64 to a uint64
word; a comparator (a, b) becomes a' = a | b (max), b' = a & b (min). Output r
(rank r, rank 0 = largest) must hold 1 exactly when the input has more than r
ones.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np


def _pack(bits: np.ndarray) -> np.ndarray:
    """(rows, T) bool -> (rows, T/64) uint64, T a multiple of 64."""
    return np.packbits(bits, axis=-1, bitorder="little").view(np.uint64)


def first_failure(net, masks: np.ndarray) -> int | None:
    """Run ``net`` on the 0-1 inputs ``masks``; return a failing mask or None."""
    masks = np.asarray(masks, dtype=np.int64)
    pad = (-len(masks)) % 64
    masks = np.concatenate([masks, np.zeros(pad, np.int64)])
    n = net.n
    wires = np.arange(n, dtype=np.int64)
    v = _pack(((masks[None, :] >> wires[:, None]) & 1).astype(bool))
    for c in net.layers:
        a, b = c[:, 0], c[:, 1]
        va, vb = v[a], v[b]
        v[a] = va | vb
        v[b] = va & vb
    counts = np.bitwise_count(masks.astype(np.uint64)).astype(np.int64)
    ranks = np.arange(net.k, dtype=np.int64)
    expected = _pack(counts[None, :] > ranks[:, None])
    bad = (v[list(net.outputs)] != expected).any(axis=0)
    if not bad.any():
        return None
    word = int(np.flatnonzero(bad)[0])
    got_bits = np.unpackbits(v[list(net.outputs)][:, word : word + 1].view(np.uint8), axis=-1, bitorder="little")
    exp_bits = np.unpackbits(expected[:, word : word + 1].view(np.uint8), axis=-1, bitorder="little")
    t = int(np.flatnonzero((got_bits != exp_bits).any(axis=0))[0])
    return int(masks[64 * word + t])


def all_masks(n: int) -> np.ndarray:
    return np.arange(1 << n, dtype=np.int64)


def masks_with_at_most(n: int, k: int, limit: int) -> tuple[np.ndarray, bool]:
    """Bitmasks of all inputs with 1..k ones, as far as ``limit`` allows.
    Returns (masks, complete)."""
    out = [np.zeros(0, np.int64)]
    total = 0
    for m in range(1, k + 1):
        c = math.comb(n, m)
        if total + c > limit:
            return np.concatenate(out), False
        total += c
        out.append(_masks_with(n, m))
    return np.concatenate(out), True


@functools.lru_cache(maxsize=256)
def _masks_with(n: int, m: int) -> np.ndarray:
    combos = np.array(list(itertools.combinations(range(n), m)), dtype=np.int64).reshape(-1, m)
    return (np.int64(1) << combos).sum(axis=1)


def check_random(net, rng: np.random.Generator, trials: int = 200) -> None:
    """Random real inputs (distinct and with ties) against ``np.sort``."""
    for x in (rng.standard_normal((trials, net.n)), rng.integers(0, 4, (trials, net.n)).astype(float)):
        want = -np.sort(-x, axis=1)[:, : net.k]
        got = net.select(x)
        assert np.array_equal(got, want), f"{net!r} wrong on {x[(got != want).any(1)][0].tolist()}"


def random_masks(n: int, k: int, rng: np.random.Generator, count: int) -> np.ndarray:
    """Random 0-1 inputs with 1..k ones."""
    m = rng.integers(1, k + 1, count)
    order = np.argsort(rng.random((count, n)), axis=1)  # a random permutation per row
    ones = order < m[:, None]
    return (ones.astype(np.int64) << np.arange(n, dtype=np.int64)).sum(axis=1)


def assert_correct(net, rng: np.random.Generator, exhaustive_n: int = 16, combo_limit: int = 20000) -> str:
    """Check ``net`` (a sorter or top-k network): every 0-1 input for
    n <= ``exhaustive_n``; otherwise all inputs with <= k ones when there are
    at most ``combo_limit`` (complete by the 0-1 principle for top-k networks,
    docs/design.md section 5), else random 0-1 and real inputs. Returns how."""
    n, k = net.n, net.k
    if n <= exhaustive_n:
        bad = first_failure(net, all_masks(n))
        how = "exhaustive"
    else:
        masks, complete = masks_with_at_most(n, k, combo_limit)
        if not complete:
            masks = np.concatenate([masks, random_masks(n, k, rng, 1000)])
        bad = first_failure(net, masks) if len(masks) else None
        how = "all inputs with <= k ones" if complete else "sampled"
        check_random(net, rng)
    assert bad is None, f"{net!r} wrong on 0-1 input {[(bad >> w) & 1 for w in range(n)]}"
    return how
