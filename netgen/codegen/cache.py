"""One on-disk cache for everything netgen compiles.

Layers built in memory (:mod:`netgen.compat`, :func:`netgen.topk_loss`,
``target="auto"``: :func:`import_source`) are written here as real module
files and imported from them, so that

* numba's ``cache=True`` keeps the compiled kernels next to them
  (``__pycache__``): a new process's first call loads machine code instead
  of compiling for seconds;
* a cuda module saves the cubin numba-cuda linked for each kernel beside
  itself, so a new process's first call loads it instead of compiling
  (:mod:`netgen.codegen.cuda.cubin`; the files are named by the
  module's source hash, and the loader checks each entry's parameters
  against the launcher's packing before using it);
* a pickled layer (``torch.save(model)``) names a module that a new process
  can import again: ``import netgen`` installs a :data:`sys.meta_path`
  finder that looks ``_netgen_*`` module names up here.

Layout (``root()``: ``$NETGEN_CACHE_DIR`` or the user cache dir of
``platformdirs``, e.g. ``~/.cache/netgen``)::

    <root>/<versions>/modules/_netgen_<name>_<sha256(source)[:12]>.py
    <root>/<versions>/modules/__pycache__/      numba's (and Python's) caches
    <root>/<versions>/modules/_netgen_<name>_<hash>.cubins/
                                                a cuda module's kernels, saved by the
                                                module itself after its first compile
                                                (netgen.codegen.cuda.cubin)
    <root>/<versions>/paths/<module name>       path of a file netgen.load() imported

``<versions>`` names python, netgen and the targets' toolchains (numba,
torch) with their versions, so an upgrade
never reads another version's compiled code. The module file name carries a
hash of its source, so equal names mean equal bytes. Files are written once,
to a temporary file first and then linked into place (``os.link`` fails if
the name exists: a concurrent writer's identical file wins, none is ever
seen half-written, and an existing file is never rewritten, which would
invalidate numba's index for it).

``<root>/<versions>/built/<key>`` holds the module name built for a
(generator, network, relaxation, target) key, so a new process imports a
layer it built before without generating its source (:func:`find_built`).

A generated module file anywhere else is imported with :func:`load`
(``netgen.load(path)``), under a name made of its stem and a hash of its
path and content (:func:`qualname_of_file`), which is recorded under
``paths/`` so that the finder imports it again in another process.

Clear with :func:`clear` or ``netgen cache clear``; ``netgen cache info``
prints where it is and how big.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import types
from pathlib import Path

__all__ = ["root", "version_dir", "module_file", "import_source", "load", "qualname_of_file", "remember_path",
           "clear", "info", "install_finder", "qualname_for", "built_key", "find_built", "remember_built"]

ENV = "NETGEN_CACHE_DIR"
PREFIX = "_netgen_"


def root() -> Path:
    """The cache root: ``$NETGEN_CACHE_DIR`` if set, else the user cache dir."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    try:
        import platformdirs
    except ImportError:  # pragma: no cover - a declared dependency
        return Path.home() / ".cache" / "netgen"
    return Path(platformdirs.user_cache_dir("netgen", appauthor=False))


def _version(dist: str) -> str:
    # installed distribution metadata, never ``mod.__version__``: the tag must
    # not depend on what this process happened to import already
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "none"


@functools.lru_cache(maxsize=None)
def versions() -> str:
    """The version tag of this interpreter, netgen and the toolchains of
    every target (:attr:`netgen.codegen.target.Target.toolchain`)."""
    from .. import __version__
    from . import TARGETS

    dists = sorted({d for t in TARGETS.values() for d in t.toolchain})
    parts = [f"py{sys.version_info[0]}.{sys.version_info[1]}", f"netgen{__version__}",
             *(f"{d}{_version(d)}" for d in dists)]
    return re.sub(r"[^0-9A-Za-z.+-]+", "_", "-".join(parts))


