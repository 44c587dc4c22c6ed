"""docs/operators.md section 7 ("Coming from torchsort / LapSum / ott")
runs as written: its python block is executed and what it computes is
checked (shapes, ranges, the mask's sums, a finite loss with gradients)."""

import re
from pathlib import Path

import torch

DOC = Path(__file__).resolve().parents[2] / "docs" / "operators.md"


def test_side_by_side_block_runs():
    section = DOC.read_text().split("## 7. Coming from torchsort / LapSum / ott", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1
    torch.manual_seed(0)
    env: dict = {}
    exec(compile(blocks[0], f"{DOC}:section 7", "exec"), env)
    x, ranks, values, p = env["x"], env["ranks"], env["values"], env["p"]
    ranks = ranks.detach()
    assert ranks.shape == x.shape and float(ranks.min()) >= 1 and float(ranks.max()) <= x.shape[1]
    torch.testing.assert_close(ranks.sum(1), torch.full((8,), 100 * 101 / 2), rtol=1e-5, atol=1e-3)
    assert bool((values[:, 1:] >= values[:, :-1] - 1e-5).all())  # ascending
    torch.testing.assert_close(p.sum(1).detach(), torch.full((8,), 5.0), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(env["ranks0"].detach(), ranks - 1)
    assert env["top5"].shape == (8, 5) and torch.isfinite(env["loss"]) and x.grad is not None
