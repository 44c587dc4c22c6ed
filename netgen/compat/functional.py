"""diffsort's ``sort`` and difftopk's ``topk``: run a network given in their
matrix format (from ``get_sorting_network``, ours or theirs) through a
netgen-generated layer; and the other public names of their
``functional`` modules (``execute_sort``, ``execute_topk``,
``execute_sparse_topk``, ``s_best``, ``NormalCDF``,
``SORTING_NETWORK_TYPE``).

The matrices are read once into a netgen Network (cached per network
object, up to 16), so a call costs what a ``DiffSortNet`` call costs."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import List

import torch

from ..relax.steepness import DEFAULT_BLUR, check_blur, estimate_steepness, is_auto
from .networks import from_matrices
from .nets import relaxation_for
from .run import call, finite_rows

_CACHE: "OrderedDict[tuple, tuple]" = OrderedDict()
_CACHE_SIZE = 16


def _layer(sorting_network, n: int, k: int, distribution, art_lambda):
    from ..codegen.auto import AutoLayer

    if not sorting_network:
        raise ValueError("the sorting network has no layers")
    # identity of the network object (its tensors are held by the cache entry, so ids stay valid)
    key = (tuple(id(m) for layer in sorting_network for m in layer), n, k)
    hit = _CACHE.get(key)
    if hit is None:
        net = from_matrices(sorting_network, n, k)
        hit = (AutoLayer(net, relaxation_for(distribution, art_lambda, 1e-10)), list(sorting_network))
        _CACHE[key] = hit
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    _CACHE.move_to_end(key)
    layer = hit[0]
    r = relaxation_for(distribution, art_lambda, 1e-10)
    if r != layer.relaxation:
        layer.set_relaxation(r)
    return layer


def _steepness(layer, vectors, steepness, blur):
    """A steepness as given; ``"auto"`` chosen from ``vectors`` for this call."""
    check_blur(blur)
    if not is_auto(steepness):
        return steepness
    est = estimate_steepness(layer.net, layer.relaxation, finite_rows(vectors), blur)
    return layer.relaxation.steepness if est.steepness is None else est.steepness


def _check(vectors):
    if not isinstance(vectors, torch.Tensor) or vectors.dim() < 1:
        raise ValueError("vectors must be a tensor of shape (..., n)")
    return vectors.shape[-1]


def sort(
    sorting_network,
    vectors: torch.Tensor,
    steepness: float = 10.0,
    art_lambda: float = 0.25,
    distribution: str = "cauchy",
    *,
    check_finite: bool = False,
    blur: float = DEFAULT_BLUR,
):
    """diffsort.sort: ``(soft sorted ascending, X (..., n, n))`` for a
    network in diffsort's matrix format. Steepness, non-finite scores
    (``check_finite``) and second order as for the modules
    (:mod:`netgen.compat.run`); ``steepness="auto"`` (netgen's extension):
    chosen from ``vectors`` at every call for the blur ``blur`` (a
    function keeps no state; the modules keep theirs)."""
    n = _check(vectors)
    layer = _layer(sorting_network, n, n, distribution, art_lambda)
    values, P = call(layer, vectors, _steepness(layer, vectors, steepness, blur), check_finite=check_finite)
    return values.flip(-1), P.flip(-2).transpose(-1, -2)


def topk(
    sorting_network,
    vectors: torch.Tensor,
    k: int,
    steepness: float = 10.0,
    art_lambda: float = 0.25,
    distribution: str = "cauchy",
    sparse: bool = False,
    *,
    check_finite: bool = False,
    blur: float = DEFAULT_BLUR,
):
    """difftopk.topk: ``(values ascending, X (..., n, k))`` for a network
    in difftopk's dense or sparse matrix format (difftopk returns None for
    the values). ``sparse`` is accepted; the format is read off the
    matrices. ``steepness="auto"``: as in :func:`sort`."""
    n = _check(vectors)
    layer = _layer(sorting_network, n, k, distribution, art_lambda)
    values, P = call(layer, vectors, _steepness(layer, vectors, steepness, blur), check_finite=check_finite)
    return values.flip(-1), P.flip(-2).transpose(-1, -2)


def execute_sort(sorting_network, vectors, steepness=10.0, art_lambda=0.25, distribution="cauchy"):
    """diffsort's ``execute_sort`` (what ``sort`` calls): the same as :func:`sort`."""
    return sort(sorting_network, vectors, steepness, art_lambda, distribution)


def execute_topk(sorting_network, vectors, k, steepness: float = 10.0, art_lambda: float = 0.25,
                 distribution: str = "cauchy"):
    """difftopk's ``execute_topk`` (dense matrices): the same as :func:`topk`
    (values first, where difftopk returns None)."""
    return topk(sorting_network, vectors, k, steepness, art_lambda, distribution)


def execute_sparse_topk(sorting_network, vectors, k, steepness: float = 10.0, art_lambda: float = 0.25,
                        distribution: str = "cauchy"):
    """difftopk's ``execute_sparse_topk`` (sparse matrices; no torch_sparse
    needed): the same as :func:`topk`."""
    return topk(sorting_network, vectors, k, steepness, art_lambda, distribution, sparse=True)


#: the published type hint of a sorting network in matrix format (as published: it names the
#: function ``torch.tensor``)
SORTING_NETWORK_TYPE = List[torch.tensor]


def s_best(x):
    """The published ``s_best``: the CDF of the ``optimal`` distribution
    (netgen's formula, with their epsilon 1e-10 in the tails)."""
    from ..relax.expr import evaluate, var
    from ..relax.formulas import REGISTRY

    cdf = REGISTRY["optimal"].formulas(var("z"), 1e-10)[0]
    return evaluate({"p": cdf}, {"z": x}, x.dtype)["p"]


class NormalCDF(torch.autograd.Function):
    """The published ``NormalCDF.apply(x, sigma)``: the normal CDF of
    ``x / sigma`` with its derivative."""

    @staticmethod
    def forward(ctx, x, sigma):
        ctx.save_for_backward(x)
        ctx.sigma = float(sigma)
        return 0.5 + 0.5 * torch.erf(x / (ctx.sigma * math.sqrt(2.0)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        z = x / ctx.sigma
        return g * torch.exp(-0.5 * z * z) / (ctx.sigma * math.sqrt(2.0 * math.pi)), None
