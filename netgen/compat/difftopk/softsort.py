"""``difftopk.softsort``."""

import torch  # noqa: F401  (a public name of the published module)

from ..sorts import SoftSort

__all__ = ["SoftSort"]
