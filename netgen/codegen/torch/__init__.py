"""The ``torch`` target: a self-contained PyTorch module (needs only torch;
runs on any torch device).

* :mod:`.emit`: the emitter (constants, the compressed index table, the
  rendered ``_swap``), build time;
* :mod:`.layer`, :mod:`.engine`: the runtime copied into every module (the
  sweeps as autograd Functions, ``Layer``; the P engine).

Its P engine sweeps back only (P's rows by rank groups), so its plan always
has ``direction="back"`` (forcing ``"forward"`` is a ValueError), keeps the
differences of every rank of every comparator (``Budget.dense``: size x k
floats per row) and chooses its rank groups per call (``group`` None).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..plan import Budget
from ..target import EmitOptions, Target

__all__ = ["TARGET", "TorchOptions"]


@dataclass(frozen=True)
class TorchOptions(EmitOptions):
    """The torch target's knobs: the plan's overrides (``mode``, ``group``;
    ``direction`` can only be "back")."""


# Mode ``save`` keeps the back-sweep's differences D (size x k floats per
# batch row) from the forward for the backward; ``recompute`` keeps O(size)
# per row and re-runs the back-sweep in the backward, one rank group at a
# time. ``save`` where D is at most 4 k n floats (size <= 4 n; top-5 of
# 10450: size = 3.0 n) or at most 65,536 floats per row (256 KB in float32):
# then writing and reading D costs less than a second back-sweep. Sorters
# have size = 6 n (n = 32) to 23.5 n (n = 1024). Measured (odd-even, B = 64,
# float32, one thread, fwd+bwd, save / recompute): n = 64 (size x k =
# 34,752) 12.4 / 19.7 ms, n = 128 (188,288) 77.8 / 67.2 ms.
BUDGET = Budget(save_per_kn=4, save_floats=65536, dense=True, forward=False,
                group=lambda direction, mode, n, lanes: None)


def _emit(net, r, plan, options) -> str:
    from .emit import emit

    return emit(net, r, plan, options)


def _available() -> str | None:
    return None  # runs wherever torch does


TARGET = Target(
    name="torch",
    summary="a PyTorch module: vector ops over each layer's comparators, on any device",
    requires=("torch",),
    devices=None,
    preference=0,
    needs="torch",
    available=_available,
    options=TorchOptions,
    budget=BUDGET,
    toolchain=("torch",),
    emitter=_emit,
    lanes=True,
)
