"""Smooth top-k SVM loss (Berrada et al. 2018) against brute force over k-subsets."""

import itertools

import pytest
import torch

from netgen.relax.baselines import SmoothTopKLoss, smooth_topk_loss
from netgen.relax.baselines.smooth_topk import log_esp


def brute(s, y, k, tau, alpha):
    n = s.shape[-1]
    all_terms, with_y = [], []
    for S in itertools.combinations(range(n), k):
        mean = sum(s[j] for j in S) / k
        all_terms.append((alpha * (y not in S) + mean) / tau)
        if y in S:
            with_y.append(mean / tau)
    return tau * (torch.logsumexp(torch.stack(all_terms), 0) - torch.logsumexp(torch.stack(with_y), 0))


@pytest.mark.parametrize("k", [1, 2, 4])
def test_matches_brute_force(k):
    torch.manual_seed(k)
    s = torch.randn(3, 7, dtype=torch.float64)
    y = torch.tensor([0, 3, 6])
    loss = smooth_topk_loss(s, y, k, tau=0.6, alpha=1.0, reduction="none")
    ref = torch.stack([brute(s[i], int(y[i]), k, 0.6, 1.0) for i in range(3)])
    torch.testing.assert_close(loss, ref)


def test_elementary_symmetric_polynomials():
    x = torch.tensor([0.5, 2.0, 3.0, 1.5], dtype=torch.float64)
    e = log_esp(x.log(), 3).exp()
    ref = [1.0] + [sum(torch.prod(x[list(S)]) for S in itertools.combinations(range(4), j)) for j in (1, 2, 3)]
    torch.testing.assert_close(e, torch.tensor(ref, dtype=torch.float64))


def test_gradcheck_and_batch_dims():
    torch.manual_seed(0)
    s = torch.randn(2, 2, 6, dtype=torch.float64, requires_grad=True)
    y = torch.tensor([[1, 5], [0, 2]])
    assert torch.autograd.gradcheck(lambda s: smooth_topk_loss(s, y, 3, 0.5, reduction="none"), (s,))
    assert SmoothTopKLoss(2)(s.float(), y).dtype == torch.float32


def test_zero_temperature_limit_is_hinge():
    torch.manual_seed(1)
    s = torch.randn(5, 8, dtype=torch.float64)
    y = torch.randint(0, 8, (5,))
    k, alpha = 3, 1.0
    loss = smooth_topk_loss(s, y, k, tau=1e-4, alpha=alpha, reduction="none")
    for i in range(5):
        others = torch.cat([s[i, : y[i]], s[i, y[i] + 1 :]]).sort(descending=True).values
        best_without = others[:k].mean()
        best_with = (s[i, y[i]] + others[: k - 1].sum()) / k
        hinge = torch.clamp(alpha + best_without - best_with, min=0)
        torch.testing.assert_close(loss[i], hinge, atol=1e-3, rtol=0)


def test_bad_input():
    s = torch.randn(2, 5)
    with pytest.raises(ValueError, match="y must lie"):
        smooth_topk_loss(s, torch.tensor([0, 5]), 2)
    with pytest.raises(ValueError, match="integer"):
        smooth_topk_loss(s, torch.tensor([0.0, 1.0]), 2)
    with pytest.raises(ValueError, match="k < n"):
        smooth_topk_loss(s, torch.tensor([0, 1]), 5)
