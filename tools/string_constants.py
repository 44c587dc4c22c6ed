"""Lines of source held in string constants (not docstrings) under a
package folder, per file: the code no linter, type checker or coverage tool
sees. Counts every multi-line string constant (a template, a pasted kernel)
by its number of lines; one-line strings (messages, names) are not code and
are not counted.

    python tools/string_constants.py [folder ...]   # default netgen/codegen
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def count(path: Path) -> int:
    tree = ast.parse(path.read_text(), str(path))
    skip = _docstrings(tree)
    total = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            lines = node.value.strip("\n").count("\n") + 1
            if lines > 1:
                total += lines
    return total


def main(folders: list[str]) -> None:
    grand = 0
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.py")):
            c = count(path)
            if c:
                print(f"{c:6d}  {path}")
            grand += c
    print(f"{grand:6d}  total lines in multi-line string constants ({', '.join(folders)})")


if __name__ == "__main__":
    main(sys.argv[1:] or ["netgen/codegen"])
