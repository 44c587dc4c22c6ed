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
        return "torch", 'a CUDA device without a usable numba-cuda (pip install "netgen[cuda]" for the cuda target)'
    if dev.type == "cpu":
        if _has("numba"):
            return "numba", "a CPU device with numba"
        return "torch", 'a CPU device without numba (pip install "netgen[numba]" for the numba target)'
    return "torch", f"a {dev.type} device (only the torch target runs there)"


def build_layer(net, r, target: str = "torch"):
    """A ``Layer()`` of the generated ``target`` module for ``net`` relaxed
    by ``r``, compiled in memory (nothing written to ``generated/``)."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose 'auto' or one of {', '.join(TARGETS)}")
    return load_source(emit(target, net, r), module_name(net, r, target)).Layer()


def check_target(target: str) -> str:
    if target != "auto" and target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose 'auto' or one of {', '.join(TARGETS)}")
    return target


class AutoLayer(torch.nn.Module):
    """A netgen layer whose target follows the scores' device (``target=
    "auto"``) or is fixed. Same interface as a generated ``Layer``:
    ``layer(x) -> (values, P)``, ``layer.column(x, y)``, ``layer.hard(x)``.

    The layer for a device type is built on the first call with a tensor on
    it; under ``torch.compile`` or CUDA-graph capture, make one eager call
    first (or pass ``device=`` to the builder) so nothing is built while
    tracing."""

    def __init__(self, net, r, target: str = "auto", device=None):
        super().__init__()
        self.net, self.relaxation, self.target = net, r, check_target(target)
        self.n, self.k = net.n, net.k
        self.layers = torch.nn.ModuleDict()
        self.targets: dict[str, str] = {}
        if device is not None:
            self.layer_for(torch.device(device))

    def layer_for(self, device: torch.device):
        key = f"on_{device.type}"  # not "cpu"/"cuda": ModuleDict keys may not shadow Module methods
        if key not in self.layers:
            if self.target == "auto":
                target, why = pick_target(device)
                log.info("netgen: target %r for %s (n=%d, k=%d)", target, why, self.n, self.k)
            else:
                target = self.target
            self.layers[key] = build_layer(self.net, self.relaxation, target).to(device)
            self.targets[device.type] = target
        return self.layers[key]

    def forward(self, x):
        return self.layer_for(x.device)(x)

    def column(self, x, y):
        return self.layer_for(x.device).column(x, y)

    def hard(self, x):
        return self.layer_for(x.device).hard(x)

    def extra_repr(self):
        chosen = ", ".join(f"{d}: {t}" for d, t in self.targets.items()) or "none built yet"
        return f"n={self.n}, k={self.k}, target={self.target!r} ({chosen})"
