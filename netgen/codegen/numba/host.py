"""Host side of the generated numba module below the autograd layer: the
saved-state pool, the thread choice per call and the numpy-level wrappers
(``rows_numpy``, ``rows_backward_numpy``, ``column_numpy``,
``column_backward_numpy``) that call the kernels of :mod:`.numba_kernels`.

Real code, copied into generated modules by source extraction (functions
and classes: :data:`PARTS`; module-level state: :data:`STATE`, copied by
name); it reads the module constants the numba emitter writes (:data:`READS`;
stand-ins below let this file import and lint on its own) and the network's
tables (:mod:`netgen.codegen.runtime.tables`).

* Threads: kernels run with ``torch.get_num_threads()`` threads (or the
  layer's ``threads``), capped by numba's maximum, and on the calling thread
  (the serial kernel copies) below ``_SERIAL_WORK`` updates per call, and
  whichever copy has been faster on this machine up to ``_CHOOSE_WORK``
  updates (``_CHOICE``). Under
  numba's ``workqueue`` threading layer (not reentrant: concurrent calls
  abort the process) calls are serialised by a lock.
* Kernels only read their inputs.
"""

from __future__ import annotations

import threading
import time
import weakref

import numba
import numpy as np
import torch

from ..runtime.common import compiler_disable
from ..runtime.tables import _CHI, _CLO, _DOFF, _K, _N, _NNZ, _OUTPUTS, _SIZE, _WA, _WB
from .kernels import _KERNELS, _KERNELS_SERIAL
from .vector import _W

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("RELAXATION", "_MODE", "_GROUP", "_SERIAL_WORK", "_PARALLEL", "_DIRECTION")
RELAXATION: dict = {"steepness": 1.0}
_MODE, _GROUP, _SERIAL_WORK, _PARALLEL, _DIRECTION = "save", 1, 0, True, "back"

# ------------------------------------------------------- copied by name (STATE)
_NNZ_PER_ROW = _NNZ + _SIZE  # updates of one batch row through the back-sweep and the values
# What a forward saves for backward comes from a small pool and goes back to
# it when autograd frees the graph (_Saved.__del__), and so does P once the
# caller has dropped it (_take_out), so a training loop does not fault in
# fresh pages every step (P of sort n = 1024 at B = 64 is 268 MB: a fresh
# one cost 60-140 ms of page faults and zeroing per call). At most
# _POOL_PER_SHAPE free arrays per shape (a lane sweep of one lane holds
# four of one shape: p, d, the lane differences and dL/dp), _POOL_SHAPES
# shapes (the oldest dropped), _POOL_BYTES in all; free_buffers() empties it.
_POOL: dict = {}
_POOL_SHAPES = 8
_POOL_PER_SHAPE = 4
_POOL_BYTES = 1 << 30
_POOL_LOCK = threading.Lock()
# numba's workqueue threading layer is not reentrant: two Python threads
# launching parallel kernels at once abort the process. Under it (or before
# numba has picked a layer) kernel calls take this lock.
_RUN_LOCK = threading.RLock()
# Serial or parallel, measured. A parallel region on a busy machine waits
# for its slowest thread, and one that has lost its core makes a 0.4 ms call
# take 5-70 ms (sort n = 32 rows and sort n = 256 column, B = 64, load 4-10);
# idle, the same calls are 1.4-1.8x faster parallel. So between _SERIAL_WORK
# and _CHOOSE_WORK updates per call the host times both copies per kind of
# call (moving average of seconds per update, weight _CHOOSE_EMA; the first
# call of each copy, which may compile, is not counted) and runs the faster
# on average; every _CHOOSE_PROBE * (loser / winner)-th such call (at most
# every _CHOOSE_PROBE_MAX-th) runs the other one to keep its estimate
# current: rarely where it is much slower (a parallel call that stalls for
# 20 ms costs 0.14 ms per call when it is probed every 160th). The results do not depend on the choice (the
# backward splits its work into as many runs as threads were asked for).
_CHOOSE_WORK = 1 << 21
_CHOOSE_EMA = 0.25
_CHOOSE_PROBE = 8
_CHOOSE_PROBE_MAX = 256
_CHOICE: dict = {}  # kind -> [serial average, parallel average, serial calls, parallel calls, calls]

