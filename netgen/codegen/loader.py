"""Import a generated module from its file path (``netgen.load(path)``)."""

from __future__ import annotations

import sys
import types
from pathlib import Path


def load(path) -> types.ModuleType:
    """Import the generated module at ``path`` and return it.

    The module is registered in ``sys.modules`` under its file stem plus a
    hash of its resolved path and content (``_netgen_<stem>_<hash>``),
    so loading two different files with the same name never mixes them up,
    and loading the same unchanged file again returns the same module."""
    from .cache import exec_file, file_qualname, remember_path

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
    mod = exec_file(qualname, p, data)  # the bytes hashed into its name are the bytes that run
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
    from .cache import file_qualname

    return file_qualname(path, Path(path).read_bytes())


def load_source(source: str, name: str) -> types.ModuleType:
    """Import generated ``source`` as a module named ``_netgen_<name>_<hash>``
    (used by :mod:`netgen.compat`, ``topk_loss`` and ``target="auto"``): the
    source is written once to netgen's cache and imported from that file, so
    numba caches its kernels there and a pickled layer finds its module in a
    new process (see :mod:`netgen.codegen.cache`)."""
    from .cache import import_source

    return import_source(source, name)
