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

import numba
import numpy as np
import torch

from ..runtime.tables import _CHI, _CLO, _COMPS, _DOFF, _K, _N, _OFFSETS, _OUTPUTS
from .cubin import cubin_kernel, cubin_save

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("cuda", "_DIRECTION", "THREADS", "BIG_THREADS", "SHARED_LIMIT", "KERNEL_ARGS", "KERNELS")
cuda = None  # the generated module: ``from numba import cuda``
_DIRECTION = "back"
THREADS = 256
BIG_THREADS = 1024
SHARED_LIMIT = 227 * 1024
KERNEL_ARGS: dict = {}
KERNELS: dict = {}


# ---------------------------------------------------------------- state (copied)
SIMULATED = bool(numba.config.ENABLE_CUDASIM)
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
_STREAMS: dict = {}  # torch stream handle -> cuda.core Stream
_PACKS: dict = {}  # argument shapes -> (packed words, data-pointer slots)
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
    ``numba.cuda.compile_ptx`` (netgen's compile check)."""
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
    index = device.index if getattr(device, "index", None) is not None else torch.cuda.current_device()
    _handle(index, dt, name, "shared")
    return "shared" if need <= _LIMITS[(index, dt, name, "shared")][2] else "global"


def _handle(device_index, dtype, name, variant):
    """The compiled kernel's cuda.core handle (compiled once per device),
    allowed as much dynamic shared memory as the device lets it have;
    ``_LIMITS`` gets its (thread limit, registers, dynamic shared limit)."""
    key = (device_index, dtype, name, variant)
    h = _HANDLES.get(key)
    if h is None:
        got = cubin_kernel(device_index, dtype, name, variant)  # cubin.py: no numba compile
        if got is not None:
            _HANDLES[key], _LIMITS[key] = got
            return got[0]
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


def _pack(args):
    """``_abi(args)``, cached per argument shapes: a later call with the
    same shapes only refreshes the data pointers."""
    key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else (type(a), a) for a in args)
    hit = _PACKS.get(key)
    if hit is None:
        words = _abi(args)
        slots, pos = [], 0
        for j, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                slots.append((pos + 4, j))
                pos += 5 + 2 * a.dim()
            else:
                pos += 1
        hit = _PACKS[key] = (words, slots)
        return list(words)
    words = list(hit[0])
    for pos, j in hit[1]:
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


def _launch(name, like, blocks, args, rows):
    """Run kernel ``name`` on ``blocks`` blocks (threads per :func:`_block`)
    on torch's current stream, in the dtype of ``like`` (a tensor on the
    device), with ``rows`` rows of n floats of wire arrays per block (in
    shared memory where they fit, else a global scratch this function
    allocates). Tensors must be contiguous."""
    if blocks == 0:
        return
    dev, dt = like.device, _np_dtype(like)
    if not SIMULATED and dev.index is not None and dev.index != torch.cuda.current_device():
        # a kernel launches in the current device's context: make it the tensor's for this launch
        with torch.cuda.device(dev.index):
            return _launch(name, like, blocks, args, rows)
    variant = _variant(dev, dt, name, rows)
    _VARIANTS[(name, rows)] = variant
    shared_bytes = rows * _N * dt.itemsize if variant == "shared" else 0
    scratch = like.new_empty((blocks, rows * _N) if variant == "global" else (1, 1))
    args = (*args, scratch)
    kern = KERNELS[(dt, name, variant)]
    via_numba = VIA_NUMBA or _PATH[0] == "numba"
    if SIMULATED:
        nt = _block(variant, shared_bytes)
        if via_numba:
            kern[blocks, nt, 0, shared_bytes](*(a.numpy() if isinstance(a, torch.Tensor) else a for a in args))
        else:
            kern[blocks, nt, 0, shared_bytes](*_sim_unpack(name, dt, _pack(args)))
        return
    stream = torch.cuda.current_stream(dev)
    handle = _handle(stream.device_index, dt, name, variant)
    nt = _block(variant, shared_bytes, *_LIMITS[(stream.device_index, dt, name, variant)][:2])
    if via_numba:
        kern[blocks, nt, cuda.external_stream(stream.cuda_stream), shared_bytes](
            *(cuda.as_cuda_array(a) if isinstance(a, torch.Tensor) else a for a in args))
        return
    from cuda.core import LaunchConfig, Stream, launch

    config = _CONFIGS.get((blocks, nt, shared_bytes))
    if config is None:
        config = _CONFIGS[(blocks, nt, shared_bytes)] = LaunchConfig(grid=blocks, block=nt, shmem_size=shared_bytes)
    core_stream = _STREAMS.get(stream.cuda_stream)
    if core_stream is None:
        core_stream = _STREAMS[stream.cuda_stream] = Stream.from_handle(stream.cuda_stream)
    launch(core_stream, config, handle, *_pack(args))


def _chunks(B, per_row, most=0):
    """Row ranges of the batch whose global scratch (``per_row`` bytes a
    row; 0: none) fits WORKSPACE, of at most ``most`` rows (0: no limit);
    at least one row each."""
    step = B if per_row <= 0 else max(1, min(B, WORKSPACE // per_row))
    if most > 0:
        step = max(1, min(step, most))
    return [(i, min(B, i + step)) for i in range(0, B, max(step, 1))]


def _require_cuda(x):
    """x must be a CUDA tensor and Numba must see a GPU (any tensor under the
    simulator). Costs no synchronisation."""
    if SIMULATED:
        return
    if not _CHECKED:
        if not (torch.cuda.is_available() and cuda.is_available()):
            raise RuntimeError(
                "this netgen module (target cuda) needs a CUDA device, and none is available here "
                "(torch.cuda.is_available() = %s, numba.cuda.is_available() = %s); "
                "build with --target numba or --target torch for CPU" % (torch.cuda.is_available(), cuda.is_available())
            )
        _check_driver()
        _CHECKED.append(True)
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
        tabs = _TABLES[device] = {k: torch.from_numpy(v).to(device) for k, v in TABLES.items()}
    return tabs


def _np_dtype(t):
    """The kernels' numpy float type for tensor ``t`` (float64, else float32)."""
    return np.dtype(np.float64) if t.dtype == torch.float64 else np.dtype(np.float32)


_install_syncwarp()

#: the module-level statements a generated module copies (after PARTS; in file order)
STATE = ("SIMULATED", "VIA_NUMBA", "WORKSPACE", "INDEX_LIMIT", "LOG", "WIRE_DTYPE", "TABLES", "SM_SHARED",
         "LANES", "_PATH", "_HANDLES", "_CONFIGS", "_STREAMS", "_PACKS", "_VARIANTS", "_LIMITS", "_TABLES",
         "_CHECKED", "MIN_DRIVER", "_install_syncwarp")
#: the functions a generated module copies, in order
PARTS = (LaunchConfigError, _sim_syncwarp, _install_syncwarp, _numba_types, kernel_signatures, _shared_limit, _dynamic_limit,
         _opt_in, _variant, _handle,
         _block, _abi, _pack, _sim_unpack, _launch, _chunks, _require_cuda, _check_driver, _tables, _np_dtype)
