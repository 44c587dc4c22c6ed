"""``diffsort.networks``: the networks in diffsort's matrix format."""

import math  # noqa: F401  (public names of the published module)

import numpy as np  # noqa: F401
import torch  # noqa: F401

from ..networks import bitonic_network, odd_even_network


def get_sorting_network(type, n, device):
    """diffsort's ``get_sorting_network``: 'bitonic' or 'odd_even', dense."""
    if type not in ("bitonic", "odd_even"):
        raise ValueError(f"unknown sorting network type {type!r}; choose 'bitonic' or 'odd_even'")
    from ..networks import get_sorting_network as _get

    return _get(type, n, device)


__all__ = ["bitonic_network", "odd_even_network", "get_sorting_network"]
