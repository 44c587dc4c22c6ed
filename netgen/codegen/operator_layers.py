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

import functools
import hashlib
import json
import threading
import types

from .cache import build_layer, cached_module, generator_tag

__all__ = ["kernel_module", "layer_code", "operator_layer"]

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
            mod = _KERNELS[r] = cached_module(_kernel_key(r), lambda: kernel_source(r),
                                              f"numba_kernels_{r.distribution}")
    return mod


@functools.lru_cache(maxsize=1)
def layer_code() -> types.CodeType:
    """The numba layer code (:func:`netgen.codegen.numba.shared.layer_source`)
    compiled, once per process, its source from netgen's cache when an
    earlier process generated it (generating it reads ~40 runtime
    functions' source: ~80 ms, most of a warm first call; compiling it
    ~7 ms): a module holding it as one literal
    (:func:`~netgen.codegen.numba.shared.layer_holder`)."""
    from .numba.shared import compile_layer, layer_holder, layer_source

    key = hashlib.sha256(f"{generator_tag()}\0numba-layer-code".encode()).hexdigest()[:24]
    holder = cached_module(key, lambda: layer_holder(layer_source()), "numba_layer_code")
    source = getattr(holder, "SOURCE", None)
    if not isinstance(source, str):  # pragma: no cover - a file that passed its hash check holds what netgen wrote
        source = layer_source()
    return compile_layer(source)


def operator_layer(net, r, target: str):
    """A ``Layer()`` of ``target`` for ``net`` relaxed by ``r`` (see the
    module docstring)."""
    if target == "numba":
        from .header import relaxation_of
        from .numba.shared import make_layer

        r = relaxation_of(net, r)
        return make_layer(kernel_module(r), net, r, layer_code())
    return build_layer(net, r, target)
