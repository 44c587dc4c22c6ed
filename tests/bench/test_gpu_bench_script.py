"""benchmarks/gpu_bench.py: one clear line and exit status 2 without a GPU;
with --device cpu the same table runs (every method but the cuda target)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_bench.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the script would run")
def test_exits_cleanly_without_gpu():
    proc = run("--B", "8")
    assert proc.returncode == 2
    assert "no CUDA GPU" in proc.stderr and "Traceback" not in proc.stderr
    assert run("--methods", "nope").returncode == 2


def test_table_runs_on_cpu():
    from netgen.bench.gpu import all_methods

    proc = run("--device", "cpu", "--B", "3", "--n", "24", "--k", "3", "--reps", "2", "--compile-B")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    rows = {line.split()[0]: line.split() for line in lines if line and not line.startswith(("#", "method"))}
    for m in all_methods():
        if m.startswith("netgen-cuda"):
            assert "skipped:" in rows[m], m
        elif m != "netgen-torch-compiled":  # compiled only for --compile-B sizes (none here)
            assert rows[m][1:3] == ["3", "24"] and float(rows[m][3]) > 0, (m, rows[m])
    assert rows["softsort"][-1] == "1.00"
    assert any("fastest netgen netgen-torch" in line for line in lines)
