"""The DiffTopK top-k classification loss (docs/design.md section 7).

With ``P`` from a relaxed top-K network over the class scores and a
distribution ``p_k`` over k = 1..K ("the true class should be in the top
k"), writing ``c_k = sum_{r<k} P[r, y]`` (the soft probability that class y
ranks among the top k)::

    topk mode:  L = -log( sum_k p_k(k) * c_k )
    mix mode:   L = p_k(1) * CE(softmax(scores), y)
                    - (1 - p_k(1)) * log( sum_{k>=2} p_k(k) / (1 - p_k(1)) * c_k )

(``mix`` is the default: the top-1 term is the ordinary softmax cross-
entropy, which the DiffTopK paper found more stable than the sorting
network's own top-1 weight.) Only the column ``P[:, y]`` is needed, so the
loss calls ``layer.column(scores, y)`` (O(size) work and O(n) memory per
sample) when the layer has it, ``layer(scores)[1]`` otherwise; any netgen
layer works: a generated module's ``Layer``, :class:`netgen.relax.reference.Layer`.

Top-m preselection (``m``): rank only each row's m largest scores, putting
the true class in place of the m-th when it is not among them (a hard,
non-differentiable choice of which scores enter the network; gradients flow
to the chosen scores). The layer then has n = m wires. The CE term always
uses all scores. Suggested m: 16 for ~1000 classes, 50 for > 10000.

``log`` is guarded as ``log(q * (1 - 2 eps) + eps)`` with eps = 1e-7 (as in
difftopk), so a vanishing q gives a large but finite loss with a gradient.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

import torch

__all__ = ["TopKCrossEntropyLoss", "preselect", "check_labels", "check_p_k"]


def check_p_k(p_k: Sequence[float]) -> list[float]:
    """``p_k`` as floats: non-negative weights of k = 1..K summing to 1
    (real numbers: a string such as ``"1"`` or a boolean is refused, not
    converted)."""
    items = None if isinstance(p_k, (str, bytes)) else _items(p_k)  # read once (an iterator is accepted too)
    if items is None or any(isinstance(v, (str, bytes, bool, np.bool_)) for v in items):
        raise ValueError(f"p_k must be a sequence of numbers, got {p_k!r}"[:200])
    try:
        p = [float(v) for v in items]
    except (TypeError, ValueError):
        raise ValueError(f"p_k must be a sequence of numbers, got {p_k!r}") from None
    if not p or any(v < 0 or not math.isfinite(v) for v in p) or abs(sum(p) - 1.0) > 1e-6:
        raise ValueError(f"p_k must be non-negative weights summing to 1, got {items}")
    return p


def _items(p_k):
    try:
        return list(p_k)
    except TypeError:
        raise ValueError(f"p_k must be a sequence of numbers, got {p_k!r}"[:200]) from None


def check_eps(eps) -> float:
    """The log guard ``eps``: a real number with 0 <= eps < 0.5 (the guard
    is ``log(q * (1 - 2 eps) + eps)``)."""
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise ValueError(f"eps must be a number, got {eps!r}"[:200])
    if not (0 <= float(eps) < 0.5):
        raise ValueError(f"eps must be in [0, 0.5), got {float(eps)}")
    return float(eps)


def check_labels(labels, num_classes: int, device=None) -> torch.Tensor:
    """``labels`` as an int64 tensor of class indices in 0..num_classes-1.
    Float (2.7 or 2.0), complex and boolean labels are refused, never
    truncated; ValueError names the first label out of range (this reads the
    labels on the host: one synchronisation on a GPU)."""
    t = torch.as_tensor(labels, device=device)
    if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
        raise ValueError(f"labels must be integer class indices, got dtype {t.dtype}"
                         + (f" (e.g. {t.reshape(-1)[0].item()!r})" if t.numel() else ""))
    t = t.long()
    if t.numel():
        bad = (t < 0) | (t >= num_classes)
        if bool(bad.any()):
            i = int(bad.reshape(-1).nonzero()[0, 0])
            raise ValueError(f"label {int(t.reshape(-1)[i])} (position {i}) is outside 0..{num_classes - 1}")
    return t


def preselect(scores: torch.Tensor, labels: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The m largest scores of each row, with the true class in place of the
    m-th when missing. Returns ``(sub_scores (B, m), local labels (B,),
    class indices (B, m))``; ``sub_scores`` is differentiable w.r.t. scores."""
    if not 1 <= m <= scores.shape[-1]:
        raise ValueError(f"m must lie in 1..{scores.shape[-1]}, got {m}")
    labels = check_labels(labels, scores.shape[-1], scores.device)
    idx = torch.topk(scores.detach(), m, dim=-1).indices
    hit = idx == labels.unsqueeze(-1)
    missing = ~hit.any(-1)
    idx[missing, m - 1] = labels[missing]
    hit[missing, m - 1] = True
    local = hit.to(torch.int64).argmax(-1)
    return scores.gather(-1, idx), local, idx


