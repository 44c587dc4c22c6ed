"""The cuda compile check needs no system CUDA toolkit (issue 21 item 1):
ptxas comes from the ``nvidia-cuda-nvcc`` wheel of the ``cuda`` extra, found
with PATH and CUDA_HOME cleared; where no assembler exists at all, ``netgen
build --target cuda`` writes the module and says so in one line (exit 0), or
exits 2 writing nothing with ``--compile-check``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("numba_cuda")

ROOT = Path(__file__).resolve().parents[3]


def hidden_env(**extra) -> dict:
    """The environment with the system toolkit out of reach: PATH holds only
    the interpreter's folder, no CUDA_HOME / CUDA_PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "NETGEN_PTXAS")}
    env.update(PATH=os.path.dirname(sys.executable), PYTHONPATH=str(ROOT), **extra)
    return env


def run(args, env, **kw):
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, cwd=kw.pop("cwd", ROOT), **kw)


def test_ptxas_from_the_wheel_with_the_toolkit_hidden():
    r = run(["-c", "from netgen.codegen.cuda.compile import _ptxas; print(_ptxas())"], hidden_env())
    assert r.returncode == 0, r.stderr
    found = r.stdout.strip()
    if found == "None" or not found.startswith(sysconfig.get_paths()["purelib"]):
        pytest.skip("the nvidia-cuda-nvcc wheel is not installed (pip install 'netgen-networks[cuda]')")
    assert "/usr/local" not in found and (found.endswith("nvidia/cu13/bin/ptxas") or "cuda_nvcc" in found)
    v = subprocess.run([found, "--version"], capture_output=True, text=True)
    assert v.returncode == 0 and "release 13." in v.stdout


def test_netgen_ptxas_override():
    code = "from netgen.codegen.cuda.compile import _ptxas; print(_ptxas())"
    assert run(["-c", code], hidden_env(NETGEN_PTXAS="none")).stdout.strip() == "None"
    r = run(["-c", code], hidden_env(NETGEN_PTXAS="/nonexistent/ptxas"))
    assert r.returncode != 0 and "NETGEN_PTXAS" in r.stderr


@pytest.mark.slow
def test_build_with_the_toolkit_hidden(cuda_cli_build):
    """The session's one CUDA build (tests/conftest.py) ran with the toolkit
    hidden; tests/codegen/cuda/test_cuda_ptx.py checks its kernels."""
    r = cuda_cli_build
    assert r["world"]["cuda_home"] is None and r["world"]["path"] == os.path.dirname(sys.executable), r["world"]
    assert "/usr/local" not in str(r["world"]["ptxas"]), r["world"]
    assert r["returncode"] == 0, r["stderr"]
    assert "Traceback" not in r["stderr"] and r["module"]
    lines = [l for l in r["stderr"].splitlines() if l.startswith("compile check")]
    assert len(lines) == 1, r["stderr"]
    assert "passed" in lines[0] or "skipped" in lines[0]
    assert "/usr/local" not in lines[0], lines[0]


FAKE_NO_ASSEMBLER = """
import json, sys
print(json.dumps({"cc": [9, 0], "assembler": None, "out_dir": sys.argv[2], "kernels": [],
                  "skipped": "no ptxas found and nvJitLink failed (DynamicLibNotFoundError)"}))
"""


@pytest.mark.parametrize("required", [False, True])
def test_no_assembler_one_line(tmp_path, required):
    (tmp_path / "noasm.py").write_text(FAKE_NO_ASSEMBLER)
    env = hidden_env(NETGEN_PTXAS="none", NETGEN_CUDA_COMPILE_WORKER="noasm")
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    out = tmp_path / "out"
    r = run(["-m", "netgen.cli", "build", "--n", "16", "--k", "2", "--target", "cuda", "-o", str(out)]
            + (["--compile-check"] if required else []), env, timeout=600)
    lines = [l for l in r.stderr.splitlines() if "skipped" in l]
    assert len(lines) == 1 and "pip install 'netgen-networks[cuda]'" in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    if required:
        assert r.returncode == 2 and lines[0].startswith("netgen: error:")
        assert not out.exists() or not list(out.iterdir())
    else:
        assert r.returncode == 0, r.stderr
        assert len(list(out.glob("*.py"))) == 1
