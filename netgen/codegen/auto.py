"""Pick the fastest target for a device, and build layers in memory.

``target="auto"`` (the default of :func:`netgen.relax.loss.topk_loss` and of
the difftopk/diffsort drop-ins in :mod:`netgen.compat`) means:

* a CUDA device, with numba-cuda installed and a GPU numba can see: ``cuda``
  (the generated kernels: the fastest layer on a GPU);
* a CPU device with numba installed: ``numba`` (the CPU kernels);
* anything else (a GPU without numba-cuda, MPS, ...): ``torch``.

:class:`AutoLayer` applies the rule per call: it builds the layer for the
device of the scores it is given (once per device type) and logs its choice
on the ``netgen`` logger; ``layer.targets`` tells which target serves which
device.
"""

from __future__ import annotations

import importlib.util
import logging
import numbers

import numpy as np

import torch

from . import TARGETS, emit, module_name
from .loader import load_source

__all__ = ["AutoLayer", "build_layer", "pick_target"]

log = logging.getLogger("netgen")


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing
        return False


def _cuda_target_usable() -> bool:
    if not (torch.cuda.is_available() and _has("numba") and _has("numba.cuda")):
        return False
    from ._cuda_compile import numpy_compat

    numpy_compat()
    from numba import cuda

    return bool(cuda.is_available())


def pick_target(device) -> tuple[str, str]:
    """(target, why) for tensors on ``device`` (see the module docstring)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        if _cuda_target_usable():
            return "cuda", "a CUDA device with numba-cuda"
        return "torch", 'a CUDA device without a usable numba-cuda (pip install "netgen-networks[cuda]" for the cuda target)'
    if dev.type == "cpu":
        if _has("numba"):
            return "numba", "a CPU device with numba"
        return "torch", 'a CPU device without numba (pip install numba, a dependency of netgen-networks, for the numba target)'
    return "torch", f"a {dev.type} device (only the torch target runs there)"


def build_layer(net, r, target: str = "torch"):
    """A ``Layer()`` of the generated ``target`` module for ``net`` relaxed
    by ``r``, imported from netgen's on-disk cache (written there on first
    use; nothing goes to ``generated/``; see :mod:`netgen.codegen.cache`)."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose 'auto' or one of {', '.join(TARGETS)}")
    from . import cache

    key = cache.built_key(net, r, target)
    mod = cache.find_built(key)  # built before (this process or another): no emit, no source check
    if mod is None:
        mod = load_source(emit(target, net, r), module_name(net, r, target))
        if not str(getattr(mod, "__file__", "<")).startswith("<"):  # in the cache, not in memory
            cache.remember_built(key, mod.__name__)
    return mod.Layer()


def check_target(target: str) -> str:
    if target != "auto" and target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose 'auto' or one of {', '.join(TARGETS)}")
    return target


def runtime_steepness(layer) -> bool:
    """Whether a generated layer reads ``layer.steepness`` at every call
    (PLAN interface 2) instead of the steepness baked into its module."""
    return "steepness" in vars(layer) or "steepness" in getattr(layer, "_parameters", {}) or isinstance(
        getattr(type(layer), "steepness", None), property)


def check_steepness(s) -> None:
    """ValueError unless ``s`` is a finite number > 0 (tensors: checked only
    on the CPU, where it costs no device synchronisation)."""
    if isinstance(s, torch.Tensor):
        if s.numel() != 1 or s.dim() != 0:
            raise ValueError(f"steepness must be a number or a 0-d tensor, got a tensor of shape {tuple(s.shape)}")
        if s.device.type != "cpu":
            return
        v = float(s.detach())
    else:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (numbers.Real, np.floating, np.integer)):
            raise ValueError(f"steepness must be a number, got {s!r}")
        v = float(s)
    if not (v > 0 and v != float("inf")):
        raise ValueError(f"steepness must be finite and > 0, got {v}")


_OWN = object()


