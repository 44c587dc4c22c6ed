"""The whole cache at once: how much it holds (:func:`info`, ``netgen cache
info``) and deleting it (:func:`clear`, ``netgen cache clear``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .folder import ENV, INSECURE_ENV, _shown, root, root_problem, versions


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
