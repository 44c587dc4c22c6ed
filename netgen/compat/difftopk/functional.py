"""``difftopk.functional``: ``topk`` and the helpers published beside it.
``SPARSE_INSTALLED`` is True: netgen reads the sparse format without
torch_sparse."""

import math  # noqa: F401  (public names of the published module)
from typing import List, Tuple  # noqa: F401

import torch  # noqa: F401

from ..functional import SORTING_NETWORK_TYPE, NormalCDF, execute_sparse_topk, execute_topk, s_best, topk

SPARSE_INSTALLED = True

__all__ = ["topk", "execute_topk", "execute_sparse_topk", "s_best", "NormalCDF", "SORTING_NETWORK_TYPE",
           "SPARSE_INSTALLED"]
