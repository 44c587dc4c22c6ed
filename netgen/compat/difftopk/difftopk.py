"""``difftopk.difftopk``: the module class and what it imports."""

import torch  # noqa: F401  (a public name of the published module)

from ..nets import DiffTopkNet
from .functional import topk
from .networks import get_sorting_network

__all__ = ["DiffTopkNet", "topk", "get_sorting_network"]
