"""How a generated ``cuda`` module launches its kernels: the host tables,
the variant and block size of a launch, Numba's kernel ABI packed from
torch tensors, the launch on torch's current stream, batch chunks.

Real code, copied into generated modules by source extraction
(:data:`STATE` with :func:`netgen.codegen.runtime.statements`, :data:`PARTS`
with :func:`netgen.codegen.runtime.assemble`). It reads what the cuda
emitter writes (:data:`READS`: ``THREADS``, ``BIG_THREADS``,
``SHARED_LIMIT``, ``KERNEL_ARGS``, ``KERNELS``, the sweep's direction and
the ``cuda`` module the generated file imports) and the network's tables
(:mod:`netgen.codegen.runtime.tables`); the stand-ins below only let this
file import, lint and be tested on its own.

* **Variants.** A launch runs a kernel's ``shared`` variant (its wire arrays
  in dynamic shared memory) when what *that launch* needs -- k n floats for
  the rows with P, n for values only, 2 n for the column -- fits the
  device's opt-in limit (and ``SHARED_LIMIT``), else its ``global`` variant
  (a scratch row per block; the batch then goes in chunks that fit
  ``NETGEN_CUDA_WORKSPACE_MB``, default 2048).
* **Launching.** Each kernel is compiled by Numba once per (device, dtype);
  its ``cuda.core`` handle is cached (:func:`_handle`) and launched on
  torch's current stream with Numba's kernel ABI (an array is ``meminfo,
  parent, size, itemsize, data, *shape, *strides``) packed from the torch
  tensors, the packing cached per shape (only data pointers change): no
  ``cuda.as_cuda_array``, no dispatcher, no host synchronisation.
  ``NETGEN_CUDA_LAUNCH=numba`` selects Numba's dispatcher instead (slower,
  same results).
* **Simulator.** Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the
  fast path unpacks the packed words back into arrays (pointers, shapes,
  strides), so the packing is tested there; the simulator gets a
  ``cuda.syncwarp`` (a barrier among a warp's threads).
"""

from __future__ import annotations

import logging
import os
import sys
import time

import numpy as np
import torch

from ..runtime.tables import _CHI, _CLO, _COMPS, _DOFF, _K, _N, _OFFSETS, _OUTPUTS
from .cubin import cubin_kernel, cubin_save

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("cuda", "_numba", "_DIRECTION", "THREADS", "BIG_THREADS", "SHARED_LIMIT", "KERNEL_ARGS", "KERNELS")
cuda = None  # the generated module: numba.cuda once _numba() imported it (netgen.codegen.cuda.deferred)


def _numba():  # the generated module's (netgen.codegen.cuda.deferred): imports numba-cuda, binds ``cuda``
    raise NotImplementedError
_DIRECTION = "back"
THREADS = 256
BIG_THREADS = 1024
SHARED_LIMIT = 227 * 1024
KERNEL_ARGS: dict = {}
KERNELS: dict = {}


# ---------------------------------------------------------------- state (copied)
#: Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM, read as numba reads it, without importing numba)
SIMULATED = bool(sys.modules["numba"].config.ENABLE_CUDASIM) if "numba" in sys.modules else (
    os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0"))
VIA_NUMBA = os.environ.get("NETGEN_CUDA_LAUNCH", "") == "numba"
#: bytes of global scratch a launch may use before the batch is chunked
WORKSPACE = int(os.environ.get("NETGEN_CUDA_WORKSPACE_MB", "2048")) * 2**20
#: the column kernels index a launch's saved d (rows x size) and du, p
#: (rows x 2 size) with a 32-bit flat index row * size + comparator: a
#: launch takes at most INDEX_LIMIT // size rows (tests lower it)
INDEX_LIMIT = 2**32
LOG = logging.getLogger("netgen")
#: wires (and rank bounds) as uint16 where n < 65,536, else uint32; offsets
#: uint32: unsigned indices, so the kernels do no negative-index wraparound
WIRE_DTYPE = np.dtype(np.uint16) if _N < 65536 else np.dtype(np.uint32)
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
    "doff": _DOFF.astype(np.uint32),
}
#: shared memory per SM (bytes; Hopper): how many blocks of a launch fit an SM (see _block)
SM_SHARED = 228 * 1024
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
_PLANS: dict = {}  # (kernel, device, dtype, B, rows, extra, most) -> the batch's chunks (_batch)
_DUMMIES: dict = {}  # (device, dtype, ndim) -> a 1-element tensor passed for an array a launch does not use
_CORE: dict = {}  # cuda.core's launch, Stream and LaunchConfig, torch's current-stream getter (looked up once)
_VARIANTS: dict = {}  # (kernel, rows of n floats) -> the variant last launched (for tests)
#: (device index, dtype, kernel, variant) -> (thread limit, registers, dynamic shared limit) of the loaded kernel
_LIMITS: dict = {}
_TABLES: dict = {}  # device -> tables as tensors on it (uploaded once)
_CHECKED: list = []  # [True] once a CUDA device was found



