"""The ``torch`` target: emit a self-contained PyTorch module for a network.

The emitted file needs only torch. It follows the generated-module contract
of docs/design.md section 8 (``NETWORK``, ``RELAXATION``, ``TARGET``, ``Layer``
with ``forward``, ``column`` and ``hard``) and computes exactly the
semantics of :mod:`netgen.relax.reference`, but written out:

* the comparator wires live in index buffers (``a``: max wires, ``b``: min
  wires, one slice per layer); each layer is a handful of vector ops over
  all its comparators at once, in a wire-major layout (wires x batch) so
  every gather and scatter moves contiguous rows;
* the swap probability and its derivative are specialised to the chosen
  distribution and constants;
* ``forward`` and ``column`` are ``torch.autograd.Function`` s with a
  hand-written backward (the adjoint sweeps): the forward saves the per-
  comparator differences, swap probabilities and their slopes, and for P the
  differences of the two back-swept columns, O(k * size) per sample; the
  backward sweeps the P adjoint forwards and the value adjoint backwards.

Index arrays are stored compactly (delta-coded int32, zlib, base64), so a
network with 10^6 comparators emits a few MB and imports in well under a
second; ``NETWORK`` (the interchange dict) is built lazily on first access.
"""

from __future__ import annotations

import json

from .. import __version__
from ..network import Network
from ..relax.distributions import ART_TIE_FLOOR, Relaxation
from .lines import Lines, blob_lines, literal, pack_comparators

__all__ = ["emit"]


def _swap_function(L: Lines, r: Relaxation) -> None:
    """Emit ``_swap(d) -> (p, dp/dd)`` specialised to ``r`` (the same
    formulas, in the same order, as netgen.relax.distributions)."""
    dist = r.distribution
    with L.block("def _swap(d):"):
        L(f'"""p = F(s * phi(d)) and dp/dd for d = x - y ({dist}; see the header)."""')
        L("big = torch.finfo(d.dtype).max")
        L("d = d.clamp(-big, big)")
        if r.uses_art:
            L("ad = d.abs()")
            lam = r.art_lambda
            if r.art_epsilon > 0:
                eps = r.art_epsilon
                L(f"phi = d / (ad + {eps!r}) ** {lam!r}")
                L(f"dphi = ({1.0 - lam!r} * ad + {eps!r}) / (ad + {eps!r}) ** {lam + 1.0!r}")
            else:
                L(f"phi = torch.sign(d) * ad ** {1.0 - lam!r}")
                L(f"dphi = {1.0 - lam!r} * ad.clamp_min({ART_TIE_FLOOR!r}) ** {-lam!r}  # finite at ties")
            L("z = (_S * phi).clamp(-big, big)")
        else:
            L("z = (_S * d).clamp(-big, big)")
        if dist in ("logistic", "logistic_phi"):
            L("p = torch.sigmoid(z)", "f = p * torch.sigmoid(-z)")
        elif dist == "cauchy":
            L("p = 0.5 + torch.atan(z) / math.pi", "f = 1.0 / (math.pi * (1.0 + z * z))")
        elif dist == "reciprocal":
            L("p = 0.5 * (z / (2.0 + z.abs()) + 1.0)", "f = 1.0 / (2.0 + z.abs()) ** 2")
        elif dist == "gaussian":
            L(
                f"p = 0.5 * (1.0 + torch.erf(z * {2.0 ** -0.5!r}))",
                f"f = torch.exp(-0.5 * z * z) * {(2.0 * 3.141592653589793) ** -0.5!r}",
            )
        elif dist == "optimal":
            eps = r.art_epsilon
            L(
                "az = z.abs()",
                f"zt = az.clamp_min(0.25){f' + {eps!r}' if eps else ''}",
                "tail = 1.0 / (16.0 * zt)",
                "p = torch.where(az <= 0.25, z + 0.5, torch.where(z > 0, 1.0 - tail, tail))",
                "f = torch.where(az <= 0.25, torch.ones_like(z), 1.0 / (16.0 * zt ** 2))",
            )
        else:  # pragma: no cover
            raise ValueError(dist)
        L("g = (_S * f * dphi).clamp(-big, big)" if r.uses_art else "g = (_S * f).clamp(-big, big)")
        L("return p, g")


