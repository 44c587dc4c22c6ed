"""Which network the benchmark's netgen layers run, and what memory a
configuration may use.

* :func:`portfolio_network` is the network ``netgen build --n N --k K``
  would write: :func:`netgen.compiler.build` (the portfolio, objective
  depth), without the final proof (the benchmark measures speed; the
  portfolio's choice does not depend on that proof except when a
  construction is wrong, which the test suite rules out). It is saved as a
  ``netgen-network/1`` file so every configuration's process reads the
  same network instead of rebuilding it.
* :func:`describe` is the one line the benchmark prints about it.
* :func:`plan_nnz` counts the (comparator, rank) pairs the back-sweep of the
  k output rows touches: what a layer that kept the sweep for its backward
  would store per batch row (docs/design.md section 8).
* :func:`memory_budget` is the memory one configuration may use: a fraction
  of the memory available when the benchmark starts, or ``--max-memory``.
"""

from __future__ import annotations

import os
from pathlib import Path

#: share of MemAvailable one configuration may use by default
BUDGET_FRACTION = 0.6


def portfolio_network(n: int, k: int, folder) -> tuple[Path, object]:
    """``(path, network)``: the portfolio's choice at (n, k), written to
    ``folder`` (named by the network's content, so equal networks share a
    file and a changed portfolio never reuses a stale one)."""
    from ..compiler import build
    from ..io import save

    net = build(n, k, verify=False).network
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"portfolio_n{n}_k{k}_{net.key()[:12]}.json"
    if not path.exists():
        save(net, path)
    return path, net


def plan_nnz(net) -> int:
    """(comparator, rank) pairs of the back-sweep: for each comparator, the
    number of output ranks whose row of P can be non-zero on its wires
    when the sweep (last layer first) reaches it."""
    masks = [0] * net.n
    for r, w in enumerate(net.outputs):
        masks[w] |= 1 << r
    total = 0
    comps = net.comparators
    for i in range(len(comps) - 1, -1, -1):
        a, b = int(comps[i, 0]), int(comps[i, 1])
        m = masks[a] | masks[b]
        masks[a] = masks[b] = m
        total += m.bit_count() if hasattr(m, "bit_count") else bin(m).count("1")
    return total


def describe(net) -> str:
    """``oddeven sorter, depth 55, size 24,063, nnz 19,703,808 (18.8 k n)``."""
    c = net.construction or {}
    kind = str(c.get("kind", "network"))
    what = "sorter" if net.k == net.n else "selection"
    nnz = plan_nnz(net)
    return (f"{kind} {what}, depth {net.depth}, size {net.size:,}, nnz {nnz:,} "
            f"({nnz / (net.k * net.n):.1f} k n)")


def available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def memory_budget(max_memory_gb: float | None = None) -> int | None:
    """Bytes one configuration may use: ``max_memory_gb`` when given, else
    :data:`BUDGET_FRACTION` of the memory available now (None: no guard)."""
    if max_memory_gb is not None:
        if not max_memory_gb > 0:
            raise ValueError(f"--max-memory must be positive, got {max_memory_gb}")
        return int(max_memory_gb * 2**30)
    avail = available_bytes()
    return None if avail is None else int(avail * BUDGET_FRACTION)


def cpu_model() -> str:
    """The CPU model name (for the benchmark's header)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def cpu_count() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def dense_bytes(method: str, B: int, n: int, k: int) -> int | None:
    """Estimated peak bytes of the dense difftopk / diffsort executors (None
    for other methods): their bitonic network has ``L (L + 1) / 2`` layers
    (``L = ceil(lg n)``), each an ``n x n`` float32 matrix, built once and
    multiplied per batch row with autograd keeping every layer's product:
    about ``(2 B + 1) depth n^2`` floats."""
    if method not in ("difftopk", "diffsort"):
        return None
    L = max(1, (n - 1).bit_length())
    depth = L * (L + 1) // 2
    return 4 * depth * n * n * (2 * B + 1)
