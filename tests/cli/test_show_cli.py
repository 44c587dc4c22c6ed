"""`netgen show FILE`."""

import json
from pathlib import Path

from click.testing import CliRunner

from netgen import io
from netgen.cli import main
from netgen.construct import build
from netgen.passes.pipeline import optimize


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_show_json_fields(tmp_path):
    net = build("splitter", 64, 3)
    f = tmp_path / "n.json"
    io.save(net, f)
    r = run("show", f, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert (d["n"], d["k"], d["depth"], d["size"]) == (64, 3, net.depth, net.size)
    assert d["layer_sizes"] == [len(l) for l in net.layers] and sum(d["layer_sizes"]) == net.size
    assert d["construction"]["kind"] == "splitter"


def test_show_text_mentions_everything(tmp_path):
    net, _ = optimize(build("bitonic", 20, 4))
    f = tmp_path / "n.json"
    io.save(net, f)
    r = run("show", f)
    assert r.exit_code == 0
    text = r.stdout
    for word in ["n ", "k ", "depth", "size", "per layer", "construction"]:
        assert word in text
    assert f"depth        {net.depth}" in text and f"size         {net.size}" in text
    assert "bitonic" in text
    for key in net.construction:
        if key != "kind":
            assert f"{key}:" in text


def test_show_bad_file(tmp_path):
    f = tmp_path / "x.json"
    f.write_text("{}")
    r = run("show", f)
    assert r.exit_code == 2 and "netgen: error" in r.stderr
