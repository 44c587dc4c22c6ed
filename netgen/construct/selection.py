"""Wah-Chen (k, n) selection networks from the parts of a Batcher-type sorter.

With K = 2^L, L = ceil(lg k), and n padded to N = 2^ceil(lg n): sort the N/K
blocks of K consecutive wires with the kind's sorter, then in
ceil(lg n) - L rounds merge the sorted top-K lists pairwise, keeping the top
K (the kind's merger, see ``sorters.*_merge_top``), until one list is left;
its first k wires are the outputs. Depth
L(L+1)/2 + (ceil(lg n) - L)(L+1) before ASAP packing and pruning.

The whole network is generated per layer with numpy: a template (sorter of K
or merger of two K-lists) is instantiated for all blocks of a round at once by
indexing the blocks' wire arrays with the template's positions.
"""

from __future__ import annotations

import numpy as np

from ..network import Network
from ..schedule import cone_mask
from ._common import ceil_lg, finish, refuse_if_too_large, unpad
from .sorters import MERGE_TOP, SORTER_LAYERS

SELECTION_KINDS = tuple(MERGE_TOP)


def selection_depth(n: int, k: int) -> int:
    """Depth of the Wah-Chen network before packing: L(L+1)/2 + (ceil(lg n) - L)(L+1)."""
    L = ceil_lg(k)
    return L * (L + 1) // 2 + (ceil_lg(n) - L) * (L + 1)


def selection_size_estimate(n: int, k: int) -> int:
    """Upper bound on the comparators built (on the padded N wires)."""
    L, N = ceil_lg(k), 1 << ceil_lg(n)
    return N // 2 * (L * (L + 1) // 2) + N * (L + 1)


def _pruned_template(layers: list[np.ndarray], outputs: np.ndarray, width: int) -> list[np.ndarray]:
    """The template's layers restricted to the cone of its outputs."""
    sizes = [len(c) for c in layers]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    keep = cone_mask(width, np.concatenate(layers), outputs, offsets) if sum(sizes) else np.zeros(0, bool)
    out, start = [], 0
    for c, m in zip(layers, sizes):
        kept = c[keep[start : start + m]]
        start += m
        if len(kept):
            out.append(kept)
    return out


def logical_selection(kind: str, N: int, k: int) -> tuple[list[np.ndarray], np.ndarray]:
    """The selection network on N = 2^l logical wires: its layers and the
    logical wires holding ranks 0..k-1."""
    L = ceil_lg(k)
    K = 1 << L
    # round 0: sort every block of K consecutive wires
    lists = np.arange(N, dtype=np.int64).reshape(N // K, K)
    sort_layers = SORTER_LAYERS[kind](K) if K > 1 else []
    layers = [lists[:, c].reshape(-1, 2) for c in sort_layers]  # c is (m, 2): lists[:, c] is (blocks, m, 2)
    # sorted-K-list positions after sorting: position r holds rank r
    merge_layers, merge_out = MERGE_TOP[kind](K)
    merge_layers = _pruned_template(merge_layers, merge_out, 2 * K)
    while lists.shape[0] > 1:
        pairs = lists.reshape(-1, 2 * K)  # list 2j on positions 0..K-1, 2j+1 on K..2K-1
        layers += [pairs[:, c].reshape(-1, 2) for c in merge_layers]
        lists = pairs[:, merge_out]
    return layers, lists[0, :k]


def selection(kind: str, n: int, k: int) -> Network:
    """The Wah-Chen (k, n) selection network of ``kind`` (bitonic, oddeven or
    pairwise), cone-pruned to its k outputs and packed ASAP."""
    if kind not in SELECTION_KINDS:
        raise ValueError(f"unknown selection kind {kind!r}; choose one of {', '.join(SELECTION_KINDS)}")
    refuse_if_too_large(f"{kind} selection", n, k, selection_size_estimate(n, k))
    N = 1 << ceil_lg(n)
    layers, outs = logical_selection(kind, N, k)
    chunks, outputs, _ = unpad(n, N, layers, outs)
    return finish(n, chunks, outputs, {"kind": kind, "n": n, "k": k}, prune=True)
