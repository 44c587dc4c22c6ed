"""diffsort's ``sort`` and difftopk's ``topk``: run a network given in their
matrix format (from ``get_sorting_network``, ours or theirs) through a
netgen-generated layer.

The matrices are read once into a netgen Network (cached per network
object, up to 16), so a call costs what a ``DiffSortNet`` call costs."""

from __future__ import annotations

from collections import OrderedDict

import torch

from .networks import from_matrices
from .nets import relaxation_for

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
):
    """diffsort.sort: ``(soft sorted ascending, X (..., n, n))`` for a
    network in diffsort's matrix format."""
    n = _check(vectors)
    layer = _layer(sorting_network, n, n, distribution, art_lambda)
    values, P = layer.layer_for(vectors.device, steepness)(vectors)
    return values.flip(-1), P.flip(-2).transpose(-1, -2)


def topk(
    sorting_network,
    vectors: torch.Tensor,
    k: int,
    steepness: float = 10.0,
    art_lambda: float = 0.25,
    distribution: str = "cauchy",
    sparse: bool = False,
):
    """difftopk.topk: ``(values ascending, X (..., n, k))`` for a network
    in difftopk's dense or sparse matrix format (difftopk returns None for
    the values). ``sparse`` is accepted; the format is read off the
    matrices."""
    n = _check(vectors)
    layer = _layer(sorting_network, n, k, distribution, art_lambda)
    values, P = layer.layer_for(vectors.device, steepness)(vectors)
    return values.flip(-1), P.flip(-2).transpose(-1, -2)
