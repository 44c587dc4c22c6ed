"""The portfolio default: build every construction that is cheap at (n, k),
prove each, keep the best by the objective.

The candidates are what each construction of the registry proposes at
(n, k) (its portfolio rule, :mod:`netgen.construct.registry`). Today, for
k < n: the pruned best-known sorter (n <= 64), the splitter network, the Wah-Chen selection networks (bitonic, oddeven, pairwise) and
the Batcher sorters cone-pruned to the top k, and last the record network
of the cell where the shipped record table has one (:mod:`netgen.construct.record`; last,
so that it is chosen only where it is strictly better, ties keep the
construction that built it); for k = n the best-known sorter
(n <= 64) and the Batcher sorters. Each candidate runs the same passes and
proof as ``netgen build --network KIND`` (:func:`netgen.compiled.compile_network`).

Large candidates are skipped before they are built when their formulas say
they cannot win: a candidate whose estimated comparator count is above
:data:`CHEAP` is built only if its depth formula (or size bound, for the size
objective) is within :data:`SLACK` of the best proved so far. The formulas
are upper bounds before cleanup, and cleanup removes little (86 of 31,445
comparators and one layer at (5, 10450)), so a candidate far behind stays
behind. Small candidates are always built and proved.

Objectives: "depth" (shallowest, then fewest comparators; the portfolio's
default, since depth is what the relaxation error and the kernels'
synchronisation count grow with) or "size" (fewest, then shallowest).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable

from .compiled import Compiled, compile_network, record_proof
from .construct import smallest_estimate
from .construct._common import MAX_COMPARATORS, check_nk
from .construct.best import N_MAX, check_objective, objective_key
from .construct.registry import REGISTRY, Proposal
from .network import Network, check_budget, check_max_size
from .passes.pipeline import DEFAULT_PASSES, check_passes

#: candidates estimated below this many comparators are always built and proved
CHEAP = 4096
#: a larger candidate is built only if its estimate is within this factor of the best so far
SLACK = 1.2
DEFAULT_OBJECTIVE = "depth"


class PortfolioError(RuntimeError):
    """The portfolio failed where it never should (a bug in netgen, not bad
    input): ``netgen build`` reports it as an internal error, exit code 1."""


@dataclass
class Candidate:
    """A construction's :class:`~netgen.construct.registry.Proposal` at
    (n, k), and what became of it."""

    proposal: Proposal
    make: Callable[[], Network]
    compiled: Compiled | None = None  # once built
    skipped: str = ""  # why it was not built
    seconds: float = 0.0

    @property
    def kind(self) -> str:
        """The construction that proposed it (a name of the registry)."""
        return self.proposal.kind

    @property
    def label(self) -> str:  # e.g. "splitter", "oddeven selection", "best (SorterHunter, pruned)"
        return self.proposal.label

    @property
    def est_depth(self) -> int | None:  # formula before cleanup (None: not known before building)
        return self.proposal.est_depth

    @property
    def est_size(self) -> int:
        return self.proposal.est_size

    @property
    def network(self) -> Network | None:
        return None if self.compiled is None else self.compiled.network

    def describe(self) -> str:
        if self.compiled is None:
            return f"{self.label}: skipped ({self.skipped})"
        net, report = self.compiled.network, self.compiled.report
        proof = "not verified" if report is None else str(report)
        return (f"{self.label}: depth {net.depth}, size {net.size}, {proof} "
                f"({self.seconds:.2f} s: {self.compiled.steps()})")


def candidates(n: int, k: int, objective: str = DEFAULT_OBJECTIVE) -> list[Candidate]:
    """The portfolio at (n, k): every registered construction's proposals
    (:data:`netgen.construct.registry.REGISTRY`), most likely winners first
    (by stage, then registry order), those too large to build left out."""
    props = sorted((p for c in REGISTRY.values() for p in c.proposals(n, k, objective)), key=lambda p: p.stage)
    # the size budget in force bounds a candidate (comparator_limit() is at least that budget)
    return [Candidate(p, p.make) for p in props if p.est_size + n <= check_max_size(None)]


def sample_only(n: int, k: int) -> bool:
    """No complete verification method applies at (n, k): sorters above 64
    wires, and n > 64 with k > 16 (the reachable-state tokens handle
    k <= 16). Sampling a candidate there costs up to ~3 s and proves
    nothing, so the portfolio samples the winner only."""
    from .verify.reachable import MAX_TOKENS

    return (k == n and n > N_MAX) or (n > 64 and k > MAX_TOKENS)


def _cannot_win(c: Candidate, best_net: Network | None, objective: str) -> str:
    """Why ``c`` is skipped without building it, or "" to build it."""
    if best_net is None or c.est_size <= CHEAP:
        return ""
    if objective == "depth" and c.est_depth is not None and c.est_depth > SLACK * best_net.depth:
        return f"depth formula {c.est_depth} > {SLACK} x {best_net.depth}"
    if objective == "size" and c.est_size > SLACK * best_net.size and c.est_depth is not None:
        # est_size is an upper bound; use it only together with a losing depth formula
        if c.est_depth >= best_net.depth:
            return f"size estimate {c.est_size} > {SLACK} x {best_net.size} and depth formula {c.est_depth} >= {best_net.depth}"
    return ""


def _dominated(c: Candidate, cands: list[Candidate], objective: str) -> str:
    """Why ``c`` cannot win against another candidate whose exact (depth,
    size) after the passes is known (:attr:`Proposal.exact`: Batcher sorters
    at n = 2^L > 64) and better, or equal and earlier (ties keep the
    earlier); "" to build it. Only where no candidate is verified on its own
    (so none drops out by a counterexample): the better one is built in its
    turn, or skipped by the same rules for a still better one."""
    if c.proposal.exact is None:
        return ""
    key = (lambda e: e) if objective == "depth" else (lambda e: (e[1], e[0]))
    mine = key(c.proposal.exact)
    for i, d in enumerate(cands):
        if d is c or d.proposal.exact is None:
            continue
        theirs = key(d.proposal.exact)
        if theirs < mine or (theirs == mine and i < cands.index(c)):
            return f"{d.label} is smaller or shallower (exact: depth {d.proposal.exact[0]}, size {d.proposal.exact[1]})"
    return ""


def choose(
    n: int,
    k: int | None = None,
    objective: str = DEFAULT_OBJECTIVE,
    *,
    passes: Iterable[str] | None = DEFAULT_PASSES,
    verify: bool = True,
    log: Callable[[str], None] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[Compiled, list[Candidate]]:
    """Build, prove and compare the portfolio; return ``(compiled, candidates)``
    where ``compiled`` is the winner's :class:`netgen.compiled.Compiled`.
    Proved candidates beat sampled ones; a candidate with a counterexample
    is reported and never chosen. Sorters on more than 64 wires have no
    complete method, nor has n > 64 with k > 16 (:func:`sample_only`): there
    only the winner is verified (by sampling), not every candidate.
    ``progress(done, total, label)`` is called before each candidate is
    built (and once at the end). ``log`` gets one line per candidate (with
    the time of each of its steps) as it is done, and one for a winner-only
    proof.
    :class:`PortfolioError` when no candidate survives (a bug, not bad input)."""
    check_objective(objective)
    passes = check_passes(passes) if passes else None
    n, k = check_nk(n, k)
    k = n if k is None else k
    key = objective_key(objective)
    cands = candidates(n, k, objective)
    if not cands:
        check_budget(f"the smallest construction at n = {n}, k = {k}", smallest_estimate(n, k) + n)
        raise ValueError(f"n = {n}, k = {k}: every construction would need more than {MAX_COMPARATORS:.3g} "
                         "comparators, too large")
    # no complete method (sorters above 64 wires; n > 64 with k > 16): sample only the winner
    each = verify and not sample_only(n, k)
    winner = None
    steps = len(cands) + (verify and not each)
    for i, c in enumerate(cands):
        c.skipped = _cannot_win(c, None if winner is None else winner.network, objective)
        if not c.skipped and not each:  # each candidate not verified: exact formulas decide too
            c.skipped = _dominated(c, cands, objective)
        if c.skipped:
            continue
        if progress is not None:
            progress(i, steps, c.label)
        t0 = time.perf_counter()
        net = c.make()
        built = time.perf_counter()
        c.compiled = compile_network(net, passes=passes, verify=each)
        c.compiled.construct_seconds = built - t0
        c.seconds = time.perf_counter() - t0
        if log is not None:
            log(f"  candidate {c.describe()}")
        if c.compiled.report is not None and c.compiled.report.status == "counterexample":
            continue
        if winner is None or _rank(c, key) < _rank(winner, key):
            winner = c
    if log is not None:
        for c in cands:
            if c.skipped:
                log(f"  candidate {c.describe()}")
    if winner is None:
        raise PortfolioError(
            f"no candidate network for n = {n}, k = {k} passed verification: "
            + "; ".join(c.describe() for c in cands)
        )
    if verify and not each:
        if progress is not None:
            progress(len(cands), steps, "verify the winner")
        t0 = time.perf_counter()
        from .verify import verify as run_verify

        winner.compiled.report = run_verify(winner.network)
        winner.compiled.verify_seconds = time.perf_counter() - t0
        winner.compiled.network = record_proof(winner.compiled.network, winner.compiled.report)
        if log is not None:
            log(f"verify (the winner only): {winner.compiled.report} ({winner.compiled.verify_seconds:.2f} s)")
    if progress is not None:
        progress(steps, steps, "")
    return winner.compiled, cands


def _rank(c: Candidate, key) -> tuple:
    report = c.compiled.report
    unproved = report is not None and report.status != "proved"
    return (unproved, *key(c.compiled.network))
