"""The relaxation, defined once: every distribution's cdf and pdf, ART's
phi and phi', and the swap program (p, dp/dd, dp/ds) built from them, as
expressions (:mod:`netgen.relax.expr`).

Everything that computes a swap probability renders these same
expressions: the reference (:mod:`netgen.relax.distributions`, torch
tensor ops), the torch target's ``_swap`` (torch source) and the numba /
CUDA kernels' swap code (scalar source, :func:`netgen.codegen.swap_code.swap_code`).
Renderer-specific forms (float32 inline exp, arctangent and normal CDF in
the CPU kernels, square roots for ART's 1/4 and 1/2 powers) are rewrites
of these expressions inside the renderers (:mod:`netgen.codegen.render`),
never second definitions.

Adding a distribution: one :func:`distribution` definition here (its name,
F(z) and f(z) = F'(z)) and one row in the test cases of
``tests/codegen/test_swap_code.py``; :data:`DISTRIBUTIONS` and every
target pick it up (see docs/codegen.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from .expr import BIG, E, abs_, atan, clamp, const, copysign, exp, maximum, minimum, ncdf, sigmoid, var, where

__all__ = ["Distribution", "REGISTRY", "DEFAULT_DISTRIBUTION", "distribution", "art", "swap_exprs", "ART_TIE_FLOOR"]

#: |d| below this is treated as this in ART's derivative (see distributions)
ART_TIE_FLOOR = 1e-10


@dataclass(frozen=True)
class Distribution:
    """``formulas(z, eps) -> (F(z), f(z))``; ``art``: phi is ART's."""

    name: str
    formulas: Callable[[E, float], tuple[E, E]]
    art: bool = False


REGISTRY: dict[str, Distribution] = {}

#: Default distribution: Cauchy is monotonic with heavy tails, so gradients
#: reach comparators far from a tie even in deep networks (the monotonic
#: differentiable sorting networks paper, and difftopk's default).
DEFAULT_DISTRIBUTION = "cauchy"


def distribution(name: str, art: bool = False):
    """Register ``formulas(z, eps) -> (cdf, pdf)`` under ``name``."""

    def register(formulas):
        if name in REGISTRY:
            raise ValueError(f"distribution {name!r} defined twice")
        REGISTRY[name] = Distribution(name, formulas, art)
        return formulas

    return register


# ---------------------------------------------------------------- distributions
@distribution("logistic_phi", art=True)
@distribution("logistic")
def _logistic(z: E, eps: float):
    """F = 1 / (1 + e^-z), f = F(z) F(-z)."""
    return sigmoid(z), sigmoid(z) * sigmoid(-z)


@distribution("cauchy")
def _cauchy(z: E, eps: float):
    """F = 1/2 + atan(z) / pi, f = 1 / (pi (1 + z^2))."""
    return 0.5 + atan(z) / math.pi, 1.0 / (math.pi * (1.0 + z * z))


@distribution("reciprocal")
def _reciprocal(z: E, eps: float):
    """F = (z / (2 + |z|) + 1) / 2, f = 1 / (2 + |z|)^2."""
    rz = 1.0 / (2.0 + abs_(z))
    return 0.5 * (z * rz + 1.0), rz * rz


@distribution("gaussian")
def _gaussian(z: E, eps: float):
    """F = Phi(z), f = exp(-z^2 / 2) / sqrt(2 pi)."""
    return ncdf(z), exp(-0.5 * z * z) * (1.0 / math.sqrt(2.0 * math.pi))


@distribution("optimal")
def _optimal(z: E, eps: float):
    """F = z + 1/2 on |z| <= 1/4, else the tails 1 - 1/(16 (|z| + eps)) and
    1/(16 (|z| + eps)); f = 1 on the middle, 1/(16 (|z| + eps)^2) outside."""
    az = abs_(z)
    tail = 1.0 / (16.0 * (maximum(az, 0.25) + eps))
    mid = az <= 0.25
    return where(mid, z + 0.5, where(z > 0.0, 1.0 - tail, tail)), where(mid, 1.0, 16.0 * tail * tail)


# ------------------------------------------------------------------------ ART
def art(d: E, lam: float, eps: float) -> tuple[E, E]:
    """phi(d) and phi'(d): ``sgn(d) |d|^(1 - lam)`` with the derivative's
    |d| floored at :data:`ART_TIE_FLOOR`, or with ``eps > 0`` difftopk's
    ``d / (|d| + eps)^lam``."""
    ad = abs_(d)
    if eps > 0:
        ae = ad + eps
        rp = ae ** (-lam)
        return d * rp, ((1.0 - lam) * ad + eps) * rp / ae
    return copysign(ad ** (1.0 - lam), d), (1.0 - lam) * maximum(ad, ART_TIE_FLOOR) ** (-lam)


def phi_exprs(r, d: E) -> tuple[E, E]:
    """(phi, phi') of ``d`` for relaxation ``r`` (identity without ART)."""
    if REGISTRY[r.distribution].art and r.art_lambda != 0.0:
        return art(d, r.art_lambda, r.art_epsilon)
    return d, const(1.0)


def swap_exprs(r, s: E | float | None = None, tame: bool = False) -> dict[str, E]:
    """The swap program of relaxation ``r`` reading ``var("d")``:
    ``p = F(z)``, ``dp = s f(z) phi'(d)`` (dp/dd) and ``dps = f(z) phi(d)``
    (dp/ds), with ``z = s phi(d)``; d, z and the derivatives clamped to the
    compute dtype's finite range. ``s``: the steepness (an expression, e.g.
    ``var("s")`` for a run-time value; None bakes in ``r.steepness``).

    ``tame``: without the clamps of d and z, for code that runs it only
    where they cannot act: |phi(d)| <= max(1, |d|) for every phi here (ART's
    lambda lies in [0, 1)), so where d is finite and s max(1, |d|) is at
    most the largest finite value the two clamps return their input and
    the program's values are the same, bit for bit. The derivatives keep
    their clamps."""
    s = const(r.steepness) if s is None else (s if isinstance(s, E) else const(s))
    dd = var("d") if tame else clamp(var("d"), -BIG, BIG)
    ph, dph = phi_exprs(r, dd)
    z = s * ph if tame else clamp(s * ph, -BIG, BIG)
    cdf, pdf = REGISTRY[r.distribution].formulas(z, r.art_epsilon)
    return {
        "p": cdf,
        "dp": minimum(s * pdf * dph, BIG),
        "dps": clamp(pdf * ph, -BIG, BIG),
    }
