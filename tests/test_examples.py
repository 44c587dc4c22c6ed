"""Smoke run of examples/digits_sorting.py: a few training steps through a
generated netgen layer and the baseline; the loss must go down."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("sklearn")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "digits_sorting.py"


@pytest.fixture(scope="module")
def ex():
    spec = importlib.util.spec_from_file_location("digits_sorting_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


def test_numbers_and_targets_match_the_generated_layer(ex, tmp_path):
    train_pool, test_pool = ex.split_digits(0)
    imgs, values = train_pool.sample(6, 5, torch.Generator().manual_seed(0))
    assert imgs.shape == (6, 5, 1, 8, 32) and values.shape == (6, 5)
    assert all(len(set(v.tolist())) == 5 for v in values)  # no ties
    # Q's orientation is the layer's: Q[b, r, c] = 1 iff input c has rank r (0 = largest)
    layer, path, net = ex.netgen_layer(5, "oddeven", tmp_path)
    assert path.parent == tmp_path and net.is_sorter
    _, idx = layer.hard(values.double())
    Q = ex.permutation_targets(values)
    assert torch.equal(Q, torch.nn.functional.one_hot(idx, 5).float())
    # the soft P of well-separated values is close to Q
    _, P = layer(values.double() * 10.0)
    assert (P - Q).abs().max() < 0.05


def test_training_smoke_run_loss_decreases(ex, tmp_path):
    torch.set_num_threads(1)
    results = ex.run((3,), steps=40, batch=16, lr=3e-3, eval_sets=64, out_dir=tmp_path, baseline="softsort")
    assert [r.method.split()[0] for r in results] == ["netgen", "softsort"]
    for r in results:
        assert len(r.losses) == 40 and all(np.isfinite(r.losses))
        assert np.mean(r.losses[-8:]) < np.mean(r.losses[:8]), r.method
        assert 0.0 <= r.exact_match <= r.elementwise <= 1.0
    assert list(tmp_path.glob("oddeven_n3_k3_torch_*.py"))
    assert "| 3 | netgen" in ex.table(results)