_RUNTIME = '''
def _decode():
    """Comparator wires (a = max, b = min) and output wires from _BLOB."""
    if sys.byteorder != "little":  # pragma: no cover
        raise RuntimeError("this generated module stores little-endian int32 data")
    raw = zlib.decompress(base64.b64decode("".join(_BLOB)))
    t = torch.frombuffer(bytearray(raw), dtype=torch.int32).to(torch.int64)
    a = torch.cumsum(t[:_SIZE], 0)
    b = a + t[_SIZE : 2 * _SIZE]
    return a, b, t[2 * _SIZE :]


_A, _B, _OUTS = _decode()


def __getattr__(name):
    # NETWORK (the interchange dict) is built on first use: cheap imports.
    if name == "NETWORK":
        pairs = torch.stack([_A, _B], 1).tolist()
        net = {
            "format": "netgen-network/1",
            "n": _N,
            "outputs": _OUTS.tolist(),
            "layers": [pairs[s:e] for s, e in zip(_OFFSETS[:-1], _OFFSETS[1:])],
            "construction": json.loads(_CONSTRUCTION),
            "stats": {"depth": _DEPTH, "size": _SIZE},
        }
        globals()["NETWORK"] = net
        return net
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
'''

_SWEEPS = '''
class _TopK(torch.autograd.Function):
    """Soft values and P. Layout is wire-major: x (n, B) -> values (k, B),
    R (n, k, B) with R[c, r, i] = P[i, r, c] (batch innermost: every
    elementwise op is contiguous and vectorised)."""

    @staticmethod
    def forward(ctx, x, bad, a, b, outs):
        ctx.set_materialize_grads(False)
        n, B = x.shape
        train = ctx.needs_input_grad[0]
        v = _zero_rows(x, bad)  # bad rows (NaN/inf input) run on zeros, reported as NaN
        p_all = x.new_empty(_SIZE, B)
        if train:
            d_all = x.new_empty(_SIZE, B)
            g_all = x.new_empty(_SIZE, B)
        # forward sweep of the values: v[a] <- p x + (1-p) y, v[b] <- (1-p) x + p y
        for l in range(_DEPTH):
            s, e = _OFFSETS[l], _OFFSETS[l + 1]
            al, bl = a[s:e], b[s:e]
            xa, xb = v.index_select(0, al), v.index_select(0, bl)
            d = xa - xb
            p, g = _swap(d)
            v.index_copy_(0, al, torch.lerp(xb, xa, p))  # p xa + (1-p) xb
            v.index_copy_(0, bl, torch.lerp(xa, xb, p))  # (1-p) xa + p xb
            p_all[s:e] = p
            if train:
                d_all[s:e] = d
                g_all[s:e] = g
        values = v[outs]
        # back-sweep of the k output rows: R <- R M_l, last layer first
        R = x.new_zeros(n, _K, B)
        R[outs, torch.arange(_K, device=x.device)] = 1
        if train:
            D_all = x.new_empty(_SIZE, _K, B)
        for l in range(_DEPTH - 1, -1, -1):
            s, e = _OFFSETS[l], _OFFSETS[l + 1]
            al, bl = a[s:e], b[s:e]
            Ra, Rb = R.index_select(0, al), R.index_select(0, bl)
            p = p_all[s:e].unsqueeze(1)
            R.index_copy_(0, al, torch.lerp(Rb, Ra, p))
            R.index_copy_(0, bl, torch.lerp(Ra, Rb, p))
            if train:
                torch.sub(Ra, Rb, out=D_all[s:e])
        if train:
            ctx.save_for_backward(bad, a, b, outs, p_all, d_all, g_all, D_all)
        return _nan_rows(values, bad), _nan_rows(R, bad)

    @staticmethod
    def backward(ctx, g_values, g_R):
        bad, a, b, outs, p_all, d_all, g_all, D_all = ctx.saved_tensors
        n, B = _N, p_all.shape[1]
        # dL/dp from P = R_0: G_0 = dL/dR_0, G_l = G_(l-1) M_l (first layer first);
        # dL/dp_l = sum_r (R_l[a] - R_l[b]) (G_(l-1)[a] - G_(l-1)[b])
        gp_all = p_all.new_zeros(_SIZE, B)
        if g_R is not None:
            G = g_R.clone(memory_format=torch.contiguous_format)
            for l in range(_DEPTH):
                s, e = _OFFSETS[l], _OFFSETS[l + 1]
                al, bl = a[s:e], b[s:e]
                Ga, Gb = G.index_select(0, al), G.index_select(0, bl)
                torch.linalg.vecdot(D_all[s:e], Ga - Gb, dim=1, out=gp_all[s:e])
                p = p_all[s:e].unsqueeze(1)
                G.index_copy_(0, al, torch.lerp(Gb, Ga, p))
                G.index_copy_(0, bl, torch.lerp(Ga, Gb, p))
        # adjoint of the value sweep, last layer first
        u = p_all.new_zeros(n, B)
        if g_values is not None:
            u.index_copy_(0, outs, g_values.to(u.dtype))
        for l in range(_DEPTH - 1, -1, -1):
            s, e = _OFFSETS[l], _OFFSETS[l + 1]
            al, bl = a[s:e], b[s:e]
            ua, ub = u.index_select(0, al), u.index_select(0, bl)
            p = p_all[s:e]
            t = (gp_all[s:e] + (ua - ub) * d_all[s:e]) * g_all[s:e]  # dL/dd
            u.index_copy_(0, al, torch.lerp(ub, ua, p).add_(t))
            u.index_copy_(0, bl, torch.lerp(ua, ub, p).sub_(t))
        return _nan_rows(u, bad), None, None, None, None


class _Column(torch.autograd.Function):
    """P[i, :, y_i] by pushing e_y forward with the values. Layout: x (n, B),
    y (B,) -> (k, B). V is (n, 2, B): channel 0 carries the values, 1 e_y."""

    @staticmethod
    def forward(ctx, x, y, bad, a, b, outs):
        n, B = x.shape
        train = ctx.needs_input_grad[0]
        V = torch.stack([x if bad is None else x.masked_fill(bad, 0.0), torch.zeros_like(x)], 1)
        V[y, 1, torch.arange(B, device=x.device)] = 1
        if train:
            p_all = x.new_empty(_SIZE, B)
            d_all = x.new_empty(_SIZE, 2, B)
            g_all = x.new_empty(_SIZE, B)
        for l in range(_DEPTH):
            s, e = _OFFSETS[l], _OFFSETS[l + 1]
            al, bl = a[s:e], b[s:e]
            Va, Vb = V.index_select(0, al), V.index_select(0, bl)
            W = Va - Vb
            p, g = _swap(W[:, 0])
            pp = p.unsqueeze(1)
            V.index_copy_(0, al, torch.lerp(Vb, Va, pp))
            V.index_copy_(0, bl, torch.lerp(Va, Vb, pp))
            if train:
                p_all[s:e] = p
                d_all[s:e] = W
                g_all[s:e] = g
        if train:
            ctx.save_for_backward(bad, a, b, outs, p_all, d_all, g_all)
        return _nan_rows(V[outs, 1], bad)

    @staticmethod
    def backward(ctx, g_col):
        bad, a, b, outs, p_all, d_all, g_all = ctx.saved_tensors
        n, B = _N, p_all.shape[1]
        U = p_all.new_zeros(n, 2, B)
        U[outs, 1] = g_col.to(U.dtype)
        for l in range(_DEPTH - 1, -1, -1):
            s, e = _OFFSETS[l], _OFFSETS[l + 1]
            al, bl = a[s:e], b[s:e]
            Ua, Ub = U.index_select(0, al), U.index_select(0, bl)
            t = torch.linalg.vecdot(Ua - Ub, d_all[s:e], dim=1) * g_all[s:e]  # dL/dd
            p = p_all[s:e].unsqueeze(1)
            na, nb = torch.lerp(Ub, Ua, p), torch.lerp(Ua, Ub, p)
            na[:, 0] += t
            nb[:, 0] -= t
            U.index_copy_(0, al, na)
            U.index_copy_(0, bl, nb)
        return _nan_rows(U[:, 0], bad), None, None, None, None, None


def _zero_rows(x, bad):
    """A copy of x (n, B) with the bad batch rows zeroed."""
    return x.clone() if bad is None else x.masked_fill(bad, 0.0)


def _nan_rows(t, bad):
    """t (..., B) with the bad batch rows set to NaN, in place."""
    return t if bad is None else t.masked_fill_(bad, math.nan)


def _checked():
    """Whether value checks may synchronise: eager CPU tensors only. On a GPU,
    under torch.compile or while capturing a CUDA graph, bad rows are
    reported as NaN instead (see the module docstring)."""
    return not torch.compiler.is_compiling()


def _prepare(x):
    """Check x (..., n); return it wire-major (n, B) in the compute dtype and
    the mask of rows with a NaN/inf value (B,), or None where the values were
    checked (eager CPU: a bad value raises)."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() < 1 or x.shape[-1] != _N:
        raise ValueError(f"input must have shape (..., {_N}), got {tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise ValueError(f"input must be floating point, got {x.dtype}")
    cdtype = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    xt = x.to(cdtype).reshape(-1, _N).t().contiguous()
    bad = ~torch.isfinite(xt).all(0)
    if xt.device.type == "cpu" and _checked():
        if bool(bad.any()):
            what = "NaN" if bool(torch.isnan(xt).any()) else "inf"
            raise ValueError(f"input contains {what} values; relaxed networks need finite inputs")
        bad = None  # checked: no row to mask
    return xt, bad


class Layer(torch.nn.Module):
    """The relaxed network as a layer (see the module docstring)."""

    n = _N
    k = _K

    def __init__(self):
        super().__init__()
        self.register_buffer("a", _A.clone(), persistent=False)
        self.register_buffer("b", _B.clone(), persistent=False)
        self.register_buffer("outs", _OUTS.clone(), persistent=False)

    def _index(self, device):
        if self.a.device == device:
            return self.a, self.b, self.outs
        return self.a.to(device), self.b.to(device), self.outs.to(device)

    def forward(self, x):
        """x (..., n) -> soft values (..., k) (rank 0 = largest) and
        P (..., k, n) with values = P @ x."""
        xt, bad = _prepare(x)
        batch = tuple(x.shape[:-1])
        values, R = _TopK.apply(xt, bad, *self._index(xt.device))
        values = values.t().reshape(batch + (_K,)).to(x.dtype)
        P = R.permute(2, 1, 0).reshape(batch + (_K, _N)).to(x.dtype)
        return values, P

    def column(self, x, y):
        """P[..., :, y] of shape (..., k) for integer class indices y (...)."""
        xt, bad = _prepare(x)
        batch = tuple(x.shape[:-1])
        y = torch.as_tensor(y, device=xt.device)
        if y.dtype.is_floating_point or y.dtype == torch.bool or y.is_complex():
            raise ValueError(f"y must hold integer indices, got {y.dtype}")
        if tuple(y.shape) != batch:
            raise ValueError(f"y must have shape {batch} (the batch shape of x), got {tuple(y.shape)}")
        y = y.reshape(-1).long()
        outside = (y < 0) | (y >= _N)
        if bad is None:  # values checked (eager CPU): check y too
            if bool(outside.any()):
                raise ValueError(f"y must lie in 0..{_N - 1}")
        else:
            bad = bad | outside
        col = _Column.apply(xt, y.clamp(0, _N - 1), bad, *self._index(xt.device))
        return col.t().reshape(batch + (_K,)).to(x.dtype)

    @torch.no_grad()
    def hard(self, x):
        """The exact network: values (..., k) and the input indices they came
        from (int64); a comparator swaps only on a strict inequality."""
        if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != _N:
            raise ValueError(f"input must be a tensor of shape (..., {_N})")
        if x.dtype.is_floating_point and bool(torch.isnan(x).any()):
            raise ValueError("input contains NaN values; the exact network needs ordered inputs")
        batch = tuple(x.shape[:-1])
        v = x.reshape(-1, _N).t().contiguous()
        a, b, outs = self._index(v.device)
        idx = torch.arange(_N, device=v.device).unsqueeze(1).expand(v.shape).contiguous()
        for l in range(_DEPTH):
            s, e = _OFFSETS[l], _OFFSETS[l + 1]
            al, bl = a[s:e], b[s:e]
            va, vb = v.index_select(0, al), v.index_select(0, bl)
            ia, ib = idx.index_select(0, al), idx.index_select(0, bl)
            swap = vb > va
            v.index_copy_(0, al, torch.where(swap, vb, va))
            v.index_copy_(0, bl, torch.where(swap, va, vb))
            idx.index_copy_(0, al, torch.where(swap, ib, ia))
            idx.index_copy_(0, bl, torch.where(swap, ia, ib))
        return v[outs].t().reshape(batch + (_K,)), idx[outs].t().reshape(batch + (_K,))

    def extra_repr(self):
        return f"n={_N}, k={_K}, depth={_DEPTH}, size={_SIZE}, relaxation={RELAXATION}"
'''


