"""The layers the operators run on (:class:`netgen.ops.backends.LayerLanes`):
no build step for a new (n, k).

* ``numba``: the kernels depend on the relaxation alone, so one kernel
  module per relaxation (:func:`kernel_module`, kept in netgen's cache like
  every generated module: hash-checked, no ``.pyc``; numba keeps its
  compiled kernels beside it) serves every network, and a network's layer
  is the host code run on its arrays
  (:func:`netgen.codegen.numba.shared.make_layer`): a new (n, k) compiles
  nothing and generates no source;
* any other target: its generated module (:func:`netgen.codegen.cache.build_layer`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import types

from .cache import build_layer, find_built, generator_tag, import_source, remember_built

__all__ = ["kernel_module", "operator_layer"]

_KERNELS: dict = {}  # relaxation (steepness 1.0) -> its numba kernel module
_LOCK = threading.Lock()


def _kernel_key(r) -> str:
    h = hashlib.sha256()
    for part in (generator_tag(), json.dumps(r.to_dict(), sort_keys=True), "numba-kernels"):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:24]


def kernel_module(r) -> types.ModuleType:
    """The numba kernel module of relaxation ``r`` (any steepness): from
    this process, from netgen's cache (found by key and checked against the
    hash in its name, without generating its source) or generated and
    written there now."""
    from .numba.shared import kernel_relaxation, kernel_source

    r = kernel_relaxation(r)
    mod = _KERNELS.get(r)
    if mod is not None:
        return mod
    with _LOCK:
        mod = _KERNELS.get(r)
        if mod is None:
            key = _kernel_key(r)
            mod = find_built(key)
            if mod is None:
                mod = import_source(kernel_source(r), f"numba_kernels_{r.distribution}")
                if not str(getattr(mod, "__file__", "<")).startswith("<"):  # in the cache, not in memory
                    remember_built(key, mod.__name__)
            _KERNELS[r] = mod
    return mod


def operator_layer(net, r, target: str):
    """A ``Layer()`` of ``target`` for ``net`` relaxed by ``r`` (see the
    module docstring)."""
    if target == "numba":
        from .header import relaxation_of
        from .numba.shared import make_layer

        r = relaxation_of(net, r)
        return make_layer(kernel_module(r), net, r)
    return build_layer(net, r, target)
