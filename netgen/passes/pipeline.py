"""Run passes in order and record what each one changed.

``optimize(net)`` runs cone pruning, never-firing cleanup and ASAP scheduling
and returns the new network with one :class:`PassRecord` per pass. The names
of the passes that really ran are appended to ``construction["passes"]`` so
a written file says what was done to it.

The cleanup needs to know which comparators ever swap; that comes from a
complete verifier (``netgen.verify``): exhaustive 0-1 testing when there are
few relevant inputs, the reachable-state method otherwise. When neither
applies (a sorter too wide for exhaustive testing, state sets too large, a
wrong network) the cleanup is skipped and its record says why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..network import Network
from .clean import remove_never_swapping
from .prune import prune
from .schedule import asap

PASSES = ("prune", "clean", "schedule")

FiresFn = Callable[[Network], "tuple[np.ndarray | None, str]"]


@dataclass(frozen=True)
class PassRecord:
    name: str
    size_before: int
    depth_before: int
    size_after: int
    depth_after: int
    seconds: float
    note: str = ""
    applied: bool = True

    def __str__(self) -> str:
        s = (
            f"{self.name}: size {self.size_before} -> {self.size_after}, "
            f"depth {self.depth_before} -> {self.depth_after} ({self.seconds:.2f} s)"
        )
        return f"{s}; {self.note}" if self.note else s

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "size_before": self.size_before,
            "depth_before": self.depth_before,
            "size_after": self.size_after,
            "depth_after": self.depth_after,
            "seconds": round(self.seconds, 6),
            "note": self.note,
            "applied": self.applied,
        }


def verifier_fires(net: Network) -> tuple[np.ndarray | None, str]:
    """Which comparators ever swap on a relevant 0-1 input, from a complete
    verifier, or ``(None, reason)`` when it cannot be known here."""
    try:
        from ..verify import verify
    except ImportError as e:  # pragma: no cover - verifier missing
        return None, f"verifier unavailable ({e})"
    if net.k == net.n and net.n > 64:
        return None, f"not analyzable (sorter with n = {net.n} > 64: no complete method)"
    report = verify(net, samples=1)  # only a proof counts here: keep the sampling fallback tiny
    if report.status != "proved" or report.fires is None:
        return None, f"not analyzable (verification: {report}{'; ' + report.detail if report.detail else ''})"
    return np.asarray(report.fires, dtype=bool), f"fires from {report.method}"


def optimize(
    net: Network,
    passes: tuple[str, ...] | list[str] = PASSES,
    *,
    fires: FiresFn | None = None,
) -> tuple[Network, list[PassRecord]]:
    """Apply ``passes`` (names from :data:`PASSES`) in order. ``fires`` maps
    a network to ``(mask or None, note)``; default :func:`verifier_fires`."""
    unknown = [p for p in passes if p not in PASSES]
    if unknown:
        raise ValueError(f"unknown pass {unknown[0]!r}; known passes: {', '.join(PASSES)}")
    fires = fires or verifier_fires
    records: list[PassRecord] = []
    applied: list[str] = []
    for name in passes:
        t0 = time.perf_counter()
        before = net
        note = ""
        ok = True
        if name == "prune":
            net = prune(net)
        elif name == "schedule":
            net = asap(net)
        else:
            mask, note = fires(net)
            if mask is None:
                ok = False
                note = f"skipped, {note}"
            else:
                net = remove_never_swapping(net, mask)
                removed = before.size - net.size
                note = f"removed {removed} never-swapping comparator{'s' * (removed != 1)} ({note})"
        if ok:
            applied.append(name)
        records.append(
            PassRecord(name, before.size, before.depth, net.size, net.depth, time.perf_counter() - t0, note, ok)
        )
    if applied:
        construction = dict(net.construction)
        construction["passes"] = list(construction.get("passes", [])) + applied
        net = net.with_(construction=construction)
    return net, records
