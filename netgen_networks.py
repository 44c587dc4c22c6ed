"""The ``netgen`` command of the netgen-networks distribution, and the check
that the ``netgen`` Python imports is this one.

Two projects import as ``netgen``: this one (distribution
``netgen-networks``) and NGSolve's mesher (distribution ``netgen-mesher``,
which ``pip install ngsolve`` brings; it also installs a ``netgen``
program, its GUI). They cannot share an environment: pip installs both into
``site-packages/netgen/`` and each overwrites the other's files, and where
they sit in different folders the first one on ``sys.path`` hides the other.
The console script starts here (a module with a name of its own, so it runs
whichever ``netgen`` is found) and says so in one line, exit code 2, instead
of a ``ModuleNotFoundError: No module named 'netgen.cli'`` traceback (or,
with an editable install, NGSolve's ``__init__`` silently mixed with this
package's submodules).
``import netgen`` warns when NGSolve's files share its folder
(:func:`ngsolve_files`). See docs/faq.md, "NGSolve's netgen".

Only the standard library here: this runs before any ``netgen`` is imported.
"""

from __future__ import annotations

import importlib.util
import os
import sys

DIST = "netgen-networks"
#: files only this project's ``netgen`` package has
OURS = ("network.py", os.path.join("cli", "__init__.py"))
#: files of NGSolve's ``netgen`` package (netgen-mesher 6.2), any one of them
NGSOLVE = ("libngpy", "meshing.py", "geom2d.py", "csg.py")
#: this project's ``netgen/__init__.py`` starts with this line
INIT_MARK = '"""netgen: a compiler for sorting and top-k selection networks.'
ADVICE = (f"install {DIST} and NGSolve in separate virtual environments "
          f"(python -m venv .venv && . .venv/bin/activate && pip install {DIST})")


def ngsolve_files(folder) -> list[str]:
    """The NGSolve files in the package folder ``folder`` (empty: none)."""
    return [name for name in NGSOLVE if os.path.exists(os.path.join(folder, name))]


def _ours(folder) -> bool:
    return all(os.path.exists(os.path.join(folder, name)) for name in OURS)


def _init_is_ours(folder) -> bool:
    try:
        with open(os.path.join(folder, "__init__.py"), encoding="utf-8") as fh:
            return fh.readline().startswith(INIT_MARK)
    except OSError:
        return False


def problem() -> tuple[str, bool] | None:
    """``(message, fatal)`` when the ``netgen`` that ``import netgen`` finds
    is not (only) this project's, else None. Finds the package without
    importing it."""
    try:
        spec = importlib.util.find_spec("netgen")
    except (ImportError, ValueError) as e:  # pragma: no cover - a broken sys.path entry
        return f"cannot look up the netgen package: {e}", True
    if spec is None:
        return f"no package named netgen is importable from this Python ({sys.executable}): pip install {DIST}", True
    folders = list(spec.submodule_search_locations or [])
    where = spec.origin or (folders[0] if folders else "?")
    ours = [f for f in folders if _ours(f)]
    theirs = [f for f in folders if ngsolve_files(f)]
    if not ours and spec.origin is None and not theirs:  # a folder without __init__.py: a namespace package
        return (f"`import netgen` finds the folder {where} (no __init__.py), not {DIST}: Python run from the folder "
                f"that holds a clone named netgen imports the clone's folder; run it from another folder"), True
    if not ours:
        who = "NGSolve's mesher (netgen-mesher)" if theirs else "another package named netgen"
        return (f"`import netgen` finds {who} at {where}, not {DIST} (the comparator-network compiler); "
                f"both use the import name netgen: {ADVICE}"), True
    if theirs:
        folder = theirs[0]
        if not _init_is_ours(folder):
            return (f"NGSolve's mesher (netgen-mesher) was installed over {DIST} in {folder} (its __init__.py "
                    f"replaced this one's): both use the import name netgen: {ADVICE}"), True
        return (f"warning: NGSolve's mesher (netgen-mesher) shares the folder {folder} with {DIST} "
                f"({', '.join(ngsolve_files(folder))}); NGSolve will not work here: {ADVICE}"), False
    return None


def main() -> None:
    """The ``netgen`` console script: check the package, then run the CLI."""
    found = problem()
    if found is not None:
        message, fatal = found
        print(f"netgen: {'error: ' if fatal else ''}{message}", file=sys.stderr)
        if fatal:
            raise SystemExit(2)
    from netgen.cli import main as cli

    cli(prog_name="netgen")


if __name__ == "__main__":  # pragma: no cover
    main()
