"""Reachable-state kernel for n <= 64: a state is a uint64 bitmask of the
wires holding a 1 (a token); its origin is the input mask it came from.
See reachable.py for the method."""

from __future__ import annotations

import numpy as np
from numba import njit

from ._hashset import u64_grow, u64_insert, u64_items, u64_new


@njit(cache=True)
def popcount64(x):
    x = np.uint64(x)
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return int((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(cache=True)
def _order_by_count(c, cmax):
    """Indices sorting ``c`` (values 0..cmax) ascending, stable (counting sort)."""
    start = np.zeros(cmax + 2, dtype=np.int64)
    for i in range(c.shape[0]):
        start[c[i] + 1] += 1
    for v in range(cmax + 1):
        start[v + 1] += start[v]
    out = np.empty(c.shape[0], dtype=np.int64)
    for i in range(c.shape[0]):
        out[start[c[i]]] = i
        start[c[i]] += 1
    return out


@njit(cache=True)
def mask_step(sa, oa, sb, ob, k, la, lb, fired, dead, max_states):
    """Combine every state of part A with every state of part B (at most k
    tokens in all), push each through the comparators ``(la[t], lb[t])`` in
    order, deduplicate (first origin kept). ``fired[t]`` is set when
    comparator t swaps. Returns (states, origins, bad, ok): ``bad`` is the
    index of a state with a token on a ``dead`` wire (or -1); ok is False when
    more than ``max_states`` states appear."""
    one = np.uint64(1)
    L = la.shape[0]
    pb = np.empty(sb.shape[0], dtype=np.int64)
    for j in range(sb.shape[0]):
        pb[j] = popcount64(sb[j])
    order = _order_by_count(pb, 64)
    keys, vals, occ = u64_new(min(sa.shape[0] * sb.shape[0], 1 << 16))
    count = 0
    for i in range(sa.shape[0]):
        ca = popcount64(sa[i])
        for jj in range(sb.shape[0]):
            j = order[jj]
            if ca + pb[j] > k:
                break
            s = sa[i] | sb[j]
            for t in range(L):
                a = np.uint64(la[t])
                b = np.uint64(lb[t])
                if ((s >> b) & one) and not ((s >> a) & one):
                    s ^= (one << a) | (one << b)
                    fired[t] = True
            count += u64_insert(keys, vals, occ, s, oa[i] | ob[j])
            if count > max_states:
                ks, vs = u64_items(keys, vals, occ, count)
                return ks, vs, -1, False
            if 2 * count > keys.shape[0]:
                keys, vals, occ = u64_grow(keys, vals, occ)
    ks, vs = u64_items(keys, vals, occ, count)
    bad = -1
    if dead:
        for i in range(ks.shape[0]):
            if ks[i] & dead:
                bad = i
                break
    return ks, vs, bad, True


_FINISH_CHUNKS = 64


@njit(cache=True)
def _transpose_block(states, start, stop, n, out):
    """out[w] bit t = bit w of states[start + t] (t < stop - start)."""
    one = np.uint64(1)
    for w in range(n):
        out[w] = np.uint64(0)
    for t in range(stop - start):
        s = states[start + t]
        tb = one << np.uint64(t)
        while s:
            low = s & (~s + one)
            w = popcount64(low - one)
            out[w] |= tb
            s ^= low
    return out


@njit(cache=True)
def mask_finish(states, origins, offs, n, k, la, lb, outputs, is_output, fired_out):
    """Test every combination of one state per part (the last part varies
    fastest, 64 at a time, bit-sliced: word w holds wire w of 64
    combinations) through the comparators ``(la[t], lb[t])``; at the end a
    combination with m <= k tokens must hold them exactly on outputs[0..m-1].
    Returns the origin mask of a failing combination and a found flag;
    ``fired_out[t]`` records swaps."""
    r = offs.shape[0] - 1
    L = la.shape[0]
    last0 = offs[r - 1]
    nlast = offs[r] - last0
    nblk = (nlast + 63) // 64
    # pre-transpose the last part, and its per-lane popcounts
    bt = np.zeros((nblk, n), dtype=np.uint64)
    lanepc = np.full((nblk, 64), 1 << 20, dtype=np.int64)
    for blk in range(nblk):
        s0 = last0 + blk * 64
        s1 = min(offs[r], s0 + 64)
        _transpose_block(states, s0, s1, n, bt[blk])
        for t in range(s1 - s0):
            lanepc[blk, t] = popcount64(states[s0 + t])
    outer = 1
    for q in range(r - 1):
        outer *= offs[q + 1] - offs[q]
    nch = min(outer, _FINISH_CHUNKS)
    fired = np.zeros((nch, L), dtype=np.uint64)
    bad_outer = np.full(nch, -1, dtype=np.int64)
    bad_lane = np.full(nch, -1, dtype=np.int64)
    for ch in range(nch):
        v = np.empty(n, dtype=np.uint64)
        o0 = outer * ch // nch
        o1 = outer * (ch + 1) // nch
        for oi in range(o0, o1):
            if bad_outer[ch] >= 0:
                break
            # decode the prefix state (parts 0..r-2)
            p = np.uint64(0)
            rem = oi
            for q in range(r - 2, -1, -1):
                sz = offs[q + 1] - offs[q]
                p |= states[offs[q] + rem % sz]
                rem //= sz
            pc = popcount64(p)
            if pc > k:
                continue
            for blk in range(nblk):
                valid = np.uint64(0)
                for t in range(64):
                    if lanepc[blk, t] + pc <= k:
                        valid |= np.uint64(1) << np.uint64(t)
                if valid == 0:
                    continue
                for w in range(n):
                    if (p >> np.uint64(w)) & np.uint64(1):
                        v[w] = ~np.uint64(0)
                    else:
                        v[w] = bt[blk, w]
                for t in range(L):
                    a = la[t]
                    b = lb[t]
                    x = v[a]
                    y = v[b]
                    fired[ch, t] |= y & ~x & valid
                    v[a] = x | y
                    v[b] = x & y
                err = np.uint64(0)
                for q in range(outputs.shape[0] - 1):
                    err |= v[outputs[q + 1]] & ~v[outputs[q]]
                for w in range(n):
                    if not is_output[w]:
                        err |= v[w]
                err &= valid
                if err:
                    t = popcount64((err & (~err + np.uint64(1))) - np.uint64(1))
                    bad_outer[ch] = oi
                    bad_lane[ch] = blk * 64 + t
                    break
    for ch in range(nch):
        for t in range(L):
            if fired[ch, t]:
                fired_out[t] = True
    for ch in range(nch):
        if bad_outer[ch] >= 0:
            o = origins[last0 + bad_lane[ch]]
            rem = bad_outer[ch]
            for q in range(r - 2, -1, -1):
                sz = offs[q + 1] - offs[q]
                o |= origins[offs[q] + rem % sz]
                rem //= sz
            return o, True
    return np.uint64(0), False