def version_dir() -> Path:
    return root() / versions()


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
    path.parent.mkdir(parents=True, exist_ok=True)
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


def _bytecode(path: Path) -> None:
    """Write the module's bytecode beside it (``__pycache__``) unless it is
    there: a module of a few thousand lines takes ~0.1 s to compile, in
    every process that imports it, when bytecode writing is off
    (``PYTHONDONTWRITEBYTECODE``, read-only installs). These are netgen's
    cache files, written once, so their bytecode is cached regardless;
    Python reads it back even where it would not write it. Best effort."""
    import py_compile

    try:
        pyc = importlib.util.cache_from_source(str(path))
        if not os.path.exists(pyc):
            py_compile.compile(str(path), cfile=pyc, doraise=True)
    except (OSError, py_compile.PyCompileError, NotImplementedError, ValueError):
        pass


def _exec_file(qualname: str, path: Path) -> types.ModuleType:
    _bytecode(path)
    return exec_file(qualname, path)


def exec_file(qualname: str, path: Path) -> types.ModuleType:
    """Import the module file ``path`` as ``qualname`` (registered in
    ``sys.modules`` while it runs, removed again if it fails)."""
    spec = importlib.util.spec_from_file_location(qualname, path)
    if spec is None or spec.loader is None:  # pragma: no cover
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[qualname] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(qualname, None)
        raise
    return mod


def import_source(source: str, name: str) -> types.ModuleType:
    """Import generated ``source`` as module ``_netgen_<name>_<hash>``: from
    its file in the cache (written now if missing), or, when the cache
    cannot be written, executed in memory (then nothing is cached and a
    pickled layer of it cannot be loaded in another process)."""
    qualname = qualname_for(name, source)
    mod = sys.modules.get(qualname)
    if mod is not None:
        return mod
    path = module_file(qualname)
    try:
        _write_once(path, source.encode())
    except OSError as e:
        import logging

        logging.getLogger("netgen").warning("netgen: cache %s not writable (%s); compiling in memory", path.parent, e)
        mod = types.ModuleType(qualname)
        mod.__file__ = f"<netgen generated {name}>"
        exec(compile(source, mod.__file__, "exec"), mod.__dict__)
        sys.modules[qualname] = mod
        return mod
    return _exec_file(qualname, path)


# ------------------------------------------------- a module file anywhere
def load(path) -> types.ModuleType:
    """Import the generated module at ``path`` and return it
    (``netgen.load(path)``).

    The module is registered in ``sys.modules`` under its file stem plus a
    hash of its resolved path and content (``_netgen_<stem>_<hash>``),
    so loading two different files with the same name never mixes them up,
    and loading the same unchanged file again returns the same module."""
    p = Path(path)
    if p.is_dir() or p.suffix != ".py":
        raise ValueError(f"expected a generated .py file, got {str(path)!r}")
    if not p.is_file():
        raise ValueError(f"no such generated module: {str(path)!r}")
    qualname = qualname_of_file(p)
    mod = sys.modules.get(qualname)
    if mod is not None:
        return mod
    mod = exec_file(qualname, p)
    names = vars(mod)
    for attr in ("NETWORK", "RELAXATION", "TARGET", "Layer"):
        # NETWORK may be provided lazily by a module-level __getattr__
        present = attr in names or (attr == "NETWORK" and callable(names.get("__getattr__")))
        if not present:
            del sys.modules[qualname]
            raise ValueError(f"{str(path)!r} is not a netgen generated module (missing {attr})")
    remember_path(qualname, p)  # so that a pickled Layer of it loads in another process
    return mod


def qualname_of_file(path) -> str:
    """``_netgen_<stem>_<hash of resolved path and content>``: the module
    name :func:`load` registers ``path`` under."""
    p = Path(path)
    data = p.read_bytes()
    tag = hashlib.sha256(str(p.resolve()).encode() + b"\0" + data).hexdigest()[:12]
    return f"{PREFIX}{p.stem}_{tag}"


