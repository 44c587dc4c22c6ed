"""The result of a verification: what was shown, by which method, how fast."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

STATUSES = ("proved", "counterexample", "sampled")
#: values of a counterexample shown in its one line (``to_dict`` has them all)
SHOWN_VALUES = 64


@dataclass(frozen=True)
class Report:
    """``status`` is ``"proved"`` (by a complete method), ``"counterexample"``
    (``counterexample`` is a length-n input the network gets wrong; replay it
    with ``net.select``) or ``"sampled"`` (``checked`` random inputs passed,
    nothing proved). ``fires[i]`` says whether comparator i swaps on some
    relevant 0-1 input (known only from complete methods)."""

    status: str
    method: str
    seconds: float
    checked: int | None = None
    counterexample: list | None = None
    fires: np.ndarray | None = field(default=None, repr=False, compare=False)
    detail: str | None = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown verification status {self.status!r}")

    @property
    def proved(self) -> bool:
        return self.status == "proved"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "status": self.status,
            "method": self.method,
            "seconds": round(float(self.seconds), 6),
            "checked": self.checked,
        }
        if self.counterexample is not None:
            d["counterexample"] = list(self.counterexample)
        if self.fires is not None:
            d["never_fire"] = int((~np.asarray(self.fires, dtype=bool)).sum())
        if self.detail:
            d["detail"] = self.detail
        d["summary"] = str(self)
        return d

    def __str__(self) -> str:
        if self.status == "proved":
            return f"proved ({self.method})"
        if self.status == "sampled":
            return f"sampled {self.checked} inputs, not proved"
        values = list(self.counterexample or [])
        if len(values) <= SHOWN_VALUES:
            return f"counterexample: {values}"
        shown = ", ".join(map(str, values[:SHOWN_VALUES]))
        return f"counterexample: [{shown}, ...] ({len(values):,} values; --json gives them all)"
