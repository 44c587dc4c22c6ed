"""steepness="auto" in netgen.compat (netgen's extension to diffsort's and
difftopk's steepness argument): the blur of the P returned is the target."""

import math

import pytest
import torch

from netgen.compat import DiffSortNet, DiffTopkNet
from netgen.compat.functional import sort, topk
from netgen.compat.networks import get_sorting_network
from netgen.relax import reference as ref
from netgen.relax.blur import blur


def _blur_of(module, x):
    """The blur of the module's last call from its X (their orientation)."""
    _, X = module(x)
    P = X.transpose(-1, -2).flip(-2)  # back to netgen's (k, n), rank 0 = the largest
    return float(blur(P, module.layer.hard(x)[1]))


@pytest.mark.parametrize("cls,args", [(DiffSortNet, ("odd_even", 12)), (DiffTopkNet, ("bitonic", 16, 4))])
@pytest.mark.parametrize("target", [0.05, 0.25])
def test_modules_auto_hit_the_blur(cls, args, target):
    m = cls(*args, steepness="auto", blur=target, target="torch")
    x = torch.randn(64, args[1], generator=torch.Generator().manual_seed(6), dtype=torch.float64) * 300
    assert _blur_of(m, x) == pytest.approx(target, rel=0.1)
    s = float(m.auto_steepness.steepness)
    assert m.relaxation.steepness == pytest.approx(s)
    published = cls(*args, target="torch")  # their default, s = 10
    assert abs(_blur_of(published, x) / target - 1) > 0.1
    assert set(m.state_dict()) == {"auto_steepness.steepness", "auto_steepness.calls"}


def test_module_auto_gradients_and_eval():
    m = DiffTopkNet("bitonic", 16, 3, steepness="auto", target="torch")
    x = torch.randn(16, 16, dtype=torch.float64, requires_grad=True)
    v, X = m(x)
    (v.sum() + X.sum()).backward()
    assert torch.isfinite(x.grad).all()
    m.eval()
    s = float(m.auto_steepness.steepness)
    m(x.detach() * 5)
    assert float(m.auto_steepness.steepness) == s


def test_functional_auto():
    net = get_sorting_network("odd_even", 10, "cpu")
    x = torch.randn(32, 10, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    _, X = sort(net, x, steepness="auto", blur=0.15)
    from netgen.compat.networks import from_matrices

    hard_net = from_matrices(net, 10, 10)
    P = X.transpose(-1, -2).flip(-2)
    assert float(blur(P, ref.hard(hard_net, x)[1])) == pytest.approx(0.15, rel=0.1)
    topk_net = get_sorting_network("bitonic", 16, "cpu")
    _, X = topk(topk_net, torch.randn(8, 16, dtype=torch.float64), 3, steepness="auto")
    assert X.shape == (8, 16, 3) and math.isfinite(float(X.sum()))


def test_bad_auto_arguments():
    with pytest.raises(ValueError, match="blur must be"):
        DiffSortNet("odd_even", 8, steepness="auto", blur=1.2)
    with pytest.raises(ValueError, match="steepness"):
        DiffSortNet("odd_even", 8, steepness="fast")
    with pytest.raises(ValueError, match="blur must be"):
        sort(get_sorting_network("odd_even", 8, "cpu"), torch.randn(2, 8), steepness="auto", blur=0.0)
