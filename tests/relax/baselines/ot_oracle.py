"""The textbook Sinkhorn iteration (plain domain, fixed many iterations): the
independent oracle for the OT baselines (Sinkhorn sort, SOFT top-k)."""

import torch


def plain_sinkhorn(C, a, b, eps, iters=20000):
    """Entropic OT plan for cost C with marginals a (rows) and b (columns)."""
    K = torch.exp(-C / eps)
    u = torch.ones_like(a)
    for _ in range(iters):
        v = b / (K.transpose(-1, -2) @ u.unsqueeze(-1)).squeeze(-1)
        u = a / (K @ v.unsqueeze(-1)).squeeze(-1)
    return u.unsqueeze(-1) * K * v.unsqueeze(-2)
