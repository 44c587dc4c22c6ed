"""Independent oracles for the verifier tests: brute force over every 0-1
input with 1..k ones (small n), run with ``Network.apply`` layer by layer."""

from __future__ import annotations

import itertools

import numpy as np

from netgen.network import Network


def inputs_upto_k(n: int, k: int) -> np.ndarray:
    """All 0-1 vectors of length n with 1..k ones, as an int8 matrix."""
    rows = []
    for m in range(1, k + 1):
        for ones in itertools.combinations(range(n), m):
            x = np.zeros(n, dtype=np.int8)
            x[list(ones)] = 1
            rows.append(x)
    return np.array(rows, dtype=np.int8).reshape(-1, n)


def brute_force(net: Network):
    """(correct, failing inputs, fires): fires[i] says whether comparator i
    swaps on some input with 1..k ones."""
    x = inputs_upto_k(net.n, net.k)
    v = x.copy()
    fires = np.zeros(net.size, dtype=bool)
    for i, (a, b) in enumerate(net.comparators.tolist()):  # execution order
        fires[i] = bool(((v[:, b] == 1) & (v[:, a] == 0)).any())
        va, vb = v[:, a].copy(), v[:, b].copy()
        v[:, a] = np.maximum(va, vb)
        v[:, b] = np.minimum(va, vb)
    m = x.sum(axis=1)
    want = (np.arange(net.k)[None, :] < m[:, None]).astype(np.int8)
    got = v[:, list(net.outputs)]
    extra = v.sum(axis=1) != got.sum(axis=1)  # a one left on a non-output wire
    bad = (got != want).any(axis=1) | extra
    return not bad.any(), x[bad], fires


def fails(net: Network, x) -> bool:
    """Does ``net`` get input ``x`` wrong (its top-k, sorted)?"""
    x = np.asarray(x)
    want = -np.sort(-x)[: net.k]
    return not np.array_equal(net.select(x), want)


def random_network(rng: np.random.Generator, n: int, size: int, k: int | None = None) -> Network:
    """Random comparators (either direction) and random distinct outputs."""
    comps = []
    for _ in range(size):
        a, b = rng.choice(n, size=2, replace=False) if n > 1 else (0, 0)
        if n > 1:
            comps.append((int(a), int(b)))
    k = n if k is None else k
    outputs = rng.permutation(n)[:k].tolist()
    return Network.from_comparators(n, comps, outputs=outputs)


def transposition_sorter(n: int) -> Network:
    """Odd-even transposition sort, written here independently of netgen.construct:
    rank r on wire r (max moves to the lower wire)."""
    layers = [[(i, i + 1) for i in range(t % 2, n - 1, 2)] for t in range(n)]
    layers = [l for l in layers if l]
    if not layers:
        return Network.from_arrays(n, np.zeros((0, 2)), np.zeros(1), outputs=list(range(n)))
    return Network.from_layers(n, layers, outputs=list(range(n)))


def with_prefix(rng: np.random.Generator, net: Network, extra: int) -> Network:
    """``net`` preceded by ``extra`` random comparators: still correct when
    ``net`` is (any input stays an input), and some comparators stop firing."""
    pre = []
    for _ in range(extra):
        a, b = rng.choice(net.n, size=2, replace=False)
        pre.append((int(a), int(b)))
    comps = np.concatenate([np.asarray(pre, dtype=np.int64).reshape(-1, 2), net.comparators.astype(np.int64)])
    return Network.from_comparators(net.n, comps, outputs=net.outputs)


def drop(net: Network, i: int) -> Network:
    keep = np.ones(net.size, dtype=bool)
    keep[i] = False
    return net.with_comparators(keep)
