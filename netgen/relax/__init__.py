"""Relaxed (differentiable) semantics of comparator networks.

* :mod:`netgen.relax.distributions`: :class:`Relaxation` (distribution,
  steepness, ART) and the swap probability p = F(s * phi(d)).
* :mod:`netgen.relax.reference`: the reference executor (defines the
  semantics; every code-generation target is tested against it).
* :mod:`netgen.relax.loss`: the DiffTopK top-k cross-entropy loss.
* :mod:`netgen.relax.baselines`: other differentiable sort / top-k methods.
"""

from .distributions import (
    DEFAULT_DISTRIBUTION,
    DISTRIBUTIONS,
    Relaxation,
    default_relaxation,
    swap_probability,
    swap_probability_grad,
)

__all__ = [
    "DEFAULT_DISTRIBUTION",
    "DISTRIBUTIONS",
    "Relaxation",
    "default_relaxation",
    "swap_probability",
    "swap_probability_grad",
]
