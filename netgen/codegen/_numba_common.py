"""Pieces shared by the Numba CPU and Numba CUDA emitters.

* :func:`swap_code` turns a relaxation into straight-line scalar code that
  computes ``p = F(s * phi(d))`` and ``dp = dp/dd`` exactly as
  :mod:`netgen.relax.distributions` defines them (clamps, ART tie floor,
  difftopk's epsilon form). The code is pasted into every kernel: no device
  helper functions (numba-cuda 0.30.4 queries a driver when compiling kernels
  that call ``device=True`` helpers), and only the chosen distribution is
  compiled.
* :func:`plan` is the build-time analysis of a network that the kernels use to
  skip structural zeros of the k x n back-sweep; its source is copied into
  every generated module (:func:`plan_source`), so generated code needs numpy
  only, and netgen's tests exercise the very same function.
* :func:`header` / :func:`network_literal`: the deterministic top of a
  generated module (DESIGN.md section 8 contract).
"""

from __future__ import annotations

import inspect
import json
import math
import textwrap
from typing import Any

import numpy as np

from ..network import Network

def relaxation_of(net: Network, r: Any):
    """Normalise ``r`` (a Relaxation, a dict, or None for the default)."""
    from ..relax.distributions import Relaxation, default_relaxation

    if r is None:
        return default_relaxation(net)
    if isinstance(r, dict):
        return Relaxation.from_dict(r)
    if isinstance(r, Relaxation):
        return r
    raise ValueError(f"relaxation must be a Relaxation, a dict or None, got {type(r).__name__}")


FLOAT_TYPES = ("float32", "float64")


def lit(v: float, ft: str) -> str:
    """A float literal of type ``ft`` in generated kernel code: plain for
    float64, ``np.float32(...)`` for float32 (a bare literal would promote
    float32 arithmetic to float64)."""
    s = repr(float(v))
    return s if ft == "float64" else f"np.float32({s})"


def swap_code(r, indent: int, ft: str = "float64") -> str:
    """Scalar code reading ``d`` (of type ``ft``) and defining ``p`` (swap
    probability) and ``dp`` (dp/dd), all in ``ft`` arithmetic like the
    reference in that dtype. Uses only ``math``, ``np.float32`` and
    literals, so it runs under njit, cuda.jit and the CUDA simulator."""
    if ft not in FLOAT_TYPES:
        raise ValueError(f"unknown float type {ft!r}")
    L = lambda v: lit(v, ft)  # noqa: E731
    big = L(np.finfo(ft).max)
    s = L(r.steepness)
    lam = float(r.art_lambda)
    eps = float(r.art_epsilon)
    one, half, zero = L(1.0), L(0.5), L(0.0)
    # clamps as min/max (branch-free: the column kernels' loops over a block
    # of batch rows vectorise)
    lines = [f"dd = min(max(d, -{big}), {big})"]
    if r.uses_art:
        lines.append("ad = abs(dd)")
        if eps > 0:
            lines += [
                f"ph = dd / (ad + {L(eps)}) ** {L(lam)}",
                f"dph = ({L(1.0 - lam)} * ad + {L(eps)}) / (ad + {L(eps)}) ** {L(lam + 1.0)}",
            ]
        else:
            lines += [
                f"ph = math.copysign(ad ** {L(1.0 - lam)}, dd) if dd != {zero} else {zero}",
                f"dph = {L(1.0 - lam)} * max(ad, {L(1e-10)}) ** {L(-lam)}",
            ]
        lines.append(f"z = {s} * ph")
    else:
        lines += [f"dph = {one}", f"z = {s} * dd"]
    lines.append(f"z = min(max(z, -{big}), {big})")
    dist = r.distribution
    if dist in ("logistic", "logistic_phi"):
        lines += [
            "ez = math.exp(-abs(z))",
            f"if z >= {zero}:",
            f"    p = {one} / ({one} + ez)",
            f"    pm = ez / ({one} + ez)",
            "else:",
            f"    p = ez / ({one} + ez)",
            f"    pm = {one} / ({one} + ez)",
            "f = p * pm",
        ]
    elif dist == "cauchy" and ft == "float32":
        # atan inline (Cephes atanf: range reduction + odd polynomial, error
        # ~1 float32 ulp) instead of a libm call, and one division shared by
        # the range reduction and the density 1/(pi (1 + z^2))
        lines += [
            "az = abs(z)",
            f"big = az > {L(2.414213562373095)}",
            f"mid = az > {L(0.41421356237309503)}",
            f"num = -{one} if big else (az - {one} if mid else az)",
            f"den = az if big else (az + {one} if mid else {one})",
            f"y0 = {L(math.pi / 2)} if big else ({L(math.pi / 4)} if mid else {zero})",
            f"zc = min(az, {L(1e19)})",  # z2 stays finite; den * z2 may overflow -> inv = 0 (f ~ 0 there)
            f"z2 = {one} + zc * zc",
            f"inv = {one} / (den * z2)",
            "xr = num * z2 * inv",
            "zz = xr * xr",
            f"at = y0 + ((({L(8.05374449538e-2)} * zz - {L(1.38776856032e-1)}) * zz + {L(1.99777106478e-1)}) * zz"
            f" - {L(3.33329491539e-1)}) * zz * xr + xr",
            f"p = {half} + (at if z >= {zero} else -at) * {L(1.0 / math.pi)}",
            f"f = den * inv * {L(1.0 / math.pi)}",
        ]
    elif dist == "cauchy":
        lines += [
            f"p = {half} + math.atan(z) / {L(math.pi)}",
            f"f = {one} / ({L(math.pi)} * ({one} + z * z))",
        ]
    elif dist == "reciprocal":
        lines += [
            f"p = {half} * (z / ({L(2.0)} + abs(z)) + {one})",
            f"f = {one} / (({L(2.0)} + abs(z)) * ({L(2.0)} + abs(z)))",
        ]
    elif dist == "gaussian":
        lines += [
            f"p = {half} * ({one} + math.erf(z * {L(1.0 / math.sqrt(2.0))}))",
            f"f = math.exp({L(-0.5)} * z * z) * {L(1.0 / math.sqrt(2.0 * math.pi))}",
        ]
    elif dist == "optimal":
        lines += [
            "az = abs(z)",
            f"if az <= {L(0.25)}:",
            f"    p = z + {half}",
            f"    f = {one}",
            "else:",
            f"    tl = {L(16.0)} * (az + {L(eps)})",
            f"    p = {one} - {one} / tl if z > {zero} else {one} / tl",
            f"    f = {one} / ({L(16.0)} * (az + {L(eps)}) * (az + {L(eps)}))",
        ]
    else:  # pragma: no cover - Relaxation validates the name
        raise ValueError(f"unknown distribution {dist!r}")
    lines += [
        f"dp = min({s} * f * dph, {big})",
    ]
    return textwrap.indent("\n".join(lines), " " * indent)


