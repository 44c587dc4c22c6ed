"""The driver: construct -> passes -> verify, as one call.

``netgen build`` and the Python API share this, so a network built from the
command line and one built in a script are the same value.

* :func:`compile` (old name ``build``): the portfolio's winner, or one named
  construction, after the passes and with its proof;
* :func:`compile_network`: passes and proof for a network you already have;
* :func:`build_network` (old name ``construct``, which read like
  :func:`netgen.construct.construct` with other arguments): the network
  alone (the portfolio's winner, or one construction without passes or
  proof).

Layering: :mod:`netgen.compiled` (one network through passes and proof) <
:mod:`netgen.portfolio` (many candidates) < this module.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from .compiled import Compiled, compile_network
from .construct import construct as construct_kind
from .construct import size_estimate
from .construct._common import check_nk
from .construct.best import check_objective
from .estimate import build_seconds, check_time
from .network import Network, check_budget
from .passes.pipeline import DEFAULT_PASSES, check_passes
from .portfolio import DEFAULT_OBJECTIVE, choose

__all__ = ["Compiled", "compile", "compile_network", "build_network", "build", "DEFAULT_PASSES"]


def build_network(n: int, k: int | None = None, network: str | None = None, objective: str | None = None) -> Network:
    """Build the network of ``network`` kind (``objective`` picks among the
    best-known networks for ``best``; default "size"), with no passes or
    proof. Default (no ``network``): the portfolio's winner by ``objective``
    (default "depth"), already pruned, cleaned, scheduled and proved; see
    :func:`compile`."""
    if network is None:
        return compile(n, k, objective=objective).network
    n, k = check_nk(n, k)
    if objective is not None:
        check_objective(objective)
    return construct_kind(network, n, k, objective or "size")


def compile(  # noqa: A001 - netgen.compiler.compile, as torch.compile
    n: int,
    k: int | None = None,
    network: str | None = None,
    *,
    objective: str | None = None,
    passes: Iterable[str] | None = DEFAULT_PASSES,
    verify: bool = True,
    log: Callable[[str], None] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    max_seconds: float | None = None,
) -> Compiled:
    """Construct, run the passes and prove, in one call. Without ``network``
    the portfolio (:mod:`netgen.portfolio`) builds every cheap construction,
    proves each and keeps the best by ``objective`` ("depth": shallowest
    then smallest, the default; "size": smallest then shallowest). ``log``
    receives each step as it is done: one line per candidate, or the
    construction, each pass and the proof; ``progress(done, total, label)``
    each portfolio candidate as it starts (a progress bar's hook).

    Before anything is built, the time is estimated
    (:func:`netgen.estimate.build_seconds`) and a build estimated past
    ``max_seconds`` CPU seconds (default 60,
    :data:`netgen.estimate.DEFAULT_MAX_SECONDS`; the CLI's ``--max-seconds``)
    is refused with :class:`netgen.estimate.TimeLimitError` (a ValueError)
    naming the estimate."""
    passes = check_passes(passes) if passes else None  # before a (possibly long) construction
    if objective is not None:
        check_objective(objective)
    if network is not None:
        from .construct import _check_kind

        _check_kind(network)
        m, kk = check_nk(n, k)
        check_budget(f"{network} network at n = {m}, k = {m if kk is None else kk}",
                     size_estimate(network, m, kk) + m)  # the size refusal first, as construct() would
    check_time(build_seconds(n, k, network, objective=objective, passes=bool(passes), verify=verify), max_seconds)
    if network is None:
        compiled, _ = choose(n, k, objective or DEFAULT_OBJECTIVE, passes=passes, verify=verify, log=log,
                             progress=progress)
        return compiled
    t0 = time.perf_counter()
    net = build_network(n, k, network, objective)
    seconds = time.perf_counter() - t0
    if log is not None:
        log(f"constructed {network} in {seconds:.2f} s: {net!r}")
    compiled = compile_network(net, passes=passes, verify=verify, log=log)
    compiled.construct_seconds = seconds
    return compiled


#: the old name of :func:`compile`
build = compile


def __getattr__(name: str):
    # the old name of build_network: netgen.construct.construct builds a
    # construction from (kind, n, k); this one took (n, k, network)
    if name == "construct":
        import warnings

        warnings.warn("netgen.compiler.construct(n, k, network) is now netgen.compiler.build_network "
                      "(netgen.construct.construct(kind, n, k) is the construction itself)", DeprecationWarning,
                      stacklevel=2)
        return build_network
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
