"""Pick the fastest target for a device, and build layers in memory.

``target="auto"`` (the default of :func:`netgen.topk_loss` and of the
difftopk/diffsort drop-ins in :mod:`netgen.compat`) means: among the targets
whose layers run on the device (:attr:`Target.devices
<netgen.codegen.target.Target>`) and are usable here
(:attr:`~netgen.codegen.target.Target.available`), the one of highest
:attr:`~netgen.codegen.target.Target.preference`:

* a CUDA device, with numba-cuda installed and a GPU numba can see: ``cuda``
  (the generated kernels: the fastest layer on a GPU);
* a CPU device with numba installed: ``numba`` (the CPU kernels);
* anything else (a GPU without numba-cuda, MPS, ...): ``torch``.

On a GPU the torch target is a fallback, not a choice: it issues a few
tensor ops per comparator layer group, about 1,100 kernel launches per rows
forward + backward of top-5 of 10,450 (17.8 ms at B = 500 on an H100,
against 1.58 ms for the cuda target, measured for issue 29), so ``auto``
takes it on a CUDA device only where the cuda target is not usable, and
says so at INFO with what to install (:data:`FALLBACK_NOTES`).

:class:`AutoLayer` applies the rule per call: it builds the layer for the
device of the scores it is given (once per device type) and logs its choice
on the ``netgen`` logger; ``layer.targets`` tells which target serves which
device.
"""

from __future__ import annotations

import logging

import torch

from ..relax.steepness import AutoSteepness, estimate_steepness, is_auto, optional_blur, plain_state, restore_state
from . import TARGETS
from .cache import build_layer
from .operator_layers import operator_layer
from .runtime.common import check_input, refuse_transforms
from .runtime.layer import LayerBase

__all__ = ["AutoLayer", "build_layer", "pick_target", "check_target", "runtime_steepness"]

log = logging.getLogger("netgen")

#: (target, device type) -> what ``auto`` adds to its log line when it falls
#: back to that target there (measured, issue 29)
FALLBACK_NOTES = {
    ("torch", "cuda"): (
        "; the torch target on a GPU is a fallback: ~1,100 kernel launches per rows forward + backward of "
        "top-5 of 10,450 (17.8 ms at B = 500 on an H100, the cuda target 1.58 ms); install numba-cuda "
        '(pip install "netgen-networks[cuda]") for the cuda target'),
}


def pick_target(device) -> tuple[str, str]:
    """(target, why) for tensors on ``device`` (see the module docstring)."""
    dev = torch.device(device)
    where = f"a {dev.type.upper() if dev.type in ('cpu', 'cuda') else dev.type} device"
    missed = []
    for t in sorted(TARGETS.values(), key=lambda t: -t.preference):
        if not t.runs_on(dev.type):
            continue
        why_not = t.available()
        if why_not is None:
            if t.devices is None and not missed:
                return t.name, f"{where} (only the {t.name} target runs there)"
            if t.devices is None:
                return t.name, f"{where} without a usable {missed[0][0]} target ({missed[0][1]})"
            return t.name, f"{where} with {t.needs}"
        missed.append((t.name, why_not))
    raise ValueError(f"no netgen target runs on {where}")  # pragma: no cover - torch runs anywhere


def check_target(target: str) -> str:
    if target != "auto" and (not isinstance(target, str) or target not in TARGETS):
        raise ValueError(f"unknown target {target!r}; choose 'auto' or one of {', '.join(TARGETS)}")
    return target


def runtime_steepness(layer) -> bool:
    """Whether a generated layer reads ``layer.steepness`` at every call
    (PLAN interface 2) instead of the steepness baked into its module."""
    return "steepness" in vars(layer) or "steepness" in getattr(layer, "_parameters", {}) or isinstance(
        getattr(type(layer), "steepness", None), property)


_OWN = object()


