"""The lane-sweep prototype (research/lane_sweep) against the reference
executor, in Numba's CUDA simulator (its own process: a process either
simulates or compiles)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_lane_sweeps_match_the_reference_in_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, str(ROOT / "research" / "lane_sweep" / "check.py")], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "12 passed, 0 failed" in out.stdout, out.stdout
