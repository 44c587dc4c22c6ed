"""The operators users call: soft sort, soft rank, soft top-k and the
top-k mask, as functions and ``nn.Module`` forms, with ranking losses.

    from netgen.ops import soft_rank, soft_sort, soft_topk, topk_mask
    ranks = soft_rank(x)                      # 1-based, like torchsort
    values, indices = soft_sort(x, dim=1)     # like torch.sort
    values, indices = soft_topk(x, 5)         # like torch.topk
    mask = topk_mask(x, 5)                    # sums to 5 along dim

Each is a relaxed comparator network (by default the portfolio's best,
built once and cached) applied along ``dim``, defined through its P
(docs/operators.md) and computed by lane sweeps that never form P
(:mod:`netgen.ops.backends`). Modules: :mod:`.functions` (the operators),
:mod:`.modules` (``nn.Module`` forms), :mod:`.losses` (Spearman, multi-label
top-k), :mod:`.networks` (which network, cached), :mod:`.backends` (the
interface each target implements).
"""

from .backends import BACKENDS, Lanes, lanes_for, register
from .functions import SortResult, TopKResult, TopKWithP, soft_rank, soft_sort, soft_topk, topk_mask, topk_weights
from .losses import MultiLabelTopKLoss, SpearmanLoss, exact_rank, spearman
from .modules import SoftRank, SoftSort, SoftTopK, TopKMask
from .networks import network_for

__all__ = [
    "soft_sort", "soft_rank", "soft_topk", "topk_mask", "topk_weights",
    "SortResult", "TopKResult", "TopKWithP",
    "SoftSort", "SoftRank", "SoftTopK", "TopKMask",
    "spearman", "exact_rank", "SpearmanLoss", "MultiLabelTopKLoss",
    "network_for", "lanes_for", "register", "BACKENDS", "Lanes",
]
