"""``netgen render`` from the command line: files, views, exit codes."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from netgen.cli import main
from netgen.io import save

from render_nets import random_layered

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` binary not installed")


@pytest.fixture
def files(tmp_path, small_net, large_net):
    save(small_net, tmp_path / "small.json")
    save(large_net, tmp_path / "large.json")
    save(random_layered(60, 4, seed=2, k=5), tmp_path / "mid.json")
    return tmp_path


def run(*args):
    return CliRunner().invoke(main, ["render", *map(str, args)])


@pytest.mark.parametrize("suffix", ["png", "svg", "pdf", "dot"])
def test_render_file(files, suffix):
    out = files / f"o.{suffix}"
    r = run(files / "small.json", "-o", out)
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 0
    assert f"wrote {out}" in r.stdout


@needs_dot
def test_render_dag_svg(files):
    r = run(files / "small.json", "--dag", "-o", files / "d.svg")
    assert r.exit_code == 0, r.output
    assert "comparator DAG" in r.stdout and "<svg" in (files / "d.svg").read_text()


def test_large_network_gets_summary(files):
    r = run(files / "large.json", "-o", files / "big.png")
    assert r.exit_code == 0, r.output
    assert "summary view" in r.stdout
    r = run(files / "small.json", "--summary", "-o", files / "s.png")
    assert r.exit_code == 0 and "summary view" in r.stdout


def test_constructs_from_n_k(tmp_path):
    r = run("--n", 16, "--k", 5, "--network", "splitter", "--min-ranks", "-o", tmp_path / "s.svg")
    assert r.exit_code == 0, r.output
    assert "Knuth diagram" in r.stdout and "k=5" in r.stdout
    svg = (tmp_path / "s.svg").read_text()
    assert all(f"rank {i}" in svg for i in range(5))


def test_missing_dot_binary_exit_2(files, tmp_path, monkeypatch):
    empty = tmp_path / "emptybin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    out = files / "d.png"
    r = run(files / "small.json", "--dag", "-o", out)
    assert r.exit_code == 2
    assert "graphviz" in r.stderr and "apt-get install graphviz" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output
    assert not out.exists()
    # dot source needs no binary
    assert run(files / "small.json", "-o", files / "d.dot").exit_code == 0


@pytest.mark.parametrize(
    "args, msg",
    [
        (["{dir}/nope.json", "-o", "{dir}/x.png"], "no such file"),
        (["{dir}/bad.json", "-o", "{dir}/x.png"], "not valid JSON"),
        (["{dir}/small.json", "-o", "{dir}/x.jpg"], "output format"),
        (["{dir}/small.json", "--n", "4", "-o", "{dir}/x.png"], "do not combine"),
        (["-o", "{dir}/x.png"], "give a network FILE"),
        (["--n", "4", "--k", "9", "-o", "{dir}/x.png"], "k must be <= n"),
        (["--n", "0", "-o", "{dir}/x.png"], "n must be >= 1"),
        (["{dir}/large.json", "--full", "-o", "{dir}/x.png"], "--summary"),
        (["{dir}/mid.json", "--min-ranks", "-o", "{dir}/x.png"], "0-1 inputs"),
    ],
)
def test_bad_input_exit_2(files, args, msg):
    (files / "bad.json").write_text("{not json")
    r = run(*[a.format(dir=files) for a in args])
    assert r.exit_code == 2, r.output
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (files / "x.png").exists()
