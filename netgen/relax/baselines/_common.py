"""Input checks and small helpers shared by the baseline backends."""

from __future__ import annotations

import torch


def check_scores(x, k: int | None = None, name: str = "x") -> tuple[int, int | None]:
    """Validate a score tensor of shape ``(..., n)`` and an optional k.

    Returns ``(n, k)``. Raises ``ValueError`` naming the problem."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"{name} must be float32 or float64, got {x.dtype}")
    if x.dim() < 1:
        raise ValueError(f"{name} must have shape (..., n) with at least one dimension")
    n = x.shape[-1]
    if n < 1:
        raise ValueError(f"{name} has n = 0 columns")
    if k is not None:
        check_k(k, n)
    return n, k


def check_k(k, n: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int):
        raise ValueError(f"k must be an int, got {k!r}")
    if not 1 <= k <= n:
        raise ValueError(f"k must satisfy 1 <= k <= n = {n}, got k = {k}")


def check_positive(value, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {value!r}") from None
    if not v > 0 or v != v or v == float("inf"):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return v


def apply_rows(P: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Soft values ``P @ x`` for ``P (..., k, n)`` and ``x (..., n)``."""
    return torch.matmul(P, x.unsqueeze(-1)).squeeze(-1)


def straight_through(P: torch.Tensor) -> torch.Tensor:
    """``hard=True`` of SoftSort and NeuralSort (both authors' code): the
    forward value is the one-hot of each row's argmax, the gradient is the
    soft P's (straight-through: ``hard - P.detach() + P``)."""
    hard = torch.zeros_like(P).scatter(-1, P.argmax(-1, keepdim=True), 1.0)
    return (hard - P).detach() + P