class AutoLayer(torch.nn.Module):
    """A netgen layer whose target follows the scores' device (``target=
    "auto"``) or is fixed. Same interface as a generated ``Layer``:
    ``layer(x) -> (values, P)``, ``layer.column(x, y)``, ``layer.hard(x)``.

    ``steepness`` (attribute, read at every call; None: the relaxation's):
    a number, numpy scalar, 0-d tensor or ``nn.Parameter`` (then it learns).
    It is handed to the generated layer's run-time ``steepness`` (no
    recompilation); a generated module without one is rebuilt for a new
    numeric value instead (a tensor that requires grad then raises).
    :meth:`set_relaxation` swaps distribution / ``art_lambda`` (another
    module, from the cache).

    The layer for a device type is built on the first call with a tensor on
    it; under ``torch.compile`` or CUDA-graph capture, make one eager call
    first (or pass ``device=`` to the builder) so nothing is built while
    tracing. Built layers are not submodules: ``state_dict()`` and pickles
    hold only (network, relaxation, target, steepness), and an unpickled
    AutoLayer rebuilds its layers from netgen's cache on its first call."""

    def __init__(self, net, r, target: str = "auto", device=None, steepness=None):
        super().__init__()
        self.net, self.relaxation, self.target = net, r, check_target(target)
        self.n, self.k = net.n, net.k
        self.steepness = steepness
        self._built: dict = {}  # (device type, relaxation) -> generated Layer
        self.targets: dict[str, str] = {}
        if device is not None:
            self.layer_for(torch.device(device))

    def set_relaxation(self, r) -> None:
        """Use relaxation ``r`` from the next call on (layers built lazily)."""
        self.relaxation = r

    def _target_for(self, device: torch.device) -> str:
        if device.type in self.targets:
            return self.targets[device.type]
        if self.target == "auto":
            target, why = pick_target(device)
            log.info("netgen: target %r for %s (n=%d, k=%d)", target, why, self.n, self.k)
        else:
            target = self.target
        self.targets[device.type] = target
        return target

    def _get(self, device: torch.device, r):
        key = (device.type, r)
        layer = self._built.get(key)
        if layer is None:
            layer = self._built[key] = build_layer(self.net, r, self._target_for(device)).to(device)
        return layer

    def layer_for(self, device: torch.device, steepness=_OWN):
        """The generated layer serving ``device``, with this layer's
        steepness (or ``steepness``, which the caller owns) handed over;
        built on first use."""
        if torch._C._are_functorch_transforms_active():
            raise ValueError(
                "netgen: torch.func transforms (vmap, grad, jacrev, jvp, ...) are not supported by generated "
                "layers; use netgen.relax.reference (plain autograd) for them")
        s = self.steepness if steepness is _OWN else steepness
        layer = self._get(device, self.relaxation)
        if s is None:
            if runtime_steepness(layer):
                _hand_over(layer, self.relaxation.steepness)
            return layer
        check_steepness(s)
        if runtime_steepness(layer):
            _hand_over(layer, s)
            return layer
        # a generated module without run-time steepness: one module per value
        if isinstance(s, torch.Tensor) and s.requires_grad:
            raise ValueError("netgen: a learnable steepness needs generated layers with a run-time steepness "
                             "(this netgen's generated modules bake it in)")
        from dataclasses import replace

        return self._get(device, replace(self.relaxation, steepness=float(s)))

    def forward(self, x):
        return self.layer_for(x.device)(x)

    def column(self, x, y):
        return self.layer_for(x.device).column(x, y)

    def hard(self, x):
        return self.layer_for(x.device).hard(x)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_built"] = {}  # generated modules are rebuilt (from the cache) in the loading process
        state["targets"] = {} if self.target == "auto" else dict(self.targets)
        return state

    def extra_repr(self):
        chosen = ", ".join(f"{d}: {t}" for d, t in self.targets.items()) or "none built yet"
        return f"n={self.n}, k={self.k}, target={self.target!r} ({chosen})"


def _hand_over(layer, s) -> None:
    """``layer.steepness = s`` without making ``s`` a parameter of the
    generated layer (it belongs to its owner: state_dict keys must not
    depend on which layers were built)."""
    if getattr(layer, "steepness", None) is s:
        return
    layer.steepness = s
    for mod in layer.modules():
        params = mod._parameters
        for name in [n for n, p in params.items() if p is s]:
            del params[name]
            object.__setattr__(mod, name, s)
