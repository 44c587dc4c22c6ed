"""Spearman and multi-label top-k losses over the operators."""

import pytest
import torch
from scipy import stats

import netgen.ops as ops
from netgen.relax import reference as ref
from netgen.relax.distributions import default_relaxation

torch.set_num_threads(1)


def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def test_exact_rank_is_rankdata_with_ties():
    t = torch.tensor([[3.0, 1.0, 3.0, 2.0, 1.0, 7.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    for row in t:
        assert ops.exact_rank(row).tolist() == stats.rankdata(row.numpy()).tolist()
    torch.testing.assert_close(ops.exact_rank(t.T, dim=0), ops.exact_rank(t).T, atol=0, rtol=0)


def test_spearman_steep_is_scipys_and_differentiable():
    pred, target = rand(4, 30, seed=1), rand(4, 30, seed=2)
    rho = ops.spearman(pred, target, steepness=1e7)
    want = torch.tensor([stats.spearmanr(p, t).statistic for p, t in zip(pred.numpy(), target.numpy())])
    torch.testing.assert_close(rho, want.to(rho.dtype), atol=1e-5, rtol=0)
    p = pred.clone().requires_grad_()
    loss = ops.SpearmanLoss()(p, target)
    loss.backward()
    assert loss.dim() == 0 and p.grad.abs().sum() > 0
    torch.testing.assert_close(loss, (1 - ops.spearman(pred, target)).mean(), atol=1e-12, rtol=0)
    # the soft target (torchsort's README form) and a constant row (0, not NaN)
    assert torch.isfinite(ops.spearman(pred, target, soft_target=True)).all()
    assert float(ops.spearman(pred[:1], torch.ones(1, 30, dtype=torch.float64))[0]) == 0.0


def test_spearman_loss_trains_toward_the_target_order():
    torch.manual_seed(0)
    target = rand(2, 12, seed=3)
    pred = torch.zeros(2, 12, dtype=torch.float64).normal_().requires_grad_()
    opt = torch.optim.Adam([pred], lr=0.1)
    loss_fn = ops.SpearmanLoss(reduction="sum")
    first = float(loss_fn(pred, target).detach())
    for _ in range(30):
        opt.zero_grad()
        loss = loss_fn(pred, target)
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.2 * first


def test_spearman_reductions_and_errors():
    pred, target = rand(3, 5), rand(3, 5, seed=1)
    assert ops.SpearmanLoss(reduction="none")(pred, target).shape == (3,)
    assert float(ops.SpearmanLoss()(pred[:0], target[:0])) == 0.0
    with pytest.raises(ValueError, match="reduction must be one of"):
        ops.SpearmanLoss(reduction="avg")
    with pytest.raises(ValueError, match="target must be a tensor of pred's shape"):
        ops.spearman(pred, target[:, :4])


def q_of(scores, p_k):
    """The p_k-weighted soft top-k probabilities from P (float64 oracle)."""
    K = len(p_k)
    net = ops.network_for(scores.shape[-1], K)
    _, P = ref.forward(net, scores, default_relaxation(net))
    c = P.cumsum(-2)  # c[k-1, y] = sum_{r<k} P[r, y]
    return (torch.tensor(p_k, dtype=scores.dtype)[:, None] * c).sum(-2)


def test_multilabel_topk_loss_is_the_mean_over_positives():
    scores = rand(3, 10, seed=4)
    targets = torch.zeros(3, 10, dtype=torch.bool)
    targets[0, [1, 4]] = True
    targets[1, [0, 2, 9]] = True  # row 2: no positive -> 0
    p_k = [0.2, 0.0, 0.5, 0.3]
    q = q_of(scores, p_k)
    logq = torch.log(q * (1 - 2e-7) + 1e-7)
    want = torch.stack([-(logq[0, [1, 4]]).mean(), -(logq[1, [0, 2, 9]]).mean(), torch.tensor(0.0, dtype=q.dtype)])
    loss = ops.MultiLabelTopKLoss(p_k, reduction="none")
    torch.testing.assert_close(loss(scores, targets), want, atol=1e-12, rtol=0)
    torch.testing.assert_close(ops.MultiLabelTopKLoss(p_k)(scores, targets.double()), want.mean(), atol=1e-12, rtol=0)
    s = scores.clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda s: ops.MultiLabelTopKLoss(p_k, steepness=3.0)(s, targets), (s,))


def test_multilabel_topk_loss_errors():
    loss = ops.MultiLabelTopKLoss([0.0, 1.0])
    with pytest.raises(ValueError, match="K-hot"):
        loss(torch.randn(2, 5), torch.full((2, 5), 0.5))
    with pytest.raises(ValueError, match="scores' shape"):
        loss(torch.randn(2, 5), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="p_k must be non-negative weights summing to 1"):
        ops.MultiLabelTopKLoss([0.5, 0.2])
    with pytest.raises(ValueError, match=r"k = 2 must lie in 1\.\.1"):
        loss(torch.randn(2, 1), torch.zeros(2, 1))
