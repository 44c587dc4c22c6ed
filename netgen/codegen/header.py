"""The top of a generated module, shared by the emitters.

* :func:`relaxation_of`: the relaxation an emitter is given (a Relaxation,
  its dict, or None for the network's default).
* :func:`swap_code` (in :mod:`.swap_code`, re-exported here) turns a
  relaxation into the straight-line scalar code pasted into every kernel.
* :func:`plan_source`: the network's tables of a generated module, copied
  from :mod:`netgen.codegen.runtime.tables` (whose
  :func:`~netgen.codegen.runtime.tables.plan` is the build-time analysis
  that lets the kernels skip structural zeros of the k x n back-sweep: the
  emitters and the generated modules run the very same function).
* :func:`network_literal` / :func:`relaxation_literal`: the deterministic
  top of a generated module (the generated-module contract).
"""

from __future__ import annotations

import json
from typing import Any

from ..network import Network
from .swap_code import FLOAT_TYPES, swap_code  # noqa: F401  (re-exported for the emitters)


def relaxation_of(net: Network, r: Any):
    """Normalise ``r`` (a Relaxation, a dict, or None for the default)."""
    from ..relax.distributions import Relaxation, default_relaxation

    if r is None:
        return default_relaxation(net)
    if isinstance(r, dict):
        return Relaxation.from_dict(r)
    if isinstance(r, Relaxation):
        return r
    raise ValueError(f"relaxation must be a Relaxation, a dict or None, got {type(r).__name__}")


def write_top(L, names, target: str, net: Network, r, shared=(), direction: str = "back") -> None:
    """What every numba and cuda module has after its imports: ``TARGET``,
    ``NETWORK``, ``RELAXATION`` (literals), ``_DIRECTION`` (the P sweep's
    direction, "back" or "forward": :func:`netgen.codegen.runtime.tables.plan`)
    and the network's tables (:func:`plan_source`), written into the Lines
    builder ``L`` with every name claimed in the Namespace ``names``."""
    from .literals import literal

    L(f"{names.define('TARGET')} = {literal(target)}")
    L.blank()
    names.define("NETWORK")
    L(network_literal(net))
    L.blank()
    names.define("RELAXATION")
    L(relaxation_literal(r))
    L.blank()
    L("# the P sweep: back over the output ranks, or forward over the input columns")
    L(f"{names.define('_DIRECTION')} = {literal(direction)}")
    L.blank(2)
    L(plan_source(names, shared).rstrip())


def plan_source(names, shared=()) -> str:
    """Source of the network's tables (:mod:`netgen.codegen.runtime.tables`:
    :func:`~netgen.codegen.runtime.tables.plan` and the set-up from
    ``NETWORK``), of the exact network
    (:func:`netgen.codegen.runtime.common.hard_network`, the one ``hard``
    every target runs) and of the functions ``shared`` (more pieces of
    :mod:`netgen.codegen.runtime.common`), for generated modules; every
    top-level name is claimed in the Namespace ``names``."""
    from .runtime import assemble, statements, tables
    from .runtime.common import hard_network

    parts = [assemble(tables.PARTS, names), statements(tables, tables.STATE, names),
             assemble((*shared, hard_network), names)]
    return "\n\n\n".join(parts) + "\n"


def network_literal(net: Network) -> str:
    """``NETWORK = {...}`` in the interchange format, one layer per line,
    deterministic."""
    from .. import io

    d = io.to_dict(net)
    parts = ["NETWORK = {"]
    for key, val in d.items():
        if key == "layers":
            parts.append('    "layers": [')
            for layer in val:
                parts.append("        " + json.dumps(layer, separators=(",", ":")) + ",")
            parts.append("    ],")
        else:
            parts.append(f"    {json.dumps(key)}: {_py_literal(val)},")
    parts.append("}")
    return "\n".join(parts)


def _py_literal(v: Any) -> str:
    # the one literal writer (netgen.codegen.literals): exact, never pastes text
    from .literals import literal

    return literal(json.loads(json.dumps(v, sort_keys=True)))


def relaxation_literal(r) -> str:
    """``RELAXATION = {...}``: the relaxation's dict as a literal (keys in
    its order)."""
    from .literals import literal

    return f"RELAXATION = {literal(r.to_dict())}"

