"""The launch self-check, input preparation and ``Layer`` of a generated
``cuda`` module (the ops are :mod:`.ops`, the launcher :mod:`.launch`,
:mod:`.driver`, :mod:`.packing` and :mod:`.batch`).

* **Checks** are the Layer base's (:mod:`netgen.codegen.runtime.layer`:
  torch.func refused, x's type, shape and dtype, the steepness rule) and
  :mod:`netgen.codegen.runtime.common`'s label check, where they cost no
  host synchronisation; NaN/inf values, an overflowing
  ``steepness * (max - min)`` and y out of range are found on the GPU and
  give NaN rows instead of a ValueError.
* **Steepness**: the base's value; a number becomes a 1-element tensor on
  the device, cached per (device, dtype), so a call uploads nothing while
  the value stays the same.
* **Self-check.** The cuda.core launch packing never ran on a GPU when it
  was written, so on first use per (device, dtype) the layer runs one small
  fixed case (rows with P, values only, column; forward and backward)
  through both launch paths and compares; a mismatch is a RuntimeError
  naming ``NETGEN_CUDA_LAUNCH=numba``. Once per process, logged on the
  ``netgen`` logger; ``NETGEN_CUDA_SELFCHECK=0`` skips it.

Real code, copied into generated modules by source extraction
(:data:`STATE`, :data:`PARTS`).
"""

from __future__ import annotations

import os
import time

import torch

from ..runtime.common import check_labels, hard_network
from ..runtime.layer import LayerBase
from ..runtime.tables import _A, _B, _K, _N, _OFFSETS, _OUTS
from ..runtime.lanes import _back_lanes, _fwd_lanes, _lane_input
from .cubin import cubin_ready
from .lane_ops import _lane_kernels, _lane_kernels_for
from .driver import LOG, SIMULATED, _require_cuda
from .launch import _PATH, VIA_NUMBA
from .packing import _np_dtype
from .ops import _call_column, _call_rows, _column_backward, _column_forward, _rows_backward, _rows_forward

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("RELAXATION",)
RELAXATION: dict = {"steepness": 1.0, "distribution": "logistic"}

# ---------------------------------------------------------------- state (copied)
_SELF_CHECKED: set = set()  # (device, dtype) pairs the self-check has run (or was skipped) for
_STEEP: dict = {}  # (device, dtype) -> (value, 1-element tensor): the last steepness used
_LANE_INDEX: dict = {}  # device -> the wire and output tensors of the lane sweeps

#: the module-level statements a generated module copies
STATE = ("_SELF_CHECKED", "_STEEP", "_LANE_INDEX")


# ---------------------------------------------------------------- copied parts
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
        col, ccs, cbad = _column_forward(x, y, s, True)
        gxc, gsc = _column_backward(gc, s, ccs, cbad, True)
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
    key = (x.device, x.dtype)
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
    t0 = time.perf_counter()
    self_check(x.device, x.dtype)
    _SELF_CHECKED.add(key)
    LOG.debug("netgen cuda: self-check on %s (%s) in %.1f ms", x.device, x.dtype, 1e3 * (time.perf_counter() - t0))


def _prepare(x):
    """x (checked by the Layer base) on a CUDA device, as (B, n),
    contiguous, in the compute dtype (float32 for half types), its batch
    shape and dtype; x itself where it already is all that."""
    _require_cuda(x)
    dt = x.dtype
    if x.dim() == 2 and (dt is torch.float32 or dt is torch.float64) and x.is_contiguous():
        x2 = x
    else:
        x2 = x.reshape(-1, _N).to(dt if dt in (torch.float32, torch.float64) else torch.float32).contiguous()
    _first_use(x2)
    return x2, x.shape[:-1], dt


def _result(t, lead, dt, tail):
    """A (B, *tail) result as the caller's batch shape ``lead`` and dtype (``t`` itself where it is that)."""
    if len(lead) != 1 or t.dtype != dt:
        t = t.reshape(*lead, *tail).to(dt)
    return t


def _steepness(s, like):
    """The steepness ``s`` (the Layer base's value: a float or a 0-d tensor)
    as a 1-element tensor of like's dtype on its device. A CUDA tensor is
    not read (no synchronisation): the kernels give NaN rows for a
    steepness that is not finite and > 0. A number's tensor is cached per
    (device, dtype)."""
    if isinstance(s, torch.Tensor):
        return s.reshape(1).to(device=like.device, dtype=like.dtype)
    if torch.compiler.is_compiling():
        return torch.full((1,), s, dtype=like.dtype, device=like.device)
    key = (like.device, like.dtype)
    hit = _STEEP.get(key)
    if hit is None or hit[0] != s:
        hit = _STEEP[key] = (s, torch.full((1,), s, dtype=like.dtype, device=like.device))
    return hit[1]


