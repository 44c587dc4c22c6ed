"""Benchmark grids: which (method, B, n, k) configurations to run.

``QUICK`` finishes in a few minutes on a 2-core machine; ``DEFAULT`` is the
full comparison. Methods whose cost explodes with n are limited (recorded
as ``skipped`` with the reason, never silently dropped):

* difftopk / diffsort (dense bitonic: n x n matrices per layer; the
  DiffTopkNet constructor alone takes seconds at n = 1024): n <= 256;
* Sinkhorn sort (n x n transport plan, hundreds of iterations): n <= 1024.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: temperatures used by the benchmark (the registry defaults are for unit
#: inputs of a few elements; the benchmark's inputs are N(0, 1) scores)
BENCH_OPTIONS = {
    "neuralsort": {"temperature": 0.1},
    "neuralsort_gumbel": {"temperature": 0.1},
    "softsort": {"temperature": 0.1},
    # the OT baselines run at their authors' defaults (Sinkhorn sort: epsilon
    # 1e-3 with the decay rule; SOFT top-k: epsilon 0.1, 200 iterations);
    # a Sinkhorn row that misses the authors' threshold is reported, not fatal
    "sinkhorn_sort": {"on_nonconvergence": "warn"},
    "lapsum": {"temperature": 0.1},
    "lapsum_topk": {"temperature": 0.1},
    "smooth_topk": {"temperature": 1.0},
}

#: method -> (largest n, reason)
LIMITS = {
    "difftopk": (256, "dense difftopk builds n x n matrices per layer (constructor and memory blow up); limited to n <= 256"),
    "diffsort": (256, "dense diffsort builds n x n matrices per layer; limited to n <= 256"),
    "sinkhorn_sort": (1024, "Sinkhorn sort keeps an n x n plan per row and iterates hundreds of times; limited to n <= 1024"),
}


@dataclass(frozen=True)
class Grid:
    batch: tuple[int, ...]
    n: tuple[int, ...]
    k: tuple[int, ...]
    timeout_s: float = 120.0
    repeats: int = 10
    warmup: int = 2
    limits: dict = field(default_factory=lambda: dict(LIMITS))
    #: True: full sorting, k = n for every n (``k`` is ignored)
    sort: bool = False

    def pairs(self):
        """The (n, k) pairs of the grid, in run order."""
        return [(n, n) for n in self.n] if self.sort else [(n, k) for n in self.n for k in self.k if k <= n]

    def configs(self, methods):
        """``(method, B, n, k, skip_reason or None)`` in run order."""
        out = []
        for B in self.batch:
            for n, k in self.pairs():
                for m in methods:
                    lim = self.limits.get(m)
                    reason = lim[1] if lim is not None and n > lim[0] else None
                    out.append((m, B, n, k, reason))
        return out


QUICK = Grid(
    batch=(16,), n=(64, 256, 1024), k=(5,), timeout_s=30.0, repeats=5, warmup=1,
    limits={**LIMITS,
            "difftopk": (128, "quick grid: dense difftopk limited to n <= 128"),
            "diffsort": (128, "quick grid: dense diffsort limited to n <= 128"),
            "sinkhorn_sort": (128, "quick grid: Sinkhorn sort (n x n plan, many iterations) limited to n <= 128")},
)
DEFAULT = Grid(batch=(64,), n=(16, 256, 1024, 10450), k=(1, 5), timeout_s=180.0, repeats=10, warmup=2)
#: full sorting (k = n), the workload of diffsort's users: every method on
#: its own network (netgen: the portfolio's sorter; diffsort/difftopk: their
#: bitonic networks) where it fits in memory -- no fixed n limit, the
#: harness's memory estimate decides (see netgen.bench.worker)
SORTING = Grid(batch=(64,), n=(32, 256, 1024), k=(), sort=True, timeout_s=300.0, repeats=5, warmup=1, limits={})


def parse_ints(text: str, name: str) -> tuple[int, ...]:
    """``"16,256,1024"`` -> (16, 256, 1024); ValueError naming ``name``."""
    try:
        vals = tuple(int(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        raise ValueError(f"{name} must be a comma-separated list of integers, got {text!r}") from None
    if not vals or any(v < 1 for v in vals):
        raise ValueError(f"{name} must list positive integers, got {text!r}")
    return vals
