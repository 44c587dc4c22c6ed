"""The DiffTopK loss (docs/design.md section 7) against its formulas."""

import math

import pytest
import torch

from netgen.codegen import emit
from netgen.codegen.cache import import_source as load_source
from netgen.construct import build
from netgen.relax import reference as ref
from netgen.relax.distributions import Relaxation
from netgen import topk_loss
from netgen.relax.loss import TopKCrossEntropyLoss, preselect

torch.set_num_threads(1)  # tiny tensors: intra-op threads only add contention (2-core CI)

R = Relaxation("cauchy", 6.0)


def layers(n, k):
    net = build("splitter", n, k)
    return ref.Layer(net, R), load_source(emit("torch", net, R), f"loss_{n}_{k}").Layer()


def manual(P, scores, y, p_k, mode, eps=1e-7):
    """Per-sample formula, straight from docs/design.md section 7."""
    out = []
    for i in range(scores.shape[0]):
        c = [sum(P[i, r, y[i]].item() for r in range(k)) for k in range(1, len(p_k) + 1)]
        log = lambda q: math.log(q * (1 - 2 * eps) + eps)
        if mode == "topk":
            out.append(-log(sum(p * ck for p, ck in zip(p_k, c))))
        else:
            ce = -torch.log_softmax(scores[i], -1)[y[i]].item()
            rest = sum(p / (1 - p_k[0]) * ck for p, ck in zip(p_k[1:], c[1:]))
            out.append(p_k[0] * ce - (1 - p_k[0]) * log(rest))
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("mode", ["mix", "topk"])
@pytest.mark.parametrize("p_k", [[0.5, 0, 0, 0, 0.5], [0.2, 0.2, 0.2, 0.2, 0.2], [0, 0, 1.0]])
def test_loss_matches_formula_for_reference_and_generated(mode, p_k):
    n = 12
    scores = torch.randn(6, n, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.randint(0, n, (6,), generator=torch.Generator().manual_seed(1))
    rl, gl = layers(n, len(p_k))
    _, P = ref.forward(rl.net, scores, R)
    want = manual(P, scores, y, p_k, mode)
    for layer in (rl, gl):
        got = TopKCrossEntropyLoss(layer, p_k, mode=mode, reduction="none")(scores, y)
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)


def test_column_path_equals_full_P_path():
    class OnlyForward(torch.nn.Module):  # a layer without column(): the loss uses P
        def __init__(self, inner):
            super().__init__()
            self.inner, self.n, self.k = inner, inner.n, inner.k

        def forward(self, x):
            return self.inner(x)

    rl, gl = layers(10, 5)
    scores = torch.randn(4, 10, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 3, 9, 5])
    a = TopKCrossEntropyLoss(gl, [0.5, 0, 0, 0, 0.5])(scores, y)
    b = TopKCrossEntropyLoss(OnlyForward(gl), [0.5, 0, 0, 0, 0.5])(scores, y)
    ga, = torch.autograd.grad(a, scores)
    gb, = torch.autograd.grad(b, scores)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(ga, gb)


def test_mix_with_p1_one_is_cross_entropy():
    _, gl = layers(8, 1)
    scores = torch.randn(5, 8, dtype=torch.float64)
    y = torch.arange(5)
    got = TopKCrossEntropyLoss(gl, [1.0])(scores, y)
    torch.testing.assert_close(got, torch.nn.functional.cross_entropy(scores, y))


def test_preselect():
    scores = torch.tensor([[5.0, 1.0, 4.0, 3.0, 2.0], [5.0, 1.0, 4.0, 3.0, 2.0]], requires_grad=True)
    labels = torch.tensor([1, 3])
    sub, local, idx = preselect(scores, labels, 3)
    assert idx.tolist() == [[0, 2, 1], [0, 2, 3]]  # row 0: class 1 replaces the 3rd best
    assert local.tolist() == [2, 2]
    assert sub.tolist() == [[5.0, 4.0, 1.0], [5.0, 4.0, 3.0]]
    sub.sum().backward()
    assert scores.grad.tolist() == [[1, 1, 1, 0, 0], [1, 0, 1, 1, 0]]


def test_preselected_loss_uses_m_wires_and_trains():
    torch.manual_seed(0)
    C, m = 60, 8
    loss_fn = topk_loss(C, [0.5, 0, 0, 0, 0.5], m=m)
    assert loss_fn.layer.n == m and loss_fn.layer.k == 5
    feats = torch.randn(256, 16)
    labels = torch.randint(0, C, (256,))
    head = torch.nn.Linear(16, C)
    opt = torch.optim.SGD(head.parameters(), lr=0.5)
    first = None
    for _ in range(40):
        opt.zero_grad()
        loss = loss_fn(head(feats), labels)
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    assert math.isfinite(loss.item()) and loss.item() < 0.7 * first


def test_bad_arguments():
    rl, _ = layers(8, 3)
    with pytest.raises(ValueError, match="sum"):
        TopKCrossEntropyLoss(rl, [0.5, 0.4])
    with pytest.raises(ValueError, match="K=4"):
        TopKCrossEntropyLoss(rl, [0.25] * 4)
    with pytest.raises(ValueError, match="n = m"):
        TopKCrossEntropyLoss(rl, [1.0], m=5)
    with pytest.raises(ValueError, match="mode"):
        TopKCrossEntropyLoss(rl, [1.0], mode="soft")
    with pytest.raises(ValueError, match="scores"):
        TopKCrossEntropyLoss(rl, [1.0])(torch.zeros(8), torch.tensor(0))
