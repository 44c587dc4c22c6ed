"""The operators' numba layers: one kernel module per relaxation, shared by
every network (docs/operators.md, "first call").

The numba kernels depend on the relaxation alone (its rendered swap code);
the network reaches them as arrays (the comparators' wires, the outputs,
the plan's lane ranges). A generated numba module (``netgen build``,
``AutoLayer``) carries its own copy, and numba's disk cache is keyed by the
module file, so every new network compiled them again (3.4 CPU s at
n = 1,024). The operators (:class:`netgen.ops.backends.LayerLanes`) use
:func:`netgen.codegen.operator_layers.operator_layer` instead, which
builds on this file:

* the **kernel module** (:func:`kernel_source`): the kernels of
  :func:`.emit.write_kernels` for a relaxation (its steepness, a run-time
  argument, left out), generated from literals like any module and kept in
  netgen's cache as ``_netgen_numba_kernels_<distribution>_<hash>.py``
  (hash-checked, no ``.pyc``: :mod:`netgen.codegen.cache`), so numba keeps
  its compiled kernels beside it once per machine and relaxation;
* the **layer code** (:func:`layer_code`): the host side of a numba module
  (:func:`.emit.write_host`: pool, threads, the lane sweeps' host functions,
  autograd, ``Layer``), netgen's own runtime source compiled once per
  process; it has no literal of any network;
* per network, a module object whose globals are the kernel module's names,
  the network's tables (:func:`network_tables`, from its arrays, no
  ``NETWORK`` literal to parse) and the engine plan, with the layer code run
  in it: a few milliseconds, no source to generate, check or compile.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import threading
import types
from dataclasses import replace

import numpy as np

from ...network import Network

__all__ = ["kernel_relaxation", "kernel_source", "compile_layer", "layer_code", "layer_holder", "layer_module_name", "layer_source",
           "make_layer", "network_tables"]

#: the steepness the kernel module is keyed and generated with (the kernels read it at run time)
_STEEPNESS = 1.0
#: the globals each network's module gets besides the kernel module's and the tables
_GIVEN = ("TARGET", "NETWORK", "RELAXATION", "_DIRECTION", "_MODE", "_GROUP")


def kernel_relaxation(r):
    """``r`` with the steepness its kernel module is keyed and generated
    with (the kernels read the steepness at run time)."""
    return replace(r, steepness=_STEEPNESS)


def kernel_source(r) -> str:
    """Source of the kernel module of relaxation ``r`` (its steepness is
    not in it): imports, ``numba_disk_cache`` and
    :func:`.emit.write_kernels`; compiled and checked like any generated
    module (:func:`netgen.codegen.literals.check_source`)."""
    from ..lines import Lines
    from ..literals import Namespace, check_source
    from ..runtime import assemble, check_interface, common
    from . import engine, kernels, vector
    from .emit import write_imports, write_kernels

    r = kernel_relaxation(r)
    names = Namespace()
    L = Lines()
    L(repr(f"netgen generated numba kernels for the operators: relaxation {r.distribution}, "
           f"art_lambda={r.art_lambda!r}, art_epsilon={r.art_epsilon!r} (the steepness is a run-time argument); "
           "any network's arrays.\n\nGenerated code: do not edit (netgen/codegen/numba/shared.py)."))
    L.blank()
    write_imports(L)
    L(assemble((common.numba_disk_cache,), names))
    L.blank(2)
    write_kernels(L, names, r)
    source = L.render()
    check_interface(source, names, (vector, engine, kernels), "numba kernel module")
    check_source(source, "numba kernel module")
    return source


def layer_source() -> str:
    """Source of the layer code: imports, the shared checks of
    :mod:`netgen.codegen.runtime.common`, the tables' ``plan`` and
    :func:`.emit.write_host`. It reads the kernel module's names, the
    tables and :data:`_GIVEN`, which each network's module is given."""
    from ..lines import Lines
    from ..literals import Namespace
    from ..runtime import assemble, common, tables
    from .emit import host_checks, write_host, write_imports

    names = Namespace()
    L = Lines()
    L(repr("netgen's numba operator layer: the host side of a numba module, run in a module whose globals hold "
           "one network's tables and the kernels of its relaxation (netgen/codegen/numba/shared.py)."))
    L.blank()
    write_imports(L)
    L(assemble(host_checks() + (common.hard_network, tables.plan), names))
    L.blank(2)
    write_host(L, names)
    return L.render()


