"""Relaxed (differentiable) semantics of comparator networks.

* :mod:`netgen.relax.formulas`: every distribution's formulas, defined once
  (the distribution registry); imports no torch.
* :mod:`netgen.relax.distributions`: :class:`Relaxation` (distribution,
  steepness, ART) and the swap probability p = F(s * phi(d)).
* :mod:`netgen.relax.reference`: the reference executor (defines the
  semantics; every code-generation target is tested against it).
* :mod:`netgen.relax.loss`: the DiffTopK top-k cross-entropy loss.
* :mod:`netgen.relax.baselines`: other differentiable sort / top-k methods.

The names below are loaded from :mod:`.distributions` (which needs torch)
on first use, so that ``netgen.relax.formulas`` can be read without torch
(the command line takes ``--distribution``'s choices from it).
"""

from __future__ import annotations

import importlib

__all__ = [
    "DEFAULT_DISTRIBUTION",
    "DISTRIBUTIONS",
    "Relaxation",
    "default_relaxation",
    "swap_probability",
    "swap_probability_grad",
]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module(".distributions", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
