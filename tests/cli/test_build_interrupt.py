"""Interrupting ``netgen build --target cuda`` during the compile check
(issue 19 finding 7): Ctrl-C (SIGINT) or SIGTERM leaves no module in the
output folder, no running compile worker and no ``netgen_cuda_*`` scratch
folder. A fake worker (NETGEN_CUDA_COMPILE_WORKER) records its pid and
sleeps, so the signal always arrives mid-check."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("numba_cuda")

ROOT = Path(__file__).resolve().parents[2]

FAKE_WORKER = """
import os, sys, time
from pathlib import Path
out = Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
(out / "partial.ptx").write_text("half written")
Path(os.environ["FAKE_PID_DIR"], str(os.getpid())).write_text("")
time.sleep(120)
"""


def _default_sigint() -> None:
    # a job started in the background by a non-interactive shell inherits
    # SIGINT ignored, and Python then never raises KeyboardInterrupt; give
    # the build the disposition a terminal's Ctrl-C meets
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its dead parent's reaper) is not running
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_cuda_build_leaves_nothing(tmp_path, sig):
    (tmp_path / "fakeworker.py").write_text(FAKE_WORKER)
    pids, scratch_root, out = tmp_path / "pids", tmp_path / "tmp", tmp_path / "out"
    pids.mkdir()
    scratch_root.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]), TMPDIR=str(scratch_root),
               NETGEN_CUDA_COMPILE_WORKER="fakeworker", FAKE_PID_DIR=str(pids))
    proc = subprocess.Popen([sys.executable, "-m", "netgen.cli", "build", "--n", "8", "--k", "2", "--target", "cuda",
                             "-o", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 240
        while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        workers = [int(p.name) for p in pids.iterdir()]
        assert workers, f"the compile check never started: {proc.communicate()}"
        assert list(scratch_root.glob("netgen_cuda_*")), "scratch folder expected while checking"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, err
    assert "Traceback" not in err, err
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)], "compile workers still running"
    assert not list(scratch_root.glob("netgen_cuda_*")), "scratch folder left behind"
    assert not out.exists() or not list(out.iterdir()), f"unchecked module left: {list(out.iterdir())}"
