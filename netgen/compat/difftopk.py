"""difftopk 0.2.0's public names, one for one (``sys.modules["difftopk"] =
netgen.compat.difftopk`` runs a difftopk script on netgen)."""

from .functional import topk
from .losses import SmoothHardTopKLoss, SmoothTopKLoss, TopKCrossEntropyLoss
from .nets import DiffTopkNet
from .networks import get_sorting_network
from .sorts import NeuralSort, SoftSort

__all__ = ["DiffTopkNet", "topk", "get_sorting_network", "SmoothTopKLoss", "SmoothHardTopKLoss", "SoftSort",
           "NeuralSort", "TopKCrossEntropyLoss"]
