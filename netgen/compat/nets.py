"""``DiffSortNet`` / ``DiffTopkNet``: diffsort's and difftopk's modules over
a netgen-generated layer (see :mod:`netgen.compat` for orientation and
differences).

Attributes are live, as in the originals: ``steepness``, ``distribution``,
``art_lambda``, ``interpolation_type`` (and ``art_epsilon``) are read at
every call. The steepness goes to the generated layer's run-time steepness
(no recompilation; a number, numpy scalar, 0-d tensor or ``nn.Parameter``,
which then learns); a new distribution / ``art_lambda`` selects another
generated module (built once, then from netgen's cache)."""

from __future__ import annotations

import math

import torch

from ..relax.distributions import DIFFTOPK_ART_EPSILON, DISTRIBUTIONS, Relaxation
from .networks import get_sorting_network, netgen_network, original_network

#: the steepness baked into modules whose steepness is a run-time argument
#: (one module serves every steepness)
CANONICAL_STEEPNESS = 10.0


def resolve_distribution(distribution, interpolation_type) -> str:
    if interpolation_type is not None:
        if distribution is not None and distribution not in ("cauchy", interpolation_type):
            raise ValueError(
                f"two different distributions were set (distribution={distribution!r}, "
                f"interpolation_type={interpolation_type!r}); interpolation_type is a deprecated alias"
            )
        return interpolation_type
    return "cauchy" if distribution is None else distribution


def relaxation_for(distribution, art_lambda, art_epsilon, steepness=CANONICAL_STEEPNESS) -> Relaxation:
    """The Relaxation of published-style arguments. ``distribution=None``
    means cauchy; ``art_lambda`` matters (and is checked) only for
    ``logistic_phi`` (elsewhere, None included, it is ignored)."""
    dist = "cauchy" if distribution is None else distribution
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}; choose one of {', '.join(DISTRIBUTIONS)}")
    if dist == "logistic_phi":
        if art_lambda is None or isinstance(art_lambda, bool):
            raise ValueError(f"distribution 'logistic_phi' needs a number art_lambda in [0, 1), got {art_lambda!r}")
        lam = float(art_lambda)
    else:
        lam = 0.25  # unused by every other distribution
    if isinstance(art_epsilon, bool) or not isinstance(art_epsilon, (int, float)) or not math.isfinite(art_epsilon):
        raise ValueError(f"art_epsilon must be a finite number, got {art_epsilon!r}")
    return Relaxation(dist, steepness, lam, float(art_epsilon))


class _Base(torch.nn.Module):
    def _setup(self, sorting_network_type, size, k, device, steepness, art_lambda, interpolation_type,
               distribution, art_epsilon, network, target):
        from ..codegen.auto import AutoLayer, check_target

        check_target(target)
        if network == "difftopk":
            net = original_network(sorting_network_type, size, k)
        elif network == "netgen":
            net = netgen_network(sorting_network_type, size, k)
        else:
            raise ValueError(f"network must be 'difftopk' or 'netgen', got {network!r}")
        AutoLayer.steepness_value(steepness)  # the Layer base's rule
        self.sorting_network_type = sorting_network_type
        self.size = int(size)
        self.device = device
        self.steepness = steepness
        self.art_lambda = art_lambda
        self.art_epsilon = art_epsilon
        self.distribution = resolve_distribution(distribution, interpolation_type)
        self.interpolation_type = interpolation_type
        self.network = net
        r = relaxation_for(self.distribution, art_lambda, art_epsilon)
        self._rkey = (r.distribution, r.art_lambda, r.art_epsilon)
        self.layer = AutoLayer(net, r, target, device)

    def __setattr__(self, name, value):
        # the deprecated alias stays an alias after construction too
        if name == "interpolation_type" and value is not None and "distribution" in self.__dict__:
            super().__setattr__("distribution", value)
        super().__setattr__(name, value)

    @property
    def relaxation(self) -> Relaxation:
        """The relaxation the next call uses (its steepness: the current
        ``steepness`` when that is a plain number)."""
        r = self._sync()
        s = self.steepness
        if isinstance(s, torch.Tensor):
            return r
        return Relaxation(r.distribution, float(s), r.art_lambda, r.art_epsilon)

    def _sync(self) -> Relaxation:
        """Rebuild lazily after ``distribution`` / ``art_lambda`` /
        ``art_epsilon`` changed."""
        r = relaxation_for(self.distribution, self.art_lambda, self.art_epsilon)
        key = (r.distribution, r.art_lambda, r.art_epsilon)
        if key != self._rkey:
            self.layer.set_relaxation(r)
            self._rkey = key
        return self.layer.relaxation

    def _layer(self, x: torch.Tensor):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"expected a tensor, got {type(x).__name__}")
        if x.dim() < 1 or x.shape[-1] != self.size:
            raise ValueError(f"expected input of shape (..., {self.size}), got {tuple(x.shape)}")
        self._sync()
        return self.layer.layer_for(x.device, self.steepness)

    def forward(self, vectors: torch.Tensor):
        """Their orientation: ascending values and X = P.flip(-2).transpose(-1, -2)."""
        values, P = self._layer(vectors)(vectors)
        return values.flip(-1), P.flip(-2).transpose(-1, -2)

    @property
    def sorting_network(self):
        """The network in the published matrix format (built on access;
        netgen itself never uses these matrices)."""
        k = getattr(self, "k", None)
        if getattr(self, "sparse", False):
            return get_sorting_network("sparse_" + self.sorting_network_type, self.size, self.device, k)
        if self.sorting_network_type == "splitter_selection":
            raise ValueError("difftopk has splitter_selection only in sparse form (sparse=True)")
        return get_sorting_network(self.sorting_network_type, self.size, self.device)


class DiffSortNet(_Base):
    """diffsort.DiffSortNet's arguments and outputs: ``forward(x)`` returns
    ``(x sorted ascending (soft), X)`` with ``X`` ``(..., n, n)`` and
    ``X[..., c, j] = P[..., n-1-j, c]`` (see :mod:`netgen.compat`)."""

    def __init__(
        self,
        sorting_network_type: str,
        size: int,
        device: str = "cpu",
        steepness: float = 10.0,
        art_lambda: float = 0.25,
        interpolation_type: str = None,
        distribution: str = "cauchy",
        *,
        art_epsilon: float = DIFFTOPK_ART_EPSILON,
        network: str = "difftopk",
        target: str = "auto",
    ):
        super().__init__()
        self._setup(sorting_network_type, size, None, device, steepness, art_lambda, interpolation_type,
                    distribution, art_epsilon, network, target)


class DiffTopkNet(_Base):
    """difftopk.DiffTopkNet's arguments and outputs: ``forward(x)`` returns
    ``(values ascending, X)`` with ``X`` ``(..., n, k)`` and
    ``X[..., c, j] = P[..., k-1-j, c]`` (difftopk returns None for values)."""

    def __init__(
        self,
        sorting_network_type: str,
        size: int,
        k: int,
        sparse: bool = False,
        device: str = "cpu",
        steepness: float = 10.0,
        art_lambda: float = 0.25,
        interpolation_type: str = None,
        distribution: str = "cauchy",
        *,
        art_epsilon: float = DIFFTOPK_ART_EPSILON,
        network: str = "difftopk",
        target: str = "auto",
    ):
        super().__init__()
        self.k = int(k)
        self.sparse = sparse
        self._setup(sorting_network_type, size, k, device, steepness, art_lambda, interpolation_type,
                    distribution, art_epsilon, network, target)
