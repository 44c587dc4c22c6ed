"""diffsort 0.2.0's public names, one for one (``sys.modules["diffsort"] =
netgen.compat.diffsort`` runs a diffsort script on netgen)."""

from .functional import sort
from .nets import DiffSortNet
from .networks import bitonic_network, odd_even_network


def get_sorting_network(type, n, device):
    """diffsort's ``get_sorting_network``: 'bitonic' or 'odd_even', dense."""
    if type not in ("bitonic", "odd_even"):
        raise ValueError(f"unknown sorting network type {type!r}; choose 'bitonic' or 'odd_even'")
    from .networks import get_sorting_network as _get

    return _get(type, n, device)


__all__ = ["DiffSortNet", "sort", "bitonic_network", "odd_even_network", "get_sorting_network"]
