"""Cone pruning: keep only comparators that can influence an output wire.

Walking backwards from the end, a wire is *needed* if it is an output or
feeds a kept comparator later on; a comparator is kept when one of its wires
is needed at that point (then both its wires become needed before it). The
scan itself is :func:`netgen.schedule.cone_mask`, shared with the
constructions.
"""

from __future__ import annotations

from ..network import Network
from ..schedule import cone_mask

__all__ = ["prune", "cone_mask"]


def prune(net: Network) -> Network:
    """``net`` without the comparators that cannot affect ``net.outputs``.
    Layers keep their order; layers left empty disappear."""
    keep = cone_mask(net.n, net.comparators, net.outputs, net.layer_offsets)
    if keep.all():
        return net
    return net.with_comparators(keep)
