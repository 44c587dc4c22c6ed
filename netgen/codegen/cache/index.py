"""The index of built layers: a new process that builds a layer it has
built before imports its module without generating the source again.

``<root>/<versions>/built/<key>`` holds the module name built for a
(generator, network, relaxation, target) key (:func:`built_key`);
:func:`find_built` imports that module after checking its file against the
hash in its name, :func:`cached_module` falls back to generating and
importing it (:func:`~netgen.codegen.cache.files.import_source`) and
records it, and :func:`build_layer` is the ``Layer()`` of a target's module
built that way.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import types
from pathlib import Path

from .files import NAME_RE, _write_once, exec_source, import_source, verified_source
from .folder import _shown, log, usable_dir

# A new process building a layer for a (network, relaxation, target) it has
# built before finds the module without generating its source again:
# emitting and checking a numba module costs ~0.5-1 CPU s (rendering the
# swap code, compile() and ast.parse of ~2,000 lines), more than loading its
# cached kernels. The index maps a key of the inputs *and of the generator's
# own source files* (so an edited netgen never reuses a module the old code
# wrote) to the module's name; the module file is checked against the
# source hash its name carries before it is used.
_GENERATOR_DIRS = ("codegen", "relax")
_NETGEN = Path(__file__).resolve().parents[2]  # netgen/ (this file is netgen/codegen/cache/index.py)


def generator_files() -> list[Path]:
    """Every .py file of netgen/codegen and netgen/relax, sorted per folder
    (what :func:`generator_tag` hashes)."""
    return [f for d in _GENERATOR_DIRS for f in sorted((_NETGEN / d).rglob("*.py"))]


@functools.lru_cache(maxsize=None)
def generator_tag() -> str:
    """A hash of netgen's code-generating source files (:func:`generator_files`:
    path, size and modification time, as Python's own bytecode cache checks a
    source; ~1 ms, where hashing their contents costs ~10x more)."""
    h = hashlib.sha256()
    for f in generator_files():
        try:
            st = f.stat()
            h.update(f"{f.relative_to(_NETGEN)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        except OSError:  # pragma: no cover
            h.update(f"{f}\0unreadable\0".encode())
    return h.hexdigest()[:16]


def built_key(net, r, target: str) -> str:
    """The index key of the module ``emit(target, net, r)`` would give."""
    import json

    h = hashlib.sha256()
    for part in (generator_tag(), net.key(), json.dumps(r.to_dict(), sort_keys=True), target):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:24]


def find_built(key: str) -> types.ModuleType | None:
    """The module recorded under ``key`` (imported now, or already), or None
    when there is none or its file is missing or not what its name says
    (then the caller emits the module again and rewrites the file)."""
    built = usable_dir("built")
    if built is None:
        return None
    try:
        qualname = (built / key).read_text().strip()
    except (OSError, ValueError):
        return None
    if not NAME_RE.fullmatch(qualname):
        return None
    mod = sys.modules.get(qualname)
    if mod is not None:
        return mod
    folder = usable_dir("modules")
    if folder is None:
        return None
    f = folder / f"{qualname}.py"
    data = verified_source(qualname, f)
    if data is None:
        if f.exists():
            log.warning("netgen: the cache file %s is damaged (its SHA-256 is not the one in its name); "
                        "rebuilding it", _shown(f))
        return None
    return exec_source(qualname, f, data)


def remember_built(key: str, qualname: str) -> None:
    """Record that ``key``'s module is ``qualname`` (best effort)."""
    folder = usable_dir("built", create=True)
    if folder is None:
        return
    try:
        _write_once(folder / key, qualname.encode())
    except OSError:
        pass


def cached_module(key: str, source, name: str) -> types.ModuleType:
    """The generated module recorded under ``key`` (:func:`find_built`: no
    source generated, the file checked against the hash in its name), or
    ``source()`` generated and imported now (:func:`import_source`) and
    recorded under ``key`` when it went to the cache."""
    mod = find_built(key)
    if mod is None:
        mod = import_source(source(), name)
        if not str(getattr(mod, "__file__", "<")).startswith("<"):  # in the cache, not in memory
            remember_built(key, mod.__name__)
    return mod


def build_layer(net, r, target: str = "torch"):
    """A ``Layer()`` of the generated ``target`` module for ``net`` relaxed
    by ``r``, imported from netgen's on-disk cache (written there on first
    use; nothing goes to ``generated/``). Also ``netgen.codegen.auto.build_layer``;
    it lives here so that a caller that needs no ``AutoLayer`` (the
    operators' backends) does not import ``torch._dynamo`` with it (0.74 s
    CPU, most of a first call)."""
    from .. import emit, get, module_name

    target = get(target).name
    # built before (this process or another): no emit, no source check
    mod = cached_module(built_key(net, r, target), lambda: emit(target, net, r), module_name(net, r, target))
    return mod.Layer()
