"""benchmarks/gpu_check.sh and its python parts, without a GPU: the shell
syntax, the table of a dry run, the GPU tests' count read from pytest's
output, and gpu_host.py's last line (kernels faked, a small network)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def test_shell_scripts_parse():
    for name in ("gpu_check.sh", "gpu_session.sh"):
        subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / name)], check=True)
        text = (ROOT / "benchmarks" / name).read_text()
        assert not re.search(r"(^|[\s;(])python\s", text, re.M), f"{name} calls python, the GPU image has python3"


def test_dry_run_table_and_test_count(tmp_path):
    summary = tmp_path / "tests.txt"
    summary.write_text("FF.F\n2 failed, 11 passed in 80.0s\n")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--dry-run", "--tests-summary",
                          str(summary)], capture_output=True, text=True, env=ENV, check=True).stdout
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0] == "| figure | measured | target | ok |"
    assert len(rows) == 1 + 19
    assert "| GPU tests (-m gpu): failed | 2 | 0 | NO |" in rows
    assert "| rows kernels ms, B = 4096 | - | <= 4.0 | - |" in rows


def test_gpu_host_last_line():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_host.py"), "--n", "24", "--k", "3",
                          "--reps", "2", "--calls", "5"], capture_output=True, text=True, env=ENV, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"host ms per fwd\+bwd: rows \d+\.\d{3} column \d+\.\d{3} values \d+\.\d{3}", last), last
