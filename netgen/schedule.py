"""ASAP packing and cone pruning of flat comparator sequences: the one
implementation every layer of netgen uses (the IR's
``Network.from_comparators``, the constructions, the ``prune`` and
``schedule`` passes, the splitter trace).

Everything here works on arrays: a sequence ``comps`` of shape ``(m, 2)`` in
execution order, optionally split by ``chunks`` (offsets, ``chunks[0] = 0``,
``chunks[-1] = m``) into runs of comparators on pairwise distinct wires (a
network's ``layer_offsets``, a construction's layers). This module imports
nothing from netgen, so the IR itself can use it.

Each scan is written once, as a per-comparator loop (:func:`_asap_loop`,
:func:`_cone_loop`), and run one of three ways, whichever measured fastest
(``research/schedule/schedule_paths.py``):

* few chunks (at most :data:`MAX_NUMPY_CHUNKS`): one numpy step per chunk,
  the same recurrence applied to a whole chunk at once (no compile);
* no chunks or many, short sequence (below :data:`MIN_COMPILED`): the loop
  run by the interpreter on Python lists (no numba import, no compile);
* otherwise the same loop compiled by numba (cached on disk), and from then
  on for every chunk-less sequence in the process.
"""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np

# Sequences given as at most this many wire-disjoint chunks are scanned with
# one numpy step per chunk (~10 us a chunk).
MAX_NUMPY_CHUNKS = 4096
# Chunk-less sequences shorter than this run the loop in the interpreter
# (0.2-3 us a comparator); longer ones compile it: importing numba and
# loading the cached loop costs 0.9-1.7 s once (then a few ns a comparator),
# which paid off between 1e5 and 1e6 comparators (research/schedule/schedule_paths.py).
MIN_COMPILED = 500_000


def _asap_loop(comps, ready, out):
    """ASAP level of each comparator: one more than the latest level already
    used on either of its wires (``ready[w]``: the first free level of w)."""
    for i in range(len(comps)):
        a = comps[i][0]
        b = comps[i][1]
        level = ready[a] if ready[a] > ready[b] else ready[b]
        out[i] = level
        ready[a] = level + 1
        ready[b] = level + 1
    return out


def _cone_loop(comps, needed, keep):
    """Walking backwards: a comparator is kept when one of its wires is
    needed (``needed``: the outputs at the start); then both its wires are
    needed before it."""
    for i in range(len(comps) - 1, -1, -1):
        a = comps[i][0]
        b = comps[i][1]
        if needed[a] or needed[b]:
            keep[i] = True
            needed[a] = True
            needed[b] = True
    return keep


_COMPILED: dict = {}


