"""The backend interface the operators run on: lane sweeps of one network.

A backend serves one (network, relaxation) with three sweeps
(docs/operators.md defines them; :mod:`netgen.relax.reference` is the
definition every backend is tested against):

* ``values(x, s) -> P x`` of shape ``(B, k)`` (rank 0 = the largest);
* ``back(x, s, W) -> W P`` of shape ``(B, m, n)`` for ``W`` of shape
  ``(m, k)`` (one W for every row) or ``(B, m, k)``;
* ``fwd(x, s, V) -> P V`` of shape ``(B, k, d)`` for ``V`` of shape
  ``(n, d)`` or ``(B, n, d)``.

``x`` is ``(B, n)`` in float32 or float64 (the front door moves ``dim``
last, flattens the leading dims and computes half inputs in float32);
``B`` may be 0. ``s`` is the steepness: a Python float or a 0-d tensor,
which then gets a gradient. Each sweep is differentiable w.r.t. x, s and
W / V; NaN or inf in x raises ValueError. P itself is never formed.

Registered backends: ``"reference"`` (:mod:`netgen.relax.reference` under
autograd: the definition; O(size) memory per lane and row, slow). The
targets (torch, numba, cuda) register here when their lane kernels exist;
until then ``target="auto"`` runs the reference and naming a target that
has none raises ValueError.
"""

from __future__ import annotations

import threading
from typing import Callable, Protocol

import torch

from ..network import Network
from ..relax import reference as ref
from ..relax.distributions import Relaxation

__all__ = ["Lanes", "ReferenceLanes", "BACKENDS", "TARGET_NAMES", "register", "lanes_for", "check_target"]


class Lanes(Protocol):
    """What a backend implements for one network and relaxation."""

    net: Network
    relaxation: Relaxation

    def values(self, x: torch.Tensor, s) -> torch.Tensor: ...

    def back(self, x: torch.Tensor, s, W: torch.Tensor) -> torch.Tensor: ...

    def fwd(self, x: torch.Tensor, s, V: torch.Tensor) -> torch.Tensor: ...


class ReferenceLanes:
    """The reference executor's lane sweeps (plain autograd)."""

    def __init__(self, net: Network, r: Relaxation):
        self.net, self.relaxation = net, r

    def values(self, x, s):
        return ref.soft_values(self.net, x, self.relaxation, s)

    def back(self, x, s, W):
        return ref.back(self.net, x, W, self.relaxation, s)

    def fwd(self, x, s, V):
        return ref.fwd(self.net, x, V, self.relaxation, s)

    def __repr__(self):
        return f"ReferenceLanes(n={self.net.n}, k={self.net.k}, {self.relaxation})"


#: target name -> (device -> bool: serves it, factory(net, r) -> Lanes)
BACKENDS: dict[str, tuple[Callable[[torch.device], bool], Callable[[Network, Relaxation], Lanes]]] = {
    "reference": (lambda device: True, ReferenceLanes),
}
#: the names ``target=`` accepts besides "auto" (the code-generation targets
#: are named even before they register, so their error says what is missing)
TARGET_NAMES = ("reference", "torch", "numba", "cuda")
#: the order "auto" tries registered backends in: fastest first
AUTO_ORDER = ("cuda", "numba", "torch", "reference")

_MADE: dict[tuple, Lanes] = {}  # never emptied but by register(): one entry per network used
_LOCK = threading.Lock()


def register(name: str, serves: Callable[[torch.device], bool], factory: Callable[[Network, Relaxation], Lanes]) -> None:
    """Register a target's lane kernels (``serves(device)``: whether it runs
    there; ``factory(net, r)``: the :class:`Lanes` of a network)."""
    if name not in TARGET_NAMES:
        raise ValueError(f"unknown target {name!r}; targets are {', '.join(TARGET_NAMES)}")
    BACKENDS[name] = (serves, factory)
    with _LOCK:
        _MADE.clear()


def check_target(target) -> str:
    if target != "auto" and target not in TARGET_NAMES:
        raise ValueError(f"unknown target {target!r}; choose 'auto' or one of {', '.join(TARGET_NAMES)}")
    return target


def _pick(target: str, device: torch.device) -> str:
    if target == "auto":
        for name in AUTO_ORDER:
            if name in BACKENDS and BACKENDS[name][0](device):
                return name
        raise ValueError(f"no backend runs on {device}")  # pragma: no cover - the reference runs anywhere
    if target not in BACKENDS:
        raise ValueError(f"target {target!r} has no lane kernels yet (issue 31: soft_sort, soft_rank, soft_topk and "
                         "topk_mask run on the reference executor until each target implements the lane sweeps); "
                         "use target='auto' or 'reference'")
    if not BACKENDS[target][0](device):
        raise ValueError(f"target {target!r} does not run on {device}")
    return target


def lanes_for(net: Network, r: Relaxation, target: str, device) -> Lanes:
    """The backend of ``target`` ("auto": the fastest registered one for
    ``device``) for ``net`` relaxed by ``r``; made once per (network,
    relaxation, backend) and kept."""
    name = _pick(check_target(target), torch.device(device))
    key = (name, id(net), r)  # networks come from netgen.ops.networks' cache: one object each
    made = _MADE.get(key)
    if made is None or made.net is not net:  # (an id reused after a network was freed)
        with _LOCK:
            made = _MADE[key] = BACKENDS[name][1](net, r)
    return made
