"""`netgen verify FILE`: exit codes 0 proved / 1 counterexample or not
proved / 2 bad input, JSON fields, any accepted file format."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from netgen import io
from netgen.cli import main
from netgen.construct import build
from netgen.construct.best import data_dir
from netgen.network import Network

DOB = Path(str(data_dir()))  # shipped package data


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _json(result):
    lines = [l for l in result.stdout.splitlines() if l.strip()]
    assert len(lines) == 1, result.stdout
    return json.loads(lines[0])


def test_proved_netgen_json(tmp_path):
    f = tmp_path / "sel.json"
    io.save(build("splitter", 200, 5), f)
    r = run("verify", f, "--json")
    assert r.exit_code == 0, r.output
    d = _json(r)
    assert d["status"] == "proved" and d["method"] == "reachable states" and d["seconds"] >= 0
    assert "counterexample" not in d
    r = run("verify", f)
    assert r.exit_code == 0 and "proved (reachable states)" in r.stdout


def test_dobbelaere_file_and_its_broken_copy(tmp_path):
    src = DOB / "Sort_24_120_13.json"
    r = run("verify", src, "--json")
    assert r.exit_code == 0 and _json(r)["method"] == "exhaustive"
    d = json.loads(src.read_text())
    d["nw"] = d["nw"][:50] + d["nw"][51:]
    del d["L"]
    f = tmp_path / "broken.json"
    f.write_text(json.dumps(d))
    r = run("verify", f, "--json")
    assert r.exit_code == 1
    out = _json(r)
    assert out["status"] == "counterexample"
    x = np.asarray(out["counterexample"])
    net = io.load(f)
    assert len(x) == 24 and not np.array_equal(net.select(x), -np.sort(-x))


def test_layer_text_format(tmp_path):
    f = tmp_path / "net.txt"
    f.write_text("[(0,1),(2,3)]\n[(0,2),(1,3)]\n[(1,2)]\n")
    r = run("verify", f)
    assert r.exit_code == 0, r.output
    f.write_text("[(0,1),(2,3)]\n[(0,2),(1,3)]\n")
    r = run("verify", f, "--json")
    assert r.exit_code == 1 and _json(r)["status"] == "counterexample"


def test_sampled_is_exit_1(tmp_path):
    f = tmp_path / "s.json"
    io.save(build("oddeven", 8), f)
    r = run("verify", f, "--method", "sample", "--samples", "300", "--json")
    assert r.exit_code == 1
    d = _json(r)
    assert d["status"] == "sampled" and d["checked"] == 300 and d["method"] == "random"


@pytest.mark.parametrize(
    "content, words",
    [
        (None, "no such file"),
        ("not a network", "not a network file"),
        ('{"format": "netgen-network/1", "n": 2, "outputs": [0, 1], "layers": [[[0, 5]]]}', "outside"),
        ('{"format": "netgen-network/1", "n": 2, "outputs": [0, 1], "layers": [[[0, 1]]], "stats": {"size": 3}}', "size"),
    ],
)
def test_bad_input_is_exit_2_one_line(tmp_path, content, words):
    f = tmp_path / "bad.json"
    if content is not None:
        f.write_text(content)
    r = run("verify", f)
    assert r.exit_code == 2
    assert words in r.stderr and r.stderr.count("\n") == 1 and "Traceback" not in r.output
    assert r.stdout == ""


def test_method_too_small_for_network_is_exit_2(tmp_path):
    f = tmp_path / "big.json"
    io.save(build("oddeven", 40), f)
    r = run("verify", f, "--method", "exhaustive")
    assert r.exit_code == 2 and "exhaustive" in r.stderr


def test_console_script_runs(tmp_path):
    f = tmp_path / "t.json"
    io.save(Network.from_layers(2, [[(0, 1)]], outputs=[0, 1]), f)
    p = subprocess.run([sys.executable, "-m", "netgen.cli", "verify", str(f), "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "proved"