# ---------------------------------------------------------------- functions (copied)
class LaunchConfigError(RuntimeError):
    """The driver refused a kernel's launch configuration (shared memory,
    threads): a netgen bug or an unsupported device, reported as itself
    rather than hidden behind a fallback that would fail the same way."""


#: the oldest CUDA driver API the kernels load on (cubins and PTX of CUDA 13.0: driver R580 or newer)
MIN_DRIVER = 13000


def _sim_syncwarp(self, mask=0xFFFFFFFF):
    """The simulator has no ``cuda.syncwarp``: a barrier among the threads
    of one warp of one block (the kernels call it from warp 0 only)."""
    import threading

    th = threading.current_thread()
    nthreads = int(np.prod(th._manager._block_dim))
    warp = th.thread_id // 32
    key = (id(th._manager), tuple(th.blockIdx), warp)
    fake = type(self)
    with fake._netgen_warp_lock:
        bar = fake._netgen_warp_barriers.get(key)
        if bar is None:
            bar = fake._netgen_warp_barriers[key] = threading.Barrier(min(32, nthreads - 32 * warp))
    bar.wait()


def _install_syncwarp():
    """Give the simulator's ``cuda`` module :func:`_sim_syncwarp` where it
    lacks ``syncwarp`` (no-op on a GPU)."""
    if not SIMULATED:
        return
    import threading

    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    if not hasattr(FakeCUDAModule, "syncwarp"):
        FakeCUDAModule._netgen_warp_lock = threading.Lock()
        FakeCUDAModule._netgen_warp_barriers = {}
        FakeCUDAModule.syncwarp = _sim_syncwarp


def _numba_types(dtype):
    """kernel name -> its Numba argument types in ``dtype`` (from the
    argument kinds of ``KERNEL_ARGS``)."""
    from numba import types

    ft = types.float64 if dtype == np.float64 else types.float32
    wt = types.uint16 if WIRE_DTYPE == np.uint16 else types.uint32
    kinds = {
        "f1": types.Array(ft, 1, "C"), "f2": types.Array(ft, 2, "C"), "w1": types.Array(wt, 1, "C"),
        "u1": types.Array(types.uint32, 1, "C"), "i1": types.Array(types.int64, 1, "C"),
        "b1": types.Array(types.int32, 1, "C"), "bool": types.boolean,
    }
    return {name: tuple(kinds[a] for a in args) for name, args in KERNEL_ARGS.items()}


def kernel_signatures():
    """(name, python function, argument types) of every kernel, for
    ``numba.cuda.compile_ptx`` (netgen's compile check; imports numba-cuda)."""
    _numba()
    return [(kern.py_func.__name__, kern.py_func, _numba_types(dt)[name]) for (dt, name, _), kern in KERNELS.items()]


def _shared_limit(device):
    """The opt-in shared memory per block of ``device`` (bytes): what a
    block's static and dynamic shared memory together may use."""
    if SIMULATED:
        return SHARED_LIMIT
    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "shared_memory_per_block_optin", 48 * 1024))


def _dynamic_limit(optin, static):
    """The most dynamic shared memory (bytes) a kernel holding ``static``
    bytes of static shared memory may ask for on a device whose opt-in
    limit is ``optin``. The driver's rule is dynamic + static <= opt-in
    (a request for the whole opt-in is refused with
    CUDA_ERROR_INVALID_VALUE); SHARED_LIMIT caps it further."""
    return max(0, min(SHARED_LIMIT, int(optin) - int(static)))


def _opt_in(set_attribute, handle, device_index, dynamic, static, name):
    """Allow kernel ``handle`` ``dynamic`` bytes of dynamic shared memory
    (above 48 KB - static a kernel must opt in). ``set_attribute(attr,
    value, handle, device)`` is the driver's ``cuKernelSetAttribute``; a
    refusal raises :class:`LaunchConfigError` naming the numbers (it is
    not a reason to compile the kernel another way)."""
    if dynamic + static <= 48 * 1024:
        return
    from cuda.bindings import driver as drv

    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    try:  # cuda.bindings returns (error,); numba-cuda's wrapper raises CudaAPIError
        got = set_attribute(attr, dynamic, handle, device_index)
        err = int(got[0]) if isinstance(got, tuple) else 0
    except Exception as e:  # noqa: BLE001 - reported below as what it is
        err = e
    if err != 0:
        raise LaunchConfigError(
            f"the CUDA driver refused {dynamic} bytes of dynamic shared memory for kernel {name} on device "
            f"{device_index} ({static} bytes static; {err}): dynamic + static must fit the device's opt-in limit")


