"""Relaxations of a comparator: the swap probability p = F(s * phi(d)).

For a comparator (a, b) with x = v[a], y = v[b] and d = x - y (docs/design.md
section 6)::

    p      = F(s * phi(d))          # soft "x is the larger"
    v[a]  <- p*x + (1-p)*y           # soft max
    v[b]  <- (1-p)*x + p*y           # soft min

``s`` is the steepness (inverse temperature). ``phi`` is the identity, except
for ``logistic_phi`` which uses the activation replacement trick (ART)
``phi(d) = sgn(d) * |d|^(1 - lambda)``.

Distributions F (names as in diffsort/difftopk) and their densities f = F'
are defined once each in :mod:`netgen.relax.formulas` (the registry behind
:data:`DISTRIBUTIONS`; each definition's docstring states its formula) and
tabled in docs/relaxations.md.

Numerical guarantees (tested): for every finite d, every steepness and every
distribution, p and dp/dd are finite. d is clamped to the dtype's finite
range (a difference of two huge finite inputs can overflow) and z = s*phi(d)
likewise, so no formula ever sees inf.

ART at ties. phi'(d) = (1 - lambda) |d|^-lambda is infinite at d = 0. netgen
defines the derivative with |d| floored at ``ART_TIE_FLOOR`` = 1e-10::

    phi'(d) = (1 - lambda) * max(|d|, 1e-10)^-lambda

so it is exact for |d| >= 1e-10 and bounded (by 1e10^lambda) below. The
value phi(d) itself is exact everywhere. For lambda = 0.25 and s = 10 the tie
slope is s * F'(0) * 0.75 * 1e-10^-0.25 ~ 593.

Compatibility: diffsort/difftopk compute ``phi(d) = d / (|d| + 1e-10)^lambda``
(and guard ``optimal``'s 1/(16z) with the same 1e-10). ``art_epsilon`` selects
that form: with ``art_epsilon = eps > 0``::

    phi(d)  = d / (|d| + eps)^lambda
    phi'(d) = ((1 - lambda)|d| + eps) / (|d| + eps)^(lambda + 1)
    optimal tail: 1 - 1/(16 (|z| + eps))

``art_epsilon = 1e-10`` reproduces their numbers. The default 0 is the
formula of docs/design.md section 6.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch

from . import formulas as F
from .expr import evaluate, var
from .formulas import ART_TIE_FLOOR, DEFAULT_DISTRIBUTION  # noqa: F401  (re-exported)

if TYPE_CHECKING:  # pragma: no cover
    from ..network import Network

#: every distribution defined in netgen.relax.formulas, in definition order
DISTRIBUTIONS = tuple(F.REGISTRY)


#: The epsilon diffsort/difftopk put inside ART and ``optimal``.
DIFFTOPK_ART_EPSILON = 1e-10


@dataclass(frozen=True)
class Relaxation:
    """How a comparator is relaxed: p = F(steepness * phi(d)).

    * ``distribution``: one of :data:`DISTRIBUTIONS` (default ``cauchy``).
    * ``steepness``: s > 0, the inverse temperature. The default 10.0 is
      difftopk's; for a given network prefer :func:`default_relaxation`,
      which ties s to the depth.
    * ``art_lambda``: lambda in [0, 1), used by ``logistic_phi`` only.
    * ``art_epsilon``: 0 (the docs/design.md formula) or e.g. 1e-10 to match
      diffsort/difftopk's ``d / (|d| + eps)^lambda`` (see module doc).
    """

    distribution: str = DEFAULT_DISTRIBUTION
    steepness: float = 10.0
    art_lambda: float = 0.25
    art_epsilon: float = 0.0

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(
                f"unknown distribution {self.distribution!r}; choose one of {', '.join(DISTRIBUTIONS)}"
            )
        for name in ("steepness", "art_lambda", "art_epsilon"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
            object.__setattr__(self, name, float(v))
        if self.steepness <= 0:
            raise ValueError(f"steepness must be > 0, got {self.steepness}")
        if not 0.0 <= self.art_lambda < 1.0:
            raise ValueError(f"art_lambda must lie in [0, 1), got {self.art_lambda}")
        if self.art_epsilon < 0:
            raise ValueError(f"art_epsilon must be >= 0, got {self.art_epsilon}")

    @property
    def uses_art(self) -> bool:
        return F.REGISTRY[self.distribution].art and self.art_lambda != 0.0

    def to_dict(self) -> dict[str, Any]:
        """``{"distribution", "steepness", "art_lambda", "art_epsilon"}``."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Relaxation":
        unknown = set(d) - {"distribution", "steepness", "art_lambda", "art_epsilon"}
        if unknown:
            raise ValueError(f"unknown relaxation field(s): {', '.join(sorted(unknown))}")
        return cls(**d)


