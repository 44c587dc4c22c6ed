"""Smoke run of examples/spearman.py with netgen's operators (the
torchsort comparison needs torchsort, not a test dependency)."""

import importlib.util
import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("scipy")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spearman.py"


def test_spearman_example_learns(capsys):
    spec = importlib.util.spec_from_file_location("spearman_example", EXAMPLE)
    ex = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ex  # dataclasses look the module up
    try:
        spec.loader.exec_module(ex)
    finally:
        sys.modules.pop(spec.name, None)
    short = ex.main(["--ops", "netgen", "--target", "reference", "--steps", "1", "--batch", "16"])
    longer = ex.main(["--ops", "netgen", "--target", "reference", "--steps", "40", "--batch", "16"])
    assert [r.method for r in longer] == ["netgen soft_rank (target=reference)"]
    assert math.isfinite(longer[0].test_spearman) and longer[0].test_spearman > short[0].test_spearman
    assert longer[0].test_spearman > 0.3  # the diabetes targets are learnable (0.60 after 300 steps)
    assert "| 0 | netgen soft_rank (target=reference) |" in capsys.readouterr().out
