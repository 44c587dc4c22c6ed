"""``difftopk.networks``: the networks in difftopk's dense and sparse
matrix formats."""

import math  # noqa: F401  (public names of the published module)

import numpy as np  # noqa: F401
import torch  # noqa: F401

from .. import diffsort  # noqa: F401  (difftopk.networks imports diffsort)
from ..networks import get_sorting_network, get_sparse_net, sparse_bitonic_network, sparse_splitter_selection_network

__all__ = ["get_sorting_network", "get_sparse_net", "sparse_bitonic_network", "sparse_splitter_selection_network"]
