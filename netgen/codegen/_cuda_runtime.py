"""Runtime half of a generated ``cuda`` module, as a text template: how the
kernels are launched and how they are exposed to PyTorch.

* **Variants.** A kernel runs in its ``shared`` variant (wire arrays in
  dynamic shared memory) when they fit the device's opt-in limit (and
  ``SHARED_LIMIT``), else in its ``global`` variant (a scratch row each).
* **Launching.** Each kernel is compiled by Numba once per (device, dtype)
  for fixed argument types; its ``cuda.core`` kernel handle is cached
  (allowed its dynamic shared memory above 48 KB) and launched with ``cuda.core.launch`` on torch's current stream, the
  arguments passed as Numba's kernel ABI expects them (an array is
  ``meminfo, parent, size, itemsize, data, *shape, *strides``), taken
  straight from the torch tensors: no ``cuda.as_cuda_array``, no Numba
  dispatcher, no host synchronisation. ``NETGEN_CUDA_LAUNCH=numba`` falls
  back to Numba's dispatcher (slower, same results). Under the CUDA
  simulator (``NUMBA_ENABLE_CUDASIM=1``) the same launch function runs the
  kernels on CPU tensors' memory: netgen's tests drive the whole layer that
  way, counting launches.
* **Ops.** Forward and backward of the rows and the column are
  ``torch.library`` custom ops (namespace ``OPS_NAMESPACE``) with fake
  implementations and registered autograd, so ``torch.compile(fullgraph=
  True)`` treats each as one op and ``torch.cuda.graph`` can capture them.

Placeholders: ``@@OPS@@`` (the op namespace).
"""

