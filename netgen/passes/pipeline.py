"""Run passes in order and record what each one changed.

The passes live in one registry, :data:`PASSES` (name -> :class:`Pass`);
``optimize(net)`` runs :data:`DEFAULT_PASSES` (cone pruning, never-firing
cleanup, ASAP scheduling) and returns the new network with one
:class:`PassRecord` per pass. The names of the passes that really ran are
appended to ``construction["passes"]`` so a written file says what was done
to it. Adding a pass is one function and one registry entry; the CLI and the
compiler take their pass names from here.

The cleanup needs to know which comparators ever swap. That is not a pass's
business: the caller hands it in as ``fires`` (a function from a network to
``(mask or None, source)``). :func:`netgen.compiled.compile_network` passes
the verifier's answer (a complete method: exhaustive 0-1 testing or the
reachable-state method); without ``fires``, or when it returns no mask, the
cleanup is skipped and its record says why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

import numpy as np

from ..network import Network
from .clean import remove_never_swapping
from .prune import prune
from .schedule import asap

#: fires(net) -> (mask, source) or (None, why not): which comparators ever swap
FiresFn = Callable[[Network], "tuple[Optional[np.ndarray], str]"]


@dataclass(frozen=True)
class Outcome:
    """What one pass returns: the network and, structured, what it knew."""

    network: Network
    skipped: str = ""  # why it did not run ("" when it ran)
    fires_from: str = ""  # cleanup: the analysis that said which comparators fire


@dataclass(frozen=True)
class Pass:
    """A registered pass: ``run(net, fires)`` returns an :class:`Outcome`."""

    name: str
    summary: str
    run: Callable[[Network, Optional[FiresFn]], Outcome]


@dataclass(frozen=True)
class PassRecord:
    """What one pass did, as fields; :attr:`note` and ``str()`` are rendered
    from them (nothing parses text)."""

    name: str
    size_before: int
    depth_before: int
    size_after: int
    depth_after: int
    seconds: float
    skipped: str = ""  # why the pass did not run ("" when it ran)
    fires_from: str = ""  # cleanup: which analysis gave the firing comparators

    @property
    def applied(self) -> bool:
        return not self.skipped

    @property
    def removed(self) -> int:
        """Comparators the pass removed."""
        return self.size_before - self.size_after

    @property
    def note(self) -> str:
        if self.skipped:
            return f"skipped, {self.skipped}"
        if self.fires_from:
            return (f"removed {self.removed} never-swapping comparator{'s' * (self.removed != 1)} "
                    f"(fires from {self.fires_from})")
        return ""

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
            "removed": self.removed,
            "seconds": round(self.seconds, 6),
            "applied": self.applied,
            "skipped": self.skipped,
            "fires_from": self.fires_from,
            "note": self.note,
        }


def _prune(net: Network, fires: FiresFn | None) -> Outcome:
    return Outcome(prune(net))


def _schedule(net: Network, fires: FiresFn | None) -> Outcome:
    return Outcome(asap(net))


def _clean(net: Network, fires: FiresFn | None) -> Outcome:
    if fires is None:
        return Outcome(net, skipped="no firing analysis given (netgen.compiled.compile_network gives the verifier's)")
    mask, source = fires(net)
    if mask is None:
        return Outcome(net, skipped=source)
    return Outcome(remove_never_swapping(net, mask), fires_from=source)


#: every pass, by name, in the default order
PASSES: dict[str, Pass] = {
    p.name: p
    for p in (
        Pass("prune", "drop comparators that cannot reach an output wire", _prune),
        Pass("clean", "drop comparators that never swap (needs a firing analysis)", _clean),
        Pass("schedule", "pack every comparator into the earliest layer (ASAP)", _schedule),
    )
}
#: what ``netgen build`` and :func:`netgen.compiler.compile` run
DEFAULT_PASSES: tuple[str, ...] = tuple(PASSES)
#: the passes that need no analysis (fast; what ``netgen table --no-clean`` runs)
STRUCTURAL_PASSES: tuple[str, ...] = ("prune", "schedule")


def check_passes(passes: Iterable[str]) -> tuple[str, ...]:
    """``passes`` as a tuple; ValueError naming an unknown pass."""
    passes = tuple(passes)
    unknown = [p for p in passes if p not in PASSES]
    if unknown:
        raise ValueError(f"unknown pass {unknown[0]!r}; known passes: {', '.join(PASSES)}")
    return passes


def optimize(
    net: Network,
    passes: Iterable[str] = DEFAULT_PASSES,
    *,
    fires: FiresFn | None = None,
    log: Callable[[PassRecord], None] | None = None,
) -> tuple[Network, list[PassRecord]]:
    """Apply ``passes`` (names from :data:`PASSES`) in order. ``fires``: the
    firing analysis the cleanup needs (see the module docstring); ``log``
    receives each record as soon as its pass has run."""
    passes = check_passes(passes)
    records: list[PassRecord] = []
    applied: list[str] = []
    for name in passes:
        t0 = time.perf_counter()
        before = net
        outcome = PASSES[name].run(net, fires)
        net = outcome.network
        rec = PassRecord(name, before.size, before.depth, net.size, net.depth, time.perf_counter() - t0,
                         outcome.skipped, outcome.fires_from)
        if rec.applied:
            applied.append(name)
        records.append(rec)
        if log is not None:
            log(rec)
    if applied:
        construction = dict(net.construction)
        construction["passes"] = list(construction.get("passes", [])) + applied
        net = net.with_(construction=construction)
    return net, records