# ------------------------------------------------- built layers, by input
# A new process building a layer for a (network, relaxation, target) it has
# built before finds the module without generating its source again:
# emitting and checking a numba module costs ~0.5-1 CPU s (rendering the
# swap code, compile() and ast.parse of ~2,000 lines), more than loading its
# cached kernels. The index maps a key of the inputs *and of the generator's
# own source files* (so an edited netgen never reuses a module the old code
# wrote) to the module's name; the module file is checked against the
# source hash its name carries before it is used.
_GENERATOR_DIRS = ("codegen", "relax")


@functools.lru_cache(maxsize=None)
def generator_tag() -> str:
    """A hash of netgen's code-generating source files (every .py file of
    netgen/codegen and netgen/relax: path, size and modification time, as
    Python's own bytecode cache checks a source; ~1 ms, where hashing their
    contents costs ~10x more)."""
    pkg = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for d in _GENERATOR_DIRS:
        for f in sorted((pkg / d).rglob("*.py")):
            try:
                st = f.stat()
                h.update(f"{f.relative_to(pkg)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
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
    when there is none or its file is missing or not what its name says."""
    try:
        qualname = (version_dir() / "built" / key).read_text().strip()
    except (OSError, ValueError):
        return None
    if not re.fullmatch(rf"{PREFIX}\w+_[0-9a-f]{{12}}", qualname):
        return None
    mod = sys.modules.get(qualname)
    if mod is not None:
        return mod
    f = module_file(qualname)
    try:
        data = f.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest()[:12] != qualname.rsplit("_", 1)[1]:
        return None  # damaged: the caller emits and rewrites it
    return _exec_file(qualname, f)


def remember_built(key: str, qualname: str) -> None:
    """Record that ``key``'s module is ``qualname`` (best effort)."""
    try:
        _write_once(version_dir() / "built" / key, qualname.encode())
    except OSError:
        pass


def remember_path(qualname: str, path: Path) -> None:
    """Record that module ``qualname`` was imported from ``path`` (by
    :func:`netgen.load`), so the finder can import it in another process.
    Best effort: a read-only cache only loses that."""
    try:
        _write_once(version_dir() / "paths" / qualname, str(Path(path).resolve()).encode())
    except OSError:
        pass


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``_netgen_*`` modules (generated layers) in the cache, so that
    unpickling a layer in a new process imports its module again."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(PREFIX) or "." in fullname:
            return None
        f = module_file(fullname)
        if f.is_file():
            return importlib.util.spec_from_file_location(fullname, f)
        rec = version_dir() / "paths" / fullname
        try:
            where = Path(rec.read_text())
        except (OSError, ValueError):
            return None
        try:
            if qualname_of_file(where) != fullname:  # the file changed since: not that module any more
                return None
        except OSError:
            return None
        return importlib.util.spec_from_file_location(fullname, where)


_FINDER = _Finder()


def install_finder() -> None:
    """Put the cache's finder on :data:`sys.meta_path` (idempotent; done by
    ``import netgen``)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_FINDER)


def _size(p: Path) -> tuple[int, int]:
    files = nbytes = 0
    for dirpath, _, names in os.walk(p):
        for n in names:
            try:
                nbytes += os.path.getsize(os.path.join(dirpath, n))
                files += 1
            except OSError:
                pass
    return files, nbytes


def info() -> dict:
    """Where the cache is and how much it holds."""
    r = root()
    files, nbytes = _size(r) if r.exists() else (0, 0)
    return {"root": str(r), "versions": versions(), "files": files, "bytes": nbytes}


def clear() -> int:
    """Delete the whole cache (every version); returns the number of files
    removed. Modules already imported keep working in this process."""
    r = root()
    if not r.exists():
        return 0
    files, _ = _size(r)
    for child in r.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
    return files


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] == ["clear"]:
        print(f"removed {clear()} files from {root()}")
    else:
        print(info())
