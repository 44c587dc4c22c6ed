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

or run a script unchanged: ``netgen.compat.install()`` before it imports
the published packages makes every import path of them (``import
difftopk``, ``from difftopk.losses import ...``, ``from
diffsort.functional import sort``, ...) give netgen's mirrors
(:mod:`netgen.compat.swap`).

Every public name of diffsort 0.2.0 and difftopk 0.2.0 is here with the
same signature (``netgen.compat.diffsort`` and ``netgen.compat.difftopk``
mirror the two packages module by module and name by name):
``DiffSortNet``, ``DiffTopkNet``, ``sort``, ``topk``, ``bitonic_network``,
``odd_even_network``, ``get_sorting_network``, ``TopKCrossEntropyLoss``
(every ``diffsort_method`` and ``top1_mode``), ``NeuralSort``, ``SoftSort``,
``SmoothTopKLoss``, ``SmoothHardTopKLoss``. Modules have the published
``.sorting_network`` (the matrices, built on access). See docs/migrating.md.

Attributes are live: ``steepness`` (a number, numpy scalar, 1-element
tensor or ``nn.Parameter``, or one value per row), ``distribution``,
``art_lambda``, ``interpolation_type`` are read at every call (see
:mod:`netgen.compat.nets`); ``sorting_network`` is assignable. Steepness
shapes, non-finite scores (NaN out, as published; ``check_finite=True``
for netgen's ValueError), second order and ``torch.func``: see
:mod:`netgen.compat.run`. Modules pickle (``torch.save(model)``) as plain
data and load in a new process (``weights_only=True`` with the same
allowlist as the published modules): the generated layer is rebuilt from
netgen's on-disk cache (:mod:`netgen.codegen.cache`).

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
2-D input only). ``distribution=None`` means cauchy; ``art_lambda`` is read
(and checked) only for ``logistic_phi``.
"""

from __future__ import annotations

from .functional import sort, topk
from .losses import TopKCrossEntropyLoss
from .nets import DiffSortNet, DiffTopkNet
from .networks import TYPES, bitonic_network, get_sorting_network, odd_even_network, original_network
from .smooth import SmoothHardTopKLoss, SmoothTopKLoss
from .sorts import NeuralSort, SoftSort
from .swap import install, uninstall
from . import diffsort, difftopk  # noqa: E402  (the two packages, module for module)

__all__ = [
    "DiffSortNet", "DiffTopkNet", "original_network", "sort", "topk", "bitonic_network", "odd_even_network",
    "get_sorting_network", "TopKCrossEntropyLoss", "NeuralSort", "SoftSort", "SmoothTopKLoss",
    "SmoothHardTopKLoss", "TYPES", "install", "uninstall",
]
