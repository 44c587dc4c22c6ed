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
                                                (the operators' numba kernels: one
                                                _netgen_numba_kernels_<distribution>_<hash>.py
                                                per relaxation, netgen.codegen.operator_layers)
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

What is trusted (docs/security.md): the cache folder is, because whoever
can write it can run code as you (numba's own cache files in it are
pickles). So the root is created 0700 and used only when it is yours and
not writable by group or others (:func:`usable_dir`; ``NETGEN_CACHE_INSECURE=1``
uses such a root anyway). Inside it, every module is checked before it
runs: a module runs from the bytes whose SHA-256 its name carries
(:func:`verified_source`), compiled by netgen from those bytes; no bytecode
(``.pyc``) of a cache module is ever written or read, so nothing runs that
was not checked. Only names of the form ``_netgen_<name>_<12 hex>`` are
imported, and only when the file's hash is the one in the name; a file that
does not match is rewritten when netgen has the source (building a layer)
and refused otherwise (:class:`CacheDamaged`, naming the path).

A generated module file anywhere else is imported with :func:`load`
(``netgen.load(path)``), under a name made of its stem and a hash of its
path and content (:func:`file_qualname`), which is recorded under
``paths/`` so that the finder imports it again in another process; it runs
from the bytes that hash was taken of.

Clear with :func:`clear` or ``netgen cache clear``; ``netgen cache info``
prints where it is and how big.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.abc
import importlib.util
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
import types
from pathlib import Path

__all__ = ["root", "version_dir", "module_file", "import_source", "remember_path", "clear", "info",
           "install_finder", "qualname_for", "built_key", "find_built", "remember_built", "usable_dir",
           "root_problem", "verified_source", "exec_source", "file_qualname", "CacheDamaged", "load",
           "build_layer"]

ENV = "NETGEN_CACHE_DIR"
#: set to 1 to use a cache root that is not yours or that others can write
INSECURE_ENV = "NETGEN_CACHE_INSECURE"
PREFIX = "_netgen_"
#: the module names netgen produces: ``_netgen_<name>_<12 hex digits of a SHA-256>``
NAME_RE = re.compile(rf"{PREFIX}(\w+)_([0-9a-f]{{12}})")

log = logging.getLogger("netgen")


class CacheDamaged(ImportError):
    """A cache file is not what its name says (and netgen cannot rebuild it)."""


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


@contextlib.contextmanager
def using_root(path):
    """Use ``path`` as the cache root inside the block (None: no change)."""
    if path is None:
        yield
        return
    old = os.environ.get(ENV)
    os.environ[ENV] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


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


def root_problem(path: Path | None = None) -> str | None:
    """Why the cache root (or a folder in it) must not be used, or None:
    it is not a folder, not owned by this user, or writable by group or
    others (anyone who can write it could make netgen run their code).
    ``$NETGEN_CACHE_INSECURE=1`` accepts such a folder."""
    p = root() if path is None else path
    try:
        st = os.stat(p)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if os.environ.get(INSECURE_ENV) == "1":
        return None
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"is owned by another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"is writable by {'others' if st.st_mode & 0o002 else 'its group'} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


_WARNED: set = set()


def _refuse(path: Path, why: str) -> None:
    """One line on the ``netgen`` logger (once per folder and process)."""
    if (str(path), why) not in _WARNED:
        _WARNED.add((str(path), why))
        log.warning("netgen: not using the cache folder %s: it %s; layers are built in memory, not cached (chmod 700 it, point "
                    "%s at a folder of yours, or set %s=1 to use it anyway)", _shown(path), why, ENV, INSECURE_ENV)


def _shown(path) -> str:
    return repr(str(path))[1:-1]  # control characters and lone surrogates escaped


def _usable(sub: str, create: bool = False) -> tuple[Path, str | None]:
    """``(version_dir() / sub, why not)``: why is None when the folder may be
    used, ``"missing"`` when it does not exist (or could not be created),
    else the reason it is refused (logged once, naming the folder). Each
    folder from the root down is checked before anything is created in it;
    folders netgen creates are 0700."""
    p = root()
    for part in (None, versions(), *Path(sub).parts):
        if part is not None:
            p = p / part
        if not p.exists():
            if not create:
                return version_dir() / sub, "missing"
            try:
                if part is None:
                    p.parent.mkdir(parents=True, exist_ok=True)
                p.mkdir(mode=0o700)
            except FileExistsError:
                pass
            except OSError:
                return version_dir() / sub, "missing"
        why = root_problem(p)
        if why is not None:
            _refuse(p, why)
            return version_dir() / sub, f"{_shown(p)} {why}"
    return version_dir() / sub, None


def usable_dir(sub: str, *, create: bool = False) -> Path | None:
    """``version_dir() / sub`` if it may be used (read, written, imported
    from): the root and every folder down to it yours and writable by you
    only (:func:`root_problem`); created 0700 when ``create``. None (with
    one warning naming the folder) when it may not, or does not exist."""
    d, why = _usable(sub, create)
    return d if why is None else None


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


# ------------------------------------------------- a module file anywhere
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
    problem = root_problem(r) if r.exists() else None
    return {"root": str(r), "versions": versions(), "files": files, "bytes": nbytes, "refused": problem}


def clear() -> int:
    """Delete the whole cache (every version); returns the number of files
    removed. Modules already imported keep working in this process."""
    r = root()
    if not r.exists():
        return 0
    st = os.stat(r)
    if hasattr(os, "getuid") and st.st_uid != os.getuid() and os.environ.get(INSECURE_ENV) != "1":
        raise ValueError(f"not clearing {_shown(r)}: it is owned by another user (uid {st.st_uid}); "
                         f"set {ENV} to your own cache folder")
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


def build_layer(net, r, target: str = "torch"):
    """A ``Layer()`` of the generated ``target`` module for ``net`` relaxed
    by ``r``, imported from netgen's on-disk cache (written there on first
    use; nothing goes to ``generated/``). Also ``netgen.codegen.auto.build_layer``;
    it lives here so that a caller that needs no ``AutoLayer`` (the
    operators' backends) does not import ``torch._dynamo`` with it (0.74 s
    CPU, most of a first call)."""
    from . import emit, get, module_name

    target = get(target).name
    # built before (this process or another): no emit, no source check
    mod = cached_module(built_key(net, r, target), lambda: emit(target, net, r), module_name(net, r, target))
    return mod.Layer()
