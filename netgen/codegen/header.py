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

import functools
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
    """``NETWORK = json.loads(...)``: the network in the interchange format
    as JSON text, one string literal per key and per layer (adjacent
    literals, one text), deterministic; the module imports ``json``.

    JSON text, not a dict literal: CPython compiles a string constant at
    once, where a literal of the (5, 10450) network's 31,356 pairs took
    ~0.09 s of the module's ~0.2 s import (the first call of a layer pays
    it) and compiling such literals of large networks took gigabytes
    (docs/security.md); ``json.loads`` builds the same dict in ~3 ms. Every
    piece reaches the module through :func:`~netgen.codegen.literals.literal`
    (``repr`` of a str), and the text is checked to load back equal."""
    from .. import io
    from .literals import literal

    d = io.to_dict(net)
    dumps = functools.partial(json.dumps, separators=(",", ":"), sort_keys=True)
    pieces = []
    for i, (key, val) in enumerate(d.items()):
        head = ("{" if i == 0 else ",") + dumps(key) + ":"
        if key == "layers":
            pieces.append(head + "[")
            pieces += [("," if j else "") + dumps(layer) for j, layer in enumerate(val)]
            pieces.append("]")
        else:
            pieces.append(head + dumps(val))
    pieces.append("}")
    if json.loads("".join(pieces)) != json.loads(dumps(d)):  # pragma: no cover - a bug here
        raise AssertionError("network_literal: the JSON text does not load back as the network")
    return "\n".join(["NETWORK = json.loads(", *("    " + literal(p) for p in pieces), ")"])


def relaxation_literal(r) -> str:
    """``RELAXATION = {...}``: the relaxation's dict as a literal (keys in
    its order)."""
    from .literals import literal

    return f"RELAXATION = {literal(r.to_dict())}"

