"""Where netgen's cache lives and whether it may be used.

The root (``$NETGEN_CACHE_DIR`` or the user cache dir of ``platformdirs``),
the version tag that names each version's folder under it, and the check
every folder passes before anything in it is read, written or imported
(:func:`root_problem`, :func:`usable_dir`): it must be a folder of this
user's that neither group nor others can write, or
``$NETGEN_CACHE_INSECURE=1`` must say to use it anyway (docs/security.md).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import stat
import sys
from pathlib import Path

ENV = "NETGEN_CACHE_DIR"
#: set to 1 to use a cache root that is not yours or that others can write
INSECURE_ENV = "NETGEN_CACHE_INSECURE"

log = logging.getLogger("netgen")


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
    from ... import __version__
    from .. import TARGETS

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
