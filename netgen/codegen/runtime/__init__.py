"""Runtime code of generated modules, as real modules.

The fixed part of a generated module (argument checks, the sweeps and their
written backward, ``hard``, ``Layer``) lives in these files, where it is
imported, linted and tested like any other code. An emitter copies the
pieces a module needs with :func:`assemble` (``inspect.getsource``), so the
generated file needs no netgen (torch, and numba for the numba and cuda
targets); the emitter itself writes only what varies: constants, tables,
the rendered swap functions and (cuda) the kernels.

* :mod:`.common`: pieces any target can use (checks with one wording, the
  steepness rule, the second-order and torch.func refusals, ``hard``).
* :mod:`.torch_layer`: the torch target's sweeps and ``Layer``.
* :mod:`.torch_engine`: the torch target's P engine (P's rows and their
  adjoint by rank groups; the differences kept or computed again).
* :mod:`.cuda_launch`: the cuda target's launcher (tables, variants, block
  sizes, kernel-argument packing, launches, chunks).
* :mod:`.cuda_cubin`: the cuda target's loader of ahead-of-time kernels
  (cubins or PTX through ``cuda.core``, no numba-cuda compile).
* :mod:`.cuda_ops`: the cuda target's ``torch.library`` ops and autograd.
* :mod:`.cuda_layer`: the cuda target's launch self-check and ``Layer``.
* :mod:`.numba_vector`: flush-to-zero, the block transposes and the
  16-lane vector updates of the numba target, the typed constant and the
  float-type dispatch.
* :mod:`.numba_engine`: the numba target's P engine (P and its adjoint,
  by lane groups, in either sweep direction).
* :mod:`.numba_kernels`: the numba target's dtype-generic kernels, each
  compiled parallel and serial.
* :mod:`.numba_host`: the numba target's pool, thread choice and
  numpy-level wrappers.
* :mod:`.numba_layer`: the numba target's autograd Functions and ``Layer``.

Module-level state (caches, settings read from the environment) is copied
the same way, statement by statement, with :func:`statements`.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from ..literals import GeneratedSourceError, Namespace

__all__ = ["assemble", "statements"]


def assemble(parts, names: Namespace) -> str:
    """Source of ``parts`` (functions and classes, in order), separated by
    two blank lines; each top-level name is claimed in ``names``, so a name
    defined twice in a module is refused while assembling."""
    chunks = []
    for obj in parts:
        names.define(obj.__name__)
        chunks.append(textwrap.dedent(inspect.getsource(obj)).strip("\n"))
    return "\n\n\n".join(chunks)


def statements(module, wanted, names: Namespace) -> str:
    """Source of the top-level statements of ``module`` that bind a name in
    ``wanted`` (``NAME = ...``, ``A, B = ...``, ``NAME: T = ...``) or call a function named
    in it (``name()``), in file order, each with the comment lines right
    above it (a ``# ---`` divider excluded); every bound name is claimed in
    ``names`` (defined twice: :class:`GeneratedSourceError`). A wanted name
    that no statement binds or calls is an internal error too."""
    src = inspect.getsource(module)
    lines = src.splitlines()
    wanted = set(wanted)
    found, chunks = set(), []
    for node in ast.parse(src).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)]
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
              and isinstance(node.value.func, ast.Name)):
            bound = [node.value.func.id]
        else:
            continue
        if not bound or not set(bound) <= wanted:
            continue
        first = node.lineno - 1
        while first > 0 and lines[first - 1].lstrip().startswith("#") and not lines[first - 1].startswith("# ---"):
            first -= 1
        for name in bound:
            if not isinstance(node, ast.Expr):
                names.define(name)
            found.add(name)
        chunks.append("\n".join(lines[first:node.end_lineno]))
    missing = wanted - found
    if missing:
        raise GeneratedSourceError(f"{module.__name__} has no top-level statement for {', '.join(sorted(missing))}")
    return "\n".join(chunks)
