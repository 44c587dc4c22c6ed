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

The package, one job a module (everything is imported from here):

* :mod:`.folder`: where the cache lives and whether a folder in it may be
  used (``root``, ``versions``, ``usable_dir``, ``root_problem``);
* :mod:`.files`: module names, write-once files, verified import
  (``qualname_for``, ``verified_source``, ``exec_source``, ``import_source``);
* :mod:`.index`: the index of built layers (``built_key``, ``find_built``,
  ``cached_module``, ``build_layer``);
* :mod:`.finder`: ``netgen.load`` and the ``sys.meta_path`` finder;
* :mod:`.maintenance`: ``info`` and ``clear``.
"""

from __future__ import annotations

from .files import (NAME_RE, PREFIX, CacheDamaged, _write_once, exec_source, file_qualname, import_source, module_file,
                    qualname_for, verified_source)
from .finder import install_finder, load, remember_path
from .folder import _WARNED, ENV, INSECURE_ENV, root, root_problem, usable_dir, using_root, version_dir, versions
from .index import build_layer, built_key, cached_module, find_built, generator_tag, remember_built
from .maintenance import clear, info

__all__ = ["root", "version_dir", "module_file", "import_source", "remember_path", "clear", "info",
           "install_finder", "qualname_for", "built_key", "find_built", "remember_built", "usable_dir",
           "root_problem", "verified_source", "exec_source", "file_qualname", "CacheDamaged", "load",
           "build_layer"]
