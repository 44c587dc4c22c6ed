"""Host side of the generated numba module (``--target numba``), pasted
after the kernels: the saved-state pool, the numpy-level wrappers
(``rows_numpy``, ``rows_backward_numpy``, ``column_numpy``,
``column_backward_numpy``), the autograd Functions and ``Layer``.

* Steepness: ``Layer(steepness=None)`` (None: ``RELAXATION["steepness"]``);
  ``layer.steepness`` is read at every call and passed to the kernels as a
  run-time argument (no recompilation). A tensor steepness that requires
  grad gets dL/ds (the kernels sum dL/dp * dp/ds over comparators).
* Threads: kernels run with ``torch.get_num_threads()`` threads (or the
  layer's ``threads``), capped by numba's maximum, and on one thread below
  ``_SERIAL_WORK`` updates. Under numba's ``workqueue`` threading layer
  (not reentrant: concurrent calls abort the process) calls are serialised
  by a lock.
* Refusals: second-order gradients (RuntimeError when the gradient is
  differentiated), ``torch.func`` transforms (ValueError), steepness x input
  range overflowing the compute dtype (ValueError naming both).
* No layer writes to its inputs: kernels only read ``x``; ``hard`` works on
  a copy.
"""

RUNTIME = r'''# ------------------------------------------------------------ host wrappers
_KERNELS = {
    np.dtype(np.float32): (_fwd_vals_f32, _fwd_P_f32, _bwd_rows_f32, _fwd_col_f32, _bwd_col_f32),
    np.dtype(np.float64): (_fwd_vals_f64, _fwd_P_f64, _bwd_rows_f64, _fwd_col_f64, _bwd_col_f64),
}
# the same kernels compiled without parallel=True (on first use), for calls
# below _SERIAL_WORK: they never enter numba's thread pool
_KERNELS_SERIAL = {
    np.dtype(np.float32): (_fwd_vals_f32_s, _fwd_P_f32_s, _bwd_rows_f32_s, _fwd_col_f32_s, _bwd_col_f32_s),
    np.dtype(np.float64): (_fwd_vals_f64_s, _fwd_P_f64_s, _bwd_rows_f64_s, _fwd_col_f64_s, _bwd_col_f64_s),
}
_NNZ_PER_ROW = _NNZ + _SIZE  # updates of one batch row through the back-sweep and the values


# ------------------------------------------------ reused saved-state buffers
# What a forward saves for backward comes from a small pool and goes back to
# it when autograd frees the graph (_Saved.__del__), so a training loop does
# not fault in fresh pages every step. At most 2 free arrays per shape,
# _POOL_SHAPES shapes (the oldest dropped); free_buffers() empties it.
_POOL = {}
_POOL_SHAPES = 8
_POOL_LOCK = threading.Lock()


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
            free = _POOL.setdefault(key, [])
            if len(free) < 2:
                free.append(a)


def free_buffers():
    """Drop the pooled saved-state buffers (memory goes back to the system)."""
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


# ------------------------------------------------------------------ threads
# numba's workqueue threading layer is not reentrant: two Python threads
# launching parallel kernels at once abort the process. Under it (or before
# numba has picked a layer) kernel calls take this lock.
_RUN_LOCK = threading.RLock()


def _needs_lock():
    if not _PARALLEL:
        return False
    try:
        return numba.threading_layer() == "workqueue"
    except ValueError:  # no parallel kernel has run yet: the layer is not chosen
        return True


class _Threads:
    """Context: numba's thread count for this thread's kernel calls
    (``threads`` or torch.get_num_threads(), capped by numba's maximum; 1
    when ``work`` is below _SERIAL_WORK), and the workqueue lock."""

    def __init__(self, threads, work):
        t = torch.get_num_threads() if threads is None else threads
        t = max(1, min(int(t), numba.config.NUMBA_NUM_THREADS))
        self.n = 1 if work < _SERIAL_WORK else t

    def __enter__(self):
        self.serial = self.n == 1 or not _PARALLEL
        self.kernels = _KERNELS_SERIAL if self.serial else _KERNELS
        self.lock = not self.serial and _needs_lock()
        if self.lock:
            _RUN_LOCK.acquire()
        if not self.serial:
            self.old = numba.get_num_threads()
            numba.set_num_threads(self.n)
        return self

    def workers(self):
        return 1 if self.serial else numba.get_num_threads()

    def __exit__(self, *exc):
        if not self.serial:
            numba.set_num_threads(self.old)
        if self.lock:
            _RUN_LOCK.release()


# ------------------------------------------------------------- numpy level
def rows_numpy(x, steepness=None, save=True, sgrad=False, threads=None, mode=None, group=None):
    """Forward kernels on a (B, n) float32/float64 C-contiguous array.
    Returns ``values, P, saved`` (``saved`` feeds :func:`rows_backward_numpy`;
    None without ``save``). ``sgrad``: also save what dL/dsteepness needs.
    ``mode`` / ``group`` override the module's _MODE / _GROUP."""
    B = x.shape[0]
    dt = x.dtype
    ft = dt.type
    stp = ft(RELAXATION["steepness"] if steepness is None else steepness)
    mode = _MODE if mode is None else mode
    grp = int(_GROUP if group is None else group)
    nblk = (B + _W - 1) // _W
    values = np.empty((B, _K), dtype=dt)
    P = np.empty((B, _K, _N), dtype=dt)
    ps = _take((nblk, _SIZE, _W), dt)
    save = bool(save or sgrad)
    keep_D = save and mode == "save"
    # without save / sgrad / D: one scratch slot per block, overwritten
    sv = _take((nblk, _SIZE, 2, _W), dt) if save else np.empty((nblk, 1, 2, _W), dtype=dt)
    ss = _take((nblk, _SIZE, 2, _W), dt) if sgrad else np.empty((nblk, 1, 2, _W), dtype=dt)
    D = _take((nblk, _NNZ, _W), dt) if keep_D else np.empty((nblk, 0, _W), dtype=dt)
    with _Threads(threads, B * _NNZ_PER_ROW) as th:
        kv, kP = th.kernels[dt][:2]
        kv(x, stp, _CA, _CB, _OUTPUTS, values, ps, sv, ss, save, sgrad)
        kP(_CA, _CB, _CLO, _CHI, _DOFF, _OUTPUTS, ps, P, D, keep_D, grp)
    if not save:
        _give(ps)
        return values, P, None
    arrays = (ps, sv) + ((ss,) if sgrad else ()) + ((D,) if keep_D else ())
    return values, P, _Saved(B, arrays, ps=ps, sv=sv, ss=ss if sgrad else sv, D=D, keep_D=keep_D,
                             sgrad=sgrad, grp=grp)


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
    with _Threads(threads, B * (_NNZ_PER_ROW if has_gP else _SIZE)) as th:
        nt = th.workers()
        gxt = np.zeros((nt, nblk, _N, _W), dtype=dt)
        gst = np.zeros((nt, nblk, _W), dtype=dt)
        th.kernels[dt][2](gv, gP, has_gP, _CA, _CB, _CLO, _CHI, _DOFF, _OUTPUTS, ps, saved.sv, saved.ss,
                        saved.sgrad, saved.D, saved.keep_D, saved.grp, gxt, gst)
    gx = gxt.sum(axis=0) if nt > 1 else gxt[0]
    gx = np.ascontiguousarray(gx.transpose(0, 2, 1).reshape(nblk * _W, _N)[:B])
    gs = float(gst.sum(axis=0).reshape(-1)[:B].sum(dtype=np.float64)) if saved.sgrad else 0.0
    return gx, gs


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
    with _Threads(threads, 2 * B * _SIZE) as th:
        th.kernels[dt][3](x, y, stp, _CA, _CB, _OUTPUTS, col, cs, css, save, sgrad)
    if not save:
        return col, None
    arrays = (cs, css) if sgrad else (cs,)
    return col, _Saved(B, arrays, cs=cs, css=css if sgrad else cs, sgrad=sgrad)


def column_backward_numpy(saved, gcol, threads=None):
    """Adjoint of :func:`column_numpy`: (gradient w.r.t. x, dL/ds)."""
    cs = saved.cs
    B = gcol.shape[0]
    gx = np.empty((B, _N), dtype=cs.dtype)
    gsr = np.zeros(B, dtype=cs.dtype)
    with _Threads(threads, 2 * B * _SIZE) as th:
        th.kernels[cs.dtype][4](gcol, _CA, _CB, _OUTPUTS, cs, saved.css, saved.sgrad, gx, gsr)
    return gx, (float(gsr.sum(dtype=np.float64)) if saved.sgrad else 0.0)


# ---------------------------------------------------------------- autograd
_TORCH = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}
def _np(t, dtype):
    # read-only use: may share memory with the caller's tensor (kernels never write to it)
    return np.ascontiguousarray(t.detach().to(dtype).numpy())


def _sgrad(s, dtype):
    return torch.tensor(s, dtype=dtype)


class _Rows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s_t, stp, threads):
        ctx.set_materialize_grads(False)
        sgrad = bool(ctx.needs_input_grad[1])
        save = bool(ctx.needs_input_grad[0]) or sgrad
        values, P, saved = rows_numpy(_np(x, x.dtype), stp, save, sgrad, threads)
        ctx.saved = saved
        ctx.threads = threads
        ctx.s_dtype = None if s_t is None else s_t.dtype
        ctx.save_for_backward(x, s_t)  # what a second derivative would be taken with respect to
        return torch.from_numpy(values), torch.from_numpy(P)

    @staticmethod
    def backward(ctx, gv, gP):
        if gv is None and gP is None:
            return None, None, None, None
        saved = ctx.saved
        B = saved.B
        dt = saved.ps.dtype
        gvn = np.zeros((B, _K), dtype=dt) if gv is None else _np(gv, _TORCH[dt])
        gPn = None if gP is None else _np(gP, _TORCH[dt])
        gx, gs = rows_backward_numpy(saved, gvn, gPn, ctx.threads)
        gxt = torch.from_numpy(gx) if ctx.needs_input_grad[0] else None
        gst = _sgrad(gs, ctx.s_dtype) if ctx.needs_input_grad[1] else None
        gxt, gst = refuse_second_order((gxt, gst), ctx.saved_tensors)  # create_graph=True: no silent term
        return gxt, gst, None, None


class _Column(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s_t, y, stp, threads):
        ctx.set_materialize_grads(False)
        sgrad = bool(ctx.needs_input_grad[1])
        save = bool(ctx.needs_input_grad[0]) or sgrad
        col, saved = column_numpy(_np(x, x.dtype), y, stp, save, sgrad, threads)
        ctx.saved = saved
        ctx.threads = threads
        ctx.s_dtype = None if s_t is None else s_t.dtype
        ctx.save_for_backward(x, s_t)  # what a second derivative would be taken with respect to
        return torch.from_numpy(col)

    @staticmethod
    def backward(ctx, gcol):
        if gcol is None:
            return None, None, None, None, None
        dt = ctx.saved.cs.dtype
        gx, gs = column_backward_numpy(ctx.saved, _np(gcol, _TORCH[dt]), ctx.threads)
        gxt = torch.from_numpy(gx) if ctx.needs_input_grad[0] else None
        gst = _sgrad(gs, ctx.s_dtype) if ctx.needs_input_grad[1] else None
        gxt, gst = refuse_second_order((gxt, gst), ctx.saved_tensors)
        return gxt, gst, None, None, None


# ------------------------------------------------------------------ checks
def _prepare(x, steepness):
    """Checks (the shared runtime's: transforms, shape and dtype, steepness,
    NaN/inf and overflow) and x as (B, n) in the compute dtype, with the
    steepness as (float, tensor or None)."""
    refuse_transforms()
    check_input(x, _N)
    if x.device.type != "cpu":
        raise ValueError(f"the numba target runs on CPU tensors; got a tensor on {x.device} (use the cuda target)")
    s = steepness_value(steepness)
    stp = float(s.detach()) if isinstance(s, torch.Tensor) else s
    # the steepness as a tensor only where its gradient is asked for
    learn = isinstance(s, torch.Tensor) and s.dtype.is_floating_point and s.requires_grad and torch.is_grad_enabled()
    cdt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    x2 = x.reshape(-1, _N).to(cdt)
    check_values(x2.t(), stp)
    return x2, x.shape[:-1], x.dtype, stp, s if learn else None


def _check_threads(threads):
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be None or an integer >= 1, got {threads!r}")
    return int(threads)


class Layer(torch.nn.Module):
    """Relaxed top-k / sorting layer for the network in ``NETWORK``.

    ``steepness`` (None: ``RELAXATION["steepness"]``) is read at every call:
    a Python number, numpy scalar, 0-d tensor or ``nn.Parameter`` (then it
    gets a gradient), finite and > 0. ``threads`` (None: follow
    ``torch.get_num_threads()``) caps the kernels' threads."""

    n = _N
    k = _K

    def __init__(self, steepness=None, threads=None):
        super().__init__()
        self.steepness = RELAXATION["steepness"] if steepness is None else steepness
        self.threads = threads

    def __setattr__(self, name, value):
        if name == "steepness":
            steepness_value(value)
            if not isinstance(value, torch.nn.Parameter):
                self._parameters.pop("steepness", None)
                object.__setattr__(self, name, value)
                return
            self.__dict__.pop("steepness", None)
        elif name == "threads":
            value = _check_threads(value)
        super().__setattr__(name, value)

    def forward(self, x):
        x2, lead, dt, stp, s_t = _prepare(x, self.steepness)
        values, P = _Rows.apply(x2, s_t, stp, self.threads)
        return values.reshape(*lead, _K).to(dt), P.reshape(*lead, _K, _N).to(dt)

    def column(self, x, y):
        x2, lead, dt, stp, s_t = _prepare(x, self.steepness)
        y = torch.as_tensor(y)
        if y.dtype.is_floating_point or y.dtype == torch.bool or y.is_complex():
            raise ValueError(f"y must be an integer tensor, got {y.dtype}")
        if tuple(y.shape) != tuple(lead):
            raise ValueError(f"y must have shape {tuple(lead)}, got {tuple(y.shape)}")
        yn = np.ascontiguousarray(y.reshape(-1).cpu().numpy().astype(np.int64))
        if yn.size and (yn.min() < 0 or yn.max() >= _N):
            raise ValueError(f"y must lie in 0..{_N - 1}")
        col = _Column.apply(x2, s_t, yn, stp, self.threads)
        return col.reshape(*lead, _K).to(dt)

    def hard(self, x):
        """The exact network: ``(values, indices)`` of shapes (..., k) (on a copy of ``x``)."""
        return hard_network(x, _N, _HARD_A, _HARD_B, _OFFSETS, _HARD_OUTS)

    def extra_repr(self):
        return f"n={_N}, k={_K}, target=numba, {RELAXATION['distribution']}, engine={_MODE}/{_GROUP}"
'''
