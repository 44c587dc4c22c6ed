"""The CLI on untrusted input and bad output paths (issue 19 findings 5, 6
and the show part of 10): one line on stderr, exit 2, early; string fields
printed inert."""

from __future__ import annotations

import json
import os
import time

import pytest
from click.testing import CliRunner

from netgen import io
from netgen.cli import main
from netgen.network import Network


def run(*args):
    t = time.perf_counter()
    r = CliRunner().invoke(main, [str(a) for a in args])
    r.seconds = time.perf_counter() - t
    return r


def one_line_error(r, *words):
    assert r.exit_code == 2, (r.exit_code, r.output)
    err = r.stderr.strip()
    assert err.startswith("netgen: error:") and "\n" not in err and "Traceback" not in r.output, err
    for w in words:
        assert w in err, err
    return err


@pytest.mark.parametrize(
    "args, words",
    [
        (["--n", "16777216", "--k", "1"], ["too large", "--max-size"]),
        (["--n", "100000"], ["too large", "--max-size"]),
        (["--n", "65536", "--k", "64", "--max-size", "100000"], ["too large", "--max-size"]),
        (["--n", "4096", "--k", "5", "--network", "oddeven", "--max-size", "1000"], ["oddeven", "--max-size"]),
    ],
)
def test_oversized_builds_are_refused_early(args, words):
    r = run("build", *args)
    one_line_error(r, *words)
    assert r.seconds < 10


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("command", ["show", "verify", "build"])
@pytest.mark.parametrize(
    "text, words",
    [
        (json.dumps({"N": 10**9, "L": 1, "D": 1, "nw": [[0, 1]]}), ["too large"]),
        ("[(0,16777215)]\n", ["too large", "--max-size"]),
        (json.dumps({"format": io.FORMAT, "n": 3, "outputs": [0], "layers": [[[0, 2**63]]]}), ["64 bits"]),
        ('{"format": "netgen-network/1", "n": Infinity, "outputs": [0], "layers": []}', ["Infinity"]),
        ('{"a": ' + "[" * 50_000 + "]" * 50_000 + "}", ["nested"]),
        (json.dumps({"format": io.FORMAT, "n": 3, "outputs": [0], "layers": [[["1", 2]]]}), ["'1'"]),
        (json.dumps({"format": io.FORMAT, "n": 3, "outputs": [0], "layers": [[[True, 2]]]}), ["True"]),
        (json.dumps({"format": io.FORMAT, "n": 3, "outputs": [0], "layers": [[[1.9, 0]]]}), ["1.9"]),
    ],
)
def test_bad_files_one_line_exit_2(tmp_path, command, text, words):
    f = _write(tmp_path, "bad.json", text)
    args = ["build", "--from", f] if command == "build" else [command, f]
    one_line_error(run(*args), *words)


@pytest.mark.parametrize("command", ["show", "verify"])
def test_special_files_are_refused(tmp_path, command):
    one_line_error(run(command, "/dev/zero"), "not a regular file")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = run(command, fifo)
    one_line_error(r, "FIFO")
    assert r.seconds < 10


def test_max_size_option_raises_and_lowers_the_limit(tmp_path):
    f = tmp_path / "n.json"
    io.save(Network.from_layers(40, [[(i, i + 20) for i in range(20)]]), f)
    assert run("show", f).exit_code == 0
    one_line_error(run("show", f, "--max-size", "30"), "too large", "--max-size")
    big = _write(tmp_path, "big.txt", "[(0,1048575)]\n")
    one_line_error(run("show", big, "--max-size", "1000000"), "too large")
    assert run("show", big, "--max-size", "2000000").exit_code == 0


def test_bad_output_paths(tmp_path):
    a_file = _write(tmp_path, "exists.txt", "x")
    # a file where a folder is expected (code targets write a folder)
    one_line_error(run("build", "--n", "8", "--k", "2", "--target", "torch", "-o", a_file), "is a file")
    # a folder where a file is expected (json)
    one_line_error(run("build", "--n", "8", "--k", "2", "-o", tmp_path), "is a folder")
    # a path under a file: cannot be created
    one_line_error(run("build", "--n", "8", "--k", "2", "-o", a_file / "net.json"), "not a folder")
    one_line_error(run("build", "--n", "8", "--k", "2", "--target", "torch", "-o", a_file / "gen"), "not a folder")
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        try:
            one_line_error(run("build", "--n", "8", "--k", "2", "-o", ro / "net.json"), "not writable")
        finally:
            ro.chmod(0o700)
    r = run("build", "--n", "8", "--k", "2", "-o", tmp_path / "new" / "net.json")
    assert r.exit_code == 0 and (tmp_path / "new" / "net.json").is_file()


HOSTILE = "x\x1b[31mRED\x1b]0;title\x07\nfake line\r\x00\u202eevil\x9b2J"


def test_show_escapes_control_characters(tmp_path):
    net = Network.from_layers(2, [[(1, 0)]], construction={"kind": HOSTILE, HOSTILE: HOSTILE, "note": [HOSTILE]})
    f = tmp_path / "n.json"
    io.save(net, f)
    r = run("show", f)
    assert r.exit_code == 0, r.output
    out = r.stdout
    for ch in "\x1b\x07\r\x00\u202e\x9b":
        assert ch not in out, repr(ch)
    assert len(out.splitlines()) == 7 + 2  # the 7 fixed lines and one per other construction key
    assert "x\\x1b[31mRED" in out and "\\n" in out
    d = json.loads(run("show", f, "--json").stdout)  # --json: exact, escaped by JSON
    assert d["construction"]["kind"] == HOSTILE


def test_verify_text_output_is_escaped(tmp_path):
    f = tmp_path / "odd\x1b[2Jname\n.json"
    io.save(Network.from_layers(2, [[(0, 1)]]), f)
    r = run("verify", f)
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.stdout and len(r.stdout.strip().splitlines()) == 1
