"""Text that leaves netgen: strings from network files (a construction's
kind, file names) made inert for where they go.

* :func:`printable`: one line for a terminal or a message, control
  characters, bidirectional overrides and lone surrogates shown as Python
  escapes, cut to a length;
* :func:`dot_string`: a graphviz quoted string (nothing in it can close the
  quote, add an attribute or use a label escape such as ``\\N``);
* :func:`plain_text`: text matplotlib draws as written (``$`` is not math).

Imports nothing of netgen (layer *base*, docs/layout.md).
"""

from __future__ import annotations

__all__ = ["printable", "dot_string", "plain_text", "MAX_SHOWN"]

#: characters of a string from a file shown in a message or a title
MAX_SHOWN = 80


def printable(text: object, limit: int | None = None) -> str:
    """``text`` as one inert printable line: every character that is not
    printable (terminal escape sequences, newlines, NUL, DEL, C1 controls,
    U+2028, bidirectional overrides, lone surrogates) shown as its Python
    escape; cut to ``limit`` characters with "..." (None: not cut)."""
    text = str(text)
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] if ch not in "'\"" else ch
                       for ch in text)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 3, 0)] + "..."
    return text


def dot_string(text: object, limit: int | None = MAX_SHOWN) -> str:
    """``text`` as a graphviz double-quoted string, quotes included: shown
    printable (:func:`printable`), then backslashes and double quotes
    escaped, so the string ends where it should and no escape such as
    ``\\N`` or ``\\G`` is expanded by graphviz."""
    body = printable(text, limit).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{body}"'


def plain_text(text: object, limit: int | None = MAX_SHOWN) -> str:
    """``text`` printable and cut; pass it to matplotlib with
    ``parse_math=False`` so ``$...$`` is drawn as written."""
    return printable(text, limit)
