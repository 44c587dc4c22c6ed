"""Runtime half of a generated ``cuda`` module, as a text template: how the
kernels are launched and how they are exposed to PyTorch.

* **Launching.** Each kernel is compiled by Numba once per (device, dtype)
  for fixed argument types; its ``cuda.core`` kernel handle is cached and
  launched with ``cuda.core.launch`` on torch's current stream, the
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
_HANDLES = {}  # (device index, dtype, kernel name) -> cuda.core kernel handle
_CONFIGS = {}  # grid -> cuda.core LaunchConfig
_STREAMS = {}  # torch stream handle -> cuda.core Stream


def _numba_types(dtype):
    from numba import types

    ft = types.float64 if dtype == np.float64 else types.float32
    kinds = {
        "f1": types.Array(ft, 1, "C"), "f2": types.Array(ft, 2, "C"), "f3": types.Array(ft, 3, "C"),
        "i1": types.Array(types.int64, 1, "C"), "b1": types.Array(types.int32, 1, "C"), "bool": types.boolean,
    }
    return {name: tuple(kinds[a] for a in args) for name, args in KERNEL_ARGS.items()}


def kernel_signatures():
    """(name, python function, argument types) of every kernel, for
    ``numba.cuda.compile_ptx`` (netgen's compile check)."""
    out = []
    for dt, kernels in KERNELS.items():
        sigs = _numba_types(dt)
        for name, kern in kernels.items():
            out.append((kern.py_func.__name__, kern.py_func, sigs[name]))
    return out


def _handle(device, dtype, name):
    key = (device, dtype, name)
    h = _HANDLES.get(key)
    if h is None:
        kern = KERNELS[dtype][name].compile(_numba_types(dtype)[name])
        h = _HANDLES[key] = kern._codelibrary.get_cufunc().kernel
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


def _launch(name, dtype, grid, stream, args):
    """Run kernel ``name`` (``dtype`` variant) on ``grid`` blocks of
    ``THREADS`` threads, on ``stream`` (a torch stream; None under the
    simulator). Tensors must be contiguous."""
    if grid == 0:
        return
    kern = KERNELS[dtype][name]
    if SIMULATED:
        kern[grid, THREADS](*(a.numpy() if isinstance(a, torch.Tensor) else a for a in args))
    elif VIA_NUMBA:
        kern[grid, THREADS, cuda.external_stream(stream.cuda_stream)](
            *(cuda.as_cuda_array(a) if isinstance(a, torch.Tensor) else a for a in args))
    else:
        from cuda.core import LaunchConfig, Stream, launch

        config = _CONFIGS.get(grid)
        if config is None:
            config = _CONFIGS[grid] = LaunchConfig(grid=grid, block=THREADS)
        core_stream = _STREAMS.get(stream.cuda_stream)
        if core_stream is None:
            core_stream = _STREAMS[stream.cuda_stream] = Stream.from_handle(stream.cuda_stream)
        launch(core_stream, config, _handle(stream.device_index, dtype, name), *_abi(args))


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


def _stream(device):
    return None if SIMULATED else torch.cuda.current_stream(device)


def _np_dtype(t):
    return np.dtype(np.float64) if t.dtype == torch.float64 else np.dtype(np.float32)


def _scratch(x, j, family):
    """A (B, n) global scratch block when wire array j of a kernel family is
    not in shared memory, else a 1 x 1 placeholder."""
    ft = "float64" if x.dtype == torch.float64 else "float32"
    return x.new_empty(x.shape) if GLOBAL_SCRATCH[(ft, family, j)] else x.new_empty((1, 1))


# ---------------------------------------------------------------- ops
OPS_NAMESPACE = "@@OPS@@"


def _rows_forward(x: torch.Tensor, save: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                                         torch.Tensor, torch.Tensor, torch.Tensor]:
    """values (B, k), P (B, k, n) and what backward needs: ps, ds, dps (B,
    size), D (B, nnz), bad (B,) int32; ds, dps, D are 1 x 1 when not save."""
    B, dev, dt = x.shape[0], x.device, _np_dtype(x)
    tabs = _tables(dev)
    values, P, ps = x.new_empty((B, _K)), x.new_empty((B, _K, _N)), x.new_empty((B, _SIZE))
    if save:
        ds, dps, D = x.new_empty((B, _SIZE)), x.new_empty((B, _SIZE)), x.new_empty((B, max(_NNZ, 1)))
    else:
        ds, dps, D = x.new_empty((1, 1)), x.new_empty((1, 1)), x.new_empty((1, 1))
    bad = torch.empty((B,), dtype=torch.int32, device=dev)
    stream = _stream(dev)
    _launch("fwd_vals", dt, B, stream, (x, tabs["ca"], tabs["cb"], tabs["offs"], tabs["outs"], values, ps, ds, dps,
                                        bad, save, _scratch(x, 0, "vals")))
    _launch("fwd_P", dt, B, stream, (tabs["ca"], tabs["cb"], tabs["offs"], tabs["clo"], tabs["chi"], tabs["doff"],
                                     tabs["outs"], ps, bad, P, D, save))
    return values, P, ps, ds, dps, D, bad


def _rows_backward(gv: torch.Tensor | None, gP: torch.Tensor | None, ps: torch.Tensor, ds: torch.Tensor,
                   dps: torch.Tensor, D: torch.Tensor, bad: torch.Tensor) -> torch.Tensor:
    """dL/dx (B, n) from dL/dvalues and dL/dP (either may be None)."""
    B, dev, dt = ps.shape[0], ps.device, _np_dtype(ps)
    tabs = _tables(dev)
    stream = _stream(dev)
    gx = ps.new_empty((B, _N))
    has_gv, has_gP = gv is not None, gP is not None
    gv = gv.to(ps.dtype).contiguous() if has_gv else ps.new_empty((1, 1))
    if has_gP:
        gP = gP.to(ps.dtype).contiguous()
        G, gpp = torch.empty_like(gP), ps.new_empty((B, _SIZE))
        _launch("bwd_P", dt, B, stream, (tabs["ca"], tabs["cb"], tabs["offs"], tabs["clo"], tabs["chi"],
                                         tabs["doff"], ps, D, gP, G, gpp))
    else:
        gpp = ps.new_empty((1, 1))
    _launch("bwd_vals", dt, B, stream, (tabs["ca"], tabs["cb"], tabs["offs"], tabs["outs"], gv, has_gv, ps, ds, dps,
                                        gpp, has_gP, bad, gx, _scratch(gx, 0, "vals")))
    return gx


def _column_forward(x: torch.Tensor, y: torch.Tensor, save: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                           torch.Tensor, torch.Tensor, torch.Tensor]:
    """P[:, y] (B, k) and what backward needs: ps, ds, dps, dus (B, size; 1 x
    1 when not save), bad (B,) int32."""
    B, dev, dt = x.shape[0], x.device, _np_dtype(x)
    tabs = _tables(dev)
    col = x.new_empty((B, _K))
    shape = (B, _SIZE) if save else (1, 1)
    ps, ds, dps, dus = (x.new_empty(shape) for _ in range(4))
    bad = torch.empty((B,), dtype=torch.int32, device=dev)
    _launch("fwd_col", dt, B, _stream(dev), (x, y, tabs["ca"], tabs["cb"], tabs["offs"], tabs["outs"], col, ps, ds,
                                             dps, dus, bad, save, _scratch(x, 0, "col"), _scratch(x, 1, "col")))
    return col, ps, ds, dps, dus, bad


def _column_backward(gcol: torch.Tensor, ps: torch.Tensor, ds: torch.Tensor, dps: torch.Tensor, dus: torch.Tensor,
                     bad: torch.Tensor) -> torch.Tensor:
    B, dev, dt = ps.shape[0], ps.device, _np_dtype(ps)
    tabs = _tables(dev)
    gx = ps.new_empty((B, _N))
    _launch("bwd_col", dt, B, _stream(dev), (tabs["ca"], tabs["cb"], tabs["offs"], tabs["outs"],
                                             gcol.to(ps.dtype).contiguous(), ps, ds, dps, dus, bad, gx,
                                             _scratch(gx, 0, "col"), _scratch(gx, 1, "col")))
    return gx


def _rows_fake(x, save):
    B = x.shape[0]
    S = (B, _SIZE) if save else (1, 1)
    return (x.new_empty((B, _K)), x.new_empty((B, _K, _N)), x.new_empty((B, _SIZE)), x.new_empty(S),
            x.new_empty(S), x.new_empty((B, max(_NNZ, 1)) if save else (1, 1)),
            x.new_empty((B,), dtype=torch.int32))


def _rows_backward_fake(gv, gP, ps, ds, dps, D, bad):
    return ps.new_empty((ps.shape[0], _N))


def _column_fake(x, y, save):
    B = x.shape[0]
    S = (B, _SIZE) if save else (1, 1)
    return (x.new_empty((B, _K)),) + tuple(x.new_empty(S) for _ in range(4)) + (x.new_empty((B,), dtype=torch.int32),)


def _column_backward_fake(gcol, ps, ds, dps, dus, bad):
    return ps.new_empty((ps.shape[0], _N))


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
