"""Slow, obviously-correct references for the pass tests."""

from __future__ import annotations

import itertools

import numpy as np

from netgen.network import Network


def random_network(rng: np.random.Generator, n: int, size: int, k: int | None = None) -> Network:
    """A random comparator sequence (random directions), ASAP-layered by the
    IR's own constructor; outputs: k random distinct wires."""
    comps = []
    for _ in range(size):
        a, b = rng.choice(n, size=2, replace=False)
        comps.append((int(a), int(b)))
    outs = rng.permutation(n)[: (n if k is None else k)].tolist()
    return Network.from_comparators(n, comps, outs, {"kind": "random"})


def relevant_inputs(n: int, k: int) -> np.ndarray:
    """0-1 inputs that decide a top-k network (all of them for a sorter)."""
    rows = [x for x in itertools.product((0, 1), repeat=n) if 0 < sum(x) <= k]
    return np.asarray(rows, dtype=np.int8).reshape(-1, n)


def brute_force_fires(net: Network) -> np.ndarray:
    """fires[i]: comparator i (in net.comparators order) swaps on some
    relevant 0-1 input. Comparator (a, b) swaps when x_a < x_b."""
    x = relevant_inputs(net.n, net.k).copy()
    fires = np.zeros(net.size, dtype=bool)
    for i, (a, b) in enumerate(net.comparators.tolist()):
        swap = x[:, a] < x[:, b]
        fires[i] = swap.any()
        x[swap, a], x[swap, b] = 1, 0
    return fires


def wire_orders(net: Network) -> dict[int, list[tuple[int, int]]]:
    """For each wire, the sequence of comparators (as pairs, numbered by
    their occurrence) that touch it."""
    seen: dict[tuple[int, int], int] = {}
    per_wire: dict[int, list] = {w: [] for w in range(net.n)}
    for a, b in net.comparators.tolist():
        c = seen.get((a, b), 0)
        seen[(a, b)] = c + 1
        per_wire[a].append((a, b, c))
        per_wire[b].append((a, b, c))
    return per_wire
