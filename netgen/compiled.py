"""One network through the passes and the proof: :func:`compile_network`.

This is where the passes meet the verifier: the cleanup pass needs to know
which comparators ever swap, and that comes from a complete verifier
(:func:`verifier_fires`). The portfolio (:mod:`netgen.portfolio`) runs this
for each candidate; :mod:`netgen.compiler` for one construction or file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable

import numpy as np

from .network import Network
from .passes.pipeline import DEFAULT_PASSES, PassRecord, optimize

if TYPE_CHECKING:  # importing netgen.verify loads numba: done when a proof runs
    from .verify.report import Report


@dataclass
class Compiled:
    """A network after the passes, what each pass did, and its proof."""

    network: Network
    passes: list[PassRecord] = field(default_factory=list)
    report: Report | None = None  # None when not verified
    construct_seconds: float = 0.0  # building (or reading) the network, when measured here
    verify_seconds: float = 0.0  # the proof after the passes (0 when not verified)

    @property
    def seconds(self) -> float:
        """Construction, passes and proof: every step measured once."""
        return self.construct_seconds + sum(r.seconds for r in self.passes) + self.verify_seconds

    def steps(self) -> str:
        """``construct 0.01, prune 0.00, clean 0.87 (-2), schedule 0.00,
        verify 0.40``: each step's seconds, with the comparators a pass
        removed or why it was skipped."""
        parts = [f"construct {self.construct_seconds:.2f}"] if self.construct_seconds else []
        for r in self.passes:
            what = " (skipped)" if r.skipped else f" (-{r.removed})" if r.removed else ""
            parts.append(f"{r.name} {r.seconds:.2f}{what}")
        if self.report is not None:
            parts.append(f"verify {self.verify_seconds:.2f}")
        return ", ".join(parts)


def verifier_fires(net: Network) -> tuple[np.ndarray | None, str]:
    """Which comparators ever swap on a relevant 0-1 input, from a complete
    verifier, as ``(mask, method)``, or ``(None, reason)`` when it cannot be
    known here. The ``fires`` analysis the cleanup pass is given."""
    if net.k == net.n and net.n > 64:
        return None, f"not analyzable (sorter with n = {net.n} > 64: no complete method)"
    from .verify import verify as run_verify

    report = run_verify(net, samples=1)  # only a proof counts here: keep the sampling fallback tiny
    if report.status != "proved" or report.fires is None:
        return None, f"not analyzable (verification: {report}{'; ' + report.detail if report.detail else ''})"
    return np.asarray(report.fires, dtype=bool), report.method


def compile_network(
    net: Network,
    *,
    passes: Iterable[str] | None = DEFAULT_PASSES,
    verify: bool = True,
    log: Callable[[str], None] | None = None,
) -> Compiled:
    """Run the passes (None or () keeps the comparators exactly as given) and
    prove the result, recorded in the network's construction
    (:func:`record_proof`). ``log`` receives one line per pass and one for
    the proof, each as soon as it has run."""
    records: list[PassRecord] = []
    if passes:
        on_pass = None if log is None else (lambda rec: log(f"  pass {rec}"))
        net, records = optimize(net, passes, fires=verifier_fires, log=on_pass)
    report, seconds = None, 0.0
    if verify:
        t0 = time.perf_counter()  # the import counts: it loads numba the first time
        from .verify import verify as run_verify

        report = run_verify(net)
        seconds = time.perf_counter() - t0
        if log is not None:
            log(f"verify: {report} ({seconds:.2f} s)")
        net = record_proof(net, report)
    return Compiled(net, records, report, verify_seconds=seconds)


def record_proof(net: Network, report: Report) -> Network:
    """``net`` with the verdict in its construction (``"verified": "proved
    (reachable states)"``): the network ``compile_network`` returns carries
    its proof, so what ``netgen build`` writes (a JSON file, a module and
    its hash) equals what the same steps write from Python."""
    return net.with_(construction={**net.construction, "verified": str(report)})
