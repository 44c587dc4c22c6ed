"""The networks of diffsort/difftopk: as netgen Networks, and in their matrix
format (``bitonic_network``, ``odd_even_network``, ``get_sorting_network``),
plus the way back (:func:`from_matrices`) for their ``sort``/``topk``.

Their matrix format, per layer, one row per comparator or kept wire:
``split_a``/``split_b`` (rows, n) select the two inputs of each row,
``combine_min``/``combine_max`` (n, rows) say which wire gets the soft min /
soft max; a kept wire is a row with ``split_a == split_b`` and 0.5 in both
combine matrices. The sparse difftopk variants hold the transposes as sparse
COO tensors plus index tensors (``alpha_idxs``, ``one_minus_alpha_idxs``,
``remain_idxs``, ``alpha_mask``) that its sparse executor reads.

The comparators are the published ones (tested against the packages);
rows are listed comparators first (by lower wire) then kept wires, which
for odd_even and power-of-two bitonic is their order too; the executors'
results do not depend on the row order.
"""

from __future__ import annotations

import numpy as np
import torch

from ..network import Network

TYPES = ("odd_even", "bitonic", "splitter_selection")


def _transposition(n: int) -> list[list[tuple[int, int]]]:
    # n layers; layer t compares (i, i+1) for i = t%2, t%2 + 2, ...: min -> i, max -> i+1
    return [[(i + 1, i) for i in range(t % 2, n - 1, 2)] for t in range(n)]


def _bitonic_classic(n: int) -> list[list[tuple[int, int]]]:
    m = max(1, int(np.ceil(np.log2(n)))) if n > 1 else 0
    N = 1 << m
    pad = N - n  # wires 0..pad-1 of the 2^m are padding (dropped)
    layers = []
    for block in range(m):
        for step in range(block + 1):
            dist = 1 << (block - step)
            layer = []
            for i in range(0, N, 2 * dist):
                for j in range(dist):
                    a, b = i + j, i + j + dist
                    if a < pad or b < pad:
                        continue
                    descending_block = (a >> (block + 1)) & 1
                    # ascending block: min -> a, max -> b; descending: reversed
                    layer.append((a - pad, b - pad) if descending_block else (b - pad, a - pad))
            layers.append(layer)
    return layers


def _check_size(size, k=None) -> tuple[int, int]:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise ValueError(f"size must be an integer, got {size!r}")
    n = int(size)
    if n < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    if k is None:
        return n, n
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= int(k) <= n:
        raise ValueError(f"k must be an integer in 1..{n}, got {k!r}")
    return n, int(k)


def _splitter_layers(n: int, k: int) -> list[list[tuple[int, int]]]:
    from ..construct.splitter import splitter

    net = splitter(n, k)  # the paper's construction (not the shallower splitter-tail finish)
    # difftopk mirrors the wires: wire w of the construction is n-1-w
    comps = (n - 1) - net.comparators.astype(np.int64)
    off = net.layer_offsets
    return [[(int(a), int(b)) for a, b in comps[off[l]:off[l + 1]]] for l in range(len(off) - 1)]


def original_network(sorting_network_type: str, size: int, k: int | None = None) -> Network:
    """The network diffsort/difftopk build for these arguments, as a netgen
    Network (outputs: wires n-1, n-2, ... hold ranks 0, 1, ...)."""
    n, k = _check_size(size, k)
    outputs = list(range(n - 1, n - 1 - k, -1))
    construction = {"kind": sorting_network_type, "n": n, "k": k, "source": "difftopk"}
    if sorting_network_type == "odd_even":
        layers = _transposition(n)
    elif sorting_network_type == "bitonic":
        layers = _bitonic_classic(n)
    elif sorting_network_type == "splitter_selection":
        layers = _splitter_layers(n, k)
    else:
        raise ValueError(f"unknown sorting_network_type {sorting_network_type!r}; choose one of {', '.join(TYPES)}")
    layers = [l for l in layers if l]
    return Network.from_layers(n, layers, outputs, construction)


