"""Never-firing cleanup: drop comparators that swap on no relevant input.

Which comparators ever swap is learned by a complete verifier (exhaustive 0-1
testing or the reachable-state method, see ``netgen.verify``): ``fires[i]``
is True when comparator i swaps for some relevant 0-1 input. By the 0-1
principle a comparator that never swaps on those inputs can be removed without
changing what the network computes on its outputs.
"""

from __future__ import annotations

import numpy as np

from ..network import Network


def remove_never_swapping(net: Network, fires: np.ndarray) -> Network:
    """``net`` without the comparators whose ``fires`` entry is False.
    ``fires`` is a boolean array with one entry per comparator, in
    ``net.comparators`` order."""
    fires = np.asarray(fires)
    if fires.shape != (net.size,):
        raise ValueError(f"fires must have one entry per comparator ({net.size}), got shape {fires.shape}")
    if fires.dtype != np.bool_:
        raise ValueError(f"fires must be a boolean array, got dtype {fires.dtype}")
    if fires.all():
        return net
    return net.with_comparators(fires)
