"""How a generated ``cuda`` module launches its kernels: the host tables,
the variant of a launch, the compiled kernels' handles, launch records and
the launch on torch's current stream.

Real code, copied into generated modules by source extraction
(:data:`STATE` with :func:`netgen.codegen.runtime.statements`, :data:`PARTS`
with :func:`netgen.codegen.runtime.assemble`). It reads what the cuda
emitter writes (:data:`READS`: ``SHARED_LIMIT``, ``KERNELS``, the sweep's
direction and the ``cuda`` module the generated file imports), the
network's tables (:mod:`netgen.codegen.runtime.tables`), the driver's rules
(:mod:`.driver`), the argument packing (:mod:`.packing`) and the cubin
loader (:mod:`.cubin`); the stand-ins below only let this file import, lint
and be tested on its own. Batch chunks are :mod:`.batch`'s.

* **Variants.** A launch runs a kernel's ``shared`` variant (its wire arrays
  in dynamic shared memory) when what *that launch* needs -- k n floats for
  the rows with P, n for values only, 2 n for the column -- fits the
  device's opt-in limit (and ``SHARED_LIMIT``), else its ``global`` variant
  (a scratch row per block; the batch then goes in chunks that fit
  ``NETGEN_CUDA_WORKSPACE_MB``, default 2048: :mod:`.batch`).
* **Launching.** Each kernel is compiled by Numba once per (device, dtype);
  its ``cuda.core`` handle is cached (:func:`_handle`) and launched on
  torch's current stream with Numba's kernel ABI packed from the torch
  tensors (:mod:`.packing`), the packing cached per shape in a launch
  record (only data pointers change): no ``cuda.as_cuda_array``, no
  dispatcher, no host synchronisation. ``NETGEN_CUDA_LAUNCH=numba`` selects
  Numba's dispatcher instead (slower, same results).
* **Simulator.** Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the
  fast path unpacks the packed words back into arrays, so the packing is
  tested there.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from ..runtime.tables import _CHI, _CLO, _COMPS, _K, _N, _OFFSETS, _OUTPUTS
from .cubin import cubin_kernel, cubin_save
from .driver import LOG, SIMULATED, _block, _dynamic_limit, _opt_in, _shared_limit, _sm_count
from .layout import d_slots
from .packing import WIRE_DTYPE, _abi, _fill, _np_dtype, _numba_types, _shape_key, _sim_unpack, _slots

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("cuda", "_numba", "_DIRECTION", "SHARED_LIMIT", "KERNELS", "D_STRIDE")
cuda = None  # the generated module: numba.cuda once _numba() imported it (netgen.codegen.cuda.deferred)


def _numba():  # the generated module's (netgen.codegen.cuda.deferred): imports numba-cuda, binds ``cuda``
    raise NotImplementedError
_DIRECTION = "back"
SHARED_LIMIT = 227 * 1024
KERNELS: dict = {}
D_STRIDE = 1  # the emitter's: where the rows kernels keep D (layout.d_slots)


# ---------------------------------------------------------------- state (copied)
VIA_NUMBA = os.environ.get("NETGEN_CUDA_LAUNCH", "") == "numba"
#: host copies of the tables the kernels read (uploaded once per device)
TABLES = {
    "wa": np.ascontiguousarray(_COMPS[:, 0]).astype(WIRE_DTYPE),
    "wb": np.ascontiguousarray(_COMPS[:, 1]).astype(WIRE_DTYPE),
    # both wires of comparator i side by side (wab[2 i], wab[2 i + 1]): the column kernels' one address
    "wab": np.ascontiguousarray(_COMPS).reshape(-1).astype(WIRE_DTYPE),
    "offs": _OFFSETS.astype(np.uint32),
    "outs": _OUTPUTS.astype(WIRE_DTYPE),
    "clo": _CLO.astype(WIRE_DTYPE),
    "chi": _CHI.astype(WIRE_DTYPE),
    # the rows kernels' plan range and wires of comparator i interleaved: rtab[4 i] .. rtab[4 i + 3]
    "rtab": np.stack([_CLO, _CHI, _COMPS[:, 0], _COMPS[:, 1]], axis=1).reshape(-1).astype(WIRE_DTYPE),
    # comparator i's D entry of lane l at dix[i] + l D_STRIDE; dix[size]: D's floats per row
    "dix": d_slots(_CLO, _CHI, _OFFSETS, D_STRIDE).astype(np.uint32),
}
#: floats per row of the rows kernels' D (layout.d_slots; at least one: a row of D is never empty)
_DLEN = max(1, int(TABLES["dix"][-1]))
#: lanes of the P sweep per wire (rows of n floats of a row's sweep state):
#: k ranks going back, n input columns going forward
LANES = _N if _DIRECTION == "forward" else _K
_PATH = ["fast"]  # the self-check's reference run sets "numba"
_HANDLES: dict = {}  # (device index, dtype, kernel name, variant) -> cuda.core kernel handle
_CONFIGS: dict = {}  # (grid, threads, shared bytes) -> cuda.core LaunchConfig
_STREAMS: dict = {}  # (device, torch raw stream handle) -> cuda.core Stream
#: launch records (see _record): (kernel, device, dtype, blocks, rows, key) -> what every such launch reuses
_RECORDS: dict = {}
#: the most launch records (and batch plans) kept; past it they are rebuilt as needed
RECORDS_MAX = 4096
_DUMMIES: dict = {}  # (device, dtype, ndim) -> a 1-element tensor passed for an array a launch does not use
_CORE: dict = {}  # cuda.core's launch, Stream and LaunchConfig, torch's current-stream getter (looked up once)
_VARIANTS: dict = {}  # (kernel, rows of n floats) -> the variant last launched (for tests)
#: (device index, dtype, kernel, variant) -> (thread limit, registers, dynamic shared limit) of the loaded kernel
_LIMITS: dict = {}
_TABLES: dict = {}  # device -> tables as tensors on it (uploaded once)


# ---------------------------------------------------------------- functions (copied)
def kernel_signatures():
    """(name, python function, argument types) of every kernel, for
    ``numba.cuda.compile_ptx`` (netgen's compile check; imports numba-cuda)."""
    _numba()
    return [(kern.py_func.__name__, kern.py_func, _numba_types(dt)[name]) for (dt, name, _), kern in KERNELS.items()]


def _shared_room(device, dt, names):
    """Bytes of dynamic shared memory the shared variant of every kernel in
    ``names`` may ask for on ``device``: the opt-in limit less each
    kernel's own static shared memory (read from the loaded kernel), the
    least of them; ``SHARED_LIMIT`` in the simulator."""
    if SIMULATED:
        return SHARED_LIMIT
    index = _index(device)
    for name in names:
        _handle(index, dt, name, "shared")
    return min(_LIMITS[(index, dt, name, "shared")][2] for name in names)


def _variant(device, dt, name, rows):
    """"shared" where ``rows`` rows of n floats fit the dynamic shared
    memory the kernel's shared variant may ask for on ``device``
    (:func:`_shared_room`), else "global"."""
    if (dt, name, "shared") not in KERNELS:
        return "global"
    return "shared" if rows * _N * dt.itemsize <= _shared_room(device, dt, (name,)) else "global"


def _index(device):
    """The CUDA device index of ``device`` (a CUDA tensor's device has one;
    else the current device: tests' fake drivers pass CPU tensors)."""
    index = device.index
    return index if index is not None else torch.cuda.current_device()


def _handle(device_index, dtype, name, variant):
    """The compiled kernel's cuda.core handle (compiled once per device),
    allowed as much dynamic shared memory as the device lets it have;
    ``_LIMITS`` gets its (thread limit, registers, dynamic shared limit).
    From the module's cubins where they load (no numba import), else
    compiled with numba-cuda."""
    key = (device_index, dtype, name, variant)
    h = _HANDLES.get(key)
    if h is None:
        got = cubin_kernel(device_index, dtype, name, variant)  # cubin.py: no numba compile
        if got is not None:
            _HANDLES[key], _LIMITS[key] = got
            return got[0]
        t0 = time.perf_counter()
        _numba()
        if not cuda.is_available():
            raise RuntimeError(
                "this netgen module (target cuda) has no cubin for this device, and numba-cuda, which would "
                "compile its kernels, sees no usable CUDA device (driver); rebuild it with netgen build --target "
                "cuda, or build with --target torch")
        compiled = KERNELS[(dtype, name, variant)].compile(_numba_types(dtype)[name])
        cubin_save(dtype, name, variant, compiled)  # for the next process (modules in netgen's cache)
        cufunc = compiled._codelibrary.get_cufunc()
        attrs = getattr(cufunc, "attrs", None)
        static = int(getattr(attrs, "shared", 0) or 0)
        dynamic = _dynamic_limit(_shared_limit(device_index), static) if variant == "shared" else 0
        if dynamic:
            from numba.cuda.cudadrv.driver import driver

            _opt_in(driver.cuKernelSetAttribute, cufunc.handle, cufunc.device.id, dynamic, static, name)
        h = _HANDLES[key] = cufunc.kernel
        _LIMITS[key] = (int(getattr(attrs, "maxthreads", 1024) or 1024), int(getattr(attrs, "regs", 32) or 32),
                        dynamic)
        LOG.debug("netgen cuda: %s (%s, %s) compiled by numba-cuda in %.1f ms", name, dtype, variant,
                  1e3 * (time.perf_counter() - t0))
    return h


def _record(name, like, blocks, args, rows):
    """What every launch of kernel ``name`` on ``blocks`` blocks with these
    argument shapes reuses, worked out once (see :func:`_launch`):
    ``(variant, shared bytes, scratch shape or None, threads, numpy dtype,
    kernel, cuda.core handle, launch config, packed words, pointer
    slots)``; the words are ``_abi`` of the arguments and the scratch, whose
    data pointers (the slots) each launch rewrites."""
    t0 = time.perf_counter()
    dev, dt = like.device, _np_dtype(like)
    variant = _variant(dev, dt, name, rows)
    shared_bytes = rows * _N * dt.itemsize if variant == "shared" else 0
    scratch = (blocks, rows * _N) if variant == "global" else None
    full = (*args, like.new_empty(scratch) if scratch else _dummy(like, 2))
    handle = config = None
    if SIMULATED:
        nt = _block(variant, shared_bytes)
    else:
        index = _index(dev)
        handle = _handle(index, dt, name, variant)
        nt = _block(variant, shared_bytes, *_LIMITS[(index, dt, name, variant)][:2], blocks, _sm_count(index))
        config = _CONFIGS.get((blocks, nt, shared_bytes))
        if config is None:
            if len(_CONFIGS) >= RECORDS_MAX:
                _CONFIGS.clear()
            config = _CONFIGS[(blocks, nt, shared_bytes)] = _core()["LaunchConfig"](
                grid=blocks, block=nt, shmem_size=shared_bytes)
    LOG.debug("netgen cuda: launch record of %s on %s (%s, %s, %d blocks of %d threads, %d B shared): %.2f ms",
              name, dev, dt, variant, blocks, nt, shared_bytes, 1e3 * (time.perf_counter() - t0))
    return (variant, shared_bytes, scratch, nt, dt, KERNELS[(dt, name, variant)], handle, config, _abi(full),
            _slots(full))


def _launch(name, like, blocks, args, rows, key=None):
    """Run kernel ``name`` on ``blocks`` blocks (threads per :func:`_block`)
    on torch's current stream of ``like``'s device (made the current device
    for the launch), in the dtype of ``like``, with ``rows`` rows of n
    floats of wire arrays per block (in shared memory where they fit, else
    a global scratch this function allocates). Tensors must be contiguous.

    ``key``: what, besides the kernel, ``blocks``, ``rows``, the device and
    dtype, fixes every argument's shape and every non-tensor argument (the
    caller's flags), or None to read the shapes. A launch record (variant,
    block size, kernel handle, launch config, the packed argument words) is
    built once per such key; a launch then only rewrites the data pointers.
    Under the simulator each launch checks the record's words but the
    data pointers against a fresh packing (a key that does not fix the
    arguments fails there)."""
    if blocks == 0:
        return
    dev = like.device
    if not SIMULATED and dev.index is not None and dev.index != torch.cuda.current_device():
        # a kernel launches in the current device's context: make it the tensor's for this launch
        with torch.cuda.device(dev.index):
            return _launch(name, like, blocks, args, rows, key)
    rkey = (name, dev, like.dtype, blocks, rows, _shape_key(args) if key is None else key)
    rec = _RECORDS.get(rkey)
    if rec is None:
        if len(_RECORDS) >= RECORDS_MAX:  # many batch sizes: start over rather than grow without bound
            _RECORDS.clear()
        rec = _RECORDS[rkey] = _record(name, like, blocks, args, rows)
    variant, shared_bytes, scratch, nt, dt, kern, handle, config, words, slots = rec
    _VARIANTS[(name, rows)] = variant
    args = (*args, like.new_empty(scratch) if scratch else _dummy(like, 2))
    words = _fill(words, slots, args)
    via_numba = VIA_NUMBA or _PATH[0] == "numba"
    if SIMULATED:
        _numba()
        if via_numba:
            kern[blocks, nt, 0, shared_bytes](*(a.numpy() if isinstance(a, torch.Tensor) else a for a in args))
            return
        fresh = _abi(args)
        for pos, _ in slots:
            fresh[pos] = words[pos]
        if fresh != words:  # every word but the data pointers as a fresh packing's
            raise AssertionError(f"launch record of {name} (key {key!r}) does not fit its arguments: the key must "
                                 "fix every argument's shape and every flag")
        kern[blocks, nt, 0, shared_bytes](*_sim_unpack(name, dt, words))
        return
    core = _CORE or _core()
    stream = core["stream"](_index(dev))
    if via_numba:
        _numba()
        kern[blocks, nt, cuda.external_stream(stream), shared_bytes](
            *(cuda.as_cuda_array(a) if isinstance(a, torch.Tensor) else a for a in args))
        return
    core_stream = _STREAMS.get((dev, stream))
    if core_stream is None:
        core_stream = _STREAMS[(dev, stream)] = core["Stream"].from_handle(stream)
    core["launch"](core_stream, config, handle, *words)


def _core():
    """cuda.core's ``launch``, ``Stream`` and ``LaunchConfig`` and torch's
    raw current stream of a device (``torch._C._cuda_getCurrentRawStream``,
    what torch's own generated code calls, else ``torch.cuda.current_stream``),
    looked up once."""
    if not _CORE:
        from cuda.core import LaunchConfig, Stream, launch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _CORE.update(launch=launch, Stream=Stream, LaunchConfig=LaunchConfig,
                     stream=raw if raw is not None else (lambda index: torch.cuda.current_stream(index).cuda_stream))
    return _CORE


def _dummy(like, ndim):
    """A 1-element tensor of like's dtype and device with ``ndim``
    dimensions, for an array argument a launch does not use (one per
    device, dtype and ndim: nothing is allocated per call)."""
    key = (like.device, like.dtype, ndim)
    d = _DUMMIES.get(key)
    if d is None:
        d = _DUMMIES[key] = like.new_empty((1,) * ndim)
    return d


def _tables(device):
    """The kernels' tables as tensors on ``device`` (uploaded once)."""
    tabs = _TABLES.get(device)
    if tabs is None:
        t0 = time.perf_counter()
        tabs = _TABLES[device] = {k: torch.from_numpy(v).to(device) for k, v in TABLES.items()}
        LOG.debug("netgen cuda: tables uploaded to %s (%d bytes) in %.1f ms", device,
                  sum(v.nbytes for v in TABLES.values()), 1e3 * (time.perf_counter() - t0))
    return tabs


#: the module-level statements a generated module copies (after PARTS; in file order)
STATE = ("VIA_NUMBA", "TABLES", "_DLEN", "LANES", "_PATH", "_HANDLES", "_CONFIGS", "_STREAMS", "_RECORDS",
         "RECORDS_MAX", "_DUMMIES", "_CORE", "_VARIANTS", "_LIMITS", "_TABLES")
#: the functions a generated module copies, in order
PARTS = (kernel_signatures, _shared_room, _variant, _index, _handle, _record, _launch, _core, _dummy, _tables)