class TopKCrossEntropyLoss(torch.nn.Module):
    """Top-k cross-entropy over a netgen layer.

    * ``layer``: any netgen layer with ``n`` = number of classes (or ``m``)
      and ``k >= len(p_k)`` outputs (ranks beyond K are ignored).
    * ``p_k``: weights of k = 1..K, non-negative, summing to 1.
    * ``m``: optional top-m preselection (the layer then has n = m).
    * ``mode``: ``"mix"`` (default) or ``"topk"`` (see the module doc).
    * ``reduction``: ``"mean"``, ``"sum"`` or ``"none"``. An empty batch
      gives a zero loss (``"mean"`` and ``"sum"``, still connected to the
      scores so ``backward`` works) or an empty tensor (``"none"``), never NaN.
    * ``num_classes``: when given, scores must have this many columns.

    Labels must be integer class indices in range (ValueError naming the
    first bad one; float labels are refused, not truncated).
    """

    def __init__(self, layer, p_k: Sequence[float], m: int | None = None, mode: str = "mix",
                 reduction: str = "mean", eps: float = 1e-7, num_classes: int | None = None):
        super().__init__()
        p = check_p_k(p_k)
        eps = check_eps(eps)
        if mode not in ("mix", "topk"):
            raise ValueError(f"mode must be 'mix' or 'topk', got {mode!r}")
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        K = len(p)
        k_layer = getattr(layer, "k", None)
        if k_layer is not None and k_layer < K:
            raise ValueError(f"the layer has k={k_layer} outputs but p_k needs K={K}")
        n_layer = getattr(layer, "n", None)
        if m is not None and n_layer is not None and n_layer != m:
            raise ValueError(f"with top-m preselection the layer must have n = m = {m}, it has n={n_layer}")
        if m is not None and m < K:
            raise ValueError(f"m = {m} must be at least K = len(p_k) = {K}")
        if m is not None and num_classes is not None and m > num_classes:
            raise ValueError(f"m = {m} must be at most num_classes = {num_classes}")
        self.layer, self.p_k, self.m, self.mode, self.reduction, self.eps = layer, p, m, mode, reduction, eps
        self.K, self.num_classes = K, num_classes

    def _column(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if hasattr(self.layer, "column"):
            return self.layer.column(x, y)
        _, P = self.layer(x)
        return torch.gather(P, -1, y.view(-1, 1, 1).expand(-1, P.shape[-2], 1)).squeeze(-1)

    def _log(self, q: torch.Tensor) -> torch.Tensor:
        return torch.log(q * (1 - 2 * self.eps) + self.eps)

    def forward(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if scores.dim() != 2:
            raise ValueError(f"scores must have shape (batch, classes), got {tuple(scores.shape)}")
        C = scores.shape[1]
        if self.num_classes is not None and C != self.num_classes:
            raise ValueError(f"scores have {C} columns but the loss was built for num_classes = {self.num_classes}")
        n_layer = getattr(self.layer, "n", None)
        if self.m is None and n_layer is not None and C != n_layer:
            raise ValueError(f"scores have {C} columns but the layer has n = {n_layer} wires")
        if self.m is not None and C < self.m:
            raise ValueError(f"scores have {C} columns, fewer than m = {self.m}")
        labels = check_labels(labels, C, scores.device)
        if labels.shape != scores.shape[:1]:
            raise ValueError(f"labels must have shape ({scores.shape[0]},), got {tuple(labels.shape)}")
        if scores.shape[0] == 0:  # empty batch: zero loss, not the NaN of mean() over nothing
            empty = scores.sum(-1) * 0.0
            return empty if self.reduction == "none" else empty.sum()
        x, y = scores, labels
        if self.m is not None:
            x, y, _ = preselect(scores, labels, self.m)
        cum = torch.cumsum(self._column(x, y)[:, : self.K], -1)  # c_k, k = 1..K
        w = torch.tensor(self.p_k, dtype=cum.dtype, device=cum.device)
        p1 = self.p_k[0]
        if self.mode == "topk" or p1 == 0.0:
            loss = -self._log((cum * w).sum(-1))
        else:
            ce = torch.nn.functional.cross_entropy(scores, labels, reduction="none")
            loss = p1 * ce
            if p1 < 1.0:
                rest = (cum[:, 1:] * w[1:]).sum(-1) / (1.0 - p1)
                loss = loss - (1.0 - p1) * self._log(rest)
        if self.reduction == "mean":
            return loss.mean()
        if self.reduction == "sum":
            return loss.sum()
        return loss


def __getattr__(name: str):
    # ``netgen.relax.loss.topk_loss``: the old home of :func:`netgen.topk_loss`
    # (it builds a network and a generated layer, which this module, below
    # codegen, cannot import; docs/layout.md). Served from the front door,
    # which is imported before any module of netgen, with a DeprecationWarning.
    if name == "topk_loss":
        import warnings

        from .. import topk_loss

        warnings.warn("netgen.relax.loss.topk_loss moved: import it as netgen.topk_loss", DeprecationWarning,
                      stacklevel=2)
        return topk_loss
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
