"""The one literal writer, the namespace and the compile check, and the
property behind them: whatever text a network file carries in its
construction fields, every target writes a module that compiles, imports
without running any of that text, and hands the text back unchanged."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from netgen.codegen import TARGETS, GeneratedSourceError, emit, write_module
from netgen.codegen.lines import literal as lines_literal
from netgen.codegen.literals import Namespace, check_source, docstring, literal
from netgen.codegen.cache import load
from netgen.network import Network
from netgen.relax.distributions import Relaxation

PAYLOAD = "x\"\"\"; __import__('pathlib').Path('pwned').touch(); \"\"\""
NASTY = [
    PAYLOAD,
    "x'''; __import__('pathlib').Path('pwned').touch(); '''",
    "a\\x b\\N{ c\\u12 d\\",
    "nul\0nul",
    "line\nbreak\r\n#",
    "@@KERNELS@@ @@HELPERS@@ @@NETWORK@@ @@DOC@@ @@PLAN@@ @@OPS@@ @@SFX@@",
    "\ud800 lone surrogate \udfff",
    "\u2028\u2029\x0c\x0b\x85",
    '"',
    "\\",
    "",
]

json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and (a == b) and (not isinstance(a, float) or math.copysign(1, a) == math.copysign(1, b))


@settings(max_examples=300, deadline=None)
@given(json_like)
def test_literal_round_trips(value):
    text = literal(value)
    assert "@@" not in text
    assert _same(eval(compile(text, "<literal>", "eval"), {}), value)


@settings(max_examples=300, deadline=None)
@given(st.text())
@example("".join(NASTY))
def test_docstring_round_trips(text):
    src = docstring(text)
    assert "@@" not in src and "\0" not in src
    assert eval(compile(src, "<doc>", "eval"), {}) == text


def test_literal_forms_and_alias():
    assert lines_literal is literal
    assert literal(float("inf")) == "float('inf')" and literal(float("-inf")) == "float('-inf')"
    assert literal((1,)) == "(1,)" and literal({"a": [1.5, None, True]}) == "{'a': [1.5, None, True]}"
    with pytest.raises(ValueError, match="literal"):
        literal(object())


def test_namespace_unique_names_and_refuses_redefinition():
    ns = Namespace(["plan"])
    assert ns.create("plan") == "plan_1" and ns.create("plan") == "plan_2"
    assert ns.create("9 bad-name") == "_9_bad_name"
    assert ns.create("list") == "list_1"  # never shadows a builtin
    assert ns.define("_tables") == "_tables"
    with pytest.raises(GeneratedSourceError, match="twice"):
        ns.define("_tables")


def test_check_source_refuses_bad_code_and_repeated_definitions():
    check_source("def f():\n    return 1\n\nx = f()\n")
    with pytest.raises(GeneratedSourceError, match="netgen bug.*does not compile"):
        check_source("def f(:\n")
    with pytest.raises(GeneratedSourceError, match="does not compile"):
        check_source("x = 1  # \0\n")
    with pytest.raises(GeneratedSourceError, match="defines '_tables' twice"):
        check_source("def _tables():\n    pass\n\n_tables = 1\n")
    check_source("def _tables():\n    pass\n\n_tables = 1\n", allow_twice=["_tables"])


def test_write_module_compiles_first_and_writes_nothing_on_failure(tmp_path, monkeypatch):
    net = Network.from_layers(2, [[(0, 1)]])
    from netgen.codegen.torch import emit as torch_emit

    monkeypatch.setattr(torch_emit, "emit", lambda *args: "def broken(:\n")
    with pytest.raises(RuntimeError, match="netgen bug"):
        write_module("torch", net, Relaxation(), tmp_path)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------ every target, any construction text
construction_text = st.text(max_size=40) | st.sampled_from(NASTY)
constructions = st.builds(
    lambda kind, extra: {"kind": kind, **extra},
    construction_text,
    st.dictionaries(construction_text, construction_text | st.lists(construction_text, max_size=2), max_size=3),
)


def _network(construction):
    return Network.from_layers(4, [[(0, 1), (2, 3)], [(0, 2), (1, 3)], [(1, 2)]], construction=construction)


def _check_target(target, construction, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NETGEN_NUMBA_PARALLEL", "0")
    net = _network(construction)
    src = emit(target, net, Relaxation())  # compiled inside emit (a SyntaxError there fails the example)
    if TARGETS[target].test.simulator:
        # (cuda) the module is imported in its own simulator-free process by
        # test_cuda_target_imports_without_gpu; here: compiles and keeps the text
        ns = {"json": json}  # the module's import
        import ast

        tree = ast.parse(src)
        for node in tree.body:  # evaluate the NETWORK literal alone
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "NETWORK":
                exec(compile(ast.Module([node], []), "<net>", "exec"), ns)
        assert ns["NETWORK"]["construction"] == json.loads(json.dumps(construction))
        return
    path = write_module(target, net, Relaxation(), tmp_path / "out")
    mod = load(path)
    assert not (tmp_path / "pwned").exists(), "importing the module ran network text"
    assert mod.NETWORK["construction"] == json.loads(json.dumps(construction))
    assert construction["kind"] in (mod.__doc__ or "") or target == "torch"


@pytest.mark.parametrize("target", list(TARGETS))
def test_any_construction_text_every_target(target, tmp_path_factory):
    if target in ("numba",):
        pytest.importorskip("numba")

    # the literal code is the targets' shared renderer: 25 examples on torch (cheap modules), 10 on numba
    # (each writes and imports a module), 6 on simulated targets (cuda: each emits a ~1 s module)
    @settings(max_examples=6 if TARGETS[target].test.simulator else 25 if target == "torch" else 10, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(constructions)
    @example({"kind": PAYLOAD})
    @example({"kind": "\0\\N{x}\\x@@KERNELS@@\"\"\"'''", "@@HELPERS@@": "\ud800\n"})
    def prop(construction):
        with pytest.MonkeyPatch.context() as mp:
            _check_target(target, construction, tmp_path_factory.mktemp(target), mp)

    prop()


def test_cuda_target_imports_without_gpu(tmp_path):
    """The cuda module (payload in its construction) imports in a fresh
    process without a GPU, runs no network text and keeps the text."""
    import subprocess
    import sys

    pytest.importorskip("numba.cuda")
    construction = {"kind": PAYLOAD, "note": "\0@@KERNELS@@\\N{"}
    path = write_module("cuda", _network(construction), Relaxation(), tmp_path, build=False)
    code = (
        "import json, sys\n"
        "from netgen.codegen.cache import load\n"
        f"m = load({str(path)!r})\n"
        "print(json.dumps(m.NETWORK['construction']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == construction
    assert not (tmp_path / "pwned").exists()
