"""Compiled per-comparator loops for the passes, for sequences too long to
handle one numpy step per layer. Imported lazily: importing numba and its
first call cost about a second each."""

import numba
import numpy as np


@numba.njit(cache=True)
def asap_levels_loop(n, comps):  # pragma: no cover - compiled
    ready = np.zeros(n, np.int64)
    out = np.empty(comps.shape[0], np.int64)
    for i in range(comps.shape[0]):
        a = comps[i, 0]
        b = comps[i, 1]
        level = ready[a] if ready[a] > ready[b] else ready[b]
        out[i] = level
        ready[a] = level + 1
        ready[b] = level + 1
    return out


@numba.njit(cache=True)
def cone_loop(n, comps, outputs):  # pragma: no cover - compiled
    needed = np.zeros(n, np.bool_)
    for w in outputs:
        needed[w] = True
    keep = np.zeros(comps.shape[0], np.bool_)
    for i in range(comps.shape[0] - 1, -1, -1):
        a = comps[i, 0]
        b = comps[i, 1]
        if needed[a] or needed[b]:
            keep[i] = True
            needed[a] = True
            needed[b] = True
    return keep
