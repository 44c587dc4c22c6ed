"""Issue 32, C1 and M9: netgen's cache runs only bytes it checked, imports
only names it produced, and refuses a root another user could write.

Each test here failed on 064e1b4 (the planted line ran, the planted pyc ran,
a foreign root was used) and passes now."""

import hashlib
import logging
import os
import pickle
import py_compile
import stat
import subprocess
import sys

import pytest
import torch

from netgen.codegen import cache
from netgen.codegen.auto import build_layer
from netgen.construct import build
from netgen.relax.distributions import Relaxation

NET = build("splitter", 9, 2)
R = Relaxation("logistic", 3.0)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "c"
    monkeypatch.setenv("NETGEN_CACHE_DIR", str(d))
    monkeypatch.delenv("NETGEN_CACHE_INSECURE", raising=False)
    cache._WARNED.clear() if hasattr(cache, "_WARNED") else None
    return d


def _fresh_layer(r=R, target="torch"):
    for name in [m for m in sys.modules if m.startswith("_netgen_")]:
        del sys.modules[name]
    return build_layer(NET, r, target)


def _run(code, cache_dir, stdin=None):
    env = {**os.environ, "NETGEN_CACHE_DIR": str(cache_dir), "PYTHONPATH": os.pathsep.join(
        [os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    env.pop("NETGEN_CACHE_INSECURE", None)
    return subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, env=env, timeout=300)


UNPICKLE = ("import pickle, sys, netgen, torch; l = pickle.loads(sys.stdin.buffer.read()); "
            "print(float(l(torch.linspace(0, 1, 9, dtype=torch.float64)[None])[1].sum()))")


def test_a_planted_line_in_a_cache_module_never_runs(cache_dir):
    layer = _fresh_layer()
    f = cache.module_file(type(layer).__module__)
    data = pickle.dumps(layer)
    f.write_text(f.read_text() + "\nprint('PLANTED')\n")
    p = _run(UNPICKLE, cache_dir, data)
    out, err = p.stdout.decode(), p.stderr.decode()
    assert "PLANTED" not in out
    assert p.returncode != 0 and "cache is damaged" in err and str(f) in err, err[-800:]


def test_a_damaged_cache_module_is_refused_not_run_with_a_wrong_result(cache_dir):
    layer = _fresh_layer()
    x = torch.linspace(0, 1, 9, dtype=torch.float64)[None]
    good = float(layer(x)[1].sum())
    f = cache.module_file(type(layer).__module__)
    text = f.read_text()
    assert "'steepness': 3.0" in text
    f.write_text(text.replace("'steepness': 3.0", "'steepness': 7.0"))  # one damaged value
    p = _run(UNPICKLE, cache_dir, pickle.dumps(layer))
    assert p.returncode != 0 and b"cache is damaged" in p.stderr, (p.stdout, p.stderr[-800:])
    # where netgen has the source (building the layer), the file is rebuilt
    sys.modules.pop(type(layer).__module__)
    again = build_layer(NET, R, "torch")
    assert float(again(x)[1].sum()) == good and f.read_text() == text


def test_a_planted_pyc_with_the_same_mtime_and_size_never_runs(cache_dir, tmp_path):
    layer = _fresh_layer()
    f = cache.module_file(type(layer).__module__)
    src = f.read_text()
    evil = "print('PLANTED PYC')\n"
    evil += "#" * (len(src.encode()) - len(evil.encode()) - 1) + "\n"
    assert len(evil.encode()) == len(src.encode())
    fake = tmp_path / "fake.py"
    fake.write_text(evil)
    st = f.stat()
    os.utime(fake, ns=(st.st_atime_ns, st.st_mtime_ns))
    pyc = py_compile.compile(str(fake), cfile=os.path.join(f.parent, "__pycache__", f.stem + "."
                                                           + sys.implementation.cache_tag + ".pyc"), doraise=True)
    assert os.path.exists(pyc)
    code = ("import netgen; from netgen.construct import build; from netgen.relax.distributions import Relaxation; "
            "from netgen.codegen.auto import build_layer; "
            "l = build_layer(build('splitter', 9, 2), Relaxation('logistic', 3.0), 'torch'); print('built', type(l).__name__)")
    p = _run(code, cache_dir)
    assert b"PLANTED PYC" not in p.stdout and p.returncode == 0 and b"built Layer" in p.stdout, p.stderr[-800:]
    p = _run(UNPICKLE, cache_dir, pickle.dumps(layer))
    assert b"PLANTED PYC" not in p.stdout and p.returncode == 0, p.stderr[-800:]


@pytest.mark.parametrize("name", ["_netgen_evil", "_netgen_x_0123456789ab", "_netgen_x_0123456789abc"])
def test_only_names_netgen_produces_with_their_hash_are_importable(cache_dir, name):
    _fresh_layer()  # the cache exists
    f = cache.version_dir() / "modules" / f"{name}.py"
    f.write_text("print('PLANTED')\nX = 1\n")
    p = _run(f"import netgen, importlib; importlib.import_module({name!r})", cache_dir)
    assert b"PLANTED" not in p.stdout and p.returncode != 0
    assert b"ModuleNotFoundError" in p.stderr or b"cache is damaged" in p.stderr, p.stderr[-800:]


def test_a_module_under_its_own_hash_name_imports(cache_dir):
    """The name carries the SHA-256 of the bytes: a file with the hash in its
    name imports (and the bytes run are those hashed)."""
    _fresh_layer()
    body = b"X = 41 + 1\n"
    name = f"_netgen_mine_{hashlib.sha256(body).hexdigest()[:12]}"
    (cache.version_dir() / "modules" / f"{name}.py").write_bytes(body)
    p = _run(f"import netgen, importlib; print(importlib.import_module({name!r}).X)", cache_dir)
    assert p.returncode == 0 and p.stdout.strip() == b"42", p.stderr[-800:]


def test_no_bytecode_is_written_for_cache_modules(cache_dir):
    layer = _fresh_layer()
    f = cache.module_file(type(layer).__module__)
    assert not (f.parent / "__pycache__").exists() or not list((f.parent / "__pycache__").glob(f.stem + ".*.pyc"))


def test_the_cache_is_created_owner_only(cache_dir):
    _fresh_layer()
    for d in (cache_dir, cache.version_dir(), cache.version_dir() / "modules", cache.version_dir() / "built"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="chown to another user needs root")


@needs_root
def test_a_root_owned_by_another_user_is_refused(cache_dir, caplog):
    cache_dir.mkdir(mode=0o777)
    os.chmod(cache_dir, 0o777)
    os.chown(cache_dir, 65534, 65534)
    with caplog.at_level(logging.WARNING, logger="netgen"):
        layer = _fresh_layer()
    x = torch.randn(2, 9)
    assert layer(x)[1].shape == (2, 2, 9)  # still works: built in memory
    assert list(cache_dir.iterdir()) == []  # nothing written into another user's folder
    lines = [r.getMessage() for r in caplog.records if "not using the cache" in r.getMessage()]
    assert len(lines) == 1 and str(cache_dir) in lines[0] and "another user" in lines[0], caplog.text


def test_a_world_writable_root_is_refused_unless_opted_in(cache_dir, caplog, monkeypatch):
    cache_dir.mkdir()
    os.chmod(cache_dir, 0o777)
    with caplog.at_level(logging.WARNING, logger="netgen"):
        _fresh_layer()
    assert list(cache_dir.iterdir()) == []
    assert any(str(cache_dir) in r.getMessage() and "writable by others" in r.getMessage() for r in caplog.records)
    monkeypatch.setenv("NETGEN_CACHE_INSECURE", "1")
    layer = _fresh_layer()
    assert cache.module_file(type(layer).__module__).is_file()


def test_a_group_writable_module_folder_is_refused(cache_dir, caplog):
    layer = _fresh_layer()
    modules = cache.version_dir() / "modules"
    os.chmod(modules, 0o770)
    data = pickle.dumps(layer)
    p = _run(UNPICKLE, cache_dir, data)
    assert p.returncode != 0 and b"writable by its group" in p.stderr and str(modules).encode() in p.stderr


@needs_root
def test_cache_info_and_clear_on_another_users_root(cache_dir):
    from click.testing import CliRunner

    from netgen.cli import main

    cache_dir.mkdir()
    (cache_dir / "theirs").write_text("x")
    os.chown(cache_dir, 65534, 65534)
    r = CliRunner().invoke(main, ["cache", "info"])
    assert r.exit_code == 0 and "not used: it is owned by another user" in r.output, r.output
    r = CliRunner().invoke(main, ["cache", "clear"])
    assert r.exit_code == 2 and "not clearing" in r.output and (cache_dir / "theirs").exists(), r.output
