"""The command group: ``python -m netgen``, ``-V``/``--version``, a
mistyped command answered with the closest names in one line (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import netgen
from netgen.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_python_dash_m_netgen_and_version():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for flag in ("-V", "--version"):
        r = subprocess.run([sys.executable, "-m", "netgen", flag], capture_output=True, text=True, env=env,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == f"netgen {netgen.__version__} (distribution netgen-networks)"


@pytest.mark.parametrize("typo, hint", [("buidl", "did you mean 'build'?"), ("cahce", "did you mean 'cache'?"),
                                        ("verfy", "did you mean 'verify'?"), ("xyzzy", None)])
def test_mistyped_command(typo, hint):
    r = CliRunner().invoke(main, [typo, "--n", "8"])
    assert r.exit_code == 2
    (line,) = r.output.strip().splitlines()
    assert line.startswith(f"netgen: error: no such command '{typo}'")
    assert (hint in line) if hint else ("did you mean" not in line)
    assert "commands: bench, build, cache" in line


def test_group_usage_errors_are_one_line_and_bare_netgen_is_help():
    r = CliRunner().invoke(main, ["--bogus"])
    assert r.exit_code == 2 and r.output.strip().splitlines() == ["netgen: error: No such option '--bogus'."]
    r = CliRunner().invoke(main, [])
    assert "Usage:" in r.output and "build" in r.output
