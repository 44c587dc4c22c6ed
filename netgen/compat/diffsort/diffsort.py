"""``diffsort.diffsort``: the module class and what it imports."""

import torch  # noqa: F401  (a public name of the published module)

from ..nets import DiffSortNet
from .functional import sort
from .networks import get_sorting_network

__all__ = ["DiffSortNet", "sort", "get_sorting_network"]
