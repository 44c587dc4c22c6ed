"""Code generation: turn (Network, Relaxation) into an importable module.

Each target module (``TARGETS``) exposes ``emit(net, r) -> str`` returning the
full source of a module that follows the generated-module contract of
docs/design.md section 8 (``NETWORK``, ``RELAXATION``, ``TARGET``, ``Layer``).
Targets are imported lazily, so ``netgen.codegen`` itself needs no torch.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .literals import GeneratedSourceError, check_source

if TYPE_CHECKING:  # pragma: no cover
    from ..network import Network
    from ..relax.distributions import Relaxation

TARGETS = {
    "torch": "netgen.codegen.torch.emit",
    "numba": "netgen.codegen.numba.emit",
    "cuda": "netgen.codegen.cuda.emit",
}

__all__ = ["TARGETS", "emit", "module_name", "write_module", "target_module", "GeneratedSourceError"]


def target_module(target: str):
    """The (lazily imported) emitter module for ``target``."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    return importlib.import_module(TARGETS[target])


def emit(target: str, net: "Network", r: "Relaxation") -> str:
    """Full module source for ``target``; byte-stable for equal inputs.
    The source is compiled (and checked to define each top-level name once)
    before it is returned: a failure is a :class:`GeneratedSourceError`
    (a RuntimeError: a netgen bug, exit 1 in the CLI)."""
    source = target_module(target).emit(net, r)
    check_source(source, f"generated {target} module")
    return source


def module_name(net: "Network", r: "Relaxation", target: str) -> str:
    """A valid Python identifier naming the module, e.g.
    ``splitter_n10450_k5_torch_1a2b3c4d``: construction kind, n, k, target
    and 8 hex digits of a hash of (network, relaxation, target)."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    kind = str(net.construction.get("kind", "custom"))
    kind = re.sub(r"[^0-9a-zA-Z_]+", "_", kind).strip("_").lower() or "custom"
    if not kind[0].isalpha():
        kind = "net_" + kind
    h = hashlib.sha256()
    h.update(net.key().encode())
    h.update(json.dumps(r.to_dict(), sort_keys=True).encode())
    h.update(target.encode())
    return f"{kind}_n{net.n}_k{net.k}_{target}_{h.hexdigest()[:8]}"


def write_module(
    target: str,
    net: "Network",
    r: "Relaxation",
    out_dir: str | Path = "generated",
    name: str | None = None,
) -> Path:
    """Emit and write ``<out_dir>/<name>.py`` atomically; return its path.
    ``name`` defaults to :func:`module_name` and must be an identifier. The
    source is compiled first (:func:`emit`); if that fails nothing is
    written."""
    from ..io import atomic_write_text

    name = module_name(net, r, target) if name is None else name
    if not name.isidentifier():
        raise ValueError(f"module name {name!r} is not a valid Python identifier")
    source = emit(target, net, r)
    path = Path(out_dir) / f"{name}.py"
    atomic_write_text(path, source)
    return path