def _run(loop, comps: np.ndarray, state: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``loop(comps, state, out)``: compiled when the loop is compiled in this
    process already or the sequence is long, else interpreted on Python lists
    (~0.3 us a comparator; the interpreter is slower on numpy scalars)."""
    fn = _COMPILED.get(loop)
    if fn is None and len(comps) >= MIN_COMPILED:
        import numba

        fn = _COMPILED[loop] = numba.njit(cache=True)(loop)
    if fn is not None:
        return fn(comps, state, out)
    return _interpreted(loop, comps, state, out)


def _interpreted(loop, comps: np.ndarray, state: np.ndarray, out: np.ndarray) -> np.ndarray:
    return np.asarray(loop(comps.tolist(), state.tolist(), out.tolist()), dtype=out.dtype)


def _flat(comps) -> np.ndarray:
    """``comps`` as a C-contiguous (m, 2) array: int32 and int64 arrays as
    they are (a large network's int32 comparators are not widened), other
    input as int64."""
    a = np.asarray(comps)
    if a.dtype not in (np.int32, np.int64):
        a = a.astype(np.int64)
    return np.ascontiguousarray(a.reshape(-1, 2))


def is_packed(n: int, comps, chunks: np.ndarray) -> bool:
    """Whether the layers ``chunks`` (offsets of runs on pairwise distinct
    wires) are already ASAP: every comparator of layer l has a wire used in
    layer l - 1, so :func:`pack` would return the same sequence and
    offsets. One numpy step per layer, O(n) memory; False without
    looking when there are more than :data:`MAX_NUMPY_CHUNKS` layers."""
    if not _use_numpy(chunks):
        return False
    comps = _flat(comps)
    for l, (c, level) in enumerate(_levels(n, _runs(comps, chunks))):
        if len(c) == 0 or (level != l).any():
            return False
    return True


def pack_layers(n: int, make_layers: Callable[[], Iterable[np.ndarray]]) -> Packed:
    """:func:`pack` (no pruning) of a sequence given as layers, for large
    networks: ``make_layers()`` returns a fresh iterable of (m, 2) arrays,
    each on pairwise distinct wires, the same each time. Two passes: the
    first counts the comparators of each ASAP level, the second recomputes
    the levels and writes each layer's comparators to their levels (stably:
    the order :func:`pack` gives) in one int32 array. Nothing is kept but
    the result and O(n) state: ~8 bytes a comparator at the peak, against
    ~100 for :func:`pack` on int64 chunks. ``kept`` and ``level`` of the
    result are empty (not kept)."""
    counts = np.zeros(1, dtype=np.int64)
    for c, level in _levels(n, make_layers()):
        if len(c) == 0:
            continue
        if int(level.max()) >= len(counts):
            counts = np.concatenate([counts, np.zeros(int(level.max()) + 1 - len(counts), np.int64)])
        counts += np.bincount(level, minlength=len(counts))
    counts = counts[:int(np.flatnonzero(counts)[-1]) + 1] if counts.any() else counts[:0]
    offsets = offsets_of(counts)
    out = np.empty((int(offsets[-1]), 2), dtype=np.int32)
    cursor = offsets[:-1].copy()
    for c, level in _levels(n, make_layers()):
        if len(c) == 0:
            continue
        lo, hi = int(level.min()), int(level.max())
        for l in (np.unique(level).tolist() if hi - lo > 8 else range(lo, hi + 1)):
            sel = c if lo == hi else c[level == l]
            out[cursor[l]:cursor[l] + len(sel)] = sel
            cursor[l] += len(sel)
    empty = np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
    return Packed(out, offsets, *empty)


def _levels(n: int, layers: Iterable[np.ndarray], dtype=np.int32):
    """(layer, ASAP level of each of its comparators) for each layer (each
    on pairwise distinct wires; empty ones too): one more than the latest
    level already used on either wire, one numpy step per layer."""
    ready = np.zeros(n, dtype=dtype)
    for c in layers:
        a, b = c[:, 0], c[:, 1]
        level = np.maximum(ready[a], ready[b])
        ready[a] = level + 1
        ready[b] = level + 1
        yield c, level


def _runs(comps: np.ndarray, chunks: np.ndarray):
    """The runs ``comps[chunks[i]:chunks[i + 1]]``."""
    return (comps[lo:hi] for lo, hi in zip(chunks[:-1], chunks[1:]))


def _use_numpy(chunks) -> bool:
    return chunks is not None and len(chunks) - 1 <= MAX_NUMPY_CHUNKS


def asap_levels(n: int, comps, chunks: np.ndarray | None = None) -> np.ndarray:
    """ASAP level (0-based layer index) of each comparator of a flat
    sequence: one more than the latest level already used on either of its
    wires. ``chunks``: optional offsets of runs on pairwise distinct wires."""
    comps = _flat(comps)
    if len(comps) == 0:
        return np.zeros(0, dtype=np.int64)
    if not _use_numpy(chunks):
        return _run(_asap_loop, comps, np.zeros(n, np.int64), np.zeros(len(comps), np.int64))
    out = np.empty(len(comps), dtype=np.int64)
    for lo, (_, level) in zip(chunks[:-1], _levels(n, _runs(comps, chunks), np.int64)):
        out[lo:lo + len(level)] = level
    return out


def cone_mask(n: int, comps, outputs: Sequence[int], chunks: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask over a flat sequence: which comparators lie in the
    backward cone of the ``outputs`` wires (can influence one of them)."""
    comps = _flat(comps)
    outs = np.asarray(list(outputs), dtype=np.int64)
    if len(comps) == 0:
        return np.zeros(0, dtype=bool)
    if not _use_numpy(chunks):
        needed = np.zeros(n, dtype=bool)
        needed[outs] = True
        return _run(_cone_loop, comps, needed, np.zeros(len(comps), dtype=bool))
    needed = np.zeros(n, dtype=bool)
    needed[outs] = True
    keep = np.zeros(len(comps), dtype=bool)
    for lo, hi in zip(chunks[-2::-1], chunks[:0:-1]):
        a, b = comps[lo:hi, 0], comps[lo:hi, 1]
        k = needed[a] | needed[b]
        keep[lo:hi] = k
        needed[a[k]] = True
        needed[b[k]] = True
    return keep


def offsets_of(sizes) -> np.ndarray:
    """Offsets ``[0, s0, s0 + s1, ...]`` of consecutive runs of the given sizes."""
    return np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))]).astype(np.int64)


class Packed(NamedTuple):
    """A sequence packed into ASAP layers (see :func:`pack`)."""

    comparators: np.ndarray  # (size, 2) int64, layer by layer
    layer_offsets: np.ndarray  # (depth + 1,) int64
    kept: np.ndarray  # (m,) bool over the input sequence: survived pruning
    level: np.ndarray  # (size,) layer of each kept comparator, in input order


def pack(n: int, comps, chunks: np.ndarray | None = None, outputs: Sequence[int] | None = None) -> Packed:
    """Pack a flat sequence into ASAP layers; with ``outputs``, cone-prune to
    them first ("prune, then pack"). Stable: comparators of one layer keep
    their sequence order, so the result is deterministic and packing a
    packed network changes nothing."""
    comps = _flat(comps)
    kept = np.ones(len(comps), dtype=bool)
    if outputs is not None and len(comps):
        kept = cone_mask(n, comps, outputs, chunks)
        if chunks is not None:
            chunks = offsets_of(kept)[chunks]  # kept comparators before each chunk boundary
        comps = comps[kept]
    level = asap_levels(n, comps, chunks)
    order = np.argsort(level, kind="stable")
    counts = np.bincount(level, minlength=int(level.max()) + 1) if len(level) else np.zeros(0, np.int64)
    return Packed(comps[order], offsets_of(counts), kept, level)
