"""Imports follow the pipeline: no import circle among netgen's modules, and
no module imports from a layer above its own (docs/layout.md).

Every module of the package is parsed with ``ast`` (nothing is imported);
every ``import`` statement counts, at module level and inside functions:

* a **circle** is a cycle of imports, at module level or inside functions
  (a function-level import still ties the two modules together: neither
  can be read, moved or tested without the other); ``if TYPE_CHECKING:``
  blocks do not count (they never run), nor does an import of the package
  itself (``netgen``: the front door, imported before any of its modules,
  e.g. for ``__version__``);
* a **layering violation** is any import, wherever it sits, of a module in
  a higher layer than the importer's.

To fix a failure: move the shared code down to the lowest layer that needs
it, or have the caller pass it in; never import upward, not even inside a
function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "netgen"
#: the code-generation targets' packages (one layer; none may import another)
TARGET_PACKAGES = ("netgen.codegen.torch", "netgen.codegen.numba", "netgen.codegen.cuda")

#: lowest first. A module belongs to the layer of the longest prefix that
#: names it. A module may import from its own layer and from lower ones.
LAYERS: list[tuple[str, tuple[str, ...], str]] = [
    ("base", ("netgen.extras", "netgen.schedule", "netgen.text"),
     "helpers that import nothing of netgen: optional extras; ASAP packing and cone pruning on arrays; "
     "inert text for messages, dot and matplotlib"),
    ("ir", ("netgen.network", "netgen.io"), "the Network value and its file formats"),
    ("construct", ("netgen.construct",), "constructions (each ends pruned and packed, unproved)"),
    ("passes", ("netgen.passes",), "Network -> Network passes; the cleanup is handed its firing analysis"),
    ("verify", ("netgen.verify",), "proofs and sampling"),
    ("relax", ("netgen.relax",), "the relaxed semantics: distributions, reference executor, baselines"),
    ("codegen-shared", ("netgen.codegen.literals", "netgen.codegen.lines", "netgen.codegen.render",
                        "netgen.codegen.swap_code", "netgen.codegen.header", "netgen.codegen.plan",
                        "netgen.codegen.target", "netgen.codegen.runtime"),
     "what every target shares: literals, the Lines builder, renderers, the module header, the engine plan, "
     "the Target type, the shared runtime (checks, the Layer base, tables)"),
    ("targets", TARGET_PACKAGES, "one package per target: its emitter, its runtime, its build step; no target "
                                 "imports another"),
    ("codegen", ("netgen.codegen",), "the registry (TARGETS, emit, write_module), the module cache and loader, "
                                     "target=\"auto\""),
    ("compiled", ("netgen.compiled",), "one network through the passes and the proof"),
    ("portfolio", ("netgen.portfolio",), "every cheap construction compiled, the best kept"),
    ("estimate", ("netgen.estimate",), "the build-time estimate (of a construction or the portfolio) and the time budget"),
    ("compiler", ("netgen.compiler",), "the driver: construct or portfolio, passes, proof"),
    ("layers", ("netgen.layers", "netgen.compat", "netgen.search", "netgen.render"),
     "user-facing layers and losses (a network + a relaxation + a target), diffsort/difftopk "
     "compatibility, the record search, drawings"),
    ("ops", ("netgen.ops",), "the operators (soft_sort, soft_rank, soft_topk, topk_mask), their modules and "
     "ranking losses, on a backend's lane sweeps; the network from the compiler, cached"),
    ("bench", ("netgen.bench",), "the benchmark harness"),
    ("cli", ("netgen.cli",), "the command line"),
    ("package", ("netgen",), "netgen/__init__.py, the package's front door"),
]


MISSING = "missing:"  # marks an import of a netgen module that does not exist


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes, _) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    if rank is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/test_imports.py and to docs/layout.md")
    return rank


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


MODULE, FUNCTION, TYPING = "at module level", "inside a function", "under TYPE_CHECKING"


def imports(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int, str]]:
    """``(imported netgen module, line, where)`` for every import statement
    of ``module``; ``where`` is MODULE (runs at import time), FUNCTION or
    TYPING (never runs)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int, str]] = []

    def target(name: str) -> str | None:
        while name and name not in modules:  # "netgen.x.func" -> "netgen.x"
            name = name.rpartition(".")[0]
        return name or None

    def visit(node: ast.AST, top: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, FUNCTION if top == MODULE else top)
            elif isinstance(child, ast.If) and _is_type_checking(child):
                visit(child, TYPING)  # never runs
            elif isinstance(child, ast.Import):
                for a in child.names:
                    t = target(a.name) if a.name.split(".")[0] == "netgen" else None
                    if t:
                        found.append((t, child.lineno, top))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    src = ".".join(base + ([child.module] if child.module else []))
                else:
                    src = child.module or ""
                if src.split(".")[0] != "netgen":
                    continue
                if src not in modules:
                    found.append((MISSING + src, child.lineno, top))
                    continue
                for a in child.names:
                    full = f"{src}.{a.name}"
                    found.append((full if full in modules else src, child.lineno, top))
            else:
                visit(child, top)

    visit(tree, MODULE)
    return [(t, line, top) for t, line, top in found if t != module]


