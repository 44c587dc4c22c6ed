"""Long commands show a tqdm bar on stderr when it is a terminal and print
nothing of it in a pipe (issue 19). The terminal case runs twice: with a
100-column pseudo-terminal, and with one whose size was never set (0 x 0,
what ``script`` gives when run from a pipe, and many CI runners), where tqdm
on its own draws nothing at all."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BAR = "netgen build:"  # the bar with its candidate count, e.g. "netgen build:  0%|   | 0/7 [00:00, splitter]"


def _build_stderr(tmp_path, tty: bool, columns: int = 0) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NETGEN_PROGRESS_DELAY="0")
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    cmd = [sys.executable, "-m", "netgen.cli", "build", "--n", "40", "--k", "3", "-o", str(tmp_path / "net.json")]
    if not tty:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr
        return p.stderr
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24 if columns else 0, columns, 0, 0))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=300) == 0
    os.close(master)
    return b"".join(chunks).decode(errors="replace")


def test_quiet_in_a_pipe(tmp_path):
    err = _build_stderr(tmp_path, tty=False)
    assert BAR not in err and "\r" not in err
    assert "candidate splitter" in err  # the log lines still come


@pytest.mark.parametrize("columns", [100, 0], ids=["100-columns", "size-never-set"])
def test_tqdm_bar_on_a_terminal(tmp_path, columns):
    err = _build_stderr(tmp_path, tty=True, columns=columns)
    assert BAR in err, err[-2000:]
    assert re.search(r"\| +\d+/\d+ \[", err), err[-2000:]  # counts the portfolio's candidates
    assert "candidate splitter" in err