def _lanes_prepare(x, s):
    """For the lane sweeps (torch ops on the device): x (checked by the
    Layer base) wire-major (n, B) in the compute dtype (float32 for half
    types), the mask of rows with a NaN/inf value (B,) (NaN rows, no host
    synchronisation) and the steepness in the compute dtype."""
    _require_cuda(x)
    cdtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    xt = x.to(cdtype).reshape(-1, _N).t().contiguous()
    if isinstance(s, torch.Tensor):
        s = s.to(device=xt.device, dtype=cdtype)
    return xt, ~torch.isfinite(xt).all(0), s


def _lane_index(device):
    """The wires (a, b) and the output wires as int64 tensors on ``device`` (uploaded once)."""
    got = _LANE_INDEX.get(device)
    if got is None:
        got = _LANE_INDEX[device] = (_A.to(device), _B.to(device), _OUTS.to(device))
    return got


def _lane_call(x, T, s, back):
    """W P (``back``: T = W, lanes over the k ranks, result (..., m, n)) or
    P V (T = V, lanes over the n wires, result (..., k, d)) of the rows of
    x in the lane kernels (lane_ops.py)."""
    x2, lead, dt = _prepare(x)
    if back:
        lanes = _lane_input(T, "W", lead, _K, -1, x2).permute(2, 1, 0)  # (B, m, k)
    else:
        lanes = _lane_input(T, "V", lead, _N, -2, x2).permute(2, 0, 1)  # (B, n, d)
    out = _lane_kernels(x2, _steepness(s, x2), lanes, back)
    return out.reshape(tuple(lead) + tuple(out.shape[1:])).to(dt)


class Layer(LayerBase):
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
        super().__init__(RELAXATION["steepness"] if steepness is None else steepness)

    def _default_steepness(self):
        return RELAXATION["steepness"]

    def _forward(self, x, s):
        x2, lead, dt = _prepare(x)
        v, P = _call_rows(x2, _steepness(s, x2), True)
        return _result(v, lead, dt, (_K,)), _result(P, lead, dt, (_K, _N))

    def _values(self, x, s):
        # the fast path when P is not needed: no P sweep, n floats of shared memory per block
        x2, lead, dt = _prepare(x)
        return _result(_call_rows(x2, _steepness(s, x2), False)[0], lead, dt, (_K,))

    def _column(self, x, y, s):
        # a y outside 0..n-1 gives a NaN row (checked on the GPU)
        x2, lead, dt = _prepare(x)
        y, _ = check_labels(y, lead, _N, x.device, None)
        return _result(_call_column(x2, y.contiguous(), _steepness(s, x2)), lead, dt, (_K,))

    def _back(self, x, W, s):
        # W P without P: the m lanes swept back, in the lane kernels (lane_ops.py) for few lanes, else by
        # torch ops on the device; O(size) floats per lane and row either way
        m = W.shape[-2] if isinstance(W, torch.Tensor) and W.dim() >= 2 else 0
        if _lane_kernels_for(x, m):
            return _lane_call(x, W, s, True)
        xt, bad, s = _lanes_prepare(x, s)
        Wt = _lane_input(W, "W", x.shape[:-1], _K, -1, xt)
        R = _back_lanes(xt, s, bad, *_lane_index(xt.device), Wt)
        return R.permute(2, 1, 0).reshape(tuple(x.shape[:-1]) + (Wt.shape[1], _N)).to(x.dtype)

    def _fwd(self, x, V, s):
        # P V without P: the d lanes swept forward (lane kernels for few lanes, else torch ops)
        d = V.shape[-1] if isinstance(V, torch.Tensor) and V.dim() >= 2 else 0
        if _lane_kernels_for(x, d):
            return _lane_call(x, V, s, False)
        xt, bad, s = _lanes_prepare(x, s)
        Vt = _lane_input(V, "V", x.shape[:-1], _N, -2, xt)
        Y = _fwd_lanes(xt, s, bad, *_lane_index(xt.device), Vt)
        return Y.permute(2, 0, 1).reshape(tuple(x.shape[:-1]) + (_K, Vt.shape[1])).to(x.dtype)

    def _hard(self, x):
        # torch ops on a copy of x: runs on any device
        return hard_network(x, _N, _A, _B, _OFFSETS, _OUTS)

    def extra_repr(self):
        return f"n={_N}, k={_K}, target=cuda, {RELAXATION['distribution']}"


#: what a generated module copies from this file, in order
PARTS = (self_check, _first_use, _prepare, _result, _steepness, _lanes_prepare, _lane_index, _lane_call, Layer)
