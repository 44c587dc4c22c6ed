"""difftopk 0.2.0, module for module: ``netgen.compat.difftopk`` stands for
``difftopk`` and its submodules (``difftopk.difftopk``, ``.functional``,
``.losses``, ``.networks``, ``.neuralsort``, ``.smooth_topk``,
``.softsort``) stand for theirs, each with every public name of the
published module (netgen's implementations; the internals of difftopk's
hand-written smooth-loss backward are named but not provided, see
:mod:`netgen.compat.smooth`). :func:`netgen.compat.install` puts them in
``sys.modules`` under the published names."""

from . import difftopk, functional, losses, networks, neuralsort, smooth_topk, softsort
from .difftopk import DiffTopkNet
from .functional import topk
from .losses import TopKCrossEntropyLoss
from .networks import get_sorting_network
from .neuralsort import NeuralSort
from .smooth_topk import SmoothHardTopKLoss, SmoothTopKLoss
from .softsort import SoftSort

__all__ = ["DiffTopkNet", "topk", "get_sorting_network", "SmoothTopKLoss", "SmoothHardTopKLoss", "SoftSort",
           "NeuralSort", "TopKCrossEntropyLoss"]