def layer_holder(source: str) -> str:
    """A module that holds the layer code's ``source`` as one literal,
    ``SOURCE``: what netgen's cache keeps of it (a module like any other:
    hash-checked, built from a literal, compiled before it is written)."""
    from ..lines import Lines
    from ..literals import check_source, literal

    L = Lines()
    L(repr("netgen's numba operator layer code as one string: each network's module runs it "
           "(netgen/codegen/numba/shared.py). Generated code: do not edit."))
    L.blank()
    L(f"SOURCE = {literal(source)}")
    text = L.render()
    check_source(text, "numba layer code holder")
    return text


def compile_layer(source: str) -> types.CodeType:
    """The layer code ``source`` (:func:`layer_source`) compiled."""
    return compile(source, "<netgen numba operator layer>", "exec", dont_inherit=True)


@functools.lru_cache(maxsize=1)
def layer_code() -> types.CodeType:
    """:func:`layer_source` compiled (once per process; generating the
    source reads ~40 runtime functions' source, ~80 ms:
    :func:`netgen.codegen.operator_layers.layer_code` keeps it in netgen's
    cache)."""
    return compile_layer(layer_source())


#: networks of at least this many comparators get lean tables (no P plan;
#: see :func:`network_tables`): the plan's per-comparator ranges are 24 bytes
#: a comparator plus an int64 copy of the wires, ~5 GB at n = 2^20
LEAN_SIZE = 1 << 23


def network_tables(net: Network, direction: str) -> dict:
    """The tables of :mod:`netgen.codegen.runtime.tables` (the same names
    and values a generated module builds from its ``NETWORK`` literal),
    from the network's arrays. The wires ``_WA`` / ``_WB`` are int32 (the
    kernels index with them; half the memory of int64) and ``_COMPS`` is
    the network's own int32 array. A network of :data:`LEAN_SIZE`
    comparators or more gets no P plan (``_CLO`` / ``_CHI`` / ``_DOFF``
    empty, ``_NNZ`` 0): the operators run it by lane sweeps, which need
    none, and its layer refuses to form P (:func:`make_layer`)."""
    import torch

    from ..plan import sweep_ranges

    comps = net.comparators  # (size, 2) int32, read-only
    offs = np.ascontiguousarray(net.layer_offsets, dtype=np.int64)
    outputs = np.array(net.outputs, dtype=np.int64)
    if net.size >= LEAN_SIZE:  # no plan; the wires as views of the network's own array (no 0.8 GB copy at 2^20)
        clo = chi = np.zeros(0, dtype=np.int64)
        doff = np.zeros(1, dtype=np.int64)
        wa, wb = comps[:, 0], comps[:, 1]
    else:
        clo, chi, doff = sweep_ranges(net, direction)
        wa, wb = np.ascontiguousarray(comps[:, 0]), np.ascontiguousarray(comps[:, 1])
    return {"_N": net.n, "_OUTPUTS": outputs, "_K": len(outputs), "_COMPS": comps, "_OFFSETS": offs,
            "_SIZE": len(comps), "_CLO": clo, "_CHI": chi, "_DOFF": doff, "_NNZ": int(doff[-1]), "_WA": wa,
            "_WB": wb, "_A": _tensor(wa), "_B": _tensor(wb), "_OUTS": torch.from_numpy(outputs)}