def _variant(device, dt, name, rows):
    """"shared" where ``rows`` rows of n floats fit the dynamic shared
    memory the kernel's shared variant may ask for on ``device`` (the
    opt-in limit less the kernel's own static shared memory), else
    "global"."""
    if (dt, name, "shared") not in KERNELS:
        return "global"
    need = rows * _N * dt.itemsize
    if SIMULATED:
        return "shared" if need <= SHARED_LIMIT else "global"
    index = _index(device)
    _handle(index, dt, name, "shared")
    return "shared" if need <= _LIMITS[(index, dt, name, "shared")][2] else "global"


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


def _block(variant, shared_bytes, limit=1024, regs=32):
    """Threads per block: where shared memory limits an SM to few blocks
    (the rows with P: one; the column: two), blocks get more threads so an
    SM keeps ~2048 threads' worth of warps to hide latencies: 2048 / blocks
    per SM, at most BIG_THREADS and the compiled kernel's limit, at least
    THREADS, and no more than the SM's 65,536 registers allow for that many
    blocks (``regs`` per thread)."""
    if variant != "shared":
        return THREADS
    per_sm = max(1, SM_SHARED // (shared_bytes + 1024))
    regs = -(-max(1, int(regs)) // 8) * 8  # registers are allocated 8 per thread at a time
    nt = min(BIG_THREADS, int(limit), 2048 // per_sm, 65536 // regs // per_sm) // 32 * 32
    return max(THREADS, nt)


def _abi(args):
    """Numba's kernel ABI for ``args``: an array is meminfo, parent, size,
    itemsize, data pointer, shape, strides (bytes; C-contiguous)."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            isz = a.element_size()
            strides = []
            step = isz
            for s in reversed(a.shape):
                strides.append(step)
                step *= s
            out += [0, 0, a.numel(), isz, a.data_ptr(), *a.shape, *reversed(strides)]
        else:
            out.append(a)
    return out


def _shape_key(args):
    """What fixes ``_abi(args)`` but the data pointers: each tensor's shape
    and dtype, each other argument itself."""
    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else (type(a), a) for a in args)


def _slots(args):
    """(word, argument index) of each tensor argument's data pointer in ``_abi(args)``."""
    slots, pos = [], 0
    for j, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            slots.append((pos + 4, j))
            pos += 5 + 2 * a.dim()
        else:
            pos += 1
    return slots


def _fill(words, slots, args):
    """``words`` (``_abi`` of arguments of the same shapes and flags as
    ``args``; ``slots`` their :func:`_slots`) with the data pointers of
    ``args``: what a launch record's packing becomes for this launch."""
    words = words.copy()
    for pos, j in slots:
        words[pos] = args[j].data_ptr()
    return words


def _sim_unpack(name, dt, words):
    """Simulator only: the arrays a GPU kernel would see from the packed
    words (so the packing is checked without a GPU); ValueError where the
    words do not fit the kernel's argument kinds."""
    import ctypes

    npdt = {"w1": WIRE_DTYPE, "u1": np.dtype(np.uint32), "i1": np.dtype(np.int64), "b1": np.dtype(np.int32)}
    out, pos = [], 0
    for kind in KERNEL_ARGS[name]:
        if kind == "bool":
            out.append(bool(words[pos]))
            pos += 1
            continue
        ndim = int(kind[1])
        size, isz, ptr = words[pos + 2], words[pos + 3], words[pos + 4]
        shape = tuple(int(v) for v in words[pos + 5:pos + 5 + ndim])
        strides = tuple(int(v) for v in words[pos + 5 + ndim:pos + 5 + 2 * ndim])
        pos += 5 + 2 * ndim
        adt = dt if kind[0] == "f" else npdt[kind]
        if isz != adt.itemsize:
            raise ValueError(f"{name}: packed itemsize {isz} for a {adt} array")
        if min(shape, default=1) == 0:
            out.append(np.empty(shape, adt))
            continue
        extent = isz + sum((sh - 1) * st for sh, st in zip(shape, strides))
        if min(strides, default=0) < 0 or extent > size * isz:
            raise ValueError(f"{name}: packed array (shape {shape}, strides {strides}) exceeds its {size} elements")
        buf = (ctypes.c_char * extent).from_address(ptr)
        out.append(np.ndarray(shape, adt, buffer=buf, strides=strides))
    if pos != len(words):
        raise ValueError(f"{name}: {len(words)} packed words, the kernel takes {pos}")
    return out


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
        nt = _block(variant, shared_bytes, *_LIMITS[(index, dt, name, variant)][:2])
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


def _part(t, b0, b1):
    """Rows b0:b1 of ``t``; ``t`` itself where that is all of it (no view made)."""
    return t if b0 == 0 and b1 == t.shape[0] else t[b0:b1]


def _batch(name, like, B, rows, extra=0, most=0):
    """The chunks of a batch of ``B`` rows launched as kernel ``name`` with
    ``rows`` rows of n floats per block (:func:`_chunks` of the global
    scratch where the launch runs the global variant, plus ``extra`` bytes
    per row; at most ``most`` rows each), worked out once per (kernel,
    device, dtype, B, rows, extra, most)."""
    key = (name, like.device, like.dtype, B, rows, extra, most)
    hit = _PLANS.get(key)
    if hit is None:
        glob = _variant(like.device, _np_dtype(like), name, rows) == "global"
        if len(_PLANS) >= RECORDS_MAX:
            _PLANS.clear()
        hit = _PLANS[key] = _chunks(B, (rows * _N * like.element_size() if glob else 0) + extra, most)
    return hit


def _chunks(B, per_row, most=0):
    """Row ranges of the batch whose global scratch (``per_row`` bytes a
    row; 0: none) fits WORKSPACE, of at most ``most`` rows (0: no limit);
    at least one row each."""
    step = B if per_row <= 0 else max(1, min(B, WORKSPACE // per_row))
    if most > 0:
        step = max(1, min(step, most))
    return [(i, min(B, i + step)) for i in range(0, B, max(step, 1))]


def _require_cuda(x):
    """x must be a CUDA tensor and torch must see a GPU (any tensor under
    the simulator). Costs no synchronisation. The first call checks the
    driver (numba-cuda is not imported: kernels load from cubins where
    they can)."""
    if SIMULATED:
        return
    if not _CHECKED:
        t0 = time.perf_counter()
        if not torch.cuda.is_available():
            raise RuntimeError(
                "this netgen module (target cuda) needs a CUDA device, and none is available here "
                "(torch.cuda.is_available() = False); build with --target numba or --target torch for CPU")
        _check_driver()
        _CHECKED.append(True)
        LOG.debug("netgen cuda: device and driver checked in %.1f ms", 1e3 * (time.perf_counter() - t0))
    if x.device.type != "cuda":
        raise ValueError(f"the cuda target needs CUDA tensors; got a tensor on {x.device}")


def _check_driver():
    """RuntimeError naming the driver's CUDA version where it is older than
    MIN_DRIVER (the kernels are CUDA 13 cubins and PTX)."""
    try:
        from cuda.bindings import driver as drv

        err, version = drv.cuDriverGetVersion()
    except Exception:  # noqa: BLE001 - no binding to ask: numba-cuda will say what is missing
        return
    if int(err) == 0 and int(version) < MIN_DRIVER:
        raise RuntimeError(
            "this netgen module (target cuda) needs an NVIDIA driver for CUDA %d.%d or newer (R580+); this driver "
            "supports CUDA %d.%d: update the driver, or build with --target torch"
            % (MIN_DRIVER // 1000, MIN_DRIVER % 1000 // 10, version // 1000, version % 1000 // 10))


def _tables(device):
    """The kernels' tables as tensors on ``device`` (uploaded once)."""
    tabs = _TABLES.get(device)
    if tabs is None:
        t0 = time.perf_counter()
        tabs = _TABLES[device] = {k: torch.from_numpy(v).to(device) for k, v in TABLES.items()}
        LOG.debug("netgen cuda: tables uploaded to %s (%d bytes) in %.1f ms", device,
                  sum(v.nbytes for v in TABLES.values()), 1e3 * (time.perf_counter() - t0))
    return tabs


def _np_dtype(t):
    """The kernels' numpy float type for tensor ``t`` (float64, else float32)."""
    return np.dtype(np.float64) if t.dtype == torch.float64 else np.dtype(np.float32)


_install_syncwarp()

#: the module-level statements a generated module copies (after PARTS; in file order)
STATE = ("SIMULATED", "VIA_NUMBA", "WORKSPACE", "INDEX_LIMIT", "LOG", "WIRE_DTYPE", "TABLES", "SM_SHARED",
         "LANES", "_PATH", "_HANDLES", "_CONFIGS", "_STREAMS", "_RECORDS", "RECORDS_MAX", "_PLANS", "_DUMMIES", "_CORE",
         "_VARIANTS", "_LIMITS", "_TABLES", "_CHECKED", "MIN_DRIVER", "_install_syncwarp")
#: the functions a generated module copies, in order
PARTS = (LaunchConfigError, _sim_syncwarp, _install_syncwarp, _numba_types, kernel_signatures, _shared_limit,
         _dynamic_limit, _opt_in, _variant, _index, _handle, _block, _abi, _shape_key, _slots, _fill, _sim_unpack, _record,
         _launch, _core, _dummy, _part, _batch, _chunks, _require_cuda, _check_driver, _tables, _np_dtype)