def netgen_network(sorting_network_type: str, size: int, k: int | None) -> Network:
    """netgen's correct construction of the same kind (``network="netgen"``)."""
    from ..construct import build

    kind = {"odd_even": "transposition", "bitonic": "bitonic", "splitter_selection": "splitter"}.get(sorting_network_type)
    if kind is None:
        raise ValueError(f"unknown sorting_network_type {sorting_network_type!r}; choose one of {', '.join(TYPES)}")
    return build(kind, size, size if k is None else k)


# ------------------------------------------------------------ matrix format
def _rows(n: int, layer):
    """(split_a, split_b, combine_min, combine_max, comparator rows, kept wires)."""
    comps = sorted(layer, key=lambda c: min(c))
    kept = sorted(set(range(n)) - {w for c in comps for w in c})
    rows = len(comps) + len(kept)
    sa, sb = np.zeros((rows, n)), np.zeros((rows, n))
    cmin, cmax = np.zeros((n, rows)), np.zeros((n, rows))
    for r, (hi, lo) in enumerate(comps):
        a, b = min(hi, lo), max(hi, lo)
        sa[r, a] = sb[r, b] = 1
        cmin[lo, r] = cmax[hi, r] = 1
    for r, w in enumerate(kept, len(comps)):
        sa[r, w] = sb[r, w] = 1
        cmin[w, r] = cmax[w, r] = 0.5
    return sa, sb, cmin, cmax, comps, kept


def _dense(n: int, layers) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    return [_rows(n, layer)[:4] for layer in layers]


def bitonic_network(n):
    """diffsort's bitonic network in its matrix format (numpy float64
    arrays). For n not a power of two this network is not always a sorter
    (see :mod:`netgen.compat`)."""
    n, _ = _check_size(n)
    return _dense(n, _bitonic_classic(n))


def odd_even_network(n):
    """diffsort's odd-even transposition network (n layers) in its matrix format."""
    n, _ = _check_size(n)
    return _dense(n, _transposition(n))


def _sparse_numpy(n: int, layers):
    """difftopk's sparse format in numpy: per layer ``(split_a, split_b,
    combine_min, combine_max, alpha_idxs, one_minus_alpha_idxs,
    remain_idxs, alpha_mask)``."""
    out = []
    for layer in layers:
        sa, sb, cmin, cmax, comps, kept = _rows(n, layer)
        alpha, one_minus = [], []
        for hi, lo in comps:
            wa, wb = min(hi, lo), max(hi, lo)  # the wires split_a / split_b read
            # the soft min (at lo) is alpha * v[wa] + (1 - alpha) * v[wb]; the soft max the other way round
            alpha += [[lo, wa], [hi, wb]]
            one_minus += [[lo, wb], [hi, wa]]
        out.append((sa, sb, cmin, cmax, np.array(alpha), np.array(one_minus), np.array([[w, w] for w in kept]),
                    np.array([[r] for r in range(len(comps))])))
    return out


def sparse_bitonic_network(n):
    """difftopk's ``sparse_bitonic_network``: the bitonic network in its
    sparse format, as numpy arrays (see :func:`_sparse_numpy`)."""
    n, _ = _check_size(n)
    return _sparse_numpy(n, _bitonic_classic(n))


def sparse_splitter_selection_network(n, k):
    """difftopk's ``sparse_splitter_selection_network``: the splitter
    selection network in its sparse format, as numpy arrays."""
    n, k = _check_size(n, k)
    return _sparse_numpy(n, _splitter_layers(n, k))


def _to_torch(layers, device):
    return [[torch.from_numpy(np.asarray(m)).float().to(device) for m in layer] for layer in layers]


def get_sparse_net(net):
    """difftopk's ``get_sparse_net``: the first four matrices of each layer
    (torch tensors) as coalesced sparse COO tensors of their transposes,
    the index tensors kept."""
    return [[m.T.to_sparse().coalesce() for m in layer[:4]] + list(layer[4:]) for layer in net]


def _sparse(n: int, layers, device):
    return get_sparse_net(_to_torch(_sparse_numpy(n, layers), device))


