"""ASAP scheduling: put every comparator in the earliest layer its wires allow.

Depth is what the relaxation error and the kernels' synchronisation count grow
with, so every depth netgen quotes is measured after this pass. The order
within a layer is the order of first appearance in the input network, so the
result is deterministic, and the pass is idempotent. The packing itself is
:func:`netgen.schedule.pack`, shared with the IR and the constructions.
"""

from __future__ import annotations

from ..network import Network
from ..schedule import MAX_NUMPY_CHUNKS, asap_levels, is_packed, pack

__all__ = ["asap", "asap_levels", "MAX_NUMPY_CHUNKS"]


def asap(net: Network) -> Network:
    """``net`` re-layered as soon as possible. Never increases depth; the
    comparator sequence is a valid reordering of the original one (the
    relative order of comparators sharing a wire is kept)."""
    if is_packed(net.n, net.comparators, net.layer_offsets):  # pack would give the same arrays: no copy
        return net
    packed = pack(net.n, net.comparators, net.layer_offsets)
    return net.with_(comparators=packed.comparators, layer_offsets=packed.layer_offsets)
