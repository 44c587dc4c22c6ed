"""The driver: construct -> passes -> verify, as one call.

``netgen build`` and the Python API share this, so a network built from the
command line and one built in a script are the same value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .network import Network


@dataclass
class Compiled:
    network: Network
    passes: list = field(default_factory=list)  # PassRecord per pass run
    report: Any = None  # netgen.verify.report.Report, or None when not verified


def construct(n: int, k: int | None = None, network: str | None = None, objective: str | None = None) -> Network:
    """Build the network of ``network`` kind (``objective`` picks among the
    best-known networks for ``best``; default "size"). Default (no
    ``network``): the portfolio's winner by ``objective`` (default "depth"),
    already pruned, cleaned, scheduled and proved; see :func:`build`."""
    if network is None:
        return build(n, k, objective=objective).network
    from .construct import build as build_kind
    from .construct._common import check_nk
    from .construct.best import check_objective

    n, k = check_nk(n, k)
    if objective is not None:
        check_objective(objective)
    return build_kind(network, n, k, objective or "size")


def build(
    n: int,
    k: int | None = None,
    network: str | None = None,
    *,
    objective: str | None = None,
    passes: tuple[str, ...] | None = ("prune", "clean", "schedule"),
    verify: bool = True,
    log=None,
) -> Compiled:
    """Construct, run the passes and prove, in one call. Without ``network``
    the portfolio (:mod:`netgen.construct.portfolio`) builds every cheap
    construction, proves each and keeps the best by ``objective`` ("depth":
    shallowest then smallest, the default; "size": smallest then
    shallowest); ``log`` receives one line per candidate."""
    if network is None:
        from .construct.portfolio import DEFAULT_OBJECTIVE, choose

        compiled, _ = choose(n, k, objective or DEFAULT_OBJECTIVE, passes=passes, verify=verify, log=log)
        return compiled
    return compile_network(construct(n, k, network, objective), passes=passes, verify=verify)


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
