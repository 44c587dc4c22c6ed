"""Runtime half of a generated ``cuda`` module, as a text template: how the
kernels are launched and how they are exposed to PyTorch.

* **Variants.** A launch runs a kernel's ``shared`` variant (its wire arrays
  in dynamic shared memory) when what *that launch* needs -- k n floats for
  the rows with P, n for values only, 2 n for the column -- fits the
  device's opt-in limit (and ``SHARED_LIMIT``), else its ``global`` variant
  (a scratch row per block; the batch then goes in chunks that fit
  ``NETGEN_CUDA_WORKSPACE_MB``, default 2048).
* **Launching.** Each kernel is compiled by Numba once per (device, dtype);
  its ``cuda.core`` handle is cached and launched on torch's current stream
  with Numba's kernel ABI (an array is ``meminfo, parent, size, itemsize,
  data, *shape, *strides``) packed from the torch tensors, the packing
  cached per shape (only data pointers change): no ``cuda.as_cuda_array``,
  no dispatcher, no host synchronisation. ``NETGEN_CUDA_LAUNCH=numba``
  selects Numba's dispatcher instead (slower, same results).
* **Simulator.** Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the
  fast path unpacks the packed words back into arrays (pointers, shapes,
  strides), so the packing is tested there; the simulator gets a
  ``cuda.syncwarp`` (a barrier among a warp's threads).
The ops, the self-check and the ``Layer`` follow in
:mod:`netgen.codegen._cuda_layer` (the emitter pastes that template after
this one). No placeholders.
"""

RUNTIME = '''
# ---------------------------------------------------------------- launching
import logging  # noqa: E402

SIMULATED = bool(numba.config.ENABLE_CUDASIM)
VIA_NUMBA = os.environ.get("NETGEN_CUDA_LAUNCH", "") == "numba"
#: bytes of global scratch a launch may use before the batch is chunked
WORKSPACE = int(os.environ.get("NETGEN_CUDA_WORKSPACE_MB", "2048")) * 2**20
LOG = logging.getLogger("netgen")
_PATH = ["fast"]  # the self-check's reference run sets "numba"
_HANDLES = {}  # (device index, dtype, kernel name, variant) -> cuda.core kernel handle
_CONFIGS = {}  # (grid, threads, shared bytes) -> cuda.core LaunchConfig
_STREAMS = {}  # torch stream handle -> cuda.core Stream
_PACKS = {}  # argument shapes -> (packed words, data-pointer slots)
_VARIANTS = {}  # (kernel, rows of n floats) -> the variant last launched (for tests)
_MAXTHREADS = {}  # (device index, dtype, kernel, variant) -> the compiled kernel's thread limit


if SIMULATED:
    # The simulator has no cuda.syncwarp: a barrier among the threads of one
    # warp of one block (the kernels call it from warp 0 only).
    import threading as _threading

    from numba.cuda.simulator.kernelapi import FakeCUDAModule as _Fake

    _WARP_BARRIERS = {}
    _WARP_LOCK = _threading.Lock()

    def _sim_syncwarp(self, mask=0xFFFFFFFF):
        th = _threading.current_thread()
        nthreads = int(np.prod(th._manager._block_dim))
        warp = th.thread_id // 32
        key = (id(th._manager), tuple(th.blockIdx), warp)
        with _WARP_LOCK:
            bar = _WARP_BARRIERS.get(key)
            if bar is None:
                bar = _WARP_BARRIERS[key] = _threading.Barrier(min(32, nthreads - 32 * warp))
        bar.wait()

    if not hasattr(_Fake, "syncwarp"):
        _Fake.syncwarp = _sim_syncwarp


def _numba_types(dtype):
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
    if SIMULATED:
        return SHARED_LIMIT
    props = torch.cuda.get_device_properties(device)
    return min(SHARED_LIMIT, getattr(props, "shared_memory_per_block_optin", 48 * 1024))


def _variant(device, dt, name, rows):
    """"shared" where ``rows`` rows of n floats fit the device, else "global"."""
    if (dt, name, "shared") in KERNELS and rows * _N * dt.itemsize <= _shared_limit(device):
        return "shared"
    return "global"


def _handle(device_index, dtype, name, variant):
    """The compiled kernel's cuda.core handle (compiled once per device),
    allowed the device's dynamic shared memory."""
    key = (device_index, dtype, name, variant)
    h = _HANDLES.get(key)
    if h is None:
        got = cubin_kernel(device_index, dtype, name, variant)  # runtime/cuda_cubin.py: no numba compile
        if got is not None:
            _HANDLES[key], _MAXTHREADS[key] = got
            return got[0]
        compiled = KERNELS[(dtype, name, variant)].compile(_numba_types(dtype)[name])
        cubin_save(dtype, name, variant, compiled)  # for the next process (modules in netgen's cache)
        cufunc = compiled._codelibrary.get_cufunc()
        limit = _shared_limit(device_index)
        if variant == "shared" and limit > 48 * 1024:  # above 48 KB a kernel must opt in
            from numba.cuda.cudadrv.driver import binding, driver

            attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            driver.cuKernelSetAttribute(attr, limit, cufunc.handle, cufunc.device.id)
        h = _HANDLES[key] = cufunc.kernel
        attrs = getattr(cufunc, "attrs", None)
        _MAXTHREADS[key] = (int(getattr(attrs, "maxthreads", 1024) or 1024), int(getattr(attrs, "regs", 32) or 32))
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
    words (so the packing is checked without a GPU)."""
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
    """Run kernel ``name`` on ``blocks`` blocks of ``THREADS`` threads, on
    torch's current stream, in the dtype of ``like`` (a tensor on the
    device), with ``rows`` rows of n floats of wire arrays per block (in
    shared memory where they fit, else a global scratch this function
    allocates). Tensors must be contiguous."""
    if blocks == 0:
        return
    dev, dt = like.device, _np_dtype(like)
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
    nt = _block(variant, shared_bytes, *_MAXTHREADS[(stream.device_index, dt, name, variant)])
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


def _chunks(B, per_row):
    """Row ranges of the batch whose global scratch fits WORKSPACE."""
    step = B if per_row <= 0 else max(1, min(B, WORKSPACE // per_row))
    return [(i, min(B, i + step)) for i in range(0, B, max(step, 1))]


# ---------------------------------------------------------------- device state
_TABLES = {}  # device -> tables as tensors on it (uploaded once)
_CHECKED = []


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
        _CHECKED.append(True)
    if x.device.type != "cuda":
        raise ValueError(f"the cuda target needs CUDA tensors; got a tensor on {x.device}")


def _tables(device):
    tabs = _TABLES.get(device)
    if tabs is None:
        tabs = _TABLES[device] = {k: torch.from_numpy(v).to(device) for k, v in TABLES.items()}
    return tabs


def _np_dtype(t):
    return np.dtype(np.float64) if t.dtype == torch.float64 else np.dtype(np.float32)
'''