class AutoLayer(LayerBase):
    """A netgen layer whose target follows the scores' device (``target=
    "auto"``) or is fixed. Same interface as a generated ``Layer`` (the same
    Layer base: argument checks, steepness rule, torch.func refused):
    ``layer(x) -> (values, P)``, ``layer.values(x)``, ``layer.column(x, y)``,
    ``layer.hard(x)``.

    ``steepness`` (attribute, read at every call; None: the relaxation's):
    a number, numpy scalar, 1-element tensor (0-d or ``(1,)``) or
    ``nn.Parameter`` (then it learns), or ``"auto"``: chosen from the
    scores (detached) so that the blur (:func:`netgen.blur`) is ``blur``
    (attribute in (0, 1); default None: 0.75 calibrating in training, 0.1
    otherwise), by the submodule ``auto_steepness``
    (:class:`~netgen.relax.steepness.AutoSteepness`: the first 4 training
    calls, then fixed; eval mode uses the value as it is; the value is a
    buffer in the state_dict). It is handed to the generated layer's run-time ``steepness`` (no
    recompilation); a generated module without one is rebuilt for a new
    numeric value instead (a tensor that requires grad then raises).
    :meth:`set_relaxation` swaps distribution / ``art_lambda`` (another
    module, from the cache).

    The layer for a device type is built on the first call with a tensor on
    it; under ``torch.compile`` or CUDA-graph capture, make one eager call
    first (or pass ``device=`` to the builder) so nothing is built while
    tracing. Built layers are not submodules: ``state_dict()`` and pickles
    hold only (network, relaxation, target, steepness), as plain Python
    data (``torch.load(..., weights_only=True)`` needs only this class
    allowlisted), and an unpickled AutoLayer rebuilds its layers from
    netgen's cache on its first call."""

    def __init__(self, net, r, target: str = "auto", device=None, steepness=None, blur: float | None = None):
        super().__init__(None)
        self.net, self.relaxation, self.target = net, r, check_target(target)
        self.n, self.k = net.n, net.k
        self.blur = optional_blur(blur)
        self.steepness = steepness
        self._built: dict = {}  # (device type, relaxation) -> generated Layer
        self.targets: dict[str, str] = {}
        if device is not None:
            self.layer_for(torch.device(device))

    def __setattr__(self, name, value):
        if name == "blur":
            value = optional_blur(value)
            if "auto_steepness" in self._modules:
                self.auto_steepness.blur = value
        if name == "steepness" and isinstance(value, str):
            if not is_auto(value):
                raise ValueError(f"steepness must be a number, a 1-element tensor or 'auto', got {value!r}")
            self._parameters.pop("steepness", None)
            self.__dict__.pop("steepness", None)
            torch.nn.Module.__setattr__(self, name, value)
            if "auto_steepness" not in self._modules:  # a buffer from the start: checkpoints load before a call
                self.auto_steepness = AutoSteepness(self.blur)
            return
        super().__setattr__(name, value)

    def _call(self, x, steepness=None):
        s = self.steepness if steepness is None else steepness
        if not is_auto(s):
            return super()._call(x, steepness)
        refuse_transforms()
        check_input(x, self.n)
        return self._auto(x)

    @torch.compiler.disable
    def _auto(self, x) -> float:
        """``steepness="auto"``: this call's steepness (see the class doc)."""
        net, r = self.net, self.relaxation
        return self.auto_steepness(x, lambda t, b: estimate_steepness(net, r, t, b),
                                   r.steepness)

    def set_relaxation(self, r) -> None:
        """Use relaxation ``r`` from the next call on (layers built lazily)."""
        self.relaxation = r

    def _target_for(self, device: torch.device) -> str:
        if device.type in self.targets:
            return self.targets[device.type]
        if self.target == "auto":
            target, why = pick_target(device)
            log.info("netgen: target %r for %s (n=%d, k=%d)%s", target, why, self.n, self.k,
                     FALLBACK_NOTES.get((target, device.type), ""))
        else:
            target = self.target
        self.targets[device.type] = target
        return target

    def _get(self, device: torch.device, r):
        layer = self._built.get((device.type, r))
        return self._build(device, r) if layer is None else layer

    @torch.compiler.disable
    def _build(self, device: torch.device, r):
        """Build (or load from the cache) the layer for ``device`` and ``r``
        (:func:`~netgen.codegen.operator_layers.operator_layer`: on numba,
        the relaxation's shared kernel module, so a new network compiles
        nothing): outside any torch.compile graph, so a first call under torch.compile
        works too (one graph break, then a recompile that finds it built)."""
        layer = self._built[(device.type, r)] = operator_layer(self.net, r, self._target_for(device)).to(device)
        return layer

    def layer_for(self, device: torch.device, steepness=_OWN):
        """The generated layer serving ``device``, with this layer's
        steepness (or ``steepness``, which the caller owns) handed over;
        built on first use."""
        s = self.steepness if steepness is _OWN else steepness
        layer = self._get(device, self.relaxation)
        if is_auto(s):  # a call without scores to choose from (hard): the relaxation's
            s = None
        if s is None:
            if runtime_steepness(layer):
                _hand_over(layer, self.relaxation.steepness)
            return layer
        self.steepness_value(s)
        if runtime_steepness(layer):
            _hand_over(layer, s)
            return layer
        # a generated module without run-time steepness: one module per value
        if isinstance(s, torch.Tensor) and s.requires_grad:
            raise ValueError("netgen: a learnable steepness needs generated layers with a run-time steepness "
                             "(this netgen's generated modules bake it in)")
        from dataclasses import replace

        return self._get(device, replace(self.relaxation, steepness=float(s)))

    def _default_steepness(self):
        return self.relaxation.steepness

    # the base has checked x and the steepness; the generated layer for x's device runs the call
    def _forward(self, x, s):
        return self.layer_for(x.device, s)(x)

    def _values(self, x, s):
        return self.layer_for(x.device, s).values(x)

    def _column(self, x, y, s):
        return self.layer_for(x.device, s).column(x, y)

    def _back(self, x, W, s):
        return self.layer_for(x.device, s).back(x, W)

    def _fwd(self, x, V, s):
        return self.layer_for(x.device, s).fwd(x, V)

    def _hard(self, x):
        return self.layer_for(x.device).hard(x)

    def __getstate__(self):
        from ..io import to_dict

        state = self.__dict__.copy()
        state["_built"] = {}  # generated modules are rebuilt (from the cache) in the loading process
        state["targets"] = {} if self.target == "auto" else dict(self.targets)
        # plain data only (no numpy, no netgen classes): weights_only loading needs nothing else
        state["net"] = to_dict(self.net)
        state["relaxation"] = self.relaxation.to_dict()
        return plain_state(state)

    def __setstate__(self, state):
        from ..io import from_dict
        from ..relax.distributions import Relaxation

        state = restore_state(dict(state))
        if isinstance(state.get("net"), dict):
            state["net"] = from_dict(state["net"], source="a pickled AutoLayer")
        if isinstance(state.get("relaxation"), dict):
            state["relaxation"] = Relaxation.from_dict(state["relaxation"])
        self.__dict__.update(state)

    def extra_repr(self):
        chosen = ", ".join(f"{d}: {t}" for d, t in self.targets.items()) or "none built yet"
        blur = "default" if self.blur is None else f"{self.blur:g}"
        auto = f", steepness='auto', blur={blur}" if is_auto(self.steepness) else ""
        return f"n={self.n}, k={self.k}, target={self.target!r} ({chosen}){auto}"


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
