"""Reachable-state kernel for large n and small k: a state is the sorted list
of wires holding tokens (at most k, padded with -1), its origin the sorted
list of input wires it came from. Comparators only matter where a token is,
so each state is pushed through a comparator list by following its tokens
from event to event (``next_a`` / ``next_b``: the next comparator on the same
wire), not by scanning the list. See reachable.py for the method."""

from __future__ import annotations

import numpy as np
from numba import njit

from ._hashset import row_hash
from ._reach_masks import _order_by_count


@njit(cache=True)
def _find_or_insert(table, pos, cnt_rows, k, row, m):
    """Look ``row[:m]`` up among ``pos`` rows via ``table``; returns
    (index, inserted). ``cnt_rows`` is the number of stored rows."""
    mask = np.uint64(table.shape[0] - 1)
    h = np.uint64(0x12345678)
    for c in range(k):
        v = row[c] if c < m else -1
        x = np.uint64(v + 1) ^ h
        x ^= x >> np.uint64(31)
        x *= np.uint64(0x9E3779B97F4A7C15)
        x ^= x >> np.uint64(29)
        h = x
    h &= mask
    while True:
        j = table[h]
        if j < 0:
            table[h] = cnt_rows
            return cnt_rows, True
        same = True
        for c in range(k):
            v = row[c] if c < m else -1
            if pos[j, c] != v:
                same = False
                break
        if same:
            return j, False
        h = (h + np.uint64(1)) & mask


@njit(cache=True)
def _rehash(pos, count, size):
    table = np.full(size, -1, dtype=np.int64)
    mask = np.uint64(size - 1)
    k = pos.shape[1]
    for i in range(count):
        h = row_hash(pos, i, k) & mask
        while table[h] >= 0:
            h = (h + np.uint64(1)) & mask
        table[h] = i
    return table


@njit(cache=True)
def _grow(a, rows):
    """A (rows, k) copy of ``a`` (truncated or padded with -1)."""
    out = np.full((rows, a.shape[1]), -1, dtype=a.dtype)
    for i in range(min(rows, a.shape[0])):
        for c in range(a.shape[1]):
            out[i, c] = a[i, c]
    return out


@njit(cache=True)
def _grow1(a, rows):
    out = np.zeros(rows, dtype=a.dtype)
    for i in range(min(rows, a.shape[0])):
        out[i] = a[i]
    return out


@njit(cache=True)
def token_step(pa, oa, ca, pb, ob, cb, k, la, lb, seen, fired, dead, max_states):
    """Like ``mask_step`` for token lists: combine rows of A and B with at
    most k tokens in all, push them through comparators ``(la[t], lb[t])``,
    deduplicate. ``seen`` is an all -1 scratch array of length n (restored
    on return). ``dead[w]``: a token on w is a counterexample. Returns
    (pos, org, cnt, bad, ok)."""
    L = la.shape[0]
    nxa = np.empty(L, dtype=np.int64)
    nxb = np.empty(L, dtype=np.int64)
    for t in range(L - 1, -1, -1):
        a = la[t]
        b = lb[t]
        nxa[t] = seen[a] if seen[a] >= 0 else L
        nxb[t] = seen[b] if seen[b] >= 0 else L
        seen[a] = t
        seen[b] = t
    order = _order_by_count(cb, k)
    cap = 64
    pos = np.full((cap, k), -1, dtype=np.int32)
    org = np.full((cap, k), -1, dtype=np.int32)
    cnt = np.zeros(cap, dtype=np.int32)
    tsize = 128
    table = np.full(tsize, -1, dtype=np.int64)
    count = 0
    w = np.empty(k, dtype=np.int32)
    tm = np.empty(k, dtype=np.int64)
    o = np.empty(k, dtype=np.int32)
    ok = True
    for i in range(pa.shape[0]):
        if not ok:
            break
        for jj in range(pb.shape[0]):
            j = order[jj]
            m = ca[i] + cb[j]
            if m > k:
                break
            for q in range(ca[i]):
                w[q] = pa[i, q]
            for q in range(cb[j]):
                w[ca[i] + q] = pb[j, q]
            for q in range(m):
                s = seen[w[q]]
                tm[q] = s if s >= 0 else L
            while True:
                best = L
                for q in range(m):
                    if tm[q] < best:
                        best = tm[q]
                if best >= L:
                    break
                a = la[best]
                b = lb[best]
                qa = -1
                qb = -1
                for q in range(m):
                    if w[q] == a:
                        qa = q
                    elif w[q] == b:
                        qb = q
                if qb >= 0 and qa < 0:
                    w[qb] = a
                    tm[qb] = nxa[best]
                    fired[best] = True
                else:
                    if qa >= 0:
                        tm[qa] = nxa[best]
                    if qb >= 0:
                        tm[qb] = nxb[best]
            # sort tokens (insertion sort, m <= k is small)
            for q in range(1, m):
                v = w[q]
                r = q - 1
                while r >= 0 and w[r] > v:
                    w[r + 1] = w[r]
                    r -= 1
                w[r + 1] = v
            idx, new = _find_or_insert(table, pos, count, k, w, m)
            if new:
                # origin: merge the two sorted origin lists
                x = 0
                y = 0
                for q in range(m):
                    if y >= cb[j] or (x < ca[i] and oa[i, x] < ob[j, y]):
                        o[q] = oa[i, x]
                        x += 1
                    else:
                        o[q] = ob[j, y]
                        y += 1
                if count == cap:
                    cap *= 2
                    pos = _grow(pos, cap)
                    org = _grow(org, cap)
                    cnt = _grow1(cnt, cap)
                for q in range(m):
                    pos[count, q] = w[q]
                    org[count, q] = o[q]
                cnt[count] = m
                count += 1
                if count > max_states:
                    ok = False
                    break
                if 2 * count > tsize:
                    tsize *= 2
                    table = _rehash(pos, count, tsize)
    for t in range(L):
        seen[la[t]] = -1
        seen[lb[t]] = -1
    bad = -1
    for i in range(count):
        for q in range(cnt[i]):
            if dead[pos[i, q]]:
                bad = i
                break
        if bad >= 0:
            break
    return _grow(pos, count), _grow(org, count), _grow1(cnt, count), bad, ok
