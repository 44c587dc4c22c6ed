"""Small hand-made networks for the render tests (independent of
netgen.construct, so these tests check rendering, not constructions)."""

from __future__ import annotations

import numpy as np
from netgen.network import Network


def transposition_sorter(n: int) -> Network:
    """Odd-even transposition sort, max to the lower wire index: rank r on wire r."""
    layers = [[(i, i + 1) for i in range(p % 2, n - 1, 2)] for p in range(n)]
    return Network.from_layers(n, [l for l in layers if l], list(range(n)), {"kind": "transposition", "n": n})


def splitter_cascade(wires: list[int], comps: list[tuple[int, int]]) -> None:
    """docs/design.md section 4: compare l_i with l_{i+s}, s = 2^(ceil(lg m) - 1), max to l_i; recurse."""
    m = len(wires)
    if m < 2:
        return
    s = 1 << ((m - 1).bit_length() - 1)
    comps.extend((wires[i], wires[i + s]) for i in range(m - s))
    splitter_cascade(wires[:s], comps)
    splitter_cascade(wires[s:], comps)


def random_layered(n: int, depth: int, seed: int, k: int | None = None) -> Network:
    rng = np.random.default_rng(seed)
    layers = []
    for _ in range(depth):
        perm = rng.permutation(n)
        m = int(rng.integers(1, n // 2 + 1))
        layers.append([(int(perm[2 * i]), int(perm[2 * i + 1])) for i in range(m)])
    return Network.from_layers(n, layers, list(range(k or n)))