# ---------------------------------------------------------------- copied parts
def _take(shape, dtype):
    with _POOL_LOCK:
        free = _POOL.get((shape, np.dtype(dtype)))
        if free:
            return free.pop()
    return np.empty(shape, dtype=dtype)


def _give(*arrays):
    with _POOL_LOCK:
        for a in arrays:
            key = (a.shape, a.dtype)
            if key not in _POOL and len(_POOL) >= _POOL_SHAPES:
                del _POOL[next(iter(_POOL))]
            held = sum(b.nbytes for free in _POOL.values() for b in free)
            free = _POOL.setdefault(key, [])
            if len(free) < _POOL_PER_SHAPE and held + a.nbytes <= _POOL_BYTES:
                free.append(a)


def _take_out(shape, dtype):
    """An output array (P) from the pool: a view of a pooled array, which
    goes back to the pool once the output, every view of it and every
    tensor made from it are gone."""
    base = _take(shape, dtype)
    # numpy collapses a view's base to the array that owns the memory, so a
    # view of base.view() would outlive it and find base handed out again.
    # Through a memoryview every view of the output keeps `flat` alive.
    flat = np.frombuffer(memoryview(base).cast("B"), dtype=dtype)
    weakref.finalize(flat, _give, base).atexit = False
    return flat.reshape(shape)


def free_buffers():
    """Drop the pooled buffers, saved state and free outputs (memory goes
    back to the system)."""
    with _POOL_LOCK:
        _POOL.clear()


class _Saved:
    """A forward's saved arrays; back to the pool when autograd frees them."""

    def __init__(self, B, arrays, **info):
        self.B = B
        self.arrays = arrays
        self.__dict__.update(info)

    def __del__(self):
        _give(*self.arrays)


def _needs_lock():
    if not _PARALLEL:
        return False
    try:
        return numba.threading_layer() == "workqueue"
    except ValueError:  # no parallel kernel has run yet: the layer is not chosen
        return True


class _Threads:
    """Context for one call's kernels: the thread count (``threads`` or
    torch.get_num_threads(), capped by numba's maximum), whether they run
    serial (one thread, NETGEN_NUMBA_PARALLEL=0, fewer than _SERIAL_WORK
    updates, or measured faster: :func:`_choose_serial`), ``kernels`` (the
    parallel or serial copies), ``workers`` (the runs a backward splits its
    work into: the thread count, whichever copy runs) and the workqueue
    lock."""

    def __init__(self, threads, work, kind="rows"):
        t = torch.get_num_threads() if threads is None else threads
        self.n = max(1, min(int(t), numba.config.NUMBA_NUM_THREADS)) if _PARALLEL else 1
        self.work = work
        self.kind = kind
        self.serial = self.n == 1 or work < _SERIAL_WORK
        self.timed = not self.serial and work < _CHOOSE_WORK
        if self.timed:
            self.serial = _choose_serial(kind)

    def __enter__(self):
        self.kernels = _KERNELS_SERIAL if self.serial else _KERNELS
        self.lock = not self.serial and _needs_lock()
        if self.lock:
            _RUN_LOCK.acquire()
        if not self.serial:
            self.old = numba.get_num_threads()
            numba.set_num_threads(self.n)
        self.t0 = time.perf_counter()
        return self

    def workers(self):
        return self.n

    def __exit__(self, *exc):
        if self.timed and exc[0] is None:
            _note_time(self.kind, self.serial, (time.perf_counter() - self.t0) / max(self.work, 1))
        if not self.serial:
            numba.set_num_threads(self.old)
        if self.lock:
            _RUN_LOCK.release()


