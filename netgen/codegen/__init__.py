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
import keyword
import re
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING

from .literals import GeneratedSourceError, check_source

if TYPE_CHECKING:  # pragma: no cover
    from ..network import Network
    from ..relax.distributions import Relaxation

TARGETS = {
    "torch": "netgen.codegen.torch_target",
    "numba": "netgen.codegen.numba_target",
    "cuda": "netgen.codegen.cuda_target",
}

__all__ = ["TARGETS", "emit", "module_name", "write_module", "target_module", "GeneratedSourceError",
           "check_module_name", "MAX_NAME"]

#: the longest module name (UTF-8 bytes). numba names its cache files
#: ``<module>.<function>-<line>.pyXY.<n>.nbc`` (~50 bytes past the module
#: name) and a cache module adds ``_netgen_`` and 13 characters of hash; a
#: file name stops at 255 bytes ("File name too long" at every call)
MAX_NAME = 120
#: characters of the construction's kind kept in a default module name
KIND_CHARS = 40


def check_module_name(name) -> str:
    """``name`` if it can name a generated module that imports: an
    identifier that is not a keyword (``class``), unchanged by the NFKC
    normalisation Python applies to identifiers in source (``ﬁle`` would be
    imported as ``file``), and at most :data:`MAX_NAME` bytes; else
    ValueError saying which."""
    shown = repr(name)[:60] + ("..." if len(repr(name)) > 60 else "")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"module name {shown} is not a valid Python identifier (letters, digits, _; not starting "
                         "with a digit)")
    if keyword.iskeyword(name):
        raise ValueError(f"module name {shown} is a Python keyword: `import {name}` would be a syntax error")
    if unicodedata.normalize("NFKC", name) != name:
        raise ValueError(f"module name {shown} changes under NFKC normalisation (Python would import it as "
                         f"{unicodedata.normalize('NFKC', name)!r}); use plain letters")
    if len(name.encode()) > MAX_NAME:
        raise ValueError(f"module name of {len(name.encode())} bytes is too long (at most {MAX_NAME}: numba's cache "
                         "file names add ~70 bytes, and a file name stops at 255)")
    return name


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
    kind = kind[:KIND_CHARS].rstrip("_")  # the hash below tells networks apart
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

    name = check_module_name(module_name(net, r, target) if name is None else name)
    source = emit(target, net, r)
    path = Path(out_dir) / f"{name}.py"
    atomic_write_text(path, source)
    return path