def emit(net: Network, r: Relaxation) -> str:
    """Source of a torch module for ``net`` relaxed by ``r`` (byte-stable)."""
    if not isinstance(net, Network):
        raise ValueError(f"expected a Network, got {type(net).__name__}")
    if not isinstance(r, Relaxation):
        raise ValueError(f"expected a Relaxation, got {type(r).__name__}")
    kind = net.construction.get("kind", "custom")
    rd = r.to_dict()
    L = Lines()
    L.comment(
        f"Generated by netgen {__version__} (netgen.codegen.torch_target, emitted line by "
        "line with netgen.codegen.lines). Do not edit: rebuild with `netgen build --target torch`."
    )
    L.comment(
        f"Network: kind={kind} n={net.n} k={net.k} depth={net.depth} size={net.size} key={net.key()}"
    )
    L.comment("Relaxation: " + " ".join(f"{k}={v!r}" for k, v in rd.items()))
    L.comment("Needs only torch. Same file for the same inputs (byte-stable).")
    L('"""Relaxed comparator network as a PyTorch layer (generated by netgen).')
    L("")
    L("    from <this module> import Layer")
    L("    layer = Layer()                # constructible without arguments")
    L("    values, P = layer(x)           # x (..., n) -> (..., k), (..., k, n); values = P @ x")
    L("    col = layer.column(x, y)       # P[..., :, y] -> (..., k), O(size) work")
    L("    vals, idx = layer.hard(x)      # the exact network (values, input indices)")
    L("")
    L("Rank 0 is the largest value. A comparator (a, b) with x = v[a], y = v[b] sets")
    L("p = F(s * phi(x - y)), v[a] = p x + (1-p) y, v[b] = (1-p) x + p y.")
    L("float32/float64 are computed in their own dtype; float16/bfloat16 in float32,")
    L("returned in the input dtype. NaN or inf inputs (and y out of range) raise")
    L("ValueError on CPU in eager mode; on a GPU or under torch.compile, where a check")
    L("would synchronise the host, those rows come out NaN (values, P, column, gradient).")
    L("Backward passes are written out (autograd.Function), not traced.")
    L('"""')
    L.blank()
    L("import base64", "import json", "import math", "import sys", "import zlib", "", "import torch")
    L.blank(2)
    L('TARGET = "torch"')
    L(f"RELAXATION = {literal(rd)}")
    L.blank()
    L(f"_N = {net.n}", f"_K = {net.k}", f"_DEPTH = {net.depth}", f"_SIZE = {net.size}")
    L(f"_S = {r.steepness!r}  # steepness")
    L("# layer l = comparators _OFFSETS[l]:_OFFSETS[l + 1]")
    L(f"_OFFSETS = {literal(tuple(int(o) for o in net.layer_offsets))}")
    L(f"_CONSTRUCTION = {literal(json.dumps(net.construction, sort_keys=True))}")
    L("# int32 little-endian: deltas of the max wires a, then b - a, then the outputs; zlib, base64")
    with L.block("_BLOB = ("):
        L(*blob_lines(pack_comparators(net.comparators, net.outputs)))
    L(")")
    L.blank()
    L(_RUNTIME.rstrip("\n"))
    L.blank(2)
    _swap_function(L, r)
    L.blank(2)
    L(_SWEEPS.strip("\n"))
    return L.render()
