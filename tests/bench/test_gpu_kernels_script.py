"""benchmarks/gpu_kernels.py without a GPU: one clear line, exit status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_kernels.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the script would run")
def test_exits_cleanly_without_gpu():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--B", "8"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "no CUDA GPU" in proc.stderr and "Traceback" not in proc.stderr
