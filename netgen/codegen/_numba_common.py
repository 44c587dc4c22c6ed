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

_BIG = repr(float(np.finfo(np.float64).max))


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


def swap_code(r, indent: int) -> str:
    """Scalar code reading float64 ``d`` and defining float64 ``p`` (swap
    probability) and ``dp`` (dp/dd). Uses only ``math`` and literals."""
    s = repr(float(r.steepness))
    lam = float(r.art_lambda)
    eps = float(r.art_epsilon)
    lines = [
        "dd = d",
        f"if dd > {_BIG}:",
        f"    dd = {_BIG}",
        f"elif dd < -{_BIG}:",
        f"    dd = -{_BIG}",
    ]
    if r.uses_art:
        lines.append("ad = abs(dd)")
        if eps > 0:
            lines += [
                f"ph = dd / (ad + {eps!r}) ** {lam!r}",
                f"dph = ({1.0 - lam!r} * ad + {eps!r}) / (ad + {eps!r}) ** {lam + 1.0!r}",
            ]
        else:
            lines += [
                f"ph = math.copysign(ad ** {1.0 - lam!r}, dd) if dd != 0.0 else 0.0",
                f"dph = {1.0 - lam!r} * max(ad, 1e-10) ** {-lam!r}",
            ]
        lines.append(f"z = {s} * ph")
    else:
        lines += ["dph = 1.0", f"z = {s} * dd"]
    lines += [f"if z > {_BIG}:", f"    z = {_BIG}", f"elif z < -{_BIG}:", f"    z = -{_BIG}"]
    dist = r.distribution
    if dist in ("logistic", "logistic_phi"):
        lines += [
            "ez = math.exp(-abs(z))",
            "if z >= 0.0:",
            "    p = 1.0 / (1.0 + ez)",
            "    pm = ez / (1.0 + ez)",
            "else:",
            "    p = ez / (1.0 + ez)",
            "    pm = 1.0 / (1.0 + ez)",
            "f = p * pm",
        ]
    elif dist == "cauchy":
        lines += [
            f"p = 0.5 + math.atan(z) / {math.pi!r}",
            f"f = 1.0 / ({math.pi!r} * (1.0 + z * z))",
        ]
    elif dist == "reciprocal":
        lines += [
            "p = 0.5 * (z / (2.0 + abs(z)) + 1.0)",
            "f = 1.0 / (2.0 + abs(z)) ** 2",
        ]
    elif dist == "gaussian":
        lines += [
            f"p = 0.5 * (1.0 + math.erf(z * {1.0 / math.sqrt(2.0)!r}))",
            f"f = math.exp(-0.5 * z * z) * {1.0 / math.sqrt(2.0 * math.pi)!r}",
        ]
    elif dist == "optimal":
        lines += [
            "az = abs(z)",
            "if az <= 0.25:",
            "    p = z + 0.5",
            "    f = 1.0",
            "else:",
            f"    tl = 16.0 * (az + {eps!r})",
            "    p = 1.0 - 1.0 / tl if z > 0.0 else 1.0 / tl",
            f"    f = 1.0 / (16.0 * (az + {eps!r}) ** 2)",
        ]
    else:  # pragma: no cover - Relaxation validates the name
        raise ValueError(f"unknown distribution {dist!r}")
    lines += [
        f"dp = {s} * f * dph",
        f"if dp > {_BIG}:",
        f"    dp = {_BIG}",
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


def plan_source() -> str:
    return inspect.getsource(plan)


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