def get_sorting_network(type, n, device, k=None):
    """difftopk's ``get_sorting_network`` (a superset of diffsort's): the
    network as per-layer lists of float32 tensors on ``device``: ``'bitonic'``
    and ``'odd_even'`` dense, ``'sparse_bitonic'`` and
    ``'sparse_splitter_selection'`` (needs ``k``) in difftopk's sparse form."""
    n, _ = _check_size(n)
    if type == "bitonic":
        layers = _dense(n, _bitonic_classic(n))
    elif type == "odd_even":
        layers = _dense(n, _transposition(n))
    elif type == "sparse_bitonic":
        return _sparse(n, _bitonic_classic(n), device)
    elif type == "sparse_splitter_selection":
        _, k = _check_size(n, k)
        return _sparse(n, _splitter_layers(n, k), device)
    else:
        raise ValueError(f"unknown sorting network type {type!r}; choose one of 'bitonic', 'odd_even', "
                         "'sparse_bitonic', 'sparse_splitter_selection'")
    return [[torch.from_numpy(m).float().to(device) for m in layer] for layer in layers]


def to_plain(net: Network) -> dict:
    """``net`` as plain Python data (lists, ints, strings: what a pickle
    loaded with ``weights_only=True`` may hold)."""
    from ..io import to_dict

    return to_dict(net)


def from_plain(d: dict) -> Network:
    from ..io import from_dict

    return from_dict(d, source="a pickled compat module")


# -------------------------------------------------------- and the way back
def _dest(m: torch.Tensor, transposed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, wire, value) of the nonzeros of a (rows, n) selection matrix
    (given as its (n, rows) transpose when ``transposed``)."""
    if m.is_sparse:
        m = m.coalesce()
        i, v = m.indices().cpu().numpy(), m.values().detach().cpu().double().numpy()
    else:
        nz = torch.nonzero(m).T
        i, v = nz.cpu().numpy(), m[tuple(nz)].detach().cpu().double().numpy()
    r, w = (i[1], i[0]) if transposed else (i[0], i[1])
    return r, w, v


def from_matrices(sorting_network, n: int, k: int) -> Network:
    """The netgen Network of a network in diffsort/difftopk's matrix format
    (dense or sparse), keeping the last ``k`` wires. ValueError if a row is
    neither a comparator nor a kept wire."""
    layers = []
    for li, layer in enumerate(sorting_network):
        if len(layer) < 4:
            raise ValueError(f"layer {li} of the sorting network has {len(layer)} matrices, expected 4 or 8")
        sparse = layer[0].is_sparse
        sel = []
        for j, m in enumerate(layer[:4]):
            # split_a/split_b are (rows, n) and combine_* are (n, rows); the sparse form stores transposes
            r, w, v = _dest(m, transposed=sparse if j < 2 else not sparse)
            sel.append((r, w, v))
        rows = 1 + max((int(r.max()) if len(r) else -1) for r, _, _ in sel)
        pick = np.full((4, rows), -1, dtype=np.int64)
        val = np.zeros((4, rows))
        for j, (r, w, v) in enumerate(sel):
            if len(np.unique(r)) != len(r):
                raise ValueError(f"layer {li}: a row of the sorting network has several entries")
            pick[j, r], val[j, r] = w, v
        comps = []
        for row in range(rows):
            a, b, lo, hi = pick[:, row]
            if min(a, b, lo, hi) < 0 or max(a, b, lo, hi) >= n:
                raise ValueError(f"layer {li}, row {row}: not a comparator of wires 0..{n - 1}")
            if a == b == lo == hi and np.allclose(val[:, row], [1, 1, 0.5, 0.5]):
                continue  # a kept wire
            if a == b or {a, b} != {lo, hi} or not np.allclose(val[:, row], 1):
                raise ValueError(f"layer {li}, row {row}: neither a comparator nor a kept wire")
            comps.append((int(hi), int(lo)))
        if comps:
            layers.append(comps)
    _, k = _check_size(n, k)
    return Network.from_layers(n, layers, list(range(n - 1, n - 1 - k, -1)),
                               {"kind": "matrices", "n": n, "k": k, "source": "diffsort/difftopk matrices"})
