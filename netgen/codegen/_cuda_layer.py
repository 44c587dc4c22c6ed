"""The ops, the launch self-check and the ``Layer`` of a generated ``cuda``
module, as a text template pasted after :mod:`netgen.codegen._cuda_runtime`'s.

* **Ops.** Forward and backward of the rows and the column are
  ``torch.library`` custom ops with fake implementations and registered
  autograd (``torch.compile(fullgraph=True)`` sees one op each; CUDA graphs
  can capture them). They take the steepness as a 1-element device tensor
  (a kernel argument: changing it never recompiles, reading it never
  synchronises) and return dL/ds when it requires grad. Once
  differentiable: differentiating a gradient again raises RuntimeError;
  ``torch.func`` transforms raise ValueError.
* **Self-check.** The cuda.core launch packing never ran on a GPU when it
  was written, so on first use per (device, dtype) the layer runs one small
  fixed case (rows with P, values only, column; forward and backward)
  through both launch paths and compares; a mismatch is a RuntimeError
  naming ``NETGEN_CUDA_LAUNCH=numba``. Once per process, logged on the
  ``netgen`` logger; ``NETGEN_CUDA_SELFCHECK=0`` skips it.

Placeholders: ``@@OPS@@`` (the op namespace, a literal).
"""

LAYER = '''
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
    if not SIMULATED and os.environ.get("NETGEN_CUDA_SELFCHECK", "") == "" and cubin_ready(x.device, _np_dtype(x)):
        _SELF_CHECKED.add(key)  # its reference run would compile with numba-cuda; the loader checked the ABI
        LOG.info("netgen cuda self-check skipped on %s (%s): kernels from cubins", x.device, x.dtype)
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
        ops on a copy of ``x``; runs on any device)."""
        return hard_network(x, _N, _HARD_A, _HARD_B, _OFFSETS, _HARD_OUTS)

    def extra_repr(self):
        return f"n={_N}, k={_K}, target=cuda, {RELAXATION['distribution']}"
'''
