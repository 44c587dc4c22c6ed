"""``diffsort.functional``: ``sort`` and the helpers published beside it."""

import math  # noqa: F401  (public names of the published module)
from typing import List, Tuple  # noqa: F401

import torch  # noqa: F401

from ..functional import SORTING_NETWORK_TYPE, NormalCDF, execute_sort, s_best, sort

__all__ = ["sort", "execute_sort", "s_best", "NormalCDF", "SORTING_NETWORK_TYPE"]
