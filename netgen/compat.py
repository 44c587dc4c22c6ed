"""Drop-in replacements for diffsort's ``DiffSortNet`` and difftopk's
``DiffTopkNet``: same argument names, same output orientation, computed by
a netgen-generated layer (written-out backward). The extra keyword
``target="auto"`` picks the fastest generated target for the input's device
(cuda kernels on a GPU with numba-cuda, numba on CPU, torch otherwise; see
:mod:`netgen.codegen.auto`); ``target="torch"`` pins the torch layer.

Switch by changing an import::

    # from diffsort import DiffSortNet
    # from difftopk import DiffTopkNet
    from netgen.compat import DiffSortNet, DiffTopkNet

Orientation (theirs, returned here): ranks ascending. netgen's own layers
return ``P`` of shape ``(..., k, n)`` with rank 0 = the largest; these
classes return ``X`` of shape ``(..., n, k)`` with

    X[..., c, j] = P[..., k-1-j, c]        (X = P.flip(-2).transpose(-1, -2))

so ``X[..., :, -1]`` is the weight of each input in the maximum.

* ``DiffSortNet(...)(x)`` returns ``(sorted_x_ascending, X)`` with ``X`` of
  shape ``(..., n, n)``, like diffsort.
* ``DiffTopkNet(...)(x)`` returns ``(values, X)`` with ``X`` of shape
  ``(..., n, k)``. difftopk returns ``None`` as the first element; netgen
  returns the soft top-k values, ascending (``values[..., j]`` is rank
  k-1-j), which code that ignores the first element never notices.

Networks: the same comparators as the originals, so results agree with them
to rounding (tested against diffsort/difftopk): ``odd_even`` (odd-even
transposition, n layers), ``bitonic`` (the classic bitonic network with
their padding for n not a power of two: padded wires are dropped and so is
every comparator touching one) and ``splitter_selection`` (DiffTopK's
splitter network). Caution: for many n that are not powers of two (22, 38,
42-46, 54, 300, 3000, 10450, ...) that bitonic network is not a sorter and
its top-k can be wrong; pass ``network="netgen"`` to use netgen's correct
construction of the same kind instead (different comparators, so the soft
numbers differ).

Relaxation: diffsort/difftopk put an epsilon 1e-10 inside ART
(``d / (|d| + 1e-10)^lambda``) and ``optimal``; these classes default to
``art_epsilon=1e-10`` to match; pass ``art_epsilon=0`` for netgen's formula.
``sparse`` is accepted and ignored (netgen never builds dense matrices);
``interpolation_type`` is the deprecated alias of ``distribution``, as in
the originals. Any leading batch dimensions are accepted (the originals take
2-D input only).
"""

from __future__ import annotations

import numpy as np
import torch

from .network import Network
from .relax.distributions import DIFFTOPK_ART_EPSILON, Relaxation

__all__ = ["DiffSortNet", "DiffTopkNet", "original_network"]

TYPES = ("odd_even", "bitonic", "splitter_selection")


def _transposition(n: int) -> list[list[tuple[int, int]]]:
    # n layers; layer t compares (i, i+1) for i = t%2, t%2 + 2, ...: min -> i, max -> i+1
    return [[(i + 1, i) for i in range(t % 2, n - 1, 2)] for t in range(n)]


def _bitonic_classic(n: int) -> list[list[tuple[int, int]]]:
    m = max(1, int(np.ceil(np.log2(n)))) if n > 1 else 0
    N = 1 << m
    pad = N - n  # wires 0..pad-1 of the 2^m are padding (dropped)
    layers = []
    for block in range(m):
        for step in range(block + 1):
            dist = 1 << (block - step)
            layer = []
            for i in range(0, N, 2 * dist):
                for j in range(dist):
                    a, b = i + j, i + j + dist
                    if a < pad or b < pad:
                        continue
                    descending_block = (a >> (block + 1)) & 1
                    # ascending block: min -> a, max -> b; descending: reversed
                    layer.append((a - pad, b - pad) if descending_block else (b - pad, a - pad))
            layers.append(layer)
    return layers


