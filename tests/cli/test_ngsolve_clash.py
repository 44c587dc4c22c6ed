"""NGSolve's mesher also imports as ``netgen`` (distribution netgen-mesher).
What a user hits, with a fake NGSolve package (its marker files: libngpy/,
meshing.py, geom2d.py) instead of the real one:

* NGSolve's ``netgen`` first on ``sys.path``: the ``netgen`` command
  (netgen_networks.main, the console script) says so in one line, exit
  code 2, instead of ``No module named 'netgen.cli'`` (or, with an editable
  install, whose finder maps ``netgen.*`` submodules, NGSolve's
  ``__init__`` silently mixed with this package's modules);
* both installed into one folder (pip lets each overwrite the other's
  files): ``import netgen`` warns and the command warns and runs while this
  package's ``__init__.py`` is there; after NGSolve's replaced it, the
  command refuses;
* Python run from the folder that holds a clone named ``netgen`` finds the
  clone's folder as a namespace package: the command says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NGSOLVE_INIT = '"""NGSolve\'s netgen (a fake for this test)"""\n__version__ = "6.2.2608"\nfrom . import libngpy\n'
LAUNCH = "import netgen_networks; netgen_networks.main()"


def fake_ngsolve(folder: Path, init: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if init:
        (folder / "__init__.py").write_text(NGSOLVE_INIT)
    (folder / "libngpy").mkdir(exist_ok=True)
    (folder / "libngpy" / "__init__.py").write_text("")
    (folder / "meshing.py").write_text("")
    (folder / "geom2d.py").write_text("")


def launcher_only(tmp_path) -> Path:
    """A folder holding netgen_networks.py alone (this netgen not importable)."""
    d = tmp_path / "launcher"
    d.mkdir()
    shutil.copy(ROOT / "netgen_networks.py", d)
    return d


def run(code, *args, pythonpath, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, pythonpath)))
    return subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_ngsolve_first_on_the_path(tmp_path):
    fake_ngsolve(tmp_path / "site" / "netgen")
    r = run(LAUNCH, "build", "--n", "8", pythonpath=[tmp_path / "site", ROOT], cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("netgen: error: `import netgen` finds NGSolve's mesher (netgen-mesher) at ")
    assert str(tmp_path / "site" / "netgen") in line and "separate virtual environments" in line
    # and the control: this netgen first, the command runs
    ok = run(LAUNCH, "--version", pythonpath=[ROOT, tmp_path / "site"], cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.startswith("netgen ") and not ok.stderr, ok.stderr


def test_both_in_one_folder(tmp_path):
    pkg = tmp_path / "site" / "netgen"
    pkg.mkdir(parents=True)
    for entry in (ROOT / "netgen").iterdir():  # this package's files, NGSolve's beside them
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    fake_ngsolve(pkg, init=False)
    path = [tmp_path / "site", launcher_only(tmp_path)]
    r = run("import warnings; warnings.simplefilter('always'); import netgen; print(netgen.load.__name__)",
            pythonpath=path, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.split() == ["load"], r.stderr
    assert "NGSolve's mesher (netgen-mesher) shares this package's folder" in r.stderr
    r = run(LAUNCH, "--version", pythonpath=path, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("netgen "), r.stderr
    assert r.stderr.startswith("netgen: warning: NGSolve's mesher (netgen-mesher) shares the folder ")
    (pkg / "__init__.py").unlink()  # NGSolve installed afterwards: its __init__.py replaces this one's
    (pkg / "__init__.py").write_text(NGSOLVE_INIT)
    r = run(LAUNCH, "--version", pythonpath=path, cwd=tmp_path)
    assert r.returncode == 2 and "was installed over netgen-networks" in r.stderr and "Traceback" not in r.stderr


def test_run_beside_a_clone_named_netgen(tmp_path):
    (tmp_path / "netgen" / "netgen").mkdir(parents=True)  # a clone: its package folder one level down
    r = run("import sys; sys.path.insert(0, ''); " + LAUNCH, "--version", pythonpath=[launcher_only(tmp_path)],
            cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "(no __init__.py)" in r.stderr and "clone named netgen" in r.stderr and "Traceback" not in r.stderr
