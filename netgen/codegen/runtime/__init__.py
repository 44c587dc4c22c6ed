"""Runtime code of generated modules, as real modules.

The fixed part of a generated module (argument checks, the sweeps and their
written backward, ``hard``, ``Layer``) lives in these files, where it is
imported, linted and tested like any other code. An emitter copies the
pieces a module needs with :func:`assemble` (``inspect.getsource``), so the
generated file needs no netgen (torch, and numba for the numba and cuda
targets); the emitter itself writes only what varies: constants, tables,
the rendered swap functions and (cuda) the kernels.

The shared runtime lives here; each target's own runtime files sit in its
package (``netgen/codegen/<target>/``):

* :mod:`.common`: pieces any target can use (checks with one wording, the
  second-order and torch.func refusals, ``hard``).
* :mod:`.layer`: the one ``Layer`` base (forward, values, column, hard, the
  steepness rule), shared by the targets' ``Layer`` classes and
  :class:`netgen.codegen.auto.AutoLayer`.
* :mod:`.tables`: the network's tables of numba and cuda modules, built at
  import from ``NETWORK``, and the plan's lane ranges.

Module-level state (caches, settings read from the environment) is copied
the same way, statement by statement, with :func:`statements`.

**The interface.** A runtime file declares in ``READS`` the module globals
its copied code reads and neither defines nor imports from another runtime
file (the emitter's constants and rendered code; stand-ins in the file let
it import on its own). :func:`check_interface` holds a generated module to
them: every name the copied files read is defined (none missing), and every
name the emitter wrote is read by some code of the module or is part of the
generated-module contract (none extra). Every emitter runs it, and
tests/codegen/test_runtime.py checks each ``READS`` against what the file's
copied code really reads.
"""

from __future__ import annotations

import ast
import inspect
import io
import textwrap
import tokenize

from ..literals import GeneratedSourceError, Namespace, top_level_definitions

__all__ = ["assemble", "statements", "renamed", "check_interface", "CONTRACT"]

#: the names of the generated-module contract (docs/generated-modules.md): written, maybe read by no code
CONTRACT = frozenset({"TARGET", "NETWORK", "RELAXATION", "Layer"})


def renamed(source: str, rename: dict) -> str:
    """``source`` with each name token that is a key of ``rename`` replaced
    by its value (comments, strings and attributes' names untouched, layout
    kept): how an emitter makes a variant of copied code, e.g. the 1-row
    kernels of :mod:`netgen.codegen.numba.narrow`."""
    if not rename:
        return source
    lines = source.splitlines(keepends=True)
    hits, prev = [], None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.string in rename and prev != ".":
            hits.append((tok.start, tok.string))
        prev = tok.string
    for (row, col), name in reversed(hits):  # right to left: earlier columns stay valid
        line = lines[row - 1]
        lines[row - 1] = line[:col] + rename[name] + line[col + len(name):]
    return "".join(lines)


def assemble(parts, names: Namespace, rename: dict | None = None) -> str:
    """Source of ``parts`` (functions and classes, in order), separated by
    two blank lines; each top-level name is claimed in ``names``, so a name
    defined twice in a module is refused while assembling. With ``rename``
    the names in it are replaced (:func:`renamed`), the parts' own included."""
    rename = rename or {}
    chunks = []
    for obj in parts:
        name = rename.get(obj.__name__, obj.__name__)
        names.define(name)
        names.copied.add(name)
        chunks.append(renamed(textwrap.dedent(inspect.getsource(obj)).strip("\n"), rename))
    return "\n\n\n".join(chunks)


def statements(module, wanted, names: Namespace, rename: dict | None = None) -> str:
    """Source of the top-level statements of ``module`` that bind a name in
    ``wanted`` (``NAME = ...``, ``A, B = ...``, ``NAME: T = ...``) or call a function named
    in it (``name()``), in file order, each with the comment lines right
    above it (a ``# ---`` divider excluded); every bound name is claimed in
    ``names`` (defined twice: :class:`GeneratedSourceError`). A wanted name
    that no statement binds or calls is an internal error too. With
    ``rename`` the names in it are replaced (:func:`renamed`), the bound
    ones included."""
    rename = rename or {}
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
                names.define(rename.get(name, name))
                names.copied.add(rename.get(name, name))
            found.add(name)
        chunks.append(renamed("\n".join(lines[first:node.end_lineno]), rename))
    missing = wanted - found
    if missing:
        raise GeneratedSourceError(f"{module.__name__} has no top-level statement for {', '.join(sorted(missing))}")
    return "\n".join(chunks)


def check_interface(source: str, names: Namespace, modules, what: str = "generated module") -> None:
    """Hold the module ``source`` to the runtime interface of the runtime
    ``modules`` it copied (their ``READS``): a name they read that the module
    does not define is *missing*; a name the emitter wrote (defined at the
    top level, not copied: ``names.copied``) that no code of the module reads
    and the contract does not name is *extra*. Either is a
    :class:`GeneratedSourceError` (a netgen bug)."""
    tree = ast.parse(source)
    defined = {name for name, _ in top_level_definitions(tree)}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    reads = set().union(*(getattr(m, "READS", ()) for m in modules))
    missing = reads - defined
    read_somewhere = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    extra = defined - names.copied - CONTRACT - read_somewhere - {
        (a.asname or a.name).split(".")[0] for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
        for a in node.names}
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"its runtime reads {', '.join(sorted(missing))}, which the emitter did not write")
        if extra:
            parts.append(f"the emitter wrote {', '.join(sorted(extra))}, which nothing reads")
        raise GeneratedSourceError(f"netgen bug: the {what} breaks the runtime interface: {'; '.join(parts)}")
