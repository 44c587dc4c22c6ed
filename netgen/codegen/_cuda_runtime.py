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
* **Self-check.** That packing never ran on a GPU when it was written, so on
  first use per (device, dtype) the layer runs one small fixed case (rows
  with P, values only, column; forward and backward) through both paths
  and compares; a mismatch is a RuntimeError naming
  ``NETGEN_CUDA_LAUNCH=numba``. Once per process, logged on the ``netgen``
  logger; ``NETGEN_CUDA_SELFCHECK=0`` skips it. Under the CUDA simulator
  (``NUMBA_ENABLE_CUDASIM=1``) the fast path unpacks the packed words back
  into arrays (pointers, shapes, strides), so the packing is tested there.
* **Ops.** Forward and backward of the rows and the column are
  ``torch.library`` custom ops with fake implementations and registered
  autograd (``torch.compile(fullgraph=True)`` sees one op each; CUDA graphs
  can capture them). They take the steepness as a 1-element device tensor
  (a kernel argument: changing it never recompiles, reading it never
  synchronises) and return dL/ds when it requires grad. Once
  differentiable: differentiating a gradient again raises RuntimeError;
  ``torch.func`` transforms raise ValueError.

Placeholders: ``@@OPS@@`` (the op namespace, a literal).
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
        cufunc = KERNELS[(dtype, name, variant)].compile(_numba_types(dtype)[name])._codelibrary.get_cufunc()
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
    nt = min(BIG_THREADS, int(limit), 2048 // per_sm, 65536 // max(1, regs) // per_sm) // 32 * 32
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


# ---------------------------------------------------------------- ops
OPS_NAMESPACE = @@OPS@@


def _rows_forward(x: torch.Tensor, s: torch.Tensor, want_P: bool,
                  save: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                       torch.Tensor]:
    """values (B, k), P (B, k, n; (0,) when not want_P) and what backward
    needs: ds and ps (B, size), the comparators' differences and swap
    probabilities (the sweeps over ranks read p; the values' adjoint
    recomputes dp/dd and dp/ds from d), D (B, nnz) where SAVE_D and save
    (else 1 x 1), the back-sweep's row differences, and bad (B,) int32."""
    B = x.shape[0]
    t = _tables(x.device)
    values, ds, ps = x.new_empty((B, _K)), x.new_empty((B, _SIZE)), x.new_empty((B, _SIZE))
    P = x.new_empty((B, _K, _N) if want_P else (0,))
    keep_D = want_P and save and SAVE_D
    D = x.new_empty((B, max(_NNZ, 1)) if keep_D else (1, 1))
    bad = torch.empty((B,), dtype=torch.int32, device=x.device)
    rows = _K if want_P else 1
    glob = _variant(x.device, _np_dtype(x), "fwd", rows) == "global"
    P2 = P.view(B, _K * _N) if want_P else x.new_empty((1, 1))
    for b0, b1 in _chunks(B, rows * _N * x.element_size() if glob else 0):
        _launch("fwd", x, b1 - b0, (x[b0:b1], s, t["wa"], t["wb"], t["offs"], t["clo"], t["chi"], t["doff"],
                                    t["outs"], values[b0:b1], ds[b0:b1], ps[b0:b1], bad[b0:b1],
                                    P2[b0:b1] if want_P else P2, D[b0:b1] if keep_D else D, want_P, keep_D), rows)
    return values, P, ds, ps, D, bad


def _rows_backward(gv: torch.Tensor | None, gP: torch.Tensor | None, s: torch.Tensor, ds: torch.Tensor,
                   ps: torch.Tensor, D: torch.Tensor, bad: torch.Tensor,
                   want_gs: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """dL/dx (B, n) from dL/dvalues and dL/dP (either may be None), and the
    rows' shares of dL/ds (B,) when want_gs (else a 1-element dummy)."""
    B = ds.shape[0]
    t = _tables(ds.device)
    gx = ds.new_empty((B, _N))
    has_gv, has_gP = gv is not None, gP is not None
    gv = gv.to(ds.dtype).contiguous() if has_gv else ds.new_empty((1, 1))
    recompute = has_gP and not SAVE_D
    rows = _K if has_gP else 1
    gs = torch.zeros((B,), dtype=ds.dtype, device=ds.device) if want_gs else ds.new_empty((1,))
    per_row = rows * _N * ds.element_size() if _variant(ds.device, _np_dtype(ds), "bwd", rows) == "global" else 0
    if recompute:
        per_row += _NNZ * ds.element_size()
    if has_gP:
        gP2 = gP.to(ds.dtype).reshape(B, _K * _N).contiguous()
        gp = ds.new_empty((B, _SIZE))
    else:
        gP2 = gp = ds.new_empty((1, 1))
    chunks = _chunks(B, per_row)
    Dr = ds.new_empty((chunks[0][1] - chunks[0][0], max(_NNZ, 1))) if recompute and B else None
    for b0, b1 in chunks:
        Dc = Dr[: b1 - b0] if recompute else (D[b0:b1] if has_gP else D)
        _launch("bwd", ds, b1 - b0, (s, t["wa"], t["wb"], t["offs"], t["clo"], t["chi"], t["doff"], t["outs"],
                                     gv[b0:b1] if has_gv else gv, gP2[b0:b1] if has_gP else gP2, ds[b0:b1],
                                     ps[b0:b1], Dc,
                                     gp[b0:b1] if has_gP else gp, bad[b0:b1], gx[b0:b1],
                                     gs[b0:b1] if want_gs else gs, has_gv, has_gP, recompute, want_gs), rows)
    return gx, gs


def _column_forward(x: torch.Tensor, y: torch.Tensor, s: torch.Tensor,
                    save: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """P[:, y] (B, k) and what backward needs: ds and dus (B, size; 1 x 1
    when not save), the differences of the values and of the pushed unit
    vector at each comparator, and bad (B,) int32."""
    B = x.shape[0]
    t = _tables(x.device)
    col = x.new_empty((B, _K))
    ds, dus = x.new_empty((B, _SIZE) if save else (1, 1)), x.new_empty((B, _SIZE) if save else (1, 1))
    bad = torch.empty((B,), dtype=torch.int32, device=x.device)
    glob = _variant(x.device, _np_dtype(x), "fwd_col", 2) == "global"
    for b0, b1 in _chunks(B, 2 * _N * x.element_size() if glob else 0):
        _launch("fwd_col", x, b1 - b0, (x[b0:b1], y[b0:b1], s, t["wa"], t["wb"], t["offs"], t["outs"], col[b0:b1],
                                        ds[b0:b1] if save else ds, dus[b0:b1] if save else dus, bad[b0:b1], save), 2)
    return col, ds, dus, bad


def _column_backward(gcol: torch.Tensor, s: torch.Tensor, ds: torch.Tensor, dus: torch.Tensor, bad: torch.Tensor,
                     want_gs: bool) -> tuple[torch.Tensor, torch.Tensor]:
    B = ds.shape[0]
    t = _tables(ds.device)
    gx = ds.new_empty((B, _N))
    gcol = gcol.to(ds.dtype).contiguous()
    gs = torch.zeros((B,), dtype=ds.dtype, device=ds.device) if want_gs else ds.new_empty((1,))
    glob = _variant(ds.device, _np_dtype(ds), "bwd_col", 2) == "global"
    for b0, b1 in _chunks(B, 2 * _N * ds.element_size() if glob else 0):
        _launch("bwd_col", ds, b1 - b0, (s, t["wa"], t["wb"], t["offs"], t["outs"], gcol[b0:b1], ds[b0:b1],
                                         dus[b0:b1], bad[b0:b1], gx[b0:b1], gs[b0:b1] if want_gs else gs,
                                         want_gs), 2)
    return gx, gs


def _rows_fake(x, s, want_P, save):
    B = x.shape[0]
    return (x.new_empty((B, _K)), x.new_empty((B, _K, _N) if want_P else (0,)), x.new_empty((B, _SIZE)),
            x.new_empty((B, _SIZE)), x.new_empty((B, max(_NNZ, 1)) if want_P and save and SAVE_D else (1, 1)),
            x.new_empty((B,), dtype=torch.int32))


def _rows_backward_fake(gv, gP, s, ds, ps, D, bad, want_gs):
    return ds.new_empty((ds.shape[0], _N)), ds.new_empty((ds.shape[0],) if want_gs else (1,))


def _column_fake(x, y, s, save):
    B = x.shape[0]
    S = (B, _SIZE) if save else (1, 1)
    return x.new_empty((B, _K)), x.new_empty(S), x.new_empty(S), x.new_empty((B,), dtype=torch.int32)


def _column_backward_fake(gcol, s, ds, dus, bad, want_gs):
    return ds.new_empty((ds.shape[0], _N)), ds.new_empty((ds.shape[0],) if want_gs else (1,))


SECOND_ORDER = (
    "netgen: second-order gradients through a generated layer are not supported (its backward is a "
    "fused kernel, once differentiable); use netgen.relax.reference (plain autograd, fully "
    "differentiable) where a gradient must be differentiated again"
)


class _OnceDifferentiable(torch.autograd.Function):
    """Identity on a gradient computed by a kernel; differentiating it
    raises (so a gradient penalty never silently misses a term)."""

    @staticmethod
    def forward(ctx, g, *inputs):
        return g.clone()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(SECOND_ORDER)


def _guard(g, *inputs):
    """Under create_graph=True, tie the gradient to the layer's inputs
    through a node that refuses to be differentiated."""
    if g is None or not torch.is_grad_enabled() or torch.compiler.is_compiling():
        return g
    if not any(isinstance(v, torch.Tensor) and v.requires_grad for v in inputs):
        return g
    return _OnceDifferentiable.apply(g, *inputs)


def _rows_setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(inputs[0], inputs[1], *output[2:])


def _rows_grad(ctx, gv, gP, *unused):
    x, s, ds, ps, D, bad = ctx.saved_tensors
    if gv is None and gP is None:
        return None, None, None, None
    want_gs = bool(ctx.needs_input_grad[1])
    gx, gs = _op("rows_backward")(gv, gP, s, ds, ps, D, bad, want_gs)
    return _guard(gx, x, s), (_guard(gs.sum().reshape(s.shape), x, s) if want_gs else None), None, None


def _column_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[2], *output[1:])


def _column_grad(ctx, gcol, *unused):
    x, s, ds, dus, bad = ctx.saved_tensors
    if gcol is None:
        return None, None, None, None
    want_gs = bool(ctx.needs_input_grad[2])
    gx, gs = _op("column_backward")(gcol, s, ds, dus, bad, want_gs)
    return _guard(gx, x, s), None, (_guard(gs.sum().reshape(s.shape), x, s) if want_gs else None), None


def _op(name):
    return getattr(getattr(torch.ops, OPS_NAMESPACE), name)


def _register():
    """Define the four ops once per process (a second import of the same
    module, e.g. from another path, reuses them: same network, same code)."""
    try:
        _op("rows_forward")
        return
    except (AttributeError, RuntimeError):
        pass
    ops = {}
    for name, fn, fake in (
        ("rows_forward", _rows_forward, _rows_fake),
        ("rows_backward", _rows_backward, _rows_backward_fake),
        ("column_forward", _column_forward, _column_fake),
        ("column_backward", _column_backward, _column_backward_fake),
    ):
        ops[name] = torch.library.custom_op(f"{OPS_NAMESPACE}::{name}", fn, mutates_args=())
        ops[name].register_fake(fake)
    ops["rows_forward"].register_autograd(_rows_grad, setup_context=_rows_setup)
    ops["column_forward"].register_autograd(_column_grad, setup_context=_column_setup)


_register()


# ---------------------------------------------------------------- self-check
_SELF_CHECKED = set()


def self_check(device, dtype=torch.float32):
    """Run one small fixed case (2 rows: values and P, values only, column;
    forward and backward with dL/ds) through the fast launch path and
    through Numba's dispatcher, and compare. Raises RuntimeError naming
    NETGEN_CUDA_LAUNCH=numba on a mismatch. Called by the Layer on first use
    per (device, dtype); NETGEN_CUDA_SELFCHECK=0 skips that."""
    device = torch.device(device)
    cdt = torch.float64 if dtype == torch.float64 else torch.float32
    gen = torch.Generator().manual_seed(20260101)
    B = 2
    x = torch.randn(B, _N, generator=gen, dtype=cdt).to(device)
    y = torch.randint(0, _N, (B,), generator=gen).to(device)
    gv, gc = (torch.randn(B, _K, generator=gen, dtype=cdt).to(device) for _ in range(2))
    gP = torch.randn(B, _K, _N, generator=gen, dtype=cdt).to(device)
    s = torch.full((1,), float(RELAXATION["steepness"]), dtype=cdt, device=device)

    def case():
        v, P, ds, ps, D, bad = _rows_forward(x, s, True, True)
        gx, gs = _rows_backward(gv, gP, s, ds, ps, D, bad, True)
        v1, _, ds1, ps1, D1, bad1 = _rows_forward(x, s, False, True)
        gx1, gs1 = _rows_backward(gv, None, s, ds1, ps1, D1, bad1, True)
        col, cd, cdu, cbad = _column_forward(x, y, s, True)
        gxc, gsc = _column_backward(gc, s, cd, cdu, cbad, True)
        return {"values": v, "P": P, "dL/dx": gx, "dL/ds": gs, "values only": v1, "dL/dx values only": gx1,
                "column": col, "dL/dx column": gxc, "dL/ds column": gsc}

    hint = ("set NETGEN_CUDA_LAUNCH=numba to launch through Numba's dispatcher instead (slower, "
            "the path the fast one is checked against), and please report this")
    try:
        fast = case()
        _PATH[0] = "numba"
        try:
            ref = case()
        finally:
            _PATH[0] = "fast"
        wrong = [k for k in fast if not torch.allclose(fast[k], ref[k], rtol=1e-5, atol=1e-6, equal_nan=True)]
    except Exception as e:  # a wrong packing may also fail loudly
        raise RuntimeError(f"netgen cuda self-check failed on {device} ({cdt}): the fast launch path raised "
                           f"{type(e).__name__}: {e}; {hint}") from e
    if wrong:
        raise RuntimeError(f"netgen cuda self-check failed on {device} ({cdt}): the fast launch path (cuda.core, "
                           f"packed kernel arguments) disagrees with Numba's dispatcher on {', '.join(wrong)}; "
                           f"{hint}")
    LOG.info("netgen cuda self-check passed on %s (%s): fast launch path equals Numba's dispatcher "
             "(NETGEN_CUDA_SELFCHECK=0 skips it)", device, cdt)


def _first_use(x):
    key = (str(x.device), x.dtype)
    if key in _SELF_CHECKED or torch.compiler.is_compiling():
        return
    if VIA_NUMBA or os.environ.get("NETGEN_CUDA_SELFCHECK", "1") == "0":
        _SELF_CHECKED.add(key)
        LOG.info("netgen cuda self-check skipped on %s (%s)", x.device, x.dtype)
        return
    if not SIMULATED and torch.cuda.is_current_stream_capturing():
        return
    self_check(x.device, x.dtype)
    _SELF_CHECKED.add(key)


# ---------------------------------------------------------------- the layer
def _prepare(x):
    if torch._C._are_functorch_transforms_active():
        raise ValueError("netgen: torch.func transforms (vmap, grad, jacrev, jvp, ...) are not supported by a "
                         "generated layer; call it on batches directly, or use netgen.relax.reference")
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"expected a torch.Tensor, got {type(x).__name__}")
    if x.shape[-1:] != (_N,):
        raise ValueError(f"input must have shape (..., {_N}), got {tuple(x.shape)}")
    _require_cuda(x)
    if not x.dtype.is_floating_point:
        raise ValueError(f"input must be floating point, got {x.dtype}")
    cdt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    x2 = x.reshape(-1, _N).to(cdt).contiguous()
    _first_use(x2)
    return x2, x.shape[:-1], x.dtype


_STEEP = {}  # (device, dtype) -> (value, 1-element tensor): the last steepness used


def _number(v):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ValueError(f"steepness must be a number or a 1-element tensor, got {type(v).__name__}")
    f = float(v)
    if not (math.isfinite(f) and f > 0):
        raise ValueError(f"steepness must be finite and > 0, got {f!r}")
    return f


def _steepness(v, like):
    """The steepness as a 1-element tensor of like's dtype on its device.
    Python and numpy numbers and CPU tensors are checked here (finite, > 0);
    a CUDA tensor is not read (no synchronisation): the kernels give NaN rows
    for a steepness that is not finite and > 0."""
    if isinstance(v, torch.Tensor):
        if v.numel() != 1 or not v.dtype.is_floating_point:
            raise ValueError(f"steepness must be a single floating-point value, got a {v.dtype} tensor of shape "
                             f"{tuple(v.shape)}")
        if v.device.type == "cpu" and not torch.compiler.is_compiling():
            f = float(v.detach())
            if not (math.isfinite(f) and f > 0):
                raise ValueError(f"steepness must be finite and > 0, got {f!r}")
        return v.reshape(1).to(device=like.device, dtype=like.dtype)
    f = _number(v)
    if torch.compiler.is_compiling():
        return torch.full((1,), f, dtype=like.dtype, device=like.device)
    key = (like.device, like.dtype)
    hit = _STEEP.get(key)
    if hit is None or hit[0] != f:
        hit = _STEEP[key] = (f, torch.full((1,), f, dtype=like.dtype, device=like.device))
    return hit[1]


class Layer(torch.nn.Module):
    """Relaxed top-k / sorting layer for the network in ``NETWORK`` (CUDA).

    ``Layer(steepness=None)``: None takes ``RELAXATION["steepness"]``; a
    number, numpy scalar, 1-element tensor or ``nn.Parameter`` (then
    dL/ds flows to it). ``layer.steepness`` is read at every call.

    A row of x with a NaN or inf entry, or whose steepness * (max - min)
    overflows the float type, gives NaN values, P and column in that row
    (and a NaN gradient), as does a y outside 0..n-1 for the column:
    checked on the GPU, without synchronising the host. Inputs are never
    written. Once differentiable (second-order gradients raise)."""

    n = _N
    k = _K

    def __init__(self, steepness=None):
        super().__init__()
        self.steepness = RELAXATION["steepness"] if steepness is None else steepness
        if not isinstance(self.steepness, torch.Tensor):
            _number(self.steepness)  # validate early

    def forward(self, x):
        x2, lead, dt = _prepare(x)
        s = _steepness(self.steepness, x2)
        save = torch.is_grad_enabled() and (x2.requires_grad or s.requires_grad)
        out = _op("rows_forward")(x2, s, True, save)
        return out[0].reshape(*lead, _K).to(dt), out[1].reshape(*lead, _K, _N).to(dt)

    def values(self, x):
        """The relaxed values only, shape (..., k): the fast path when P is
        not needed (no back-sweep, n floats of shared memory per block)."""
        x2, lead, dt = _prepare(x)
        s = _steepness(self.steepness, x2)
        save = torch.is_grad_enabled() and (x2.requires_grad or s.requires_grad)
        out = _op("rows_forward")(x2, s, False, save)
        return out[0].reshape(*lead, _K).to(dt)

    def column(self, x, y):
        x2, lead, dt = _prepare(x)
        if not isinstance(y, torch.Tensor):
            y = torch.as_tensor(y, device=x.device)
        if y.dtype.is_floating_point or y.dtype == torch.bool or y.is_complex():
            raise ValueError(f"y must be an integer tensor, got {y.dtype}")
        if y.device != x.device:
            raise ValueError(f"y must be on the device of x ({x.device}), got {y.device}")
        if tuple(y.shape) != tuple(lead):
            raise ValueError(f"y must have shape {tuple(lead)}, got {tuple(y.shape)}")
        s = _steepness(self.steepness, x2)
        save = torch.is_grad_enabled() and (x2.requires_grad or s.requires_grad)
        out = _op("column_forward")(x2, y.reshape(-1).to(torch.int64).contiguous(), s, save)
        return out[0].reshape(*lead, _K).to(dt)

    def hard(self, x):
        """The exact network: ``(values, indices)`` of shapes (..., k) (torch
        ops; runs on any device)."""
        if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != _N:
            raise ValueError(f"input must be a tensor of shape (..., {_N})")
        if x.dtype.is_floating_point and bool(torch.isnan(x).any()):
            raise ValueError("input contains NaN values; the exact network needs ordered inputs")
        lead = x.shape[:-1]
        v = x.detach().reshape(-1, _N).clone()
        idx = torch.arange(_N, device=v.device).expand(v.shape[0], _N).clone()
        for l in range(len(_OFFSETS) - 1):
            a = torch.from_numpy(_COMPS[_OFFSETS[l]:_OFFSETS[l + 1], 0].copy()).to(v.device)
            c = torch.from_numpy(_COMPS[_OFFSETS[l]:_OFFSETS[l + 1], 1].copy()).to(v.device)
            va, vc = v[:, a], v[:, c]
            ia, ic = idx[:, a], idx[:, c]
            swap = vc > va
            v[:, a] = torch.where(swap, vc, va)
            v[:, c] = torch.where(swap, va, vc)
            idx[:, a] = torch.where(swap, ic, ia)
            idx[:, c] = torch.where(swap, ia, ic)
        o = torch.from_numpy(_OUTPUTS).to(v.device)
        return v[:, o].reshape(*lead, _K), idx[:, o].reshape(*lead, _K)

    def extra_repr(self):
        return f"n={_N}, k={_K}, target=cuda, {RELAXATION['distribution']}"
'''