def _choose_serial(kind):
    """Whether this call of ``kind`` runs the serial copies (see _CHOICE):
    parallel until it has a measurement, then serial until it has one, then
    the faster on average, and the other one every ``_CHOOSE_PROBE`` times
    (loser / winner) calls (at most every _CHOOSE_PROBE_MAX-th)."""
    st = _CHOICE.setdefault(kind, [0.0, 0.0, 0, 0, 0])
    st[4] += 1
    if st[3] < 2:
        return False
    if st[2] < 2:
        return True
    serial = st[0] <= st[1]
    fast, slow = (st[0], st[1]) if serial else (st[1], st[0])
    every = int(min(_CHOOSE_PROBE * slow / max(fast, 1e-30), _CHOOSE_PROBE_MAX))
    return (not serial) if st[4] % every == 0 else serial


def _note_time(kind, serial, rate):
    """Add a call's seconds per update to the average of its copy (the
    first call of each copy is skipped: it may have compiled)."""
    st = _CHOICE.setdefault(kind, [0.0, 0.0, 0, 0, 0])
    i = 0 if serial else 1
    st[2 + i] += 1
    if st[2 + i] == 2:
        st[i] = rate
    elif st[2 + i] > 2:
        st[i] += _CHOOSE_EMA * (rate - st[i])


@compiler_disable
def rows_numpy(x, steepness=None, save=True, sgrad=False, threads=None, mode=None, group=None):
    """Forward kernels on a (B, n) float32/float64 C-contiguous array.
    Returns ``values, P, saved`` (``saved`` feeds :func:`rows_backward_numpy`;
    None without ``save``). ``sgrad``: also save what dL/dsteepness needs.
    ``mode`` / ``group`` override the module's _MODE / _GROUP."""
    B = x.shape[0]
    dt = x.dtype
    stp = dt.type(RELAXATION["steepness"] if steepness is None else steepness)
    mode = _MODE if mode is None else mode
    grp = int(_GROUP if group is None else group)
    nblk = (B + _W - 1) // _W
    values = np.empty((B, _K), dtype=dt)
    P = _take_out((B, _K, _N), dt)
    ps = _take((nblk, _SIZE, _W), dt)
    save = bool(save or sgrad)
    keep_D = save and mode == "save"
    # without save / sgrad / D: one scratch slot per block, overwritten
    sv = _take((nblk, _SIZE, 2, _W), dt) if save else np.empty((nblk, 1, 2, _W), dtype=dt)
    ss = _take((nblk, _SIZE, 2, _W), dt) if sgrad else np.empty((nblk, 1, 2, _W), dtype=dt)
    D = _take((nblk, _NNZ, _W), dt) if keep_D else np.empty((nblk, 0, _W), dtype=dt)
    with _Threads(threads, B * _NNZ_PER_ROW, ("rows", dt)) as th:
        kv, kP = th.kernels[:2]
        kv(x, stp, _WA, _WB, _OUTPUTS, values, ps, sv, ss, save, sgrad)
        kP(_WA, _WB, _CLO, _CHI, _DOFF, _OUTPUTS, ps, P, D, keep_D, grp, _DIRECTION == "forward")
    if not save:
        _give(ps)
        return values, P, None
    arrays = (ps, sv) + ((ss,) if sgrad else ()) + ((D,) if keep_D else ())
    return values, P, _Saved(B, arrays, ps=ps, sv=sv, ss=ss if sgrad else sv, D=D, keep_D=keep_D,
                             sgrad=sgrad, grp=grp)


