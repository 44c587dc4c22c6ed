"""``difftopk.losses``: ``TopKCrossEntropyLoss`` and what it imports."""

from typing import List  # noqa: F401  (public names of the published module)

import torch  # noqa: F401

from ..losses import TopKCrossEntropyLoss
from ..nets import DiffTopkNet
from ..sorts import NeuralSort, SoftSort

__all__ = ["TopKCrossEntropyLoss", "DiffTopkNet", "NeuralSort", "SoftSort"]
