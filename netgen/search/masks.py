"""0-1 vectors as bit masks (bit w = wire w) for the search tools (issue 22):
the inputs with few ones, running comparators on them, untangling a
generalized network, and a greedy shrink that drops comparators while a
network stays correct on those inputs."""

from __future__ import annotations

import numpy as np

from ..network import Network


def masks_upto(n: int, k: int) -> np.ndarray:
    """All n-bit masks with 1..k ones (uint64), as 0-1 inputs (bit w = wire w)."""
    if not 1 <= n <= 63:
        raise ValueError(f"n must be in 1..63 for bit masks, got {n}")
    out = []
    cur = np.zeros(1, dtype=np.uint64)
    top = np.zeros(1, dtype=np.int64)  # index of the highest set bit + 1
    for _ in range(min(k, n)):
        nm, nt = [], []
        for b in range(n):
            sel = top <= b
            if sel.any():
                nm.append(cur[sel] | np.uint64(1 << b))
                nt.append(np.full(int(sel.sum()), b + 1, dtype=np.int64))
        cur, top = np.concatenate(nm), np.concatenate(nt)
        out.append(cur)
    return np.concatenate(out) if out else np.zeros(0, np.uint64)


def apply_layers(masks: np.ndarray, layers) -> np.ndarray:
    """Run comparators (max to the first wire) on bit-mask inputs."""
    m = np.array(masks, dtype=np.uint64, copy=True)
    one = np.uint64(1)
    for layer in layers:
        for a, b in layer:
            a, b = int(a), int(b)
            xa, xb = (m >> np.uint64(a)) & one, (m >> np.uint64(b)) & one
            m &= ~np.uint64((1 << a) | (1 << b))
            m |= ((xa | xb) << np.uint64(a)) | ((xa & xb) << np.uint64(b))
    return m


def untangle(layers) -> list[list[tuple[int, int]]]:
    """The standard network (every comparator max to the lower wire) equal to
    ``layers`` up to a relabelling of wires after each comparator."""
    label: dict[int, int] = {}
    out = []
    for layer in layers:
        cur = []
        for a, b in layer:
            a, b = label.get(int(a), int(a)), label.get(int(b), int(b))
            if a > b:  # swap the two labels from here on
                inv = {v: w for w, v in label.items()}
                wa, wb = inv.get(a, a), inv.get(b, b)
                label[wa], label[wb] = b, a
                a, b = b, a
            cur.append((a, b))
        out.append(cur)
    return out


def correct(net: Network, k: int, *, unsorted: bool = False, masks: np.ndarray | None = None) -> bool:
    """Is ``net`` (outputs 0..k-1 or any ``net.outputs``) a top-k selector on
    every 0-1 input with 1..k ones (sorted: the c ones on outputs[0..c-1];
    ``unsorted``: the inputs with k ones end with them on the outputs)? Complete
    by the 0-1 principle and monotonicity."""
    m = masks_upto(net.n, k) if masks is None else masks
    counts = np.bitwise_count(m) if hasattr(np, "bitwise_count") else np.array([bin(int(v)).count("1") for v in m])
    if unsorted:
        m, counts = m[counts == k], counts[counts == k]
    out = apply_layers(m, [l.tolist() for l in net.layers])
    for r, w in enumerate(net.outputs):
        bit = ((out >> np.uint64(w)) & np.uint64(1)).astype(bool)
        if not np.array_equal(bit, counts > r if not unsorted else np.ones(len(m), bool)):
            return False
    return True


def shrink(net: Network, *, unsorted: bool = False, max_inputs: int = 200_000) -> Network:
    """Greedily drop comparators (last first) while the network stays correct
    (:func:`correct`); packed ASAP again. A size heuristic, no optimum.
    Networks with more than ``max_inputs`` relevant inputs come back as they are."""
    from math import comb

    if sum(comb(net.n, c) for c in range(1, net.k + 1)) > max_inputs:
        return net
    masks = masks_upto(net.n, net.k)
    comps = net.comparators.tolist()
    keep = [True] * len(comps)
    for i in range(len(comps) - 1, -1, -1):
        keep[i] = False
        trial = Network.from_comparators(net.n, [c for c, q in zip(comps, keep) if q], net.outputs, net.construction)
        if not correct(trial, net.k, unsorted=unsorted, masks=masks):
            keep[i] = True
    return Network.from_comparators(net.n, [c for c, q in zip(comps, keep) if q], net.outputs, net.construction)
