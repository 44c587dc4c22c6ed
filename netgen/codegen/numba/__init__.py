"""The ``numba`` target: a module of ``@njit`` CPU kernels.

* :mod:`.emit`: the emitter (literals, engine constants, the rendered swap
  functions), build time;
* :mod:`.vector`, :mod:`.engine`, :mod:`.kernels`, :mod:`.host`,
  :mod:`.lanes`, :mod:`.layer`: the runtime copied into every module
  (vector helpers, the P engine, the kernels, pool and threads, the lane
  sweeps, autograd and ``Layer``);
* :mod:`.shared`: the operators' kernel module (one per relaxation, any
  network) and the host code run on a network's arrays
  (:mod:`netgen.codegen.operator_layers`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import target as _target
from ..plan import Budget
from ..target import EmitOptions, Target, TestMode

__all__ = ["TARGET", "NumbaOptions"]


@dataclass(frozen=True)
class NumbaOptions(EmitOptions):
    """The numba target's knobs: the plan's overrides (``direction``,
    ``mode``, ``group``)."""


# Mode ``save`` keeps the sweep's differences D (one float per (comparator,
# lane) pair of the plan: nnz per batch row) from the forward for the
# backward; ``recompute`` keeps O(size) per row and re-runs each lane
# group's sweep in the backward. ``save`` where D is at most 4 k n floats
# (top-5 of 10450: 2.6) or at most 16,384 per row: then writing and reading
# D costs less than the second sweep. Sorters have nnz = 4.3 k n (n = 32) to
# 28 k n (n = 4096) going back, 3.2 to 10 k n going forward.
SAVE_PER_KN = 4.0
SAVE_FLOATS = 16384
# Lane groups: the sweep's scratch of one (row block, lane group) pair is
# R = n x g x 16 floats. g is the largest count whose R stays under
# GROUP_BYTES (float32; L2-sized: the recompute mode streams each group's
# differences through it), at least MIN_GROUP (fewer ranks per pass leave
# the per-comparator overhead and the re-reads of p dominant) and at most the
# lanes (k ranks, or n columns).
# Measured (oddeven sorters, B = 64, 2 threads, CPU seconds per fwd+bwd):
# n = 256 best at g = 16..32; n = 1024: g = 1: 4.5, 2: 2.9, 4: 2.1, 8: 2.0,
# 16: 2.5 (its differences no longer stay in cache). Mode save keeps all k ranks in one
# group while R fits SAVE_GROUP_BYTES (top-5 of 10450: 3.3 MB).
GROUP_BYTES = 512 << 10
MIN_GROUP = 4
# Forward-sweep groups write P[b, r, g0:g1] and read dL/dP the same way:
# at least 16 columns, a 64-byte cache line of float32, so no line is
# written piecewise by several groups (sort n = 1024, B = 64, one thread,
# CPU seconds per fwd+bwd, loaded machine: g = 8: 1.71, 16: 1.52, 32: 1.83).
MIN_GROUP_FORWARD = 16
SAVE_GROUP_BYTES = 4 << 20


def group(direction: str, mode: str, n: int, lanes: int) -> int:
    """Lanes per group (see the constants above)."""
    per_lane = n * 16 * 4
    if mode == "save":
        g = max(SAVE_GROUP_BYTES // per_lane, 1)
    else:
        g = max(GROUP_BYTES // per_lane, MIN_GROUP if direction == "back" else MIN_GROUP_FORWARD)
    return int(min(max(g, 1), max(lanes, 1)))


BUDGET = Budget(save_per_kn=SAVE_PER_KN, save_floats=SAVE_FLOATS, group=group)


def _emit(net, r, plan, options) -> str:
    from .emit import emit

    return emit(net, r, plan, options)


def _available() -> str | None:
    return None if _target.has("numba") else "numba is not installed (pip install numba)"


TARGET = Target(
    name="numba",
    summary="a module of numba CPU kernels (parallel over batch blocks, 16-row vector updates)",
    requires=("torch", "numba"),
    devices=("cpu",),
    preference=10,
    needs="numba",
    available=_available,
    options=NumbaOptions,
    budget=BUDGET,
    toolchain=("numba", "torch"),
    emitter=_emit,
    lanes=True,  # Layer.back / Layer.fwd: the lane sweeps of netgen/codegen/numba/lanes.py
    # serial kernels compile ~3x faster; the contract does not depend on threads
    test=TestMode(env={"NETGEN_NUMBA_PARALLEL": "0"}),
)
