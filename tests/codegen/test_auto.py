"""target="auto": the fastest target for the scores' device, said out loud,
and the same numbers as the torch target."""

import logging

import pytest
import torch

from netgen.codegen import target as target_module
from netgen.codegen.auto import AutoLayer, pick_target
from netgen.compat import DiffTopkNet
from netgen.construct import build
from netgen.relax.distributions import Relaxation
from netgen import topk_loss

torch.set_num_threads(1)


def test_rule(monkeypatch):
    assert pick_target("cpu") == ("numba", "a CPU device with numba")
    assert pick_target("meta") == ("torch", "a meta device (only the torch target runs there)")
    if not torch.cuda.is_available():
        target, why = pick_target("cuda")
        assert target == "torch" and "without a usable cuda target" in why, why
    has = target_module.has
    monkeypatch.setattr(target_module, "has", lambda m: False if m.startswith("numba") else has(m))
    target, why = pick_target("cpu")
    assert target == "torch" and "without a usable numba target" in why and "pip install numba" in why, why


def test_auto_says_why_torch_serves_a_gpu(monkeypatch, caplog):
    """Issue 29 item 7: where the cuda target is not usable (numba-cuda
    missing), ``auto`` serves a CUDA device with the torch target and its
    INFO line says what that costs and what to install."""
    has = target_module.has
    monkeypatch.setattr(target_module, "has", lambda m: False if m.startswith("numba") else has(m))
    layer = AutoLayer(build("splitter", 12, 3), Relaxation("logistic_phi", 6.0))
    with caplog.at_level(logging.INFO, logger="netgen"):
        assert layer._target_for(torch.device("cuda")) == "torch"
    assert "without a usable cuda target" in caplog.text
    assert "the torch target on a GPU is a fallback" in caplog.text and "netgen-networks[cuda]" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="netgen"):
        assert layer._target_for(torch.device("cpu")) == "torch"  # numba missing too: no GPU note on a CPU
    assert "target 'torch'" in caplog.text and "fallback" not in caplog.text


def test_auto_layer_picks_numba_on_cpu_and_agrees_with_torch(caplog):
    net, r = build("splitter", 12, 3), Relaxation("logistic_phi", 6.0)
    x = torch.randn(5, 12, dtype=torch.float64, requires_grad=True)
    y = torch.randint(0, 12, (5,))
    outs = {}
    with caplog.at_level(logging.INFO, logger="netgen"):
        for target in ("auto", "torch"):
            layer = AutoLayer(net, r, target)
            v, P = layer(x)
            col = layer.column(x, y)
            (g,) = torch.autograd.grad(v.sum() + P.square().sum() + col.sum(), x)
            outs[target] = (layer.targets, v, P, col, g)
    assert outs["auto"][0] == {"cpu": "numba"} and outs["torch"][0] == {"cpu": "torch"}
    assert "target 'numba'" in caplog.text
    for a, b in zip(outs["auto"][1:], outs["torch"][1:]):
        assert (a - b).abs().max().item() < 1e-12


def test_helpers_take_target():
    loss = topk_loss(20, [0.5, 0.5], target="torch", device="cpu")
    assert loss.layer.targets == {"cpu": "torch"}  # built now, for the given device
    assert loss(torch.randn(4, 20), torch.randint(0, 20, (4,))).isfinite()
    assert topk_loss(20, [0.5, 0.5]).layer.targets == {}  # auto: chosen on the first call
    with pytest.raises(ValueError, match="target 'tpu'"):
        topk_loss(20, [1.0], target="tpu")
    with pytest.raises(ValueError, match="target 'tpu'"):
        DiffTopkNet("bitonic", 8, 3, target="tpu")
    assert DiffTopkNet("bitonic", 8, 3).layer.targets == {"cpu": "numba"}  # their device="cpu" default


def test_torch_func_is_refused_clearly_not_swallowed():
    """PLAN interface 3: torch.func transforms raise a ValueError naming them
    (native layers; the compat modules run them on the reference instead:
    tests/compat/test_compat_second_order.py)."""
    layer = AutoLayer(build("splitter", 8, 2), Relaxation(), "torch")
    x = torch.randn(3, 8, dtype=torch.float64)
    for f in (lambda v: layer(v)[0], lambda v: layer.column(v, torch.tensor([1, 2, 3]))):
        with pytest.raises(ValueError, match="torch.func"):
            torch.func.vmap(f)(x.unsqueeze(1))
        with pytest.raises(ValueError, match="torch.func"):
            torch.func.jacrev(lambda v: f(v).sum())(x)
    assert layer(x)[1].shape == (3, 2, 8)  # and plain calls still work afterwards


def test_steepness_attribute_and_pickle_state():
    import pickle

    net = build("splitter", 8, 2)
    layer = AutoLayer(net, Relaxation("logistic", 2.0), "torch")
    x = torch.randn(4, 8, dtype=torch.float64)
    a = layer(x)[1]
    layer.steepness = 9.0
    b = layer(x)[1]
    c = AutoLayer(net, Relaxation("logistic", 9.0), "torch")(x)[1]
    assert (a - b).abs().max() > 1e-3 and (b - c).abs().max().item() < 1e-12
    clone = pickle.loads(pickle.dumps(layer))
    assert clone._built == {} and clone.steepness == 9.0
    assert (clone(x)[1] - b).abs().max().item() < 1e-12
    assert list(layer.state_dict()) == []
    with pytest.raises(ValueError, match="steepness"):
        layer.steepness = float("nan")
        layer(x)
