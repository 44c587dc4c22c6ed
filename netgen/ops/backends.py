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
autograd: the definition; O(size) memory per lane and row, slow) and, for
every code-generation target whose :class:`~netgen.codegen.target.Target`
says ``lanes=True``, its layer (:class:`LayerLanes`: built by
:func:`netgen.codegen.operator_layers.operator_layer`, kept in memory and in
netgen's cache on disk; numba's run on one kernel module per relaxation,
shared by every network, so a new (n, k) compiles nothing). ``target="auto"`` takes the usable target of highest
``Target.preference`` that runs on the device and has lanes (as
:class:`~netgen.codegen.auto.AutoLayer` picks), else the reference; naming
a target without lane kernels raises ValueError.
"""

from __future__ import annotations

import functools
import threading
from typing import Callable, Protocol

import torch

from ..codegen import TARGETS, Target
from ..codegen.runtime.common import compiler_disable
from ..network import Network
from ..relax import reference as ref
from ..relax.distributions import Relaxation

__all__ = ["Lanes", "ReferenceLanes", "LayerLanes", "BACKENDS", "TARGET_NAMES", "register", "lanes_for", "backend_name", "check_target"]


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


class LayerLanes:
    """A code-generation target's lane sweeps: its ``Layer``
    (:func:`netgen.codegen.operator_layers.operator_layer`: numba's on the
    kernel module of the relaxation, shared by every network; another
    target's generated module, as AutoLayer's: from netgen's cache on disk,
    emitted once per machine) calling ``values`` / ``back`` / ``fwd`` with
    the call's steepness; one layer per device it was used on."""

    def __init__(self, net: Network, r: Relaxation, target: str):
        self.net, self.relaxation, self.target = net, r, target
        self._on: dict = {}  # device -> its layer (Module.to moves a layer: one each)

    def _for(self, x):
        layer = self._on.get(x.device)
        return self._build(x.device) if layer is None else layer

    @compiler_disable
    def _build(self, device):
        """Build (or load) the layer for ``device``: outside any
        torch.compile trace, which cannot run the cache's imports."""
        from ..codegen.operator_layers import operator_layer

        layer = self._on[device] = operator_layer(self.net, self.relaxation, self.target).to(device)
        return layer

    def values(self, x, s):
        return self._for(x).values(x, steepness=s)

    def back(self, x, s, W):
        return self._for(x).back(x, W, steepness=s)

    def fwd(self, x, s, V):
        return self._for(x).fwd(x, V, steepness=s)

    def __repr__(self):
        return f"LayerLanes({self.target!r}, n={self.net.n}, k={self.net.k}, {self.relaxation})"


def _serves(t: Target) -> Callable[[torch.device], bool]:
    """Whether ``t``'s layers run on a device and are usable here
    (``Target.available``, asked once, for a device it runs on)."""
    usable = functools.cache(lambda: t.available() is None)
    return lambda device: t.runs_on(device.type) and usable()


def _factory(t: Target) -> Callable[[Network, Relaxation], Lanes]:
    return lambda net, r: LayerLanes(net, r, t.name)


#: target name -> (device -> bool: serves it, factory(net, r) -> Lanes):
#: the reference and every target with ``lanes=True``
BACKENDS: dict[str, tuple[Callable[[torch.device], bool], Callable[[Network, Relaxation], Lanes]]] = {
    "reference": (lambda device: True, ReferenceLanes),
    **{t.name: (_serves(t), _factory(t)) for t in TARGETS.values() if t.lanes},
}
#: the names ``target=`` accepts besides "auto" (targets without lane
#: kernels are named too, so their error says what is missing)
TARGET_NAMES = ("reference",) + tuple(TARGETS)
#: the order "auto" tries backends in: the targets by ``Target.preference``
#: (highest first, as AutoLayer), then the reference
AUTO_ORDER = tuple(t.name for t in sorted(TARGETS.values(), key=lambda t: -t.preference)) + ("reference",)

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


def backend_name(target: str, device: torch.device) -> str:
    """The registered backend that runs ``target`` ("auto": the first usable
    in :data:`AUTO_ORDER`) on ``device``; ValueError naming why none does."""
    if target == "auto":
        for name in AUTO_ORDER:
            if name in BACKENDS and BACKENDS[name][0](device):
                return name
        raise ValueError(f"no backend runs on {device}")  # pragma: no cover - the reference runs anywhere
    if target not in BACKENDS:
        have = ", ".join(repr(name) for name in BACKENDS)
        raise ValueError(f"target {target!r} has no lane kernels yet (soft_sort, soft_rank, soft_topk and topk_mask "
                         f"run on {have}); use target='auto' or one of those")
    if not BACKENDS[target][0](device):
        raise ValueError(f"target {target!r} does not run on {device}")
    return target


def lanes_for(net: Network, r: Relaxation, target: str, device) -> Lanes:
    """The backend of ``target`` ("auto": the fastest registered one for
    ``device``) for ``net`` relaxed by ``r``; made once per (network,
    relaxation, backend) and kept."""
    name = backend_name(check_target(target), torch.device(device))
    key = (name, id(net), r)  # networks come from netgen.ops.networks' cache: one object each
    made = _MADE.get(key)
    if made is None or made.net is not net:  # (an id reused after a network was freed)
        with _LOCK:
            made = _MADE[key] = BACKENDS[name][1](net, r)
    return made
