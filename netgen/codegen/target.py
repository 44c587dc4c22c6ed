"""What a code-generation target is: one :class:`Target` object per target,
defined in its package (``netgen/codegen/<name>/__init__.py``) and
registered in :data:`netgen.codegen.TARGETS`.

A target tells the rest of netgen everything it needs, so nothing outside
``netgen/codegen/`` branches on a target's name:

* ``requires``: the modules a build and a generated module need (a missing
  one is a :class:`netgen.extras.MissingExtra` naming its pip extra);
* ``devices`` / ``preference`` / ``available``: where its layers run and
  which one ``target="auto"`` picks (:mod:`netgen.codegen.auto`);
* ``options``: the emit knobs, a frozen dataclass (:class:`EmitOptions`
  and the target's own fields), checked when made;
* ``budget``: the target's numbers for the one engine plan
  (:mod:`netgen.codegen.plan`): when the P sweep's differences are kept,
  lane groups, whether it can sweep forward;
* ``toolchain``: the distributions whose versions key its compiled code in
  netgen's cache (:func:`netgen.codegen.cache.versions`);
* ``build``: an optional :class:`BuildStep` run after emitting, by
  :func:`netgen.codegen.write_module` and ``netgen build`` alike (cuda:
  the compile check and the cubins beside the module);
* ``test``: how the contract test runs it without its hardware
  (:class:`TestMode`).

:meth:`Target.emit` is the one emit signature, ``emit(net, r, options)``:
it chooses the plan once and hands it, with the options, to the target's
emitter ``emitter(net, r, plan, options) -> str``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from ..network import Network
    from ..relax.distributions import Relaxation
    from .plan import Budget, Plan

__all__ = ["Target", "EmitOptions", "BuildStep", "TestMode", "BuildError", "BuildIncomplete", "has"]


class BuildError(RuntimeError):
    """A target's build step failed (e.g. its kernels did not compile): a
    netgen bug or a broken toolchain; nothing was written."""


class BuildIncomplete(ValueError):
    """A target's build step could not run in full (e.g. no assembler for
    the cubins) and was required; nothing was written."""


def has(module: str) -> bool:
    """Whether ``module`` can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing
        return False


@dataclass(frozen=True)
class EmitOptions:
    """The knobs every target takes: overrides of the engine plan's
    build-time choices (None: the plan's rule, :func:`netgen.codegen.plan.choose`).
    A target's options class adds its own fields."""

    direction: str | None = None  # the P sweep: "back" (over the k ranks) or "forward" (over the n input columns)
    mode: str | None = None  # "save" (the forward keeps the sweep's differences) or "recompute"
    group: int | None = None  # lanes (ranks or input columns) per group

    def __post_init__(self):
        from .plan import check_overrides

        check_overrides(self.direction, self.mode, self.group)


@dataclass(frozen=True)
class BuildStep:
    """What a target does after emitting a module: ``run(source, path, *,
    required, log, progress) -> path`` writes ``path`` (and whatever goes beside it),
    nothing at all when it fails (:class:`BuildError`) or, with
    ``required``, when it cannot run in full (:class:`BuildIncomplete`)."""

    summary: str  # one line, for --help
    run: Callable[..., Path]


@dataclass(frozen=True)
class TestMode:
    """How the contract test (tests/codegen/test_contract.py) runs a target
    on a machine without its hardware."""

    simulator: bool = False  # in a subprocess under Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1; slow)
    env: Mapping[str, str] = field(default_factory=dict)  # set while its modules are built and imported
    options: Mapping[str, Any] = field(default_factory=dict)  # emit options for tests (e.g. small blocks)
    nan_rows: bool = False  # bad rows come out NaN instead of raising (checks without a host synchronisation)


@dataclass(frozen=True)
class Target:
    """One code-generation target (see the module docstring)."""

    name: str
    summary: str
    requires: tuple[str, ...]
    devices: tuple[str, ...] | None  # device types its layers run on; None: any torch device
    preference: int  # target="auto": the usable target of highest preference for a device
    needs: str  # what makes it usable, in words ("numba", "numba-cuda and a GPU")
    available: Callable[[], str | None]  # None where it can run here, else why not
    options: type
    budget: "Budget"
    toolchain: tuple[str, ...]
    emitter: Callable[..., str]
    build: BuildStep | None = None
    test: TestMode = TestMode()
    lanes: bool = False  # its Layer implements the lane sweeps _back/_fwd (netgen.ops registers it)

    def emit(self, net: "Network", r: "Relaxation", options=None) -> str:
        """Source of the generated module for ``net`` relaxed by ``r`` (a
        Relaxation, its dict, or None for the default): the engine plan is chosen once, from the options' overrides and this
        target's budget, and handed to the emitter."""
        from ..network import Network
        from .header import relaxation_of
        from .plan import choose

        if not isinstance(net, Network):
            raise ValueError(f"expected a Network, got {type(net).__name__}")
        r = relaxation_of(net, r)
        options = self.check_options(options)
        plan = choose(net, self.budget, options.direction, options.mode, options.group)
        return self.emitter(net, r, plan, options)

    def check_options(self, options=None):
        """``options`` as this target's options class: None (the defaults),
        a mapping of its fields, or an instance; ValueError otherwise."""
        if options is None:
            return self.options()
        if isinstance(options, self.options):
            return options
        if isinstance(options, Mapping):
            known = [f.name for f in dataclasses.fields(self.options)]
            unknown = sorted(set(options) - set(known))
            if unknown:
                raise ValueError(f"the {self.name} target has no option {', '.join(map(repr, unknown))}; "
                                 f"its options: {', '.join(known)}")
            return self.options(**options)
        raise ValueError(f"options for the {self.name} target must be a {self.options.__name__}, a dict or None, "
                         f"got {type(options).__name__}")

    def runs_on(self, device_type: str) -> bool:
        return self.devices is None or device_type in self.devices

    def require(self, what: str) -> None:
        """Import every module the target needs; MissingExtra naming its pip
        extra for the first one missing."""
        from ..extras import require

        for module in self.requires:
            require(module, what)