def default_steepness(depth: int) -> float:
    """s = 2 * depth (at least 2): diffsort's rule (s = 2 x number of layers
    for odd-even, (log2 n)(1 + log2 n) = 2 x depth for bitonic). Each layer
    blurs a little; a deeper network needs a sharper comparator to keep the
    total error of the relaxation bounded."""
    return float(2 * max(int(depth), 1))


def default_relaxation(net: "Network", distribution: str | None = None) -> Relaxation:
    """The documented default for ``net``: ``distribution`` (default
    ``cauchy``), steepness ``2 * net.depth``, art_lambda 0.25, art_epsilon 0."""
    return Relaxation(
        distribution=DEFAULT_DISTRIBUTION if distribution is None else distribution,
        steepness=default_steepness(net.depth),
    )


# --------------------------------------------------------------- the formulas
# Defined once, as expressions, in netgen.relax.formulas; evaluated here with
# torch tensor ops (the same expressions are rendered into every target).
def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    if not dtype.is_floating_point:
        raise ValueError(f"relaxations need floating-point inputs, got {dtype}")
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _clamp_finite(t: torch.Tensor) -> torch.Tensor:
    big = torch.finfo(t.dtype).max
    return t.clamp(-big, big)


@functools.lru_cache(maxsize=64)
def _program(r: Relaxation):
    return F.swap_exprs(r)


def _one(e, name: str, t: torch.Tensor) -> torch.Tensor:
    return evaluate({"out": e}, {name: t}, t.dtype)["out"]


def _phi(d: torch.Tensor, r: Relaxation) -> torch.Tensor:
    return _one(F.phi_exprs(r, var("d"))[0], "d", d)


def _dphi(d: torch.Tensor, r: Relaxation) -> torch.Tensor:
    dph = F.phi_exprs(r, var("d"))[1]
    return torch.ones_like(d) if dph.is_const(1.0) else _one(dph, "d", d)


def _cdf(z: torch.Tensor, r: Relaxation) -> torch.Tensor:
    return _one(F.REGISTRY[r.distribution].formulas(var("z"), r.art_epsilon)[0], "z", z)


def _pdf(z: torch.Tensor, r: Relaxation) -> torch.Tensor:
    return _one(F.REGISTRY[r.distribution].formulas(var("z"), r.art_epsilon)[1], "z", z)


def _z(d: torch.Tensor, r: Relaxation) -> torch.Tensor:
    return _clamp_finite(r.steepness * _phi(d, r))


def swap_probability(d: torch.Tensor, r: Relaxation) -> torch.Tensor:
    """p = F(s * phi(d)) for d = x - y (the weight of x in the soft max).
    Computed in float32 for half inputs and returned in ``d``'s dtype.
    Plain tensor math: use :func:`netgen.relax.reference.swap_prob` for a
    version with the documented (finite) derivative under autograd."""
    cd = _compute_dtype(d.dtype)
    return _one(_program(r)["p"], "d", d.to(cd)).to(d.dtype)


def swap_probability_grad(d: torch.Tensor, r: Relaxation) -> torch.Tensor:
    """dp/dd = s * f(s * phi(d)) * phi'(d); finite everywhere, including at
    ties under ART (see the module doc for the tie rule)."""
    cd = _compute_dtype(d.dtype)
    g = _one(_program(r)["dp"], "d", d.to(cd))
    big = torch.finfo(d.dtype).max  # clamp to the *output* dtype's range (half!)
    return g.clamp(-big, big).to(d.dtype)


def swap_probability_grad_steepness(d: torch.Tensor, r: Relaxation) -> torch.Tensor:
    """dp/ds = f(s * phi(d)) * phi(d) (the steepness derivative)."""
    cd = _compute_dtype(d.dtype)
    g = _one(_program(r)["dps"], "d", d.to(cd))
    big = torch.finfo(d.dtype).max
    return g.clamp(-big, big).to(d.dtype)
