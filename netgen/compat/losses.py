"""difftopk's ``TopKCrossEntropyLoss`` (every ``diffsort_method`` and
``top1_mode``), with difftopk's arguments and values (the smooth top-k SVM
losses are in :mod:`netgen.compat.smooth`).

``TopKCrossEntropyLoss`` over a sorting network needs only the column of
the true class, ``c_k = sum_{r<k} P[r, y]``: it calls the generated layer's
``column`` (O(size) work per sample, no (n, k) matrix), then

* ``'sort'``: ``L = -log(sum_k p_k c_k)``;
* ``'sm'``: ``L = -log(p_1 softmax(s)_y + sum_{k>=2} p_k c_k)`` (difftopk's default);
* ``'smce'``: ``L = p_1 CE(s, y) - (sum_{k>=2} p_k) log(sum_{k>=2} p_k c_k)``;

each ``log`` guarded as ``log(q (1 - 2e-7) + 1e-7)``, batch-averaged.
Top-m preselection (``m``) keeps the true class first and the m-1 largest
other scores, as difftopk does. ``distribution=None`` means cauchy
(difftopk passes None to its network, which then fails)."""

from __future__ import annotations

import math

import torch

from .nets import DiffTopkNet
from .sorts import NeuralSort, SoftSort

TOP1_MODES = ("sm", "smce", "sort")
_NETWORK_METHODS = {
    "bitonic": ("bitonic", True),
    "splitter_selection": ("splitter_selection", True),
    "bitonic__non_sparse": ("bitonic", False),
    "odd_even": ("odd_even", False),
}
_EPS = 1e-7


def _log(q):
    return torch.log(q * (1 - 2 * _EPS) + _EPS)


def preselect_true_first(outputs: torch.Tensor, labels: torch.Tensor, m: int):
    """difftopk's top-m selection: the true class's score first, then the
    m-1 largest other scores (labels become 0)."""
    B, n = outputs.shape
    others = torch.arange(n, device=outputs.device).unsqueeze(0) != labels.unsqueeze(1)
    rest = outputs[others].reshape(B, n - 1)
    top = rest.gather(1, torch.topk(rest.detach(), m - 1, dim=-1).indices)
    true = outputs.gather(1, labels.unsqueeze(1))
    return torch.cat([true, top], dim=1), torch.zeros_like(labels)


class _AscendingSoftSort(SoftSort):
    """SoftSort of -x, transposed: ``[b, i, r]`` with ranks ascending."""

    def forward(self, scores):
        return super().forward(-scores).transpose(-2, -1)


class TopKCrossEntropyLoss(torch.nn.Module):
    def __init__(
        self,
        diffsort_method: str,
        inverse_temperature: float,
        p_k,
        n: int,
        m: int = None,
        distribution: str = None,
        art_lambda: float = 0.25,
        device: str = "cpu",
        top1_mode: str = "sm",
        *,
        check_finite: bool = False,
    ):
        super().__init__()
        p = [float(v) for v in p_k]
        if not p or not all(math.isfinite(v) and v >= 0 for v in p) or not 0.9999 < sum(p) < 1.0001:
            raise ValueError(f"p_k must be non-negative weights summing to 1, got {list(p_k)}")
        if top1_mode not in TOP1_MODES:
            raise ValueError(f"top1_mode must be one of {', '.join(map(repr, TOP1_MODES))}, got {top1_mode!r}")
        self.diffsort_method = diffsort_method
        self.inverse_temperature = inverse_temperature
        self.p_k = p_k
        self.k = len(p)
        self.device = device
        self.top1_mode = top1_mode
        self.n = n
        self.m = m
        if m is not None and not self.k < m < n:
            raise ValueError(f"m must satisfy k < m < n (k={self.k}, n={n}), got m={m}")
        num_inputs = n if m is None else m
        if diffsort_method in _NETWORK_METHODS:
            kind, sparse = _NETWORK_METHODS[diffsort_method]
            self.top_k_net = DiffTopkNet(kind, num_inputs, self.k, sparse=sparse, device=device,
                                         steepness=inverse_temperature, art_lambda=art_lambda,
                                         distribution=distribution, check_finite=check_finite)
        elif diffsort_method == "neuralsort":
            self.sort_fn = NeuralSort(tau=1 / inverse_temperature)
        elif diffsort_method == "softsort":
            self.sort_fn = _AscendingSoftSort(tau=1 / inverse_temperature)
        else:
            raise ValueError(
                f"unknown diffsort_method {diffsort_method!r}; choose one of "
                f"{', '.join(map(repr, [*_NETWORK_METHODS, 'neuralsort', 'softsort']))}")

    def _cum(self, outputs, labels):
        """(B, K): c_k = P(true class among the top k), k = 1..K."""
        if self.diffsort_method in _NETWORK_METHODS:
            col = self.top_k_net._run(outputs, labels)  # (B, k): ranks 0, 1, ...
            return torch.cumsum(col, -1)
        X = self.sort_fn(outputs)  # [b, i, r], ranks ascending
        rows = X[torch.arange(X.shape[0], device=X.device), labels, -self.k:]  # (B, K) ascending
        return torch.cumsum(rows.flip(-1), -1)

    def forward(self, outputs, labels):
        if not isinstance(outputs, torch.Tensor) or outputs.dim() != 2:
            raise ValueError(f"outputs must be a (batch, classes) tensor, got {getattr(outputs, 'shape', None)}")
        labels = torch.as_tensor(labels, device=outputs.device).long()
        if labels.shape != outputs.shape[:1]:
            raise ValueError(f"labels must have shape ({outputs.shape[0]},), got {tuple(labels.shape)}")
        if self.m is not None:
            outputs, labels = preselect_true_first(outputs, labels, self.m)
        cum = self._cum(outputs, labels)
        w = torch.tensor([float(v) for v in self.p_k], dtype=cum.dtype, device=cum.device)
        if self.top1_mode == "sort":
            return (-_log((cum * w).sum(-1))).mean()
        rest = (cum[:, 1:] * w[1:]).sum(-1)
        if self.top1_mode == "sm":
            sm = torch.softmax(outputs, dim=-1).gather(1, labels.unsqueeze(1)).squeeze(1)
            return (-_log(w[0] * sm + rest)).mean()
        ce = torch.nn.functional.cross_entropy(outputs, labels)
        return float(self.p_k[0]) * ce + float(sum(self.p_k[1:])) * (-_log(rest)).mean()