def _graph():
    modules = all_modules()
    return modules, {m: imports(m, p, modules) for m, p in modules.items()}


def test_every_module_is_in_a_layer():
    for m in all_modules():
        layer_of(m)


def test_imports_follow_the_layers():
    modules, graph = _graph()
    bad = []
    for m, edges in graph.items():
        lm = layer_of(m)
        for t, line, top in edges:
            if t.startswith(MISSING):
                bad.append(f"{modules[m].relative_to(ROOT.parent)}:{line}: {m} imports {t[len(MISSING):]}, "
                           "which is no module of netgen (moved or renamed?)")
                continue
            if t == "netgen":  # the package itself (e.g. __version__): already imported before any submodule
                continue
            lt = layer_of(t)
            if lt > lm:
                where = top
                bad.append(
                    f"{modules[m].relative_to(ROOT.parent)}:{line}: {m} (layer {LAYERS[lm][0]!r}) imports {t} "
                    f"(layer {LAYERS[lt][0]!r}) {where}: a layer may import only from itself and the layers "
                    f"below it ({' < '.join(name for name, _, _ in LAYERS)})"
                )
    assert not bad, "imports against the pipeline (see docs/layout.md):\n" + "\n".join(bad)


def test_no_target_imports_another():
    """A target is one unit: its package imports the shared pieces below
    it, never another target's package (docs/codegen.md, "Adding a target")."""
    modules, graph = _graph()

    def package(m):
        return next((p for p in TARGET_PACKAGES if m == p or m.startswith(p + ".")), None)

    bad = [f"{modules[m].relative_to(ROOT.parent)}:{line}: {m} imports {t}"
           for m, edges in graph.items() if package(m) for t, line, _ in edges
           if package(t) not in (None, package(m))]
    assert not bad, "a target imports another target:\n" + "\n".join(bad)


def test_no_import_circles():
    modules, graph = _graph()
    # every import that runs counts, wherever it sits; the package itself (the front door) does not
    edges = {m: sorted({t for t, _, top in es if top != TYPING and t in graph and t != "netgen"})
             for m, es in graph.items()}
    lines: dict[tuple[str, str], str] = {}
    for m, es in graph.items():
        for t, line, top in sorted(es, key=lambda e: (e[2] != MODULE, e[1])):  # a module-level one first
            lines.setdefault((m, t), f"line {line}" + ("" if top == MODULE else f", {top}"))
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    msgs = []
    for comp in circles:
        inside = [f"{m} -> {t} ({lines[m, t]})" for m in comp for t in edges[m] if t in comp]
        msgs.append("circle among " + ", ".join(comp) + ": " + "; ".join(inside))
    assert not circles, "import circles (see docs/layout.md):\n" + "\n".join(msgs)


# ------------------------------------------------------------ the checker itself
@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """A tiny package tree named netgen, to show the checks can fail."""
    root = tmp_path / "netgen"
    for rel, text in {
        "__init__.py": "",
        "network.py": "from .construct import splitter\n",  # upward, and a circle with splitter
        "construct/__init__.py": "",
        "construct/splitter.py": "from ..network import Network\n"
                                 "def f():\n    from ..compiler import compile\n",  # upward inside a function
        "cli.py": "def f():\n    from .construct.portfolio import choose\n",  # moved away
        "compiler.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .network import Network\n",
        # a circle through function-level imports only, within one layer
        "codegen/__init__.py": "",
        "codegen/cache.py": "def f():\n    from .loader import g\n",
        "codegen/loader.py": "def g():\n    from .cache import f\n",
        # one target's package importing another's
        "codegen/torch/__init__.py": "from ..numba import kernels\n",
        "codegen/numba/__init__.py": "",
        "codegen/numba/kernels.py": "",
        # reading a name from the front door is no circle
        "relax/__init__.py": "",
        "relax/loss.py": "def __getattr__(name):\n    from .. import topk_loss\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    monkeypatch.setattr(__import__(__name__), "ROOT", root)
    return root


def test_the_checks_catch_an_upward_import_and_a_circle(fake_package):
    with pytest.raises(AssertionError, match=r"netgen\.network \(layer 'ir'\) imports netgen\.construct\.splitter"):
        test_imports_follow_the_layers()
    with pytest.raises(AssertionError, match=r"imports netgen\.compiler \(layer 'compiler'\) inside a function"):
        test_imports_follow_the_layers()
    with pytest.raises(AssertionError, match=r"imports netgen\.construct\.portfolio, which is no module of netgen"):
        test_imports_follow_the_layers()
    with pytest.raises(AssertionError, match=r"circle among netgen\.construct\.splitter, netgen\.network"):
        test_no_import_circles()
    with pytest.raises(AssertionError, match=r"circle among netgen\.codegen\.cache, netgen\.codegen\.loader: "
                                             r"netgen\.codegen\.cache -> netgen\.codegen\.loader \(line 2, inside a "
                                             r"function\)"):
        test_no_import_circles()
    with pytest.raises(AssertionError, match=r"netgen\.codegen\.torch imports netgen\.codegen\.numba\.kernels"):
        test_no_target_imports_another()
    try:
        test_no_import_circles()
    except AssertionError as e:
        assert "netgen.relax" not in str(e) and "circle among netgen," not in str(e)
