"""Issue 32, M7: a read-only module folder or cache with a read-only HOME
(container images, site-packages) must not break numba modules at import
("cannot cache function ... no locator"): the kernels compile without
numba's disk cache, with one warning.

The folders are made read-only with a read-only bind mount in a private
mount namespace (``unshare -m``), which binds root too (plain ``chmod`` does
not stop root, and the suite runs as root in CI); skipped where that is not
possible."""

import os
import shutil
import subprocess
import sys

import pytest

from netgen.codegen import cache, emit, module_name, write_module
from netgen.construct import build
from netgen.relax.distributions import Relaxation

NET = build("splitter", 9, 2)
R = Relaxation("logistic", 3.0)


def _can_mount_ro(tmp):
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    d = tmp / "probe"
    d.mkdir()
    p = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {d} {d} && mount -o remount,bind,ro {d} && "
                        f"! touch {d}/x 2>/dev/null"], capture_output=True)
    return p.returncode == 0


def _run_read_only(read_only, code, env):
    mounts = " && ".join(f"mount --bind '{d}' '{d}' && mount -o remount,bind,ro '{d}'" for d in read_only)
    script = f"{mounts} && exec '{sys.executable}' -c \"$CODE\""
    return subprocess.run(["unshare", "-m", "sh", "-c", script], env={**env, "CODE": code}, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def ro(tmp_path):
    if not _can_mount_ro(tmp_path):
        pytest.skip("no read-only bind mounts here (needs root and unshare -m on Linux)")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), NETGEN_NUMBA_PARALLEL="1",
               PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    return home, env


IMPORT = """
import warnings, netgen
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as w:
    {load}
print("imported", mod.TARGET)
print("warnings", sum("numba has no writable folder" in str(x.message) for x in w))
"""


def test_numba_module_in_a_read_only_folder_with_a_read_only_home(ro, tmp_path):
    home, env = ro
    gen = tmp_path / "site"
    path = write_module("numba", NET, R, gen)
    env["NETGEN_CACHE_DIR"] = str(tmp_path / "cache")
    p = _run_read_only([gen, home], IMPORT.format(load=f"mod = netgen.load({str(path)!r})"), env)
    assert p.returncode == 0, p.stderr[-1500:]
    assert "imported numba" in p.stdout and "warnings 1" in p.stdout, (p.stdout, p.stderr[-1500:])


def test_numba_module_in_a_read_only_cache_with_a_read_only_home(ro, tmp_path, monkeypatch):
    home, env = ro
    root = tmp_path / "cache"
    monkeypatch.setenv("NETGEN_CACHE_DIR", str(root))
    src = emit("numba", NET, R)
    qual = cache.qualname_for(module_name(NET, R, "numba"), src)
    sys.modules.pop(qual, None)
    f = cache.version_dir() / "modules" / f"{qual}.py"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(src)  # a cache baked into an image
    os.chmod(f.parent, 0o700)
    env["NETGEN_CACHE_DIR"] = str(root)
    load = ("from netgen.codegen import cache; import importlib; "
            f"mod = importlib.import_module({qual!r})")
    p = _run_read_only([root, home], IMPORT.format(load=load), env)
    assert p.returncode == 0, p.stderr[-1500:]
    assert "imported numba" in p.stdout and "warnings 1" in p.stdout, (p.stdout, p.stderr[-1500:])


@pytest.mark.slow
def test_numba_layer_runs_from_a_read_only_folder(ro, tmp_path):
    """The kernels compile (no disk cache) and give the reference's result."""
    home, env = ro
    gen = tmp_path / "site"
    path = write_module("numba", NET, R, gen)
    env["NETGEN_CACHE_DIR"] = str(tmp_path / "cache")
    code = (f"import torch, netgen; mod = netgen.load({str(path)!r}); x = torch.randn(3, 9, dtype=torch.float64); "
            "from netgen.relax import reference; from netgen.relax.distributions import Relaxation; "
            "v, P = mod.Layer()(x); v0, P0 = reference.forward(netgen.Network.from_dict(mod.NETWORK) "
            "if hasattr(netgen.Network, 'from_dict') else netgen.loads(__import__('json').dumps(mod.NETWORK)), x, "
            "Relaxation('logistic', 3.0)); "
            "print('ok', P.shape, bool(torch.allclose(P, P0, atol=1e-10)))")
    p = _run_read_only([gen, home], code, env)
    assert p.returncode == 0 and "ok torch.Size([3, 2, 9]) True" in p.stdout, p.stderr[-1500:]
