"""The driver: construct -> passes -> verify, as one call.

``netgen build`` and the Python API share this, so a network built from the
command line and one built in a script are the same value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .network import Network

SORTER_KINDS = ("oddeven", "pairwise", "bitonic")


@dataclass
class Compiled:
    network: Network
    passes: list = field(default_factory=list)  # PassRecord per pass run
    report: Any = None  # netgen.verify.report.Report, or None when not verified


def construct(n: int, k: int | None = None, network: str | None = None) -> Network:
    """Build the network of ``network`` kind. Default: the splitter network
    for k < n, otherwise the smallest sorter construction (fewest
    comparators, then shallowest)."""
    from .construct import build
    from .construct._common import check_nk

    n, k = check_nk(n, k)
    if network is not None:
        return build(network, n, k)
    if k is not None and k < n:
        return build("splitter", n, k)
    return min((build(kind, n, n) for kind in SORTER_KINDS), key=lambda net: (net.size, net.depth))


def compile_network(
    net: Network,
    *,
    passes: tuple[str, ...] | None = ("prune", "clean", "schedule"),
    verify: bool = True,
) -> Compiled:
    """Run the passes (None or () keeps the comparators exactly as given) and
    prove the result."""
    records: list = []
    if passes:
        from .passes.pipeline import optimize

        net, records = optimize(net, passes=tuple(passes))
    report = None
    if verify:
        from .verify import verify as run_verify

        report = run_verify(net)
    return Compiled(net, records, report)
