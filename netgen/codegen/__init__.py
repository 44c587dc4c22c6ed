"""Code generation: turn (Network, Relaxation) into an importable module.

:data:`TARGETS` maps each target's name to its :class:`~netgen.codegen.target.Target`
object (defined in ``netgen/codegen/<name>/``); :func:`emit` returns the full
source of a module that follows the generated-module contract of
docs/design.md section 8 (``NETWORK``, ``RELAXATION``, ``TARGET``,
``Layer``), :func:`write_module` writes it and runs the target's build step.
The target packages import their emitters lazily, so ``netgen.codegen``
itself needs no torch.
"""

from __future__ import annotations

import hashlib
import json
import keyword
import re
import time
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING

from .cuda import TARGET as _CUDA
from .literals import GeneratedSourceError, check_source
from .numba import TARGET as _NUMBA
from .target import BuildError, BuildIncomplete, Target
from .torch import TARGET as _TORCH

if TYPE_CHECKING:  # pragma: no cover
    from ..network import Network
    from ..relax.distributions import Relaxation

#: every target, by name (a new target: its package, and one entry here)
TARGETS: dict[str, Target] = {t.name: t for t in (_TORCH, _NUMBA, _CUDA)}

__all__ = ["TARGETS", "Target", "get", "emit", "module_name", "write_module", "GeneratedSourceError", "BuildError",
           "BuildIncomplete", "check_module_name", "MAX_NAME"]

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


def get(target: str | Target) -> Target:
    """The :class:`Target` named ``target`` (a Target is returned as is)."""
    if isinstance(target, Target):
        return target
    if not isinstance(target, str) or target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    return TARGETS[target]


def emit(target: str, net: "Network", r: "Relaxation", options=None) -> str:
    """Full module source for ``target``; byte-stable for equal inputs.
    ``options``: the target's emit options (its options class, a dict of
    its fields, or None for the defaults; see each target's package).
    The source is compiled (and checked to define each top-level name once)
    before it is returned: a failure is a :class:`GeneratedSourceError`
    (a RuntimeError: a netgen bug, exit 1 in the CLI)."""
    t = get(target)
    source = t.emit(net, r, options)
    check_source(source, f"generated {t.name} module")
    return source


def module_name(net: "Network", r: "Relaxation", target: str) -> str:
    """A valid Python identifier naming the module, e.g.
    ``splitter_n10450_k5_torch_1a2b3c4d``: construction kind, n, k, target
    and 8 hex digits of a hash of (network, relaxation, target)."""
    target = get(target).name
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
    options=None,
    *,
    build: bool = True,
    required: bool = False,
    log=None,
    progress=None,
) -> Path:
    """Emit ``<out_dir>/<name>.py`` and run the target's build step (the
    same artefacts as ``netgen build``: for cuda, the compile check and the
    kernels beside the module); return its path. ``name`` defaults to
    :func:`module_name` and must be an identifier; ``options`` as for
    :func:`emit`. ``build=False`` skips the build step (``--no-compile``);
    ``required=True`` makes a build step that cannot run in full (no
    assembler) a :class:`BuildIncomplete` instead of a log line. ``log``
    gets one line per step. The file is written atomically, and only once
    the source compiled (:func:`emit`) and the build step passed: a failure
    writes nothing (:class:`BuildError`)."""
    from ..io import atomic_write_text

    t = get(target)
    name = check_module_name(module_name(net, r, t.name) if name is None else name)
    say = log or (lambda line: None)
    t0 = time.perf_counter()
    source = emit(t, net, r, options)
    say(f"emitted {t.name} module in {time.perf_counter() - t0:.2f} s")
    path = Path(out_dir) / f"{name}.py"
    if build and t.build is not None:
        return t.build.run(source, path, required=required, log=say, progress=progress)
    atomic_write_text(path, source)
    return path
