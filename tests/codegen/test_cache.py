"""netgen's on-disk cache (netgen.codegen.cache): where it is, write-once
files safe under concurrent processes, the finder for pickled layers, numba
cache hits in a second process, clearing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import netgen
from netgen.codegen import cache, emit, module_name
from netgen.codegen.auto import build_layer
from netgen.codegen.cache import load
from netgen.construct import build
from netgen.relax.distributions import Relaxation

torch.set_num_threads(1)
NET = build("splitter", 9, 2)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("NETGEN_CACHE_DIR", str(tmp_path / "c"))
    # a module another test imported from its own cache root stays in sys.modules: forget it
    for name in [m for m in sys.modules if m.startswith("_netgen_")]:
        monkeypatch.delitem(sys.modules, name)
    return tmp_path / "c"


def test_location_and_version_key(cache_dir, monkeypatch):
    assert cache.root() == cache_dir
    v = cache.versions()
    assert v.startswith(f"py{sys.version_info[0]}.{sys.version_info[1]}-netgen") and "numba" in v and "torch" in v
    monkeypatch.delenv("NETGEN_CACHE_DIR")
    assert "netgen" in str(cache.root())  # the user cache dir (platformdirs)


def test_layers_built_in_memory_live_in_the_cache(cache_dir):
    r = Relaxation("logistic", 3.0)
    layer = build_layer(NET, r, "torch")
    qual = cache.qualname_for(module_name(NET, r, "torch"), emit("torch", NET, r))
    f = cache.module_file(qual)
    assert f.is_file() and f.parent.parent == cache_dir / cache.versions()
    assert type(layer).__module__ == qual and sys.modules[qual].__file__ == str(f)
    assert f.read_text() == emit("torch", NET, r)
    x = torch.randn(3, 9, dtype=torch.float64)
    assert torch.equal(layer(x)[1], build_layer(NET, r, "torch")(x)[1])


def test_write_once_and_repair(cache_dir):
    src = emit("torch", NET, Relaxation("cauchy", 2.0))
    sys.modules.pop(cache.qualname_for("m", src), None)
    cache.import_source(src, "m")
    f = cache.module_file(cache.qualname_for("m", src))
    stamp = f.stat().st_mtime_ns
    sys.modules.pop(cache.qualname_for("m", src))
    cache.import_source(src, "m")
    assert f.stat().st_mtime_ns == stamp  # an existing file is never rewritten (numba's index keys on it)
    f.write_text("damaged")
    sys.modules.pop(cache.qualname_for("m", src))
    mod = cache.import_source(src, "m")
    assert f.read_text() == src and mod.TARGET == "torch"
    assert not [p for p in f.parent.iterdir() if p.name.startswith(".tmp-")]


WRITER = """
import sys
from netgen.codegen import cache, emit
from netgen.construct import build
from netgen.relax.distributions import Relaxation
src = emit("torch", build("splitter", 40, 3), Relaxation("gaussian", float(sys.argv[1])))
mod = cache.import_source(src, "race")
assert mod.Layer()(__import__("torch").randn(2, 40))[1].shape == (2, 3, 40)
print("ok")
"""


@pytest.mark.slow
def test_concurrent_processes(cache_dir):
    env = {**os.environ, "NETGEN_CACHE_DIR": str(cache_dir)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(1.0 + (i % 2))], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(6)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and out.strip() == "ok", err[-2000:]
    files = sorted((cache_dir / cache.versions() / "modules").glob("_netgen_race_*.py"))
    assert len(files) == 2  # two sources, one file each
    assert not list(files[0].parent.glob(".tmp-*"))


def test_finder_imports_generated_modules_in_a_new_process(cache_dir, tmp_path):
    from netgen.codegen import write_module

    p = write_module("torch", NET, Relaxation(), tmp_path / "g")
    qual = load(p).__name__
    code = f"import netgen, importlib; m = importlib.import_module({qual!r}); print(m.TARGET)"
    env = {**os.environ, "NETGEN_CACHE_DIR": str(cache_dir)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "torch", out.stderr[-2000:]
    p.write_text(p.read_text() + "\n# edited\n")  # another file now: the old name must not resolve to it
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode != 0 and "changed since it was loaded" in out.stderr  # refused, naming the file


def test_clear_and_info(cache_dir):
    build_layer(NET, Relaxation("reciprocal", 2.0), "torch")
    info = cache.info()
    assert info["root"] == str(cache_dir) and info["files"] >= 1 and info["bytes"] > 0
    assert cache.clear() >= 1
    assert cache.info()["files"] == 0
    assert cache.clear() == 0


def test_cli_cache_commands(cache_dir):
    from click.testing import CliRunner

    from netgen.cli import main

    build_layer(NET, Relaxation("reciprocal", 2.0), "torch")
    res = CliRunner().invoke(main, ["cache", "info"], env={"NETGEN_CACHE_DIR": str(cache_dir)})
    assert res.exit_code == 0 and str(cache_dir) in res.output
    res = CliRunner().invoke(main, ["cache", "clear"], env={"NETGEN_CACHE_DIR": str(cache_dir)})
    assert res.exit_code == 0 and "removed" in res.output
    assert cache.info()["files"] == 0


FIRST_CALL = """
import numba, torch
from netgen import topk_loss
loss = topk_loss(30, [0.5, 0.5], target="numba")
x = torch.randn(4, 30, requires_grad=True)
loss(x, torch.tensor([0, 1, 2, 3])).backward()
mod = __import__("sys").modules[type(loss.layer.layer_for(x.device)).__module__]
d = [v for v in vars(mod).values() if isinstance(v, numba.core.registry.CPUDispatcher) and v.signatures]
print(sum(v.stats.cache_hits.total() if hasattr(v.stats.cache_hits, "total") else sum(v.stats.cache_hits.values()) for v in d),
      sum(sum(v.stats.cache_misses.values()) for v in d))