def _tensor(a: np.ndarray):
    """``a`` as a torch tensor sharing its memory; a lean layer's wires are
    views of the network's read-only array, which torch warns about: the
    tensors are only read (``hard_network`` indexes with them)."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(a)


def _lean_plan(net: Network):
    """The engine plan of a lean layer: back sweep, recompute, the numba
    budget's group (no pairs counted: that is the plan this size avoids)."""
    from ..plan import Plan
    from . import BUDGET

    return Plan("back", "recompute", BUDGET.group("back", "recompute", net.n, net.k), 0, net.k, 0)


def _refuse_p(self, x, s):
    """A lean layer's ``_forward`` (P): refused, naming the size."""
    raise ValueError(f"this layer's network has {type(self).lean_size:,} comparators: P (k x n per row) is not "
                     "formed at this size; use values / back / fwd (the operators' lane sweeps)")


def make_layer(kernels: types.ModuleType, net: Network, r, code: types.CodeType | None = None):
    """A numba ``Layer()`` for ``net`` relaxed by ``r`` (a Relaxation), as
    ``build_layer(net, r, "numba")`` gives, on ``kernels``, the kernel
    module of ``r``'s relaxation (:func:`kernel_source`; kept in netgen's
    cache by :func:`netgen.codegen.operator_layers.kernel_module`), running
    ``code`` (default :func:`layer_code`). The engine plan is the target's
    (:func:`netgen.codegen.plan.choose` with the numba budget)."""
    name = layer_module_name(kernels, net, r)
    mod = _LAYER_MODULES.get(name)
    if mod is None:
        with _LOCK:
            mod = _LAYER_MODULES.get(name)
            if mod is None:
                mod = _LAYER_MODULES[name] = _layer_module(name, kernels, net, r, code or layer_code())
                sys.modules[name] = mod
    return mod.Layer()


#: the network modules of this process, by :func:`layer_module_name`
_LAYER_MODULES: dict[str, types.ModuleType] = {}
_LOCK = threading.Lock()


def layer_module_name(kernels: types.ModuleType, net: Network, r) -> str:
    """The name of ``net``'s module on ``kernels`` relaxed by ``r``: one per
    (kernel module, network, relaxation), so that two layers of the same
    network share it and a layer's class can be found by its module's name
    (``sys.modules``: torch.compile imports the modules of the functions it
    traces). Not a cache module name (nothing is written to disk)."""
    h = hashlib.sha256()
    for part in (kernels.__name__, net.key(), json.dumps(r.to_dict(), sort_keys=True)):
        h.update(part.encode() + b"\0")
    return f"netgen_numba_layer_n{net.n}_k{net.k}_{h.hexdigest()[:12]}"


def _layer_module(name: str, kernels: types.ModuleType, net: Network, r, code: types.CodeType) -> types.ModuleType:
    """The module :func:`make_layer` runs the layer code in (see there)."""
    from ..plan import choose
    from . import BUDGET

    plan = _lean_plan(net) if net.size >= LEAN_SIZE else choose(net, BUDGET)
    mod = types.ModuleType(name)
    mod.__file__ = "<netgen numba operator layer>"
    g = mod.__dict__
    g.update((k, v) for k, v in vars(kernels).items() if not k.startswith("__"))
    g.update(network_tables(net, plan.direction))
    # NETWORK: what the layer code reads of it (the outputs, for _LIVE); the tables hold the rest
    g.update(TARGET="numba", NETWORK={"n": net.n, "outputs": list(net.outputs)}, RELAXATION=r.to_dict(),
             _DIRECTION=plan.direction, _MODE=plan.mode, _GROUP=int(plan.group))
    exec(code, g)
    if net.size >= LEAN_SIZE:  # no P plan in the tables: the P sweep is refused (a class of this module alone)
        mod.Layer.lean_size = net.size
        mod.Layer._forward = _refuse_p
    return mod
