"""Issue 32, M1, M2 and the minor text items: strings from a network file
leave netgen inert (graphviz dot, matplotlib, messages, file and module
names). Each test failed on 064e1b4."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from netgen.cli import main
from netgen.construct import build
from netgen.io import from_dict, to_dict
from netgen.network import Network
from netgen.relax.distributions import Relaxation

BASE = to_dict(build("splitter", 6, 2))
HOSTILE = ['a" image="/etc/hostname" dpi=30000 x="', "a\\Nb\\G", "x\ny\r\x1b[2J", "\u202eevil", "$x^2$",
           "\ud800lone", "k" * 698, "}\ndigraph g { a -> b", "<b>html</b>", "'quote'"]


def _file(tmp_path, kind):
    d = dict(BASE, construction={"kind": kind})
    p = tmp_path / "k.json"
    p.write_text(json.dumps(d), encoding="utf-8")  # json escapes a lone surrogate
    return p


def _dot_label(dot: str) -> str:
    """The graph label as graphviz reads it: a double-quoted string where
    ``\\"`` and ``\\\\`` are escapes; the rest of the line must be exactly
    the other graph attributes."""
    line = dot.splitlines()[1]
    assert line.startswith('  label="'), line
    i, out = len('  label="'), []
    while line[i] != '"':
        if line[i] == "\\":
            out.append(line[i:i + 2])
            i += 2
        else:
            out.append(line[i])
            i += 1
    assert line[i + 1:] == '; labelloc=t; fontsize=12; fontname="Helvetica";', line[i + 1:]
    return "".join(out)


@pytest.mark.parametrize("kind", HOSTILE)
def test_dot_source_keeps_the_kind_inside_its_label(tmp_path, kind):
    f = _file(tmp_path, kind)
    out = tmp_path / "x.dot"
    r = CliRunner().invoke(main, ["render", str(f), "-o", str(out)])
    assert r.exit_code == 0, r.output
    dot = out.read_text(encoding="utf-8")
    label = _dot_label(dot)
    for esc in ("\\N", "\\G", "\\l", "\\r", "\\n", "\\E", "\\T", "\\H"):
        assert esc not in label.replace("\\\\", ""), label  # no graphviz label escape survives
    rest = dot.replace(label, "", 1)
    assert rest.count("digraph") == 1 and "image=" not in rest and "dpi" not in rest
    assert len(label) < 200 and label.isprintable()


def test_matplotlib_draws_a_dollar_as_written(tmp_path):
    pytest.importorskip("matplotlib")
    f = _file(tmp_path, "$x^2$ kind")
    out = tmp_path / "x.svg"
    r = CliRunner().invoke(main, ["render", str(f), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert ">$x^2$ kind " in out.read_text()  # one text element, not mathtext glyphs
    r = CliRunner().invoke(main, ["render", str(f), "--summary", "--title", "$\\alpha$", "-o", str(out)])
    assert r.exit_code == 0 and ">$\\alpha$<" in out.read_text()


def test_a_long_kind_is_shown_cut(tmp_path):
    f = _file(tmp_path, "k" * 698)
    for args in (["show", str(f)], ["build", "--from", str(f), "--target", "torch", "-o", str(tmp_path / "g")]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, r.output
        assert "k" * 300 not in r.output and max(map(len, r.output.splitlines())) < 320, r.output
    assert "k" * 100 not in repr(from_dict(dict(BASE, construction={"kind": "k" * 698})))


# -------------------------------------------------------------- M2: names
def test_a_long_kind_gives_numba_cache_file_names_that_fit(tmp_path, monkeypatch):
    """numba names its cache files <module file stem>.<function>-<line>.pyXY.nbi
    (written as <that>.tmp.<16 hex> first):
    a ~170-character kind made every call fail with "File name too long"."""
    from numba.core.dispatcher import Dispatcher

    from netgen.codegen.auto import build_layer

    monkeypatch.setenv("NETGEN_NUMBA_PARALLEL", "1")  # only parallel kernels are cached on disk
    monkeypatch.setenv("NETGEN_CACHE_DIR", str(tmp_path / "c"))
    net = from_dict(dict(BASE, construction={"kind": "k" * 170}))
    mod = sys.modules[type(build_layer(net, Relaxation("logistic", 3.0), "numba")).__module__]
    assert len(os.path.basename(mod.__file__).encode()) <= 255
    names = []
    for v in vars(mod).values():
        cache = getattr(v, "_cache", None) if isinstance(v, Dispatcher) else None
        if cache is not None and hasattr(cache, "_cache_file"):
            names += [cache._cache_file._index_name, cache._cache_file._data_name(99)]
    assert names, "no disk-cached kernel found"
    # numba writes each through a temporary file named <file>.tmp.<16 hex>
    too_long = [n for n in names if len(n.encode()) + len(".tmp.") + 16 > 255]
    assert not too_long, too_long[:2]


@pytest.mark.parametrize("name, why", [
    ("class", "keyword"), ("ﬁle", "NFKC"), ("x" * 205, "too long"), ("1abc", "identifier"), ("a-b", "identifier"),
])
def test_bad_module_names_are_refused_before_the_build(tmp_path, name, why):
    r = CliRunner().invoke(main, ["build", "--n", "6", "--k", "2", "--target", "torch", "--name", name,
                                  "-o", str(tmp_path / "g")])
    assert r.exit_code == 2 and why in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "g").exists() or not list((tmp_path / "g").iterdir())


def test_a_long_valid_name_imports(tmp_path):
    name = "m" * 120
    r = CliRunner().invoke(main, ["build", "--n", "6", "--k", "2", "--target", "torch", "--name", name,
                                  "-o", str(tmp_path)])
    assert r.exit_code == 0, r.output
    p = subprocess.run([sys.executable, "-c", f"import {name} as m; print(m.TARGET)"], cwd=tmp_path,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                           [os.getcwd(), os.environ.get("PYTHONPATH", "")])})
    assert p.stdout.strip() == "torch", p.stderr[-600:]
