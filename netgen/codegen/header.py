"""Pieces shared by the Numba CPU and Numba CUDA emitters.

* :func:`swap_code` (in :mod:`._swap_code`, re-exported here) turns a
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
from .swap_code import FLOAT_TYPES, lit, swap_code  # noqa: F401  (re-exported for the emitters)


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


# ----------------------------------------------------------------- the plan
DIRECTIONS = ("back", "forward")
# The sweep that computes P runs over *lanes* (runtime/tables.plan): back
# over the k output ranks (R <- R M_l, last comparator first: P's rows) or
# forward over the n input columns (A <- M_l A, first comparator first: P's
# columns). Each comparator touches the lanes of its plan range: its output
# cone going back, its input cone going forward. Sorters have far smaller
# input cones in their early layers than output cones: the odd-even merge
# sorter needs 0.75 (n = 32), 0.52 (256), 0.43 (1024) and 0.36 (4096) times
# the back-sweep's (comparator, lane) pairs going forward, while a top-5
# network's forward sweep would carry all n columns (2,100x the pairs at
# (5, 10450)). The forward direction is chosen where k > n / 2 (its state
# is n x n per row instead of k x n) and it needs at most
# FORWARD_MAX_RATIO times the back-sweep's pairs.
FORWARD_MAX_RATIO = 0.8


def sweep_direction(net: Network) -> str:
    """The P sweep's direction for ``net``: "forward" or "back" (see
    :data:`FORWARD_MAX_RATIO`)."""
    from .runtime.tables import plan  # imports torch: only when building

    if net.k * 2 <= net.n:
        return "back"

    def pairs(d):
        return int(plan(net.n, net.comparators, net.layer_offsets, net.outputs, d)[2][-1])

    return "forward" if pairs("forward") <= FORWARD_MAX_RATIO * pairs("back") else "back"


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
    d = r.to_dict()
    return "RELAXATION = {" + ", ".join(f"{json.dumps(k)}: {v!r}" for k, v in d.items()) + "}"

