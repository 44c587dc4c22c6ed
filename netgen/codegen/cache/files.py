"""The cache's module files: their names, writing them once, and importing
them from bytes that were checked.

A module in the cache is named ``_netgen_<name>_<sha256(source)[:12]>``
(:func:`qualname_for`), so equal names mean equal bytes. Its file is
written once, to a temporary file first and then linked into place
(:func:`_write_once`: a concurrent writer's identical file wins, none is
ever seen half-written, and an existing file is never rewritten unless it
is damaged, which would invalidate numba's index for it). It runs from
the bytes whose SHA-256 its name carries (:func:`verified_source`),
compiled by netgen from those bytes (:class:`_BytesLoader`): no bytecode
(``.pyc``) of a cache module is ever written or read, so nothing runs that
was not checked. :func:`import_source` is the way in for generated source:
written to the cache and imported from it, or run in memory when the
cache may not be used (:func:`netgen.codegen.cache.folder.usable_dir`).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile
import types
from pathlib import Path

from .folder import _shown, _usable, log, version_dir

PREFIX = "_netgen_"
#: the module names netgen produces: ``_netgen_<name>_<12 hex digits of a SHA-256>``
NAME_RE = re.compile(rf"{PREFIX}(\w+)_([0-9a-f]{{12}})")


class CacheDamaged(ImportError):
    """A cache file is not what its name says (and netgen cannot rebuild it)."""


def qualname_for(name: str, source: str) -> str:
    """The module name of ``source`` built as ``name``: ``_netgen_<name>_<hash>``."""
    tag = hashlib.sha256(source.encode()).hexdigest()[:12]
    return f"{PREFIX}{name}_{tag}"


def _write_once(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data`` unless it exists with these bytes; never
    expose a partial file. An existing file with other bytes (damaged) is
    replaced atomically."""
    try:
        if path.read_bytes() == data:
            return
        replace = True
    except FileNotFoundError:
        replace = False
    path.parent.mkdir(parents=True, exist_ok=True)  # callers made it 0700 (_usable)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix + ".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)  # fails if a concurrent writer got there first: keep theirs
        except FileExistsError:
            pass
        except OSError:  # no hard links on this file system
            if not path.exists():
                os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def module_file(qualname: str) -> Path:
    return version_dir() / "modules" / f"{qualname}.py"


def verified_source(qualname: str, path: Path) -> bytes | None:
    """The bytes of ``path`` if their SHA-256 starts with the 12 hex digits
    that end ``qualname`` (a cache module's name), else None (missing or
    damaged)."""
    m = NAME_RE.fullmatch(qualname)
    if m is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest()[:12] == m.group(2) else None


def file_qualname(path, data: bytes) -> str:
    """``_netgen_<stem>_<hash of resolved path and content>``: the module
    name :func:`netgen.load` registers a file with these bytes under."""
    p = Path(path)
    tag = hashlib.sha256(str(p.resolve()).encode() + b"\0" + data).hexdigest()[:12]
    stem = re.sub(r"\W", "_", p.stem) or "module"  # a name the finder accepts (NAME_RE)
    return f"{PREFIX}{stem}_{tag}"


class _BytesLoader(importlib.abc.Loader):
    """Runs a module from bytes already checked, compiled here: no ``.pyc``
    is read (Python's would be whatever is on disk beside the file) or
    written. ``co_filename`` is the file's path, so numba's disk cache
    (keyed on that file) and tracebacks work as for a normal import."""

    def __init__(self, path: Path, data: bytes):
        self.path, self.data = Path(path), data

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(compile(self.data, str(self.path), "exec", dont_inherit=True), module.__dict__)

    def get_source(self, fullname):
        return self.data.decode("utf-8")


def _spec(qualname: str, path: Path, data: bytes):
    spec = importlib.util.spec_from_loader(qualname, _BytesLoader(path, data), origin=str(path))
    spec.has_location = True  # __file__ = path
    return spec


def exec_source(qualname: str, path: Path, data: bytes) -> types.ModuleType:
    """Import ``data`` (the checked bytes of the file ``path``) as module
    ``qualname`` (registered in ``sys.modules`` while it runs, removed again
    if it fails)."""
    spec = _spec(qualname, path, data)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[qualname] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(qualname, None)
        raise
    return mod


def _in_memory(source: str, qualname: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(qualname)
    mod.__file__ = f"<netgen generated {name}>"
    sys.modules[qualname] = mod
    try:
        exec(compile(source, mod.__file__, "exec", dont_inherit=True), mod.__dict__)
    except BaseException:
        sys.modules.pop(qualname, None)
        raise
    return mod


def import_source(source: str, name: str) -> types.ModuleType:
    """Import generated ``source`` as module ``_netgen_<name>_<hash>``: from
    its file in the cache (written now if missing, rewritten if damaged),
    or, when the cache cannot be written or may not be used
    (:func:`usable_dir`), executed in memory (then nothing is cached and a
    pickled layer of it cannot be loaded in another process)."""
    qualname = qualname_for(name, source)
    mod = sys.modules.get(qualname)
    if mod is not None:
        return mod
    data = source.encode()
    folder, why = _usable("modules", create=True)
    if why is not None:
        if why == "missing":
            log.warning("netgen: cache %s not writable; compiling in memory", _shown(folder))
        return _in_memory(source, qualname, name)
    path = folder / f"{qualname}.py"
    try:
        _write_once(path, data)
    except OSError as e:
        log.warning("netgen: cache %s not writable (%s); compiling in memory", _shown(path.parent), e)
        return _in_memory(source, qualname, name)
    return exec_source(qualname, path, data)  # the bytes netgen generated, not re-read
