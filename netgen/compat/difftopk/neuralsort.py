"""``difftopk.neuralsort``."""

import torch  # noqa: F401  (a public name of the published module)

from ..sorts import NeuralSort

__all__ = ["NeuralSort"]
