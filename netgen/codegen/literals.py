"""The one literal writer and the one namespace of every code generator.

Every value that reaches generated source (a network's construction text, a
relaxation constant, a table) is written by :func:`literal`: a Python
literal that evaluates back to an equal value (floats bit for bit, ``inf``
and ``nan`` included; strings with any character: quotes, backslashes, NUL,
newlines, lone surrogates). Nothing is ever pasted as text. As a second
line of defence a string literal never contains ``@@`` (``@`` is written
``\\x40`` in a string that holds ``@@``), so a template marker can never
appear inside a value, whatever substitution a target still performs.

:class:`Namespace` hands out unique identifiers and refuses a second
definition of a name (the ideas of torch.fx's ``_Namespace``), and
:func:`check_source` is what :func:`netgen.codegen.emit` runs on every
assembled module before anyone sees it: the source must compile and define
each top-level name once. A failure there is a netgen bug
(:class:`GeneratedSourceError`, a RuntimeError; the CLI exits 1), never a
user error, and nothing is written.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import math
import re
from typing import Any, Iterable

import numpy as np

__all__ = ["literal", "docstring", "Namespace", "GeneratedSourceError", "check_source", "top_level_definitions"]


def literal(value: Any) -> str:
    """A deterministic Python literal for JSON-like ``value``: None, bool,
    int, float (``inf``/``nan`` as ``float('inf')``/``float('nan')``), str,
    list, tuple, dict (keys as given, in order), and numpy scalars. Raises
    ValueError for anything else."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return repr(None if value is None else bool(value))
    if isinstance(value, (int, np.integer)):
        return repr(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "float('-inf')"
        return repr(v)
    if isinstance(value, str):
        text = repr(value)
        # repr never writes '@' as part of an escape, so this stays exact
        return text.replace("@", "\\x40") if "@@" in value else text
    if isinstance(value, (list, tuple)):
        inner = ", ".join(literal(v) for v in value)
        if isinstance(value, tuple):
            return "(" + inner + ("," if len(value) == 1 else "") + ")"
        return "[" + inner + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"cannot write {type(value).__name__} as a literal")


def docstring(text: str) -> str:
    """A triple-quoted string literal holding ``text`` exactly, readable
    (newlines stay newlines): backslashes and double quotes are escaped,
    every character that is not printable (NUL, CR, tabs, lone surrogates,
    line separators) is written as an escape, and ``@`` as ``\\x40`` when
    the text holds ``@@``."""
    marker = "@@" in text
    out = []
    for ch in text:
        if ch == "\n":
            out.append(ch)
        elif ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "@" and marker:
            out.append("\\x40")
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])
    return '"""' + "".join(out) + '"""'


class GeneratedSourceError(RuntimeError):
    """Generated source that does not compile or defines a name twice: an
    internal error of netgen (please report it), never a user error."""


_RESERVED = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))


class Namespace:
    """Unique identifiers for one generated module.

    ``create(candidate)`` returns a free identifier derived from
    ``candidate`` (invalid characters become ``_``, a clash gets a numeric
    suffix) and marks it used; ``define(name)`` claims an exact name and
    raises :class:`GeneratedSourceError` when it is already taken."""

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self._used: set[str] = set(reserved)
        #: the names copied from runtime modules (netgen.codegen.runtime.assemble / statements);
        #: the rest of the defined names are the emitter's
        self.copied: set[str] = set()

    def __contains__(self, name: str) -> bool:
        return name in self._used

    def create(self, candidate: str) -> str:
        base = re.sub(r"\W", "_", candidate, flags=re.ASCII) or "_"
        if base[0].isdigit():
            base = "_" + base
        name, i = base, 0
        while name in self._used or name in _RESERVED:
            i += 1
            name = f"{base}_{i}"
        self._used.add(name)
        return name

    def define(self, name: str) -> str:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise GeneratedSourceError(f"netgen bug: {name!r} is not a valid identifier for generated code")
        if name in self._used:
            raise GeneratedSourceError(f"netgen bug: generated module defines {name!r} twice")
        self._used.add(name)
        return name


def top_level_definitions(tree: ast.Module) -> list[tuple[str, int]]:
    """(name, line) of every def, class and plain assignment at module
    level (not imports, not names bound inside functions)."""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((node.name, node.lineno))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Name):
                        out.append((sub.id, node.lineno))
    return out


def check_source(source: str, what: str = "generated module", allow_twice: Iterable[str] = ()) -> None:
    """Compile ``source`` and check that no top-level name is defined twice
    (except names in ``allow_twice``). Raises :class:`GeneratedSourceError`
    saying it is a netgen bug."""
    try:
        tree = ast.parse(source, f"<{what}>")
        compile(tree, f"<{what}>", "exec")
    except (SyntaxError, ValueError) as e:  # ValueError: NUL bytes in source
        raise GeneratedSourceError(
            f"netgen bug: the {what} does not compile ({type(e).__name__}: {e}); nothing was written. "
            "Please report this with the network file."
        ) from e
    seen: dict[str, int] = {}
    allowed = set(allow_twice)
    for name, line in top_level_definitions(tree):
        if name in seen and name not in allowed:
            raise GeneratedSourceError(
                f"netgen bug: the {what} defines {name!r} twice (lines {seen[name]} and {line}); nothing was written"
            )
        seen.setdefault(name, line)
