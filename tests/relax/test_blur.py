"""netgen.blur (docs/relaxations.md, "Blur"): the mean total variation
between the relaxed P and the hard network's one-hot rows."""

import pytest
import torch

import netgen
from netgen.compiler import build
from netgen.relax import reference as ref
from netgen.relax.blur import HardPaths, blur, layer_columns
from netgen.relax.distributions import DISTRIBUTIONS, Relaxation, default_relaxation


def _net(n, k):
    return build(n, k).network


def _direct(P, h):
    """The definition, written out: H one-hot at the hard indices, TV per rank."""
    H = torch.nn.functional.one_hot(h, P.shape[-1]).to(P.dtype)
    return (0.5 * (P - H).abs().sum(-1)).mean()


@pytest.mark.parametrize("n,k", [(8, 1), (16, 5), (12, 12)])
@pytest.mark.parametrize("distribution", ["cauchy", "logistic_phi", "optimal"])
def test_blur_is_the_total_variation_of_the_reference_P(n, k, distribution):
    net = _net(n, k)
    r = default_relaxation(net, distribution)
    g = torch.Generator().manual_seed(n * 31 + k)
    x = torch.randn(6, 3, n, generator=g, dtype=torch.float64)
    _, P = ref.forward(net, x, r)
    _, h = ref.hard(net, x)
    b = blur(P, h)
    assert b.shape == ()
    assert float(b) == pytest.approx(float(_direct(P, h)), abs=1e-12)
    assert 0.02 < float(b) < 0.9  # a default steepness blurs, but not to uniform
    # rows of P are probability vectors, so the TV is 1 - P[r, h_r]
    ph = P.gather(-1, h.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(blur(P, h, reduction="none"), 1 - ph, atol=1e-12)


def test_blur_of_any_P_is_the_total_variation():
    g = torch.Generator().manual_seed(3)
    P = torch.randn(4, 3, 7, generator=g, dtype=torch.float64)  # not stochastic: the general formula
    h = torch.randint(0, 7, (4, 3), generator=g)
    assert float(blur(P, h)) == pytest.approx(float(_direct(P, h)), abs=1e-12)


@pytest.mark.parametrize("n,k", [(16, 1), (16, 5), (16, 16)])
def test_blur_limits_hard_and_flat(n, k):
    """s -> inf gives the hard network (blur -> 0); s -> 0 gives p = 1/2
    everywhere, a P that does not depend on x, so over inputs whose hard
    indices are uniform the mean of P[r, h_r] is 1/n: blur -> 1 - 1/n."""
    net = _net(n, k)
    g = torch.Generator().manual_seed(7)
    x = torch.stack([torch.randperm(n, generator=g) for _ in range(4000)]).to(torch.float64)  # distinct gaps >= 1
    r = Relaxation("cauchy", 1.0)
    _, h = ref.hard(net, x)
    _, P = ref.forward(net, x, r, steepness=1e9)
    assert float(blur(P, h)) < 1e-6
    _, P = ref.forward(net, x, r, steepness=1e-12)
    assert float(blur(P, h)) == pytest.approx(1 - 1 / n, abs=0.02)
    # and in between it falls as s grows
    bs = [float(blur(ref.forward(net, x[:200], r, steepness=s)[1], h[:200])) for s in (0.3, 1.0, 3.0, 10.0)]
    assert all(a > b for a, b in zip(bs, bs[1:])), bs


def test_blur_of_a_layer_without_P_matches_P():
    """blur(layer, x) reads 1 - P[r, h_r] from forward lanes (fwd) or columns."""
    net = _net(16, 5)
    r = default_relaxation(net)
    x = torch.randn(5, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    _, P = ref.forward(net, x, r)
    want = blur(P, ref.hard(net, x)[1], reduction="none")
    layer = ref.Layer(net, r)  # column only
    assert torch.allclose(blur(layer, x, reduction="none"), want, atol=1e-12)
    assert torch.allclose(blur(layer, x, reduction="none", chunk=2), want, atol=1e-12)

    class WithFwd(ref.Layer):
        def fwd(self, x, V):
            return ref.fwd(self.net, x, V, self.relaxation)

    assert torch.allclose(blur(WithFwd(net, r), x, reduction="none", chunk=3), want, atol=1e-12)
    y = ref.hard(net, x)[1]
    assert torch.allclose(layer_columns(WithFwd(net, r), x, y), layer_columns(layer, x, y), atol=1e-12)


def test_blur_of_a_generated_layer_and_the_front_door():
    net = _net(16, 5)
    r = default_relaxation(net)
    x = torch.randn(4, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    layer = netgen.AutoLayer(net, r, "torch")
    want = blur(*ref.forward(net, x, r)[1:], ref.hard(net, x)[1])
    assert float(netgen.blur(layer, x)) == pytest.approx(float(want), abs=1e-10)


def test_blur_is_differentiable_in_P():
    net = _net(8, 3)
    x = torch.randn(3, 8, dtype=torch.float64)
    s = torch.tensor(4.0, dtype=torch.float64, requires_grad=True)
    _, P = ref.forward(net, x, Relaxation("cauchy", 1.0), steepness=s)
    blur(P, ref.hard(net, x)[1]).backward()
    assert float(s.grad) < 0  # a steeper network is less blurred


def test_blur_refuses_bad_input():
    P = torch.full((2, 3, 5), 0.2)
    h = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="reduction"):
        blur(P, h, reduction="sum")
    with pytest.raises(ValueError, match="indices of shape"):
        blur(P, h[:, :2])
    with pytest.raises(ValueError, match="lie in 0..4"):
        blur(P, h + 5)
    with pytest.raises(ValueError, match="integer tensor"):
        blur(P, h.float())
    with pytest.raises(ValueError, match="floating tensor"):
        blur(P.long(), h)
    with pytest.raises(ValueError, match="chunk"):
        blur(ref.Layer(_net(5, 3), Relaxation()), torch.randn(2, 5), chunk=0)


def test_hard_paths_follow_the_exact_network():
    net = _net(16, 5)
    x = torch.randn(7, 16, dtype=torch.float64)
    paths = HardPaths(net, x.numpy())
    assert (paths.indices == ref.hard(net, x)[1].numpy()).all()
    # every output meets at least one comparator, and each gap is a real gap |x_i - x_j| of its row
    assert set(paths.slot.tolist()) == set(range(7 * 5))
    row = paths.slot // 5
    diffs = [(x[i, :, None] - x[i, None, :]).abs().flatten() for i in range(7)]
    assert all(torch.isclose(diffs[int(i)], torch.tensor(g, dtype=torch.float64)).any()
               for i, g in zip(row[:50], paths.gaps[:50]))
