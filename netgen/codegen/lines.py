"""A small line builder for emitting readable Python source (in the spirit of
torch.fx's code generator: the emitter states the program line by line and
the builder tracks indentation, so the output is plain, PEP 8-shaped code).

    L = Lines()
    with L.block("def f(x):"):
        L("return x + 1")
    L.render()  ->  "def f(x):\\n    return x + 1\\n"

Also: :func:`literal` (re-exported from :mod:`.literals`, the one literal
writer) and :func:`blob_lines`
(compact base64/zlib storage of integer arrays, so a network with 10^6
comparators emits a few MB of text, not tens of MB of list literals).
"""

from __future__ import annotations

import base64
import textwrap
import zlib
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from .literals import literal  # noqa: F401  (the one literal writer; kept importable here)

__all__ = ["Lines", "literal", "blob_lines", "pack_int32", "pack_comparators"]


class Lines:
    """Accumulates source lines with an indentation level."""

    def __init__(self, indent: str = "    ") -> None:
        self._lines: list[str] = []
        self._level = 0
        self._indent = indent

    def __call__(self, *lines: str) -> "Lines":
        """Append lines (each may itself contain newlines) at the current
        indentation; an empty string gives a blank line."""
        for text in lines:
            for line in text.split("\n"):
                self._lines.append(self._indent * self._level + line if line.strip() else "")
        return self

    def blank(self, count: int = 1) -> "Lines":
        self._lines.extend([""] * count)
        return self

    def text(self, snippet: str) -> "Lines":
        """Append a multi-line snippet, dedented, at the current indentation."""
        return self(textwrap.dedent(snippet).strip("\n"))

    def comment(self, text: str, width: int = 79) -> "Lines":
        pad = len(self._indent * self._level) + 2
        for line in textwrap.wrap(text, max(20, width - pad)) or [""]:
            self("# " + line)
        return self

    @contextmanager
    def block(self, header: str) -> Iterator["Lines"]:
        """``header`` (ending in ':') followed by an indented body."""
        self(header)
        self._level += 1
        try:
            yield self
        finally:
            self._level -= 1

    @contextmanager
    def indented(self) -> Iterator["Lines"]:
        self._level += 1
        try:
            yield self
        finally:
            self._level -= 1

    def render(self) -> str:
        out = list(self._lines)
        while out and out[-1] == "":
            out.pop()
        return "\n".join(out) + "\n"


def pack_int32(*arrays: np.ndarray) -> bytes:
    """Concatenate integer arrays as little-endian int32 and zlib-compress
    (level 9, deterministic)."""
    flat = [np.ascontiguousarray(np.asarray(a).reshape(-1), dtype="<i4") for a in arrays]
    raw = b"".join(a.tobytes() for a in flat)
    return zlib.compress(raw, 9)


def pack_comparators(comparators: np.ndarray, outputs) -> bytes:
    """Compact form of a comparator list plus outputs: int32 deltas of the
    max wires (``a``), then ``b - a``, then the outputs, zlib-compressed.
    Structured networks compress to a few bytes per hundred comparators.
    Decode with ``a = cumsum(da)``, ``b = a + dba``."""
    c = np.asarray(comparators, dtype=np.int64).reshape(-1, 2)
    a = c[:, 0]
    da = np.diff(a, prepend=0)
    return pack_int32(da, c[:, 1] - a, np.asarray(outputs, dtype=np.int64))


def blob_lines(data: bytes, width: int = 76) -> list[str]:
    """``data`` as base64, split into quoted string-literal lines."""
    text = base64.b64encode(data).decode("ascii")
    return [repr(text[i : i + width]) for i in range(0, len(text), width)] or ["''"]
