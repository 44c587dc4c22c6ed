"""The lane sweeps that measure the blur for ``steepness="auto"``:
``P V`` for a few lanes ``V`` by the reference's forward mixing, written
for measuring only (:func:`sweep_lanes`; columns of P: :func:`sweep_columns`,
or the reference itself: :func:`reference_columns`), and the blur over all
k ranks at once by Hutchinson probes (:func:`probe_blur`)."""

from __future__ import annotations

import numpy as np
import torch

from ..network import Network
from .blur import _layers
from .distributions import Relaxation, _cdf, _phi
from .reference import fwd as _ref_fwd


def reference_columns(net: Network, r: Relaxation):
    """``columns(x, s, y) -> P[..., :, y]`` (``(R, k, m)``) by the reference's
    forward lanes (the definition; plain autograd, slow)."""

    def columns(x, s, y):
        V = torch.nn.functional.one_hot(y, net.n).to(x.dtype).transpose(-1, -2)  # (R, n, m)
        with torch.no_grad():
            return _ref_fwd(net, x, V, r, s)

    return columns


def sweep_lanes(net: Network, r: Relaxation):
    """``lanes(x, s, V) -> P V`` for ``V`` of shape ``(R, n, m)``, as
    ``(R, k, m)``: the reference's forward lanes (:func:`~netgen.relax.reference.fwd`,
    the same mixing, bit-identical) written for measuring only: no
    autograd, the steepness a plain number, wire-major (each gather moves
    contiguous rows), each layer mixed in place. O(m size) work per row."""
    layers = _torch_layers(net)
    outs = torch.as_tensor(np.asarray(net.outputs, dtype=np.int64))

    def lanes_of(x, s, V):
        with torch.no_grad():
            dev = x.device
            v = x.t().contiguous()  # (n, R)
            lanes = V.permute(1, 0, 2).contiguous()  # (n, R, m)
            for a, b in layers:
                a, b = a.to(dev), b.to(dev)
                va, vb = v[a], v[b]
                p = _cdf((float(s) * _phi(va - vb, r)).clamp(-_BIG, _BIG), r)  # (c, R)
                v[a], v[b] = torch.lerp(vb, va, p), torch.lerp(va, vb, p)
                la, lb, q = lanes[a], lanes[b], p.unsqueeze(-1)
                lanes[a], lanes[b] = torch.lerp(lb, la, q), torch.lerp(la, lb, q)
            return lanes[outs.to(dev)].permute(1, 0, 2)  # (R, k, m)

    return lanes_of


def sweep_columns(net: Network, r: Relaxation):
    """``columns(x, s, y) -> P[..., :, y]`` (``(R, k, m)``) for indices
    ``y`` of shape ``(R, m)``: :func:`sweep_lanes` of the unit vectors."""
    lanes = sweep_lanes(net, r)

    def columns(x, s, y):
        return lanes(x, s, torch.nn.functional.one_hot(y, net.n).to(x.dtype).transpose(-1, -2))

    return columns


def probe_blur(lanes, x: torch.Tensor, indices: torch.Tensor, s, probes: int, seed: int = 0) -> float:
    """The blur over ALL k ranks of the rows ``x``, ``1 - trace(P H^T) / k``,
    by Hutchinson's estimator: for Rademacher ``z`` (``(R, probes, k)``),
    ``z^T P H^T z`` is unbiased for the trace, and ``H^T z`` is a vector
    on the inputs (``z_r`` at ``h_r``), so each probe is ONE forward lane.
    Its variance is twice the squared off-diagonal mass, ``sum_{r != r'}
    P[r, h_r']^2``: tiny next to the trace when k is large (a sorter),
    where sampling ranks is not (a heavy-tailed F blurs a few ranks much
    more than the rest). Deterministic (its own generator, ``seed``)."""
    R, k = indices.shape
    g = torch.Generator().manual_seed(seed)
    z = (torch.randint(0, 2, (R, probes, k), generator=g) * 2 - 1).to(device=x.device, dtype=x.dtype)
    V = torch.zeros(R, x.shape[-1], probes, dtype=x.dtype, device=x.device)
    V.scatter_(1, indices.unsqueeze(-1).expand(R, k, probes), z.transpose(1, 2))  # V[h_r, q] = z[q, r]
    PV = lanes(x, s, V)  # (R, k, probes)
    trace = (PV * z.transpose(1, 2)).sum(1)  # (R, probes)
    return float(1.0 - trace.mean() / k)


_BIG = 1e300


def _torch_layers(net: Network) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.from_numpy(a).long(), torch.from_numpy(b).long()) for a, b in _layers(net)]

