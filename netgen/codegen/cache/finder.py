"""Generated modules imported again by name, in any process.

:func:`load` (``netgen.load(path)``) imports a generated module file
anywhere, under a name made of its stem and a hash of its path and content
(:func:`~netgen.codegen.cache.files.file_qualname`), and records its path
under ``<root>/<versions>/paths/`` (:func:`remember_path`). ``import
netgen`` puts :class:`_Finder` on :data:`sys.meta_path`
(:func:`install_finder`): it imports a ``_netgen_*`` name from the cache's
``modules/`` folder or from a recorded path, so that unpickling a layer in
a new process finds its module. Only names netgen produces and only bytes
whose hash is the one in the name are imported; anything else is refused
(:class:`~netgen.codegen.cache.files.CacheDamaged`, naming the path).
"""

from __future__ import annotations

import importlib.abc
import sys
import types
from pathlib import Path

from .files import NAME_RE, PREFIX, CacheDamaged, _spec, _write_once, exec_source, file_qualname, verified_source
from .folder import _shown, _usable, usable_dir


def load(path) -> types.ModuleType:
    """Import the generated module at ``path`` and return it
    (``netgen.load(path)``).

    The module is registered in ``sys.modules`` under its file stem plus a
    hash of its resolved path and content (``_netgen_<stem>_<hash>``),
    so loading two different files with the same name never mixes them up,
    and loading the same unchanged file again returns the same module. The
    bytes hashed into the name are the bytes that run."""
    p = Path(path)
    if p.is_dir() or p.suffix != ".py":
        raise ValueError(f"expected a generated .py file, got {str(path)!r}")
    if not p.is_file():
        raise ValueError(f"no such generated module: {str(path)!r}")
    data = p.read_bytes()
    qualname = file_qualname(p, data)
    mod = sys.modules.get(qualname)
    if mod is not None:
        return mod
    mod = exec_source(qualname, p, data)  # the bytes hashed into the name are the bytes that run
    names = vars(mod)
    for attr in ("NETWORK", "RELAXATION", "TARGET", "Layer"):
        # NETWORK may be provided lazily by a module-level __getattr__
        present = attr in names or (attr == "NETWORK" and callable(names.get("__getattr__")))
        if not present:
            del sys.modules[qualname]
            raise ValueError(f"{str(path)!r} is not a netgen generated module (missing {attr})")
    remember_path(qualname, p)  # so that a pickled Layer of it loads in another process
    return mod


def remember_path(qualname: str, path: Path) -> None:
    """Record that module ``qualname`` was imported from ``path`` (by
    :func:`netgen.load`), so the finder can import it in another process.
    Best effort: a read-only cache only loses that."""
    folder = usable_dir("paths", create=True)
    if folder is None:
        return
    try:
        _write_once(folder / qualname, str(Path(path).resolve()).encode())
    except OSError:
        pass


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``_netgen_*`` modules (generated layers) in the cache, so that
    unpickling a layer in a new process imports its module again. Only
    names netgen produces (``_netgen_<name>_<12 hex>``) and only files whose
    hash is the one in the name: anything else is refused
    (:class:`CacheDamaged`, naming the path)."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(PREFIX) or "." in fullname or not NAME_RE.fullmatch(fullname):
            return None
        modules, why = _usable("modules")
        if why not in (None, "missing"):
            raise ImportError(f"netgen: cannot import {fullname}: the cache folder {why}", name=fullname)
        f = modules / f"{fullname}.py"
        if why is None and f.is_file():
            data = verified_source(fullname, f)
            if data is None:
                raise CacheDamaged(
                    f"netgen: the cache is damaged: {_shown(f)} is not the module {fullname} (its SHA-256 is not "
                    "the one in its name); delete it (or run `netgen cache clear`) and build the layer again",
                    name=fullname, path=str(f))
            return _spec(fullname, f, data)
        paths = usable_dir("paths")
        if paths is None:
            return None
        try:
            where = Path((paths / fullname).read_text())
            data = where.read_bytes()
        except (OSError, ValueError):
            return None
        if file_qualname(where, data) != fullname:
            raise CacheDamaged(
                f"netgen: {_shown(where)} changed since it was loaded as {fullname}; netgen.load() it again "
                "(the cache refuses a module whose bytes are not the ones recorded)", name=fullname, path=str(where))
        return _spec(fullname, where, data)


_FINDER = _Finder()


def install_finder() -> None:
    """Put the cache's finder on :data:`sys.meta_path` (idempotent; done by
    ``import netgen``)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_FINDER)
