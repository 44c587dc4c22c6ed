"""0-1 verification of sorting and top-k selection networks.

``verify(net)`` picks a complete method when one applies and says which:

* ``exhaustive``: bit-parallel testing of every relevant 0-1 input (sorters
  up to n ~ 24-32, selection networks with few inputs of <= k ones);
* ``reachable``: the exact reachable-state method (any k for n <= 64, small
  k for larger n), which also tells which comparators ever swap;
* ``sample``: random real-valued and 0-1 inputs; never a proof.

``method="auto"`` uses exhaustive testing for small sorters, the reachable
states otherwise, and falls back to sampling (status ``"sampled"``) when the
state sets explode.
"""

from __future__ import annotations

import time

from ..network import Network
from . import exhaustive, reachable, sampling
from .report import Report
from .reachable import TooManyStates, analyze

__all__ = ["verify", "Report", "analyze", "TooManyStates", "METHODS", "auto_exhaustive"]

METHODS = ("auto", "exhaustive", "reachable", "sample")
# "auto" sweeps all 2^n inputs of a sorter only up to this many (n <= 24)
AUTO_EXHAUSTIVE_INPUTS = 1 << 24
AUTO_TINY_INPUTS = 1 << 12


def auto_exhaustive(n: int, k: int) -> bool:
    """Whether ``method="auto"`` sweeps every relevant 0-1 input at (n, k):
    where that is trivially cheap, or for sorters up to
    ``AUTO_EXHAUSTIVE_INPUTS`` inputs."""
    if exhaustive.choose(n, k) is None:
        return False
    count = exhaustive.input_count(n, k)
    return count <= AUTO_TINY_INPUTS or (k == n and count <= AUTO_EXHAUSTIVE_INPUTS)


def verify(
    net: Network, *, method: str = "auto", samples: int | None = None, seed: int = 0, progress=None
) -> Report:
    """Prove ``net`` correct (status "proved"), find a counterexample, or,
    when no complete method applies, test ``samples`` random inputs (None:
    100,000, fewer for networks so large that the time would grow past
    about a minute; see :func:`netgen.verify.sampling.auto_samples`)
    (status "sampled"). ``method`` is one of ``METHODS``. ValueError when the
    network is too large for the method asked for."""
    if not isinstance(net, Network):
        raise ValueError(f"verify expects a Network, got {type(net).__name__}")
    if method not in METHODS:
        raise ValueError(f"unknown verification method {method!r} (choose from {', '.join(METHODS)})")
    if method == "exhaustive":
        return exhaustive.check(net)
    if method == "reachable":
        return analyze(net, progress=progress)
    if method == "sample":
        return sampling.sample(net, samples=samples, seed=seed)
    # auto: exhaustive where it is trivially cheap or for small sorters (the
    # bit-sliced sweep over 2^n inputs); otherwise reachable states, which are
    # orders of magnitude faster for selection networks (e.g. 0.03 s instead
    # of 8 s for the pruned 38-wire transposition network with k = 7)
    kernel = exhaustive.choose(net.n, net.k)
    if auto_exhaustive(net.n, net.k):
        return exhaustive.check(net)
    t0 = time.perf_counter()
    try:
        return analyze(net, progress=progress)
    except TooManyStates as e:
        why = str(e)
    if kernel is not None:
        return exhaustive.check(net)
    r = sampling.sample(net, samples=samples, seed=seed)
    return Report(r.status, r.method, time.perf_counter() - t0, r.checked, r.counterexample, None,
                  detail=f"no complete method applies: {why}")