@compiler_disable
def rows_backward_numpy(saved, gv, gP, threads=None):
    """Adjoint of :func:`rows_numpy`: gradient w.r.t. x from the gradients
    of values (B, k) and P (B, k, n) (``gP`` may be None), and dL/ds (a
    float; 0.0 unless the forward ran with ``sgrad``)."""
    B = saved.B
    ps = saved.ps
    dt = ps.dtype
    nblk = ps.shape[0]
    has_gP = gP is not None
    if gP is None:
        gP = np.zeros((B, 0, 0), dtype=dt)
    with _Threads(threads, B * (_NNZ_PER_ROW if has_gP else _SIZE), ("rows_bwd", dt, has_gP)) as th:
        nt = th.workers()
        gxt = np.zeros((nt, nblk, _N, _W), dtype=dt)
        gst = np.zeros((nt, nblk, _W), dtype=dt)
        th.kernels[2](gv, gP, has_gP, _WA, _WB, _CLO, _CHI, _DOFF, _OUTPUTS, ps, saved.sv, saved.ss,
                      saved.sgrad, saved.D, saved.keep_D, saved.grp, _DIRECTION == "forward", gxt, gst)
    gx = gxt.sum(axis=0) if nt > 1 else gxt[0]
    gx = np.ascontiguousarray(gx.transpose(0, 2, 1).reshape(nblk * _W, _N)[:B])
    gs = float(gst.sum(axis=0).reshape(-1)[:B].sum(dtype=np.float64)) if saved.sgrad else 0.0
    return gx, gs


@compiler_disable
def column_numpy(x, y, steepness=None, save=True, sgrad=False, threads=None):
    """P[:, y] for (B, n) ``x`` and (B,) int64 ``y``; returns ``col, saved``
    (None without ``save``)."""
    B = x.shape[0]
    dt = x.dtype
    stp = dt.type(RELAXATION["steepness"] if steepness is None else steepness)
    col = np.empty((B, _K), dtype=dt)
    nblk = (B + _W - 1) // _W
    save = bool(save or sgrad)
    # without save / sgrad: one scratch slot per block, overwritten
    cs = _take((nblk, _SIZE, 3, _W), dt) if save else np.empty((nblk, 1, 3, _W), dtype=dt)
    css = _take((nblk, _SIZE, 2, _W), dt) if sgrad else np.empty((nblk, 1, 2, _W), dtype=dt)
    with _Threads(threads, 2 * B * _SIZE, ("column", dt)) as th:
        th.kernels[3](x, y, stp, _WA, _WB, _OUTPUTS, col, cs, css, save, sgrad)
    if not save:
        return col, None
    arrays = (cs, css) if sgrad else (cs,)
    return col, _Saved(B, arrays, cs=cs, css=css if sgrad else cs, sgrad=sgrad)


@compiler_disable
def column_backward_numpy(saved, gcol, threads=None):
    """Adjoint of :func:`column_numpy`: (gradient w.r.t. x, dL/ds)."""
    cs = saved.cs
    B = gcol.shape[0]
    gx = np.empty((B, _N), dtype=cs.dtype)
    gsr = np.zeros(B, dtype=cs.dtype)
    with _Threads(threads, 2 * B * _SIZE, ("column_bwd", cs.dtype)) as th:
        th.kernels[4](gcol, _WA, _WB, _OUTPUTS, cs, saved.css, saved.sgrad, gx, gsr)
    return gx, (float(gsr.sum(dtype=np.float64)) if saved.sgrad else 0.0)


#: module-level state a generated module copies by name (with its comments)
STATE = ("_NNZ_PER_ROW", "_POOL", "_POOL_SHAPES", "_POOL_PER_SHAPE", "_POOL_BYTES", "_POOL_LOCK", "_RUN_LOCK", "_CHOOSE_WORK", "_CHOOSE_EMA",
         "_CHOOSE_PROBE", "_CHOOSE_PROBE_MAX", "_CHOICE")
#: what a generated module copies from this file, in order
PARTS = (_take, _give, _take_out, free_buffers, _Saved, _needs_lock, _Threads, _choose_serial, _note_time, rows_numpy,
         rows_backward_numpy, column_numpy,
         column_backward_numpy)
