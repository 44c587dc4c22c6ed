"""How long a build will take, estimated before it starts, and the time
budget that refuses builds estimated past it (issue 19: "bounded work,
refused early").

A build is construct -> passes (prune, clean, schedule) -> verify, once per
portfolio candidate. Measured on 2 shared AMD EPYC cores (CPU seconds,
``benchmarks/build_times.py`` prints estimate against measurement), the time
goes to the proofs: the cleanup pass asks a complete verifier which
comparators ever fire, and the final verification proves the cleaned network
again, so a network that has a complete method is proved twice. The model,
per candidate, from what is known before anything is built (n, k, the
construction's comparator estimate and depth formula):

* construct, prune and schedule: linear in comparators;
* a proof by reachable states (n <= 64: bitmasks; n > 64 and k <= 16:
  token lists): comparators x a cost per comparator that grows ~2.8x with
  each extra output past k ~ 6 (the state sets do: 3,125 states at k = 8,
  71,844 at k = 12, past the 4M limit at k = 16 for the splitter) and
  with (lg n)^2.5;
* no complete method (n > 64 with k > 16, sorters above 64 wires): the
  cleanup is skipped and verification samples random inputs, bounded by
  :func:`netgen.verify.sampling.auto_samples` (inputs x (comparators + wires)
  <= 2 x 10^8, about 3 s);
* small exhaustive sweeps: comparators x inputs / 64 word operations;
* a fixed start-up (numba loading the verifier's kernels).

Candidates the portfolio skips (a depth formula more than 1.2x the best
depth so far) are predicted with the same rule; each construction's typical
size and depth (the splitter's from fitted formulas) are registered with it
(:mod:`netgen.construct.registry`). The estimate is for an idle core: on a loaded
machine the wall time is longer (the message says "CPU seconds").

The budget: :data:`DEFAULT_MAX_SECONDS` (60), raised by ``max_seconds=``
(Python) or ``--max-seconds`` (CLI), or for a block with
:func:`time_limit`; ``float("inf")`` switches it off.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: default time budget of a build, in estimated CPU seconds
DEFAULT_MAX_SECONDS = 60.0

# ------------------------------------------------------------ cost constants
# CPU seconds per unit, fitted to measurements on this project's machine
# (benchmarks/build_times.py prints estimate and measurement side by side)
# building, and again prune plus schedule, per comparator or wire (splitter 471,252: 0.39 s;
# selections: 0.18 s per 1.1M)
CONSTRUCT_PER_COMPARATOR = 5e-7
# reachable states (tokens, n > 64), per comparator: 1.5e-5 + 1.6e-8 * 2.8^k * (lg n / 8)^2.5, the
# second term at most 2e-2 * (lg n / 8)^2.5 (past 4M states the method gives up). Measured
# (splitter, CPU s per comparator): k = 2: 1.6e-5 (n = 16384, 65536); k = 4: 1.2e-5 (n = 1024,
# 4096); k = 8: 4e-5 (n = 256), 9e-5 (n = 16384); k = 10: 6e-4 (n = 1024); k = 12: 1.5e-3
# (n = 256), 7e-3 (n = 1024: 60 CPU s for the build); k = 16: 1.6e-2 (n = 256: past the
# state limit after 23 s, then sampled). The fit errs high by up to ~3x (k = 8, n = 16384).
PROOF_PER_COMPARATOR = 1.5e-5
PROOF_STATES = 1.6e-8
PROOF_GROWTH = 2.8  # per extra output
PROOF_CAP = 2e-2
# n <= 64 (bitmasks), per comparator: 1e-5 + 2e-3 * 2^((n - 64) / 4.5). Measured: best sorter
# n = 64: 3.6e-3 (521 comparators, 1.9 s); splitter 64/32: 6.7e-4; 64/16: 2.5e-4; best 40/20: 9e-5;
# bitonic 64/32 and oddeven 48/24: 2e-5 (few states)
MASKS_PER_COMPARATOR = 1e-5
MASKS_AT_64 = 2e-3
# Batcher sorters of at least netgen.construct.sorters.LARGE comparators (built in int32,
# pack_layers), construct and passes, per comparator: oddeven n = 2^20 (100.7M): 3.8 s to
# construct, ~1 s for the passes (prune, schedule: unchanged) and the checks
LARGE_SORTER_PER_COMPARATOR = 6e-8
SAMPLE_PER_UNIT = 1.5e-8  # sampling: per input and (comparator + wire) (2e8 units: ~3 s)
EXHAUSTIVE_PER_WORD = 2e-9  # bit-sliced sweep: per comparator and 64 inputs
STARTUP = 0.7  # numba loading the verifier's cached kernels, once per process (a 40-wire build: 1.0 CPU s in all)


class TimeLimitError(ValueError):
    """A build estimated past the time budget (a ValueError: the CLI prints
    it as one line with exit code 2)."""


_MAX_SECONDS: contextvars.ContextVar[float] = contextvars.ContextVar("netgen_max_seconds",
                                                                   default=DEFAULT_MAX_SECONDS)


def check_max_seconds(max_seconds: Any) -> float:
    """Validate a ``max_seconds`` budget (None: the current limit,
    :data:`DEFAULT_MAX_SECONDS` unless :func:`time_limit` raised it)."""
    if max_seconds is None:
        return _MAX_SECONDS.get()
    if isinstance(max_seconds, bool) or not isinstance(max_seconds, (int, float, np.integer, np.floating)) \
            or not max_seconds > 0:
        raise ValueError(f"max_seconds must be a number > 0, got {max_seconds!r}")
    return float(max_seconds)


@contextlib.contextmanager
def time_limit(max_seconds: float | None):
    """Within the block, builds refuse past ``max_seconds`` estimated CPU
    seconds (None: keep the current limit). The CLI's ``--max-seconds``
    works through this."""
    token = _MAX_SECONDS.set(check_max_seconds(max_seconds))
    try:
        yield
    finally:
        _MAX_SECONDS.reset(token)


# ---------------------------------------------------------------- the model
@dataclass
class Estimate:
    """Estimated CPU seconds of a build, with the parts it adds up from.
    ``what`` names it for the refusal ("building n = 10, k = 3 (portfolio)")."""

    what: str
    seconds: float = 0.0
    parts: list[tuple[str, float]] = field(default_factory=list)

    def add(self, label: str, seconds: float) -> None:
        self.parts.append((label, seconds))
        self.seconds += seconds

    def top(self, count: int = 3) -> str:
        """The largest parts, e.g. ``splitter: proof 70 s, verify 70 s``."""
        big = sorted(self.parts, key=lambda p: -p[1])[:count]
        return ", ".join(f"{label} {_fmt(s)}" for label, s in big if s >= 0.5)


def _fmt(seconds: float) -> str:
    if seconds >= 10:
        return f"{seconds:,.0f} s"
    return f"{seconds:.1f} s" if seconds >= 0.1 else f"{seconds:.2g} s"


def reachable_per_comparator(n: int, k: int, batcher: bool = False) -> float:
    """CPU seconds per comparator of the reachable-state proof at (n, k)
    (the fits above; past the state limit it gives up, then samples).
    ``batcher``: a Batcher sorter or selection network, whose few reachable
    states make the proof cheaper (bitmasks, n <= 64: ~50x; tokens: the
    state-dependent part ~10x: (256, 12) builds in 4.6 CPU s in all)."""
    if n <= 64:  # bitmasks, finished bit-sliced when the states grow
        return MASKS_PER_COMPARATOR + MASKS_AT_64 * 2.0 ** ((n - 64) / 4.5) * (0.02 if batcher else 1.0)
    k = min(max(k, 1), 16)  # above 16 outputs the token method does not apply
    grow = max(1.0, math.log2(max(n, 2)) / 8) ** 2.5
    states = min(PROOF_STATES * PROOF_GROWTH ** k, PROOF_CAP) * grow
    return PROOF_PER_COMPARATOR + states * (0.1 if batcher else 1.0)


def proof_method(n: int, k: int) -> str:
    """Which method ``verify`` will use at (n, k): "exhaustive", "reachable"
    or "sample" (as :func:`netgen.verify.verify` decides with method="auto")."""
    from .verify import auto_exhaustive
    from .verify.reachable import MAX_TOKENS

    if auto_exhaustive(n, k):
        return "exhaustive"
    if n <= 64 or k <= MAX_TOKENS:
        return "reachable"
    return "sample"


def proof_seconds(n: int, k: int, size: int, batcher: bool = False) -> tuple[str, float]:
    """(method, CPU seconds) of verifying a network of ``size`` comparators."""
    method = proof_method(n, k)
    if method == "exhaustive":
        from .verify import exhaustive

        return method, EXHAUSTIVE_PER_WORD * size * (exhaustive.input_count(n, k) / 64 + 1)
    if method == "reachable":
        return method, size * reachable_per_comparator(n, k, batcher)
    return method, sample_seconds(n, size)


def sample_seconds(n: int, size: int) -> float:
    from .verify.sampling import AUTO_SAMPLES, AUTO_WORK, MIN_AUTO_SAMPLES

    samples = max(MIN_AUTO_SAMPLES, min(AUTO_SAMPLES, AUTO_WORK // (size + n)))
    return SAMPLE_PER_UNIT * samples * (size + n)


def network_seconds(n: int, k: int, size: int, *, passes=True, verify=True, construct: bool = False,
                    label: str = "", est: Estimate | None = None, batcher: bool = False,
                    large: bool = False) -> Estimate:
    """The steps of one network of ``size`` comparators (a construction's
    estimate, or a network in hand): ``construct`` (building it), the passes
    (``passes``: whether the cleanup's proof runs) and the proof
    (``verify``)."""
    if est is None:
        est = Estimate(label)
        if verify or passes:
            est.add("start-up", STARTUP)
    prefix = f"{label}: " if label else ""
    if construct or passes:
        stages = int(construct) + int(bool(passes))
        per = LARGE_SORTER_PER_COMPARATOR / 2 if large else CONSTRUCT_PER_COMPARATOR
        est.add(f"{prefix}construct and passes", per * (size + n) * stages)
    sorter_unprovable = k == n and n > 64
    method, proof = proof_seconds(n, k, size, batcher)
    if passes and method != "sample" and not sorter_unprovable:
        est.add(f"{prefix}cleanup proof", proof)  # clean asks a complete verifier which comparators fire
    if verify:
        est.add(f"{prefix}verify ({'sampling' if sorter_unprovable else method})",
                sample_seconds(n, size) if sorter_unprovable else proof)
    return est


def _large_sorter(kind: str, n: int, k: int, size: float) -> bool:
    """Whether ``construct(kind, n)`` takes the large sorters' int32 path."""
    from .construct.registry import BATCHER
    from .construct.sorters import LARGE

    return kind in BATCHER and k == n and size >= LARGE


def build_seconds(n: int, k: int | None = None, network: str | None = None, *, objective: str | None = None,
                  passes=True, verify: bool = True) -> Estimate:
    """Estimated CPU seconds of ``netgen.compiler.compile(n, k, network,
    ...)``: one construction, or the portfolio (``network=None``). Each
    construction's typical size and depth, and whether its proof is cheap
    (few reachable states), come from its registration
    (:mod:`netgen.construct.registry`)."""
    from .construct._common import check_nk
    from .construct.registry import REGISTRY, get

    n, k = check_nk(n, k)
    k = n if k is None else k
    est = Estimate(f"building n = {n}, k = {k}" + (f", {network}" if network else " (portfolio)"))
    if verify or passes:
        est.add("start-up", STARTUP)
    if network is not None:
        c = get(network)
        return network_seconds(n, k, c.estimated_size(n, k), passes=passes, batcher=c.few_states,
                               verify=verify, construct=True, label=network, est=est,
                               large=_large_sorter(network, n, k, c.estimated_size(n, k)))
    from .portfolio import CHEAP, SLACK, _dominated, candidates, sample_only

    objective = objective or "depth"
    cands = candidates(n, k, objective)
    best_depth = None
    each = verify and not sample_only(n, k)
    winner_size = 0
    for c in cands:
        p = c.proposal
        depth = p.est_depth if p.typical_depth is None else p.typical_depth
        size = p.est_size if p.typical_size is None else min(p.est_size, p.typical_size)
        if (best_depth is not None and c.est_size > CHEAP and depth is not None
                and depth > SLACK * best_depth and objective == "depth"):
            continue  # the portfolio will skip it (its rule, from the estimates)
        if not each and _dominated(c, cands, objective):
            continue  # another candidate's exact size and depth beat it: not built
        network_seconds(n, k, size, passes=passes, verify=each, construct=True, label=c.label, est=est,
                        batcher=REGISTRY[c.kind].few_states, large=_large_sorter(c.kind, n, k, size))
        if depth is not None and (best_depth is None or depth < best_depth):
            best_depth = depth
            winner_size = size
        winner_size = winner_size or size
    if verify and not each:
        est.add("verify the winner (sampling)", sample_seconds(n, winner_size))
    return est


def check_time(est: Estimate, max_seconds: float | None = None) -> None:
    """Refuse, before anything is built, a build estimated past the budget;
    the message names the estimate, its largest parts and how to raise the
    limit."""
    limit = check_max_seconds(max_seconds)
    if est.seconds > limit:
        top = est.top()
        raise TimeLimitError(
            f"{est.what} is estimated at ~{_fmt(est.seconds)} of CPU time{f' ({top})' if top else ''}: too slow "
            f"(limit {_fmt(limit)}; raise it with --max-seconds S, in Python max_seconds=S)"
        )
