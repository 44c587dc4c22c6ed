"""Baseline differentiable sorting / top-k methods, with netgen's call shape.

Every layer takes scores of shape ``(..., n)`` (any leading batch dims,
float32 or float64) and returns, depending on ``kind``:

* ``"permutation"``: ``(values (..., k), P (..., k, n))`` with netgen's
  orientation: ``P[..., r, c]`` is the weight of input c in rank r, rank 0
  the largest, ``values = P @ x`` (docs/design.md section 2);
* ``"indicator"``: a soft top-k indicator ``(..., n)`` summing to k;
* ``"loss"``: ``forward(scores, y)`` returns a loss (smooth top-k).

Each has a documented temperature (see ``TEMPERATURE``: the argument name and
what it means). Pick one by name::

    from netgen.relax import baselines
    layer = baselines.get("lapsum", k=5, temperature=0.1)
    values, P = layer(x)

Registered names: see ``BASELINES``.
"""

from __future__ import annotations

from ._ot import OTConvergenceWarning, OTNotConverged, transport_plan
from .lapsum import LapSum, LapSumTopK, lapsum_permutation, lapsum_rank, lapsum_sort, lapsum_topk
from .neuralsort import NeuralSort, gumbel_neuralsort, neuralsort
from .sinkhorn_sort import SinkhornSort, sinkhorn_sort
from .smooth_topk import SmoothTopKLoss, smooth_topk_loss
from .soft_topk import SoftTopK, SortedSoftTopK, soft_topk, sorted_soft_topk
from .softsort import SoftSort, softsort


class GumbelNeuralSort(NeuralSort):
    """Stochastic NeuralSort (Gumbel-perturbed scores); see :mod:`.neuralsort`."""

    def __init__(self, k, tau=1.0, *, noise_scale=1.0, generator=None, hard=False):
        super().__init__(k, tau, gumbel=True, noise_scale=noise_scale, generator=generator, hard=hard)


#: name -> layer class; every class is constructed as ``cls(k, <temperature>, **options)``
BASELINES = {
    "neuralsort": NeuralSort,
    "neuralsort_gumbel": GumbelNeuralSort,
    "softsort": SoftSort,
    "sinkhorn_sort": SinkhornSort,
    "soft_topk": SoftTopK,
    "soft_topk_sorted": SortedSoftTopK,
    "lapsum": LapSum,
    "lapsum_topk": LapSumTopK,
    "smooth_topk": SmoothTopKLoss,
}

#: name -> (temperature argument, its default, meaning)
TEMPERATURE = {
    "neuralsort": ("tau", 1.0, "softmax temperature on the NeuralSort logits"),
    "neuralsort_gumbel": ("tau", 1.0, "softmax temperature on the NeuralSort logits"),
    "softsort": ("tau", 1.0, "softmax temperature on -|s_(r) - s|"),
    "sinkhorn_sort": ("epsilon", 1e-3, "entropic regularisation on the squashed [0, 1] scale "
                      "(Cuturi et al.'s Sinkhorn1D default)"),
    "soft_topk": ("epsilon", 0.1, "entropic regularisation on the per-row normalised cost "
                  "(Xie et al.'s TopK_custom default, 200 iterations)"),
    "soft_topk_sorted": ("epsilon", 0.1, "entropic regularisation on the per-row normalised cost "
                         "(Xie et al.'s TopK_custom default, 200 iterations)"),
    "lapsum": ("alpha", 1.0, "Laplace scale"),
    "lapsum_topk": ("alpha", 1.0, "Laplace scale"),
    "smooth_topk": ("tau", 1.0, "log-sum-exp temperature of the smoothed top-k hinge"),
}


def names() -> list[str]:
    return sorted(BASELINES)


def default_temperature(name: str) -> float:
    """The default temperature of ``name`` (its authors' default)."""
    if name not in TEMPERATURE:
        raise ValueError(f"unknown baseline {name!r}; choose from {', '.join(names())}")
    return TEMPERATURE[name][1]


def get(name: str, k: int, temperature: float | None = None, **options):
    """Construct the baseline ``name`` for top-k (``k``) with the given
    temperature (the method's own argument, see ``TEMPERATURE``)."""
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; choose from {', '.join(names())}")
    arg, default, _ = TEMPERATURE[name]
    if arg in options and temperature is not None:
        raise ValueError(f"give the temperature either as temperature= or {arg}=, not both")
    t = options.pop(arg, default if temperature is None else temperature)
    return BASELINES[name](k, t, **options)


__all__ = [
    "BASELINES", "TEMPERATURE", "default_temperature", "get", "names",
    "NeuralSort", "GumbelNeuralSort", "SoftSort", "SinkhornSort", "SoftTopK", "SortedSoftTopK",
    "LapSum", "LapSumTopK", "SmoothTopKLoss",
    "neuralsort", "gumbel_neuralsort", "softsort", "sinkhorn_sort", "soft_topk", "sorted_soft_topk",
    "lapsum_topk", "lapsum_permutation", "lapsum_sort", "lapsum_rank", "smooth_topk_loss",
    "transport_plan", "OTNotConverged", "OTConvergenceWarning",
]
