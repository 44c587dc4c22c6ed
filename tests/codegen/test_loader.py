"""netgen.load (netgen.codegen.cache.load)."""

import subprocess
import sys

import pytest
import torch

import netgen
from netgen.codegen import write_module
from netgen.codegen.cache import load
from netgen.network import Network
from netgen.relax.distributions import Relaxation

torch.set_num_threads(1)  # tiny tensors: intra-op threads only add contention (2-core CI)

NET = Network.from_layers(4, [[(0, 1), (2, 3)], [(0, 2), (1, 3)], [(1, 2)]], construction={"kind": "tiny"})


def test_load_returns_working_module_and_caches(tmp_path):
    p = write_module("torch", NET, Relaxation(), tmp_path)
    mod = netgen.load(p)
    assert mod is load(str(p))  # same file, same content: same module
    assert mod.TARGET == "torch" and mod.NETWORK["n"] == 4
    vals, idx = mod.Layer().hard(torch.tensor([3.0, 1.0, 4.0, 2.0]))
    assert vals.tolist() == [4.0, 3.0, 2.0, 1.0] and idx.tolist() == [2, 0, 3, 1]


def test_same_name_different_dirs_do_not_mix(tmp_path):
    p1 = write_module("torch", NET, Relaxation(), tmp_path / "a", name="m")
    p2 = write_module("torch", NET, Relaxation("logistic", 3.0), tmp_path / "b", name="m")
    m1, m2 = load(p1), load(p2)
    assert m1 is not m2
    assert m1.RELAXATION["distribution"] == "cauchy" and m2.RELAXATION["distribution"] == "logistic"


def test_rewritten_file_is_reloaded(tmp_path):
    p = write_module("torch", NET, Relaxation(), tmp_path, name="m")
    assert load(p).RELAXATION["steepness"] == 10.0
    write_module("torch", NET, Relaxation(steepness=3.0), tmp_path, name="m")
    assert load(p).RELAXATION["steepness"] == 3.0


def test_bad_paths(tmp_path):
    with pytest.raises(ValueError, match="no such"):
        load(tmp_path / "missing.py")
    with pytest.raises(ValueError, match=".py"):
        load(tmp_path)
    other = tmp_path / "other.py"
    other.write_text("X = 1\n")
    with pytest.raises(ValueError, match="not a netgen generated module"):
        load(other)


def test_import_from_generated_package(tmp_path):
    pkg = tmp_path / "generated"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    p = write_module("torch", NET, Relaxation(), pkg)
    code = f"from generated.{p.stem} import Layer, NETWORK; print(Layer()(__import__('torch').zeros(4))[1].shape)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "torch.Size([4, 4])"
