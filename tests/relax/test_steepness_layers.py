"""steepness="auto" in the layers: AutoLayer and topk_loss choose s from the
scores so that the blur of the P they return is the target."""

import io
import math

import pytest
import torch

import netgen
from netgen.codegen.auto import AutoLayer
from netgen.compiler import build
from netgen.relax import reference as ref
from netgen.relax.blur import blur
from netgen.relax.distributions import default_relaxation


def _layer(n=16, k=5, distribution=None, **kw):
    net = build(n, k).network
    return AutoLayer(net, default_relaxation(net, distribution), "torch", steepness="auto", **kw)


@pytest.mark.parametrize("target", [0.05, 0.3])
@pytest.mark.parametrize("scale", [1e-2, 1e2])
def test_auto_layer_hits_the_blur(target, scale):
    layer = _layer(blur=target)
    x = torch.randn(64, 16, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * scale
    v, P = layer(x)
    got = float(blur(P, layer.hard(x)[1]))
    assert got == pytest.approx(target, rel=0.1)
    s = float(layer.auto_steepness.steepness)
    # the generated layer ran at that steepness: the reference agrees
    assert torch.allclose(P, ref.forward(layer.net, x, layer.relaxation, steepness=s)[1], atol=1e-10)
    # and the default would not have hit it
    assert abs(float(blur(ref.forward(layer.net, x, layer.relaxation)[1], layer.hard(x)[1])) / target - 1) > 0.1


def test_auto_layer_trains_and_evaluates():
    layer = _layer(n=12, k=3)
    x = torch.randn(32, 12, dtype=torch.float64, requires_grad=True)
    v, _ = layer(x)
    v.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    s0 = float(layer.auto_steepness.steepness)
    for _ in range(8):  # calls 1, 2 and 3 estimate again (then s is kept), on scores 10x larger: s moves down
        layer(x.detach() * 10)
    assert int(layer.auto_steepness.calls) == 9
    assert float(layer.auto_steepness.steepness) < s0 / 2
    layer.eval()
    s1 = float(layer.auto_steepness.steepness)
    one = layer(x.detach()[:1])[0]
    assert float(layer.auto_steepness.steepness) == s1  # eval: the value as it is, a row's result its own
    assert torch.allclose(one, layer(x.detach())[0][:1])
    # the state_dict carries it: a fresh layer in eval mode computes the same
    other = _layer(n=12, k=3)
    other.load_state_dict(layer.state_dict())
    other.eval()
    assert torch.allclose(other(x.detach())[0], layer(x.detach())[0])
    buf = io.BytesIO()
    torch.save(layer, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=False)
    assert float(back.auto_steepness.steepness) == s1


def test_auto_layer_settings():
    layer = _layer()
    assert "steepness='auto'" in repr(layer)
    with pytest.raises(ValueError, match="'auto'"):
        layer.steepness = "fast"
    with pytest.raises(ValueError, match=r"blur must be a number in \(0, 1\)"):
        layer.blur = 1.0
    with pytest.raises(ValueError, match="blur must be"):
        _layer(blur=0)
    layer.steepness = 4.0  # back to a number: the auto state is not used
    x = torch.randn(8, 16, dtype=torch.float64)
    assert torch.allclose(layer(x)[1], ref.forward(layer.net, x, layer.relaxation, steepness=4.0)[1], atol=1e-10)
    layer.steepness = "auto"
    layer.blur = 0.2
    layer.auto_steepness.steepness.fill_(math.nan)
    _, P = layer(torch.randn(64, 16, dtype=torch.float64))
    assert layer.auto_steepness.blur == 0.2
    assert layer.hard(x)[1].shape == (8, 5)  # hard needs no steepness


def test_topk_loss_auto():
    loss = netgen.topk_loss(20, [0.5, 0, 0.5], m=8, steepness="auto", blur=0.2, target="torch")
    x = torch.randn(64, 20, dtype=torch.float64, requires_grad=True)
    y = torch.randint(0, 20, (64,))
    loss(x, y).backward()
    assert torch.isfinite(x.grad).all()
    layer = loss.layer
    s = float(layer.auto_steepness.steepness)
    assert math.isfinite(s) and s != layer.relaxation.steepness
    xm = x.detach().topk(8, dim=-1).values  # what the layer saw: the top-8 preselection, sorted
    assert float(blur(layer, xm)) == pytest.approx(0.2, rel=0.15)
    with pytest.raises(ValueError, match="blur must be"):
        netgen.topk_loss(20, [0.5, 0.5], steepness="auto", blur=1.5)
    with pytest.raises(ValueError):
        netgen.topk_loss(20, [0.5, 0.5], steepness="fast")