def original_network(sorting_network_type: str, size: int, k: int | None = None) -> Network:
    """The network diffsort/difftopk build for these arguments, as a netgen
    Network (outputs: wires n-1, n-2, ... hold ranks 0, 1, ...)."""
    n = int(size)
    if n < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    k = n if k is None else int(k)
    if not 1 <= k <= n:
        raise ValueError(f"k must lie in 1..{n}, got {k}")
    outputs = list(range(n - 1, n - 1 - k, -1))
    construction = {"kind": sorting_network_type, "n": n, "k": k, "source": "difftopk"}
    if sorting_network_type == "odd_even":
        layers = _transposition(n)
    elif sorting_network_type == "bitonic":
        layers = _bitonic_classic(n)
    elif sorting_network_type == "splitter_selection":
        from .construct import build

        net = build("splitter", n, k)
        # difftopk mirrors the wires: wire w of the construction is n-1-w
        comps = (n - 1) - net.comparators.astype(np.int64)
        outs = [(n - 1) - w for w in net.outputs]
        return Network.from_arrays(n, comps, net.layer_offsets, outs, construction)
    else:
        raise ValueError(f"unknown sorting_network_type {sorting_network_type!r}; choose one of {', '.join(TYPES)}")
    layers = [l for l in layers if l]
    return Network.from_layers(n, layers, outputs, construction)


def _netgen_network(sorting_network_type: str, size: int, k: int | None) -> Network:
    from .construct import build

    kind = {"odd_even": "transposition", "bitonic": "bitonic", "splitter_selection": "splitter"}.get(sorting_network_type)
    if kind is None:
        raise ValueError(f"unknown sorting_network_type {sorting_network_type!r}; choose one of {', '.join(TYPES)}")
    return build(kind, size, size if k is None else k)


def _resolve_distribution(distribution, interpolation_type) -> str:
    if interpolation_type is not None:
        if distribution is not None and distribution not in ("cauchy", interpolation_type):
            raise ValueError(
                f"two different distributions were set (distribution={distribution!r}, "
                f"interpolation_type={interpolation_type!r}); interpolation_type is a deprecated alias"
            )
        return interpolation_type
    return "cauchy" if distribution is None else distribution


class _Base(torch.nn.Module):
    def _setup(self, sorting_network_type, size, k, device, steepness, art_lambda, interpolation_type,
               distribution, art_epsilon, network, target):
        from .codegen.auto import AutoLayer, check_target

        check_target(target)

        if network == "difftopk":
            net = original_network(sorting_network_type, size, k)
        elif network == "netgen":
            net = _netgen_network(sorting_network_type, size, k)
        else:
            raise ValueError(f"network must be 'difftopk' or 'netgen', got {network!r}")
        self.sorting_network_type = sorting_network_type
        self.size = int(size)
        self.steepness = steepness
        self.art_lambda = art_lambda
        self.distribution = _resolve_distribution(distribution, interpolation_type)
        self.relaxation = Relaxation(self.distribution, steepness, art_lambda, art_epsilon)
        self.network = net
        self.layer = AutoLayer(net, self.relaxation, target, device)

    def forward(self, vectors: torch.Tensor):
        """Their orientation: ascending values and X = P.flip(-2).transpose(-1, -2)."""
        if vectors.shape[-1] != self.size:
            raise ValueError(f"expected input of shape (..., {self.size}), got {tuple(vectors.shape)}")
        values, P = self.layer(vectors)
        return values.flip(-1), P.flip(-2).transpose(-1, -2)


class DiffSortNet(_Base):
    """diffsort.DiffSortNet's arguments and outputs: ``forward(x)`` returns
    ``(x sorted ascending (soft), X)`` with ``X`` ``(..., n, n)`` and
    ``X[..., c, j] = P[..., n-1-j, c]`` (see the module doc)."""

    def __init__(
        self,
        sorting_network_type: str,
        size: int,
        device: str = "cpu",
        steepness: float = 10.0,
        art_lambda: float = 0.25,
        interpolation_type: str | None = None,
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
        interpolation_type: str | None = None,
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