# ----------------------------------------------------------------- the plan
def plan(n, comparators, layer_offsets, outputs):
    """Build-time structure of the k x n back-sweep ``R <- R M_l``.

    Row r of R (the weights of rank r) is structurally non-zero only on the
    wires from which output r is reachable through the remaining layers.
    Sweeping from the last layer to the first, each wire carries the range
    ``[lo, hi)`` of ranks it can reach; a comparator merges the ranges of
    its two wires. Returns ``(clo, chi, doff)``: comparator i touches only
    rows ``clo[i] <= r < chi[i]`` of R (empty when ``clo >= chi``; such a
    comparator cannot influence P), and ``doff`` (size+1,) are CSR offsets
    of the saved differences ``R[r, a] - R[r, b]`` of those rows.

    Correct for any network (a superset of the support is always safe); for
    a (5, 10450) splitter network only the first cascade touches all five
    rows, so the back-sweep and its adjoint do a fraction of k * size work.
    The same ranges make the adjoint's forward sweep exact when it skips
    rows: a rank inactive at a comparator stays inactive on its wires in
    every later layer.
    """
    import numpy as np

    comps = np.asarray(comparators, dtype=np.int64).reshape(-1, 2)
    offs = np.asarray(layer_offsets, dtype=np.int64)
    k = len(outputs)
    lo = np.full(n, k, dtype=np.int64)
    hi = np.zeros(n, dtype=np.int64)
    for r, w in enumerate(outputs):
        lo[w] = r
        hi[w] = r + 1
    clo = np.empty(len(comps), dtype=np.int64)
    chi = np.empty(len(comps), dtype=np.int64)
    for l in range(len(offs) - 2, -1, -1):
        s, e = offs[l], offs[l + 1]
        a, b = comps[s:e, 0], comps[s:e, 1]
        ul = np.minimum(lo[a], lo[b])
        uh = np.maximum(hi[a], hi[b])
        clo[s:e] = ul
        chi[s:e] = np.maximum(uh, ul)
        lo[a] = ul
        lo[b] = ul
        hi[a] = uh
        hi[b] = uh
    doff = np.zeros(len(comps) + 1, dtype=np.int64)
    np.cumsum(chi - clo, out=doff[1:])
    return clo, chi, doff


# Module-level tables every generated numba/cuda module derives from its
# NETWORK literal (the same text in both targets).
TABLES_SOURCE = '''
def _tables():
    layers = NETWORK["layers"]
    sizes = [len(layer) for layer in layers]
    comps = np.array([c for layer in layers for c in layer], dtype=np.int64).reshape(-1, 2)
    offs = np.zeros(len(layers) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offs[1:])
    return comps, offs


_N = NETWORK["n"]
_OUTPUTS = np.array(NETWORK["outputs"], dtype=np.int64)
_K = len(_OUTPUTS)
_COMPS, _OFFSETS = _tables()
_SIZE = len(_COMPS)
_CLO, _CHI, _DOFF = plan(_N, _COMPS, _OFFSETS, NETWORK["outputs"])
_NNZ = int(_DOFF[-1])'''


def plan_source() -> str:
    """Source of :func:`plan` and of the table set-up, for generated modules."""
    return inspect.getsource(plan) + "\n" + TABLES_SOURCE


def network_literal(net: Network) -> str:
    """``NETWORK = {...}`` in the interchange format, one layer per line,
    deterministic."""
    from .. import io

    d = io.to_dict(net)
    parts = ["NETWORK = {"]
    for key, val in d.items():
        if key == "layers":
            parts.append('    "layers": [')
            for layer in val:
                parts.append("        " + json.dumps(layer, separators=(",", ":")) + ",")
            parts.append("    ],")
        else:
            parts.append(f"    {json.dumps(key)}: {_py_literal(val)},")
    parts.append("}")
    return "\n".join(parts)


def _py_literal(v: Any) -> str:
    # JSON is valid Python for the values we emit except true/false/null
    return repr(json.loads(json.dumps(v, sort_keys=True)))


def relaxation_literal(r) -> str:
    d = r.to_dict()
    return "RELAXATION = {" + ", ".join(f"{json.dumps(k)}: {v!r}" for k, v in d.items()) + "}"
