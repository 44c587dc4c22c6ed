"""Small numba hash tables used by the reachable-state kernels.

``u64``: uint64 key -> uint64 value (first value kept), open addressing.
``rows``: int32 row keys of width w (the first w columns of a row array) ->
index of the first row inserted with that key.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_GOLD = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True)
def _mix(x):
    x = np.uint64(x)
    x ^= x >> np.uint64(31)
    x *= _GOLD
    x ^= x >> np.uint64(29)
    return x


@njit(cache=True)
def u64_new(cap):
    size = 16
    while size < 2 * cap:
        size *= 2
    keys = np.zeros(size, dtype=np.uint64)
    vals = np.zeros(size, dtype=np.uint64)
    occ = np.zeros(size, dtype=np.uint8)
    return keys, vals, occ


@njit(cache=True)
def u64_insert(keys, vals, occ, key, val):
    """Insert if absent. Returns 1 when inserted, 0 when present."""
    mask = np.uint64(keys.shape[0] - 1)
    h = _mix(key) & mask
    while occ[h]:
        if keys[h] == key:
            return 0
        h = (h + np.uint64(1)) & mask
    occ[h] = 1
    keys[h] = key
    vals[h] = val
    return 1


@njit(cache=True)
def u64_grow(keys, vals, occ):
    nk, nv, no = u64_new(keys.shape[0])
    for i in range(keys.shape[0]):
        if occ[i]:
            u64_insert(nk, nv, no, keys[i], vals[i])
    return nk, nv, no


@njit(cache=True)
def u64_items(keys, vals, occ, count):
    ks = np.empty(count, dtype=np.uint64)
    vs = np.empty(count, dtype=np.uint64)
    j = 0
    for i in range(keys.shape[0]):
        if occ[i]:
            ks[j] = keys[i]
            vs[j] = vals[i]
            j += 1
    return ks, vs


@njit(cache=True)
def row_hash(rows, i, w):
    h = np.uint64(0x12345678)
    for c in range(w):
        h = _mix(h ^ np.uint64(rows[i, c] + 1))
    return h


@njit(cache=True)
def unique_rows(rows, w):
    """Indices of the first occurrence of each distinct key ``rows[i, :w]``,
    in order of first occurrence."""
    m = rows.shape[0]
    size = 16
    while size < 2 * m:
        size *= 2
    table = np.full(size, -1, dtype=np.int64)
    mask = np.uint64(size - 1)
    keep = np.empty(m, dtype=np.int64)
    nk = 0
    for i in range(m):
        h = row_hash(rows, i, w) & mask
        while True:
            j = table[h]
            if j < 0:
                table[h] = i
                keep[nk] = i
                nk += 1
                break
            same = True
            for c in range(w):
                if rows[j, c] != rows[i, c]:
                    same = False
                    break
            if same:
                break
            h = (h + np.uint64(1)) & mask
    return keep[:nk]