"""


@pytest.mark.timeout(900)
def test_numba_kernels_come_from_the_cache_in_a_second_process(cache_dir):
    env = {**os.environ, "NETGEN_CACHE_DIR": str(cache_dir), "NETGEN_NUMBA_PARALLEL": "1"}
    first = subprocess.run([sys.executable, "-c", FIRST_CALL], capture_output=True, text=True, env=env, timeout=800)
    assert first.returncode == 0, first.stderr[-2000:]
    hits, misses = map(int, first.stdout.split())
    assert hits == 0 and misses > 0
    second = subprocess.run([sys.executable, "-c", FIRST_CALL], capture_output=True, text=True, env=env, timeout=800)
    assert second.returncode == 0, second.stderr[-2000:]
    hits, misses = map(int, second.stdout.split())
    assert hits > 0 and misses == 0


_NO_EMIT = """
import sys, torch
import netgen.codegen as cg
import netgen.codegen.auto as auto
def refuse(*a, **k):
    raise AssertionError("emit called: the module was generated again")
cg.emit = auto.emit = refuse
from netgen.codegen.auto import build_layer
from netgen.construct import build
from netgen.relax.distributions import Relaxation
layer = build_layer(build("splitter", 9, 2), Relaxation("logistic", 3.0), "torch")
print(type(layer).__module__)
"""


def test_a_built_layer_is_found_again_without_generating_it(cache_dir):
    """A second process building the same (network, relaxation, target)
    imports the cached module without emitting (and checking) its source
    again: that was most of a warm first call's CPU time."""
    r = Relaxation("logistic", 3.0)
    sys.modules.pop(cache.qualname_for(module_name(NET, r, "torch"), emit("torch", NET, r)), None)  # an earlier test's
    layer = build_layer(NET, r, "torch")
    key = cache.built_key(NET, r, "torch")
    assert (cache.version_dir() / "built" / key).read_text() == type(layer).__module__
    env = dict(os.environ, NETGEN_CACHE_DIR=str(cache_dir), PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-c", _NO_EMIT], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip() == type(layer).__module__
    # no bytecode of a cache module is written (or read): it runs from the bytes its hash was checked on
    import importlib.util

    assert not os.path.exists(importlib.util.cache_from_source(str(cache.module_file(type(layer).__module__))))


def test_the_index_is_never_trusted_blindly(cache_dir, monkeypatch):
    r = Relaxation("logistic", 3.0)
    sys.modules.pop(cache.qualname_for(module_name(NET, r, "torch"), emit("torch", NET, r)), None)  # an earlier test's
    layer = build_layer(NET, r, "torch")
    qual = type(layer).__module__
    key = cache.built_key(NET, r, "torch")
    f = cache.module_file(qual)
    sys.modules.pop(qual)
    f.write_text(f.read_text() + "\nraise RuntimeError('damaged')\n")
    assert cache.find_built(key) is None  # the file is not what its name says
    assert type(build_layer(NET, r, "torch")).__module__ == qual  # emitted again, file repaired
    assert "damaged" not in f.read_text()
    # another generator (an edited netgen) never reuses the module the old code wrote
    monkeypatch.setattr(cache.index, "generator_tag", lambda: "other")  # read where built_key reads it
    assert cache.built_key(NET, r, "torch") != key


def test_the_generator_tag_covers_every_code_generating_file():
    """An edit to any file of netgen/codegen or netgen/relax changes the tag
    (the files it hashes are found from the cache package's own place)."""
    pkg = Path(netgen.__file__).resolve().parent
    files = [f.relative_to(pkg).as_posix() for f in cache.index.generator_files()]
    want = {p.relative_to(pkg).as_posix() for d in ("codegen", "relax") for p in (pkg / d).rglob("*.py")}
    assert set(files) == want and len(files) == len(want)
    assert {"codegen/cache/index.py", "codegen/torch/emit.py", "relax/reference.py"} <= set(files)
