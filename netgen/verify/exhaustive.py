"""Exhaustive 0-1 testing, numba-compiled.

Two kernels, both complete for the inputs that matter (docs/design.md section 5:
a top-k network is correct iff every 0-1 input with m <= k ones ends with
its ones exactly on ``outputs[0..m-1]``; for a sorter every input matters):

* bit-sliced: all 2^n inputs, 64 per uint64 word (wire w of word j holds bit
  w of the 64 input numbers 64j..64j+63); a comparator (a, b) is
  ``a' = a | b`` (max), ``b' = a & b`` (min). Inputs with more than k ones are
  masked out. For n <= 32.
* combinations: only the sum_{m<=k} C(n, m) inputs with at most k ones, one
  uint64 bitmask per input. For n <= 64 and small k.
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit, prange

from ..network import Network
from .report import Report

MAX_BITSLICED_N = 32
MAX_COMBINATION_INPUTS = 1 << 31
_CHUNK_WORDS = 1 << 12  # words per parallel task


def input_count(n: int, k: int) -> int:
    """Number of 0-1 inputs with 1..k ones (the inputs that decide correctness)."""
    return sum(math.comb(n, m) for m in range(1, min(k, n) + 1))


@njit(cache=True)
def _popcount(x):
    x = np.uint64(x)
    c = 0
    while x:
        x &= x - np.uint64(1)
        c += 1
    return c


@njit(cache=True)
def _tables():
    """low[w]: the fixed bit pattern of wire w < 6 within a word; valid[q]:
    the bits t (0..63) with popcount(t) <= q."""
    low = np.zeros(6, dtype=np.uint64)
    for w in range(6):
        m = np.uint64(0)
        for t in range(64):
            if (t >> w) & 1:
                m |= np.uint64(1) << np.uint64(t)
        low[w] = m
    valid = np.zeros(65, dtype=np.uint64)
    for q in range(65):
        m = np.uint64(0)
        for t in range(64):
            if _popcount(t) <= q:
                m |= np.uint64(1) << np.uint64(t)
        valid[q] = m
    return low, valid


@njit(cache=True)
def _chunk(ch, n, k, comps, outputs, is_output, nwords, fired, bad, low, valid):
    """Words ``ch * _CHUNK_WORDS ...`` of the bit-sliced run; records swaps in
    ``fired[ch]`` and the first failing input number in ``bad[ch]``."""
    size = comps.shape[0]
    full = ~np.uint64(0)
    v = np.empty(n, dtype=np.uint64)
    j0 = ch * _CHUNK_WORDS
    j1 = min(nwords, j0 + _CHUNK_WORDS)
    bad[ch] = -1
    for j in range(j0, j1):
        pj = _popcount(j)
        if pj > k:
            continue
        ok = valid[k - pj]
        if n < 6:
            ok &= (np.uint64(1) << np.uint64(1 << n)) - np.uint64(1)
        for w in range(n):
            if w < 6:
                v[w] = low[w]
            else:
                v[w] = full if (j >> (w - 6)) & 1 else np.uint64(0)
        for c in range(size):
            a = comps[c, 0]
            b = comps[c, 1]
            x = v[a]
            y = v[b]
            if (y & ~x) & ok:
                fired[ch, c] = True
            v[a] = x | y
            v[b] = x & y
        err = np.uint64(0)
        for r in range(len(outputs) - 1):
            err |= v[outputs[r + 1]] & ~v[outputs[r]]
        for w in range(n):
            if not is_output[w]:
                err |= v[w]
        err &= ok
        if err:
            t = 0
            while not (err >> np.uint64(t)) & np.uint64(1):
                t += 1
            bad[ch] = j * 64 + t
            return


@njit(cache=True)
def _bitsliced_serial(n, k, comps, outputs, is_output, nwords, fired, bad):
    """All 2^n inputs, one thread (no thread-pool start-up for small n)."""
    low, valid = _tables()
    for ch in range(bad.shape[0]):
        _chunk(ch, n, k, comps, outputs, is_output, nwords, fired, bad, low, valid)
        if bad[ch] >= 0:
            break


@njit(cache=True, parallel=True)
def _bitsliced_parallel(n, k, comps, outputs, is_output, nwords, fired, bad):
    """All 2^n inputs, chunks spread over the cores."""
    low, valid = _tables()
    for ch in prange(bad.shape[0]):
        _chunk(ch, n, k, comps, outputs, is_output, nwords, fired, bad, low, valid)


PARALLEL_FROM_N = 26  # below, a single thread is faster than starting the pool
NUMPY_UP_TO_N = 25  # up to here plain numpy beats numba's start-up (~1 s)
_NUMPY_CHUNK = 1 << 16  # words per numpy batch


def _bitsliced_numpy(n, k, comps, outputs, is_output, nwords):
    """The bit-sliced run in plain numpy (no compilation): returns (fires,
    first failing input number or None)."""
    size = len(comps)
    fired = np.zeros(size, dtype=bool)
    t = np.arange(64, dtype=np.uint64)
    one = np.uint64(1)
    low = [np.bitwise_or.reduce(np.where((t >> np.uint64(w)) & one, one << t, np.uint64(0))) for w in range(6)]
    pc_t = np.bitwise_count(t)
    valid = np.array([np.bitwise_or.reduce(np.where(pc_t <= q, one << t, np.uint64(0))) for q in range(65)],
                     dtype=np.uint64)
    full = ~np.uint64(0)
    non_out = [w for w in range(n) if not is_output[w]]
    ca, cb = comps[:, 0].tolist(), comps[:, 1].tolist()
    for j0 in range(0, nwords, _NUMPY_CHUNK):
        j = np.arange(j0, min(nwords, j0 + _NUMPY_CHUNK), dtype=np.uint64)
        pj = np.bitwise_count(j).astype(np.int64)
        ok = np.where(pj <= k, valid[np.clip(k - pj, 0, 64)], np.uint64(0))
        if n < 6:
            ok &= np.uint64((1 << (1 << n)) - 1)
        v = [np.full(len(j), low[w], dtype=np.uint64) if w < 6
             else np.where((j >> np.uint64(w - 6)) & one, full, np.uint64(0)) for w in range(n)]
        for c in range(size):
            a, b = ca[c], cb[c]
            x, y = v[a], v[b]
            if not fired[c] and ((y & ~x & ok) != 0).any():
                fired[c] = True
            v[a], v[b] = x | y, x & y
        err = np.zeros(len(j), dtype=np.uint64)
        for r in range(len(outputs) - 1):
            err |= v[outputs[r + 1]] & ~v[outputs[r]]
        for w in non_out:
            err |= v[w]
        err &= ok
        hit = np.flatnonzero(err)
        if len(hit):
            e = int(err[hit[0]])
            lane = (e & -e).bit_length() - 1
            return fired, int(j[hit[0]]) * 64 + lane
    return fired, None


@njit(cache=True)
def _combinations(n, k, comps, outputs, is_output, fired):
    """Every input with 1..k ones as a bitmask; returns the first failing
    input mask, or -1 (as int64 of the mask; n <= 63 here, 64 via unsigned)."""
    size = comps.shape[0]
    one = np.uint64(1)
    outmask = np.zeros(k + 1, dtype=np.uint64)  # outmask[m] = outputs[0..m-1]
    for m in range(1, k + 1):
        outmask[m] = outmask[m - 1] | (one << np.uint64(outputs[m - 1]))
    for m in range(1, k + 1):
        s = (one << np.uint64(m)) - one  # smallest mask with m ones
        while True:
            x = s
            for c in range(size):
                a = np.uint64(comps[c, 0])
                b = np.uint64(comps[c, 1])
                if ((x >> b) & one) and not ((x >> a) & one):
                    fired[c] = True
                    x ^= (one << a) | (one << b)
            if x != outmask[m]:
                return True, s
            # Gosper's hack: next mask with m ones
            if m == n:
                break
            u = s & (~s + one)
            vv = s + u
            if vv == 0 or (n < 64 and (vv >> np.uint64(n)) != 0):
                break
            s = vv + (((vv ^ s) // u) >> np.uint64(2))
            if n < 64 and (s >> np.uint64(n)) != 0:
                break
    return False, np.uint64(0)


def _mask_to_input(n: int, mask: int) -> list[int]:
    return [(mask >> w) & 1 for w in range(n)]


def choose(n: int, k: int) -> str | None:
    """Which exhaustive kernel fits (n, k): ``"bitsliced"``, ``"combinations"`` or None."""
    if n > max(MAX_BITSLICED_N, 64):  # no kernel: rule it out before counting (a sum of C(n, m) in big integers)
        return None
    combos = input_count(n, k)
    words = (1 << n) // 64 if n <= MAX_BITSLICED_N else None
    # a combination costs about a quarter of a 64-input word; up to n = 20
    # the numpy bit-sliced run takes milliseconds and needs no compilation
    if words is not None and (combos > 4 * max(words, 1) or n <= 20):
        return "bitsliced"
    if n <= 64 and combos <= MAX_COMBINATION_INPUTS:
        return "combinations"
    if words is not None:
        return "bitsliced"
    return None


def check(net: Network, *, engine: str = "auto") -> Report:
    """Exhaustive 0-1 check. ValueError when the network is too large for it.
    ``engine`` (bit-sliced kernel only): "numpy", "numba" or "auto" (numpy up
    to n = NUMPY_UP_TO_N, where it beats numba's start-up)."""
    if engine not in ("auto", "numpy", "numba"):
        raise ValueError(f"unknown engine {engine!r} (auto, numpy or numba)")
    t0 = time.perf_counter()
    n, k = net.n, net.k
    kernel = choose(n, k)
    if kernel is None:
        raise ValueError(
            f"exhaustive testing needs n <= {MAX_BITSLICED_N} or at most {MAX_COMBINATION_INPUTS} inputs "
            f"with <= k ones and n <= 64; this network has n={n}, k={k} ({input_count(n, k):.3g} inputs)"
        )
    comps = np.ascontiguousarray(net.comparators, dtype=np.int64)
    outputs = np.asarray(net.outputs, dtype=np.int64)
    is_output = np.zeros(n, dtype=np.bool_)
    is_output[outputs] = True
    if kernel == "bitsliced" and (engine == "numpy" or (engine == "auto" and n <= NUMPY_UP_TO_N)):
        fires, cex = _bitsliced_numpy(n, k, comps, outputs.tolist(), is_output, max(1, (1 << n) // 64))
        checked = input_count(n, k)
    elif kernel == "bitsliced":
        nwords = max(1, (1 << n) // 64)
        nchunks = (nwords + _CHUNK_WORDS - 1) // _CHUNK_WORDS
        fired = np.zeros((nchunks, net.size), dtype=np.bool_)
        bad = np.full(nchunks, -1, dtype=np.int64)
        run = _bitsliced_parallel if n >= PARALLEL_FROM_N else _bitsliced_serial
        run(n, k, comps, outputs, is_output, nwords, fired, bad)
        fires = fired.any(axis=0)
        failing = bad[bad >= 0]
        checked = input_count(n, k)
        cex = int(failing[0]) if len(failing) else None
    else:
        fires = np.zeros(net.size, dtype=np.bool_)
        found, mask = _combinations(n, k, comps, outputs, is_output, fires)
        checked = input_count(n, k)
        cex = int(mask) if found else None
    seconds = time.perf_counter() - t0
    if cex is not None:
        return Report("counterexample", "exhaustive", seconds, checked, _mask_to_input(n, cex), None)
    return Report("proved", "exhaustive", seconds, checked, None, fires)