RUNTIME = '''
# ---------------------------------------------------------------- launching
SIMULATED = bool(numba.config.ENABLE_CUDASIM)
VIA_NUMBA = os.environ.get("NETGEN_CUDA_LAUNCH", "") == "numba"
_PLANS = {}  # (device, dtype, kernel name) -> (variant, dynamic shared bytes)
_HANDLES = {}  # (device index, dtype, kernel name, variant) -> cuda.core kernel handle
_CONFIGS = {}  # (grid, shared bytes) -> cuda.core LaunchConfig
_STREAMS = {}  # torch stream handle -> cuda.core Stream


def _numba_types(dtype):
    from numba import types

    ft = types.float64 if dtype == np.float64 else types.float32
    kinds = {
        "f2": types.Array(ft, 2, "C"), "i1": types.Array(types.int64, 1, "C"),
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


def _plan(device, dtype, name):
    """The variant of a kernel to run on ``device``: its wire arrays in
    dynamic shared memory where they fit, else in a global scratch row."""
    key = (device, dtype, name)
    plan = _PLANS.get(key)
    if plan is None:
        nbytes = WIRE_ARRAYS[name] * _N * dtype.itemsize
        if (dtype, name, "shared") in KERNELS and nbytes <= _shared_limit(device):
            plan = ("shared", nbytes)
        else:
            plan = ("global", 0)
        _PLANS[key] = plan
    return plan


def _handle(device_index, dtype, name, variant, shared_bytes):
    """The compiled kernel's cuda.core handle (compiled once per device),
    allowed ``shared_bytes`` of dynamic shared memory."""
    key = (device_index, dtype, name, variant)
    h = _HANDLES.get(key)
    if h is None:
        cufunc = KERNELS[(dtype, name, variant)].compile(_numba_types(dtype)[name])._codelibrary.get_cufunc()
        if shared_bytes > 48 * 1024:  # above 48 KB a kernel must opt in
            from numba.cuda.cudadrv.driver import binding, driver

            attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            driver.cuKernelSetAttribute(attr, shared_bytes, cufunc.handle, cufunc.device.id)
        h = _HANDLES[key] = cufunc.kernel
    return h


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


def _launch(name, like, blocks, args):
    """Run kernel ``name`` on ``blocks`` blocks of ``THREADS`` threads, on
    torch's current stream, in the variant and dtype that suit ``like`` (a
    tensor on the device, in the compute dtype). Tensors must be contiguous;
    the last argument of a kernel with wire arrays is filled in here (a
    global scratch, or a placeholder when they live in shared memory)."""
    if blocks == 0:
        return
    dev, dt = like.device, _np_dtype(like)
    variant, shared_bytes = _plan(dev, dt, name)
    if name != "fwd_P":
        rows = blocks * WIRE_ARRAYS[name] if variant == "global" else 1
        args = (*args, like.new_empty((rows, _N if variant == "global" else 1)))
    kern = KERNELS[(dt, name, variant)]
    if SIMULATED:
        kern[blocks, THREADS, 0, shared_bytes](*(a.numpy() if isinstance(a, torch.Tensor) else a for a in args))
        return
    stream = torch.cuda.current_stream(dev)
    handle = _handle(stream.device_index, dt, name, variant, shared_bytes)
    if VIA_NUMBA:
        kern[blocks, THREADS, cuda.external_stream(stream.cuda_stream), shared_bytes](
            *(cuda.as_cuda_array(a) if isinstance(a, torch.Tensor) else a for a in args))
        return
    from cuda.core import LaunchConfig, Stream, launch

    config = _CONFIGS.get((blocks, shared_bytes))
    if config is None:
        config = _CONFIGS[(blocks, shared_bytes)] = LaunchConfig(grid=blocks, block=THREADS, shmem_size=shared_bytes)
    core_stream = _STREAMS.get(stream.cuda_stream)
    if core_stream is None:
        core_stream = _STREAMS[stream.cuda_stream] = Stream.from_handle(stream.cuda_stream)
    launch(core_stream, config, handle, *_abi(args))


# ---------------------------------------------------------------- device state
_TABLES = {}  # device -> tables as int64 tensors on it (uploaded once)
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
OPS_NAMESPACE = "@@OPS@@"


def _rows_forward(x: torch.Tensor, save: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                                         torch.Tensor]:
    """values (B, k), P (B, k, n) and what backward needs: ds (B, size), the
    comparators' differences (p and dp/dd are recomputed from them), D (B,
    nnz; 1 x 1 when not save), the back-sweep's row differences, and bad
    (B,) int32."""
    B = x.shape[0]
    t = _tables(x.device)
    values, P, ds = x.new_empty((B, _K)), x.new_empty((B, _K, _N)), x.new_empty((B, _SIZE))
    D = x.new_empty((B, max(_NNZ, 1)) if save else (1, 1))
    bad = torch.empty((B,), dtype=torch.int32, device=x.device)
    _launch("fwd_vals", x, B, (x, t["ca"], t["cb"], t["offs"], t["outs"], values, ds, bad))
    _launch("fwd_P", x, B * _K, (t["ca"], t["cb"], t["offs"], t["clo"], t["chi"], t["doff"], t["outs"], ds, bad,
                                 P.view(B * _K, _N), D, save))
    return values, P, ds, D, bad


def _rows_backward(gv: torch.Tensor | None, gP: torch.Tensor | None, ds: torch.Tensor, D: torch.Tensor,
                   bad: torch.Tensor) -> torch.Tensor:
    """dL/dx (B, n) from dL/dvalues and dL/dP (either may be None)."""
    B = ds.shape[0]
    t = _tables(ds.device)
    gx = ds.new_empty((B, _N))
    has_gv, has_gP = gv is not None, gP is not None
    gv = gv.to(ds.dtype).contiguous() if has_gv else ds.new_empty((1, 1))
    if has_gP:
        # each (comparator, rank)'s share of dL/dp, laid out as D
        C = torch.empty_like(D)
        _launch("bwd_P", ds, B * _K, (t["ca"], t["cb"], t["offs"], t["clo"], t["chi"], t["doff"], ds, D,
                                      gP.to(ds.dtype).reshape(B * _K, _N).contiguous(), C))
    else:
        C = ds.new_empty((1, 1))
    _launch("bwd_vals", ds, B, (t["ca"], t["cb"], t["offs"], t["doff"], t["outs"], gv, has_gv, ds, C, has_gP, bad, gx))
    return gx


def _column_forward(x: torch.Tensor, y: torch.Tensor, save: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                           torch.Tensor]:
    """P[:, y] (B, k) and what backward needs: ds and dus (B, size; 1 x 1
    when not save), the differences of the values and of the pushed unit
    vector at each comparator, and bad (B,) int32."""
    B = x.shape[0]
    t = _tables(x.device)
    col = x.new_empty((B, _K))
    ds, dus = x.new_empty((B, _SIZE) if save else (1, 1)), x.new_empty((B, _SIZE) if save else (1, 1))
    bad = torch.empty((B,), dtype=torch.int32, device=x.device)
    _launch("fwd_col", x, B, (x, y, t["ca"], t["cb"], t["offs"], t["outs"], col, ds, dus, bad, save))
    return col, ds, dus, bad


def _column_backward(gcol: torch.Tensor, ds: torch.Tensor, dus: torch.Tensor, bad: torch.Tensor) -> torch.Tensor:
    B = ds.shape[0]
    t = _tables(ds.device)
    gx = ds.new_empty((B, _N))
    _launch("bwd_col", ds, B, (t["ca"], t["cb"], t["offs"], t["outs"], gcol.to(ds.dtype).contiguous(), ds, dus, bad,
                               gx))
    return gx


def _rows_fake(x, save):
    B = x.shape[0]
    return (x.new_empty((B, _K)), x.new_empty((B, _K, _N)), x.new_empty((B, _SIZE)),
            x.new_empty((B, max(_NNZ, 1)) if save else (1, 1)), x.new_empty((B,), dtype=torch.int32))


def _rows_backward_fake(gv, gP, ds, D, bad):
    return ds.new_empty((ds.shape[0], _N))


def _column_fake(x, y, save):
    B = x.shape[0]
    S = (B, _SIZE) if save else (1, 1)
    return x.new_empty((B, _K)), x.new_empty(S), x.new_empty(S), x.new_empty((B,), dtype=torch.int32)


def _column_backward_fake(gcol, ds, dus, bad):
    return ds.new_empty((ds.shape[0], _N))


def _rows_setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(*output[2:])


def _rows_grad(ctx, gv, gP, *unused):
    return _op("rows_backward")(gv, gP, *ctx.saved_tensors), None


def _column_setup(ctx, inputs, output):
    ctx.save_for_backward(*output[1:])


def _column_grad(ctx, gcol, *unused):
    return _op("column_backward")(gcol, *ctx.saved_tensors), None, None


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


# ---------------------------------------------------------------- the layer
def _prepare(x):
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"expected a torch.Tensor, got {type(x).__name__}")
    if x.shape[-1:] != (_N,):
        raise ValueError(f"input must have shape (..., {_N}), got {tuple(x.shape)}")
    _require_cuda(x)
    if not x.dtype.is_floating_point:
        raise ValueError(f"input must be floating point, got {x.dtype}")
    cdt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    return x.reshape(-1, _N).to(cdt).contiguous(), x.shape[:-1], x.dtype


class Layer(torch.nn.Module):
    """Relaxed top-k / sorting layer for the network in ``NETWORK`` (CUDA).

    A row of x with a NaN or inf entry gives NaN values, P and column in
    that row (and a NaN gradient), as does a y outside 0..n-1 for the
    column: checked on the GPU, without synchronising the host."""

    n = _N
    k = _K

    def forward(self, x):
        x2, lead, dt = _prepare(x)
        save = torch.is_grad_enabled() and x2.requires_grad
        out = _op("rows_forward")(x2, save)
        return out[0].reshape(*lead, _K).to(dt), out[1].reshape(*lead, _K, _N).to(dt)

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
        save = torch.is_grad_enabled() and x2.requires_grad
        out = _op("column_forward")(x2, y.reshape(-1).to(torch.int64).contiguous(), save)
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
            a = torch.from_numpy(TABLES["ca"][_OFFSETS[l]:_OFFSETS[l + 1]]).to(v.device)
            c = torch.from_numpy(TABLES["cb"][_OFFSETS[l]:_OFFSETS[l + 1]]).to(v.device)
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
