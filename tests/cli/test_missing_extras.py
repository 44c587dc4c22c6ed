"""A missing optional dependency is bad input: one line naming the extra to
install, exit code 2, no traceback. Each case runs the CLI in a fresh
interpreter whose import system refuses the module, as if it were not
installed."""

import os
import subprocess
import sys

import pytest

# a meta path finder that makes `import <hidden>` (and its submodules) fail
RUN_HIDDEN = """
import sys
hidden = set(sys.argv[1].split(','))
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
sys.argv = ['netgen'] + sys.argv[2:]
from netgen.cli import main
main()
"""


def run_hidden(tmp_path, hidden, *args, env=None):
    return subprocess.run([sys.executable, "-c", RUN_HIDDEN, hidden, *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=os.getcwd(), env=env)


def assert_one_line(r, extra):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("netgen: error: ")
    assert f'pip install "netgen-networks[{extra}]"' in lines[0], lines[0]


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_render_without_matplotlib(tmp_path, suffix):
    out = tmp_path / f"x.{suffix}"
    r = run_hidden(tmp_path, "matplotlib", "render", "--n", 16, "--k", 5, "-o", out)
    assert_one_line(r, "render")
    assert "matplotlib" in r.stderr and not out.exists()


def test_render_dot_source_needs_no_matplotlib(tmp_path):
    out = tmp_path / "x.dot"
    r = run_hidden(tmp_path, "matplotlib", "render", "--n", 8, "--k", 2, "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("digraph")


def test_cuda_target_without_numba_cuda(tmp_path):
    r = run_hidden(tmp_path, "numba_cuda", "build", "--n", 16, "--k", 5, "--target", "cuda", "-o", tmp_path)
    assert_one_line(r, "cuda")
    assert "numba_cuda" in r.stderr and list(tmp_path.iterdir()) == []


def test_torch_target_without_torch(tmp_path):
    r = run_hidden(tmp_path, "torch", "build", "--n", 16, "--k", 5, "--target", "torch", "-o", tmp_path)
    assert_one_line(r, "torch")


def test_bench_plots_without_matplotlib(tmp_path):
    r = run_hidden(tmp_path, "matplotlib", "bench", "--quick", "-o", tmp_path / "b")
    assert_one_line(r, "bench")
    assert "--no-plots" in r.stderr and not (tmp_path / "b").exists()


def test_dag_without_the_dot_binary(tmp_path):
    # the DAG view shells out to graphviz's dot: an empty PATH hides it
    env = {**os.environ, "PATH": str(tmp_path)}
    r = run_hidden(tmp_path, "", "render", "--n", 8, "--k", 2, "--dag", "-o", tmp_path / "x.svg", env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "graphviz" in lines[0], r.stderr


def test_the_named_extras_exist_in_pyproject():
    import tomllib
    from pathlib import Path

    from netgen.extras import EXTRAS

    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in EXTRAS.items():
        assert extra in extras, (module, extra)
