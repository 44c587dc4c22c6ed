"""steepness="auto" in the operators (netgen.ops): the blur of the call's P
is the target; the module forms keep the value like a layer."""

import pytest
import torch

from netgen.ops import SoftRank, SoftTopK, soft_rank, soft_sort, soft_topk, topk_mask
from netgen.ops.networks import network_for
from netgen.relax.blur import blur
from netgen.relax.distributions import default_relaxation
from netgen.relax.steepness import estimate_steepness


@pytest.mark.parametrize("target", [0.05, 0.2])
def test_soft_topk_auto_hits_the_blur(target):
    x = torch.randn(48, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 1e3
    res = soft_topk(x, 5, steepness="auto", blur=target, return_P=True)
    assert float(blur(res)) == pytest.approx(target, rel=0.1)
    default = soft_topk(x, 5, return_P=True)
    assert float(blur(default)) < 0.01  # scores 1e3 apart: the default s = 2 x depth is nearly hard


def test_auto_along_a_dim_and_smallest():
    x = torch.randn(4, 12, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    res = soft_topk(x, 3, dim=1, largest=False, steepness="auto", blur=0.1, return_P=True)
    assert float(blur(res.P, res.indices.movedim(1, -1))) == pytest.approx(0.1, rel=0.15)
    m = topk_mask(x, 3, dim=1, steepness="auto")
    assert torch.allclose(m.sum(1), torch.full((4, 6), 3.0, dtype=torch.float64))


def test_sort_and_rank_run_at_the_estimated_steepness():
    x = torch.randn(32, 10, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    net = network_for(10, 10, "best", sorter=True)
    s = estimate_steepness(net, default_relaxation(net), x, 0.15).steepness
    assert torch.allclose(soft_rank(x, steepness="auto", blur=0.15), soft_rank(x, steepness=s))
    assert torch.allclose(soft_sort(x, steepness="auto", blur=0.15).values, soft_sort(x, steepness=s).values)
    assert not torch.allclose(soft_rank(x, steepness="auto", blur=0.15), soft_rank(x))


def test_modules_keep_the_value():
    x = torch.randn(32, 16, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    op = SoftTopK(5, steepness="auto", blur=0.2, return_P=True)
    assert "'auto'" in repr(op)
    res = op(x)
    s = float(op.auto_steepness.steepness)
    assert float(blur(res)) == pytest.approx(0.2, rel=0.1)
    op.eval()
    op(x * 100)  # eval: the value as it is
    assert float(op.auto_steepness.steepness) == s
    assert set(op.state_dict()) == {"auto_steepness.steepness", "auto_steepness.calls"}
    rank = SoftRank(steepness="auto")
    rank(x[:, :8])
    assert float(rank.auto_steepness.steepness) > 0


def test_bad_blur_and_steepness():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="blur must be"):
        soft_topk(x, 2, steepness="auto", blur=1.0)
    with pytest.raises(ValueError, match="blur must be"):
        SoftTopK(2, steepness="auto", blur=0)
    with pytest.raises(ValueError):
        soft_topk(x, 2, steepness="fast")
