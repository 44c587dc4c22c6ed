"""``nn.Module`` forms of the operators (:mod:`netgen.ops.functions`).

Each holds its arguments and calls the function in ``forward``. The
steepness is a live attribute read at every call: a number, a 0-d tensor,
or an ``nn.Parameter`` (``SoftRank(steepness=nn.Parameter(torch.tensor(
20.0)))``: it is then a parameter of the module and learns); or ``"auto"``
with ``blur=`` (default: 0.75 calibrating in training, 0.1 otherwise): the
submodule ``auto_steepness`` chooses it from the scores of the first 4
training calls, then keeps it, as a layer's (:class:`netgen.relax.steepness.AutoSteepness`). A module holds
no network or compiled code: ``state_dict()`` holds only a learnable
steepness (or "auto"'s value), and pickles rebuild from netgen's cache on
the first call.
"""

from __future__ import annotations

import torch

from ..relax.reference import check_steepness
from ..relax.steepness import AutoSteepness, is_auto, optional_blur, plain_state, restore_state
from .backends import check_target
from .functions import soft_rank, soft_sort, soft_topk, topk_mask

__all__ = ["SoftSort", "SoftRank", "SoftTopK", "TopKMask"]


class _Op(torch.nn.Module):
    def __init__(self, dim, steepness, distribution, network, target, blur=None, max_size=None):
        super().__init__()
        from ..network import check_max_size

        if max_size is not None:
            check_max_size(max_size)  # a bad value fails here, not at the first call
        self.max_size = max_size
        optional_blur(blur)
        if is_auto(steepness):
            self.auto_steepness = AutoSteepness(blur)
        else:
            check_steepness(steepness)
        if distribution is not None:
            from ..relax.distributions import Relaxation

            Relaxation(distribution)  # an unknown name fails here, not at the first call
        self.dim, self.steepness, self.distribution = dim, steepness, distribution
        self.network, self.target = network, check_target(target)

    def _kw(self):
        auto = dict(blur=self.auto_steepness.blur, _auto=self.auto_steepness) if is_auto(self.steepness) else {}
        return dict(steepness=self.steepness, distribution=self.distribution, network=self.network,
                    target=self.target, max_size=getattr(self, "max_size", None), **auto)  # (older pickles: no max_size)

    def __getstate__(self):  # weights_only loading needs only this module's class
        return plain_state(self.__dict__)

    def __setstate__(self, state):
        super().__setstate__(restore_state(state))

    def extra_repr(self):
        s = self.steepness
        s = "default" if s is None else ("'auto'" if is_auto(s) else (
            f"{float(s.detach()):g} (tensor)" if isinstance(s, torch.Tensor) else f"{s:g}"))
        net = self.network if isinstance(self.network, str) else type(self.network).__name__
        return (f"dim={self.dim}, steepness={s}, distribution={self.distribution or 'cauchy'}, network={net!r}, "
                f"target={self.target!r}")


class SoftSort(_Op):
    """:func:`netgen.ops.soft_sort` as a module: ``SoftSort(dim, descending)(x)``."""

    def __init__(self, dim: int = -1, descending: bool = False, *, steepness=None, distribution=None,
                 network="best", target: str = "auto", blur: float | None = None, max_size: int | None = None):
        super().__init__(dim, steepness, distribution, network, target, blur, max_size)
        self.descending = descending

    def forward(self, x):
        return soft_sort(x, self.dim, self.descending, **self._kw())


class SoftRank(_Op):
    """:func:`netgen.ops.soft_rank` as a module (1-based ranks)."""

    def __init__(self, dim: int = -1, descending: bool = False, *, steepness=None, distribution=None,
                 network="best", target: str = "auto", blur: float | None = None, max_size: int | None = None):
        super().__init__(dim, steepness, distribution, network, target, blur, max_size)
        self.descending = descending

    def forward(self, x):
        return soft_rank(x, self.dim, self.descending, **self._kw())


class SoftTopK(_Op):
    """:func:`netgen.ops.soft_topk` as a module: ``SoftTopK(k)(x) ->
    (values, indices[, P])``."""

    def __init__(self, k: int, dim: int = -1, largest: bool = True, return_P: bool = False, *, steepness=None,
                 distribution=None, network="best", target: str = "auto", blur: float | None = None, max_size: int | None = None):
        super().__init__(dim, steepness, distribution, network, target, blur, max_size)
        self.k, self.largest, self.return_P = k, largest, return_P

    def forward(self, x):
        return soft_topk(x, self.k, self.dim, self.largest, self.return_P, **self._kw())


class TopKMask(_Op):
    """:func:`netgen.ops.topk_mask` as a module: ``TopKMask(k)(x)`` sums to k."""

    def __init__(self, k: int, dim: int = -1, largest: bool = True, *, steepness=None, distribution=None,
                 network="best", target: str = "auto", blur: float | None = None, max_size: int | None = None):
        super().__init__(dim, steepness, distribution, network, target, blur, max_size)
        self.k, self.largest = k, largest

    def forward(self, x):
        return topk_mask(x, self.k, self.dim, self.largest, **self._kw())
