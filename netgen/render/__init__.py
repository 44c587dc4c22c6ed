"""Pictures of comparator networks.

Views, one module each:

* :mod:`netgen.render.knuth`: the Knuth diagram (wires and comparators),
  optionally with exact minimum ranks (:mod:`netgen.render.minrank`);
* :mod:`netgen.render.dag`: the comparator DAG as graphviz dot source, laid
  out by the ``dot`` binary for svg/png/pdf;
* :mod:`netgen.render.summary`: per-layer counts and wire activity, for
  networks too large to draw comparator by comparator.

:func:`render` picks the view: a ``.dot`` path always gets the DAG source;
``dag=True`` lays the DAG out with graphviz; otherwise the Knuth diagram
when the network has at most ``FULL_MAX_WIRES`` wires and
``FULL_MAX_COMPARATORS`` comparators, else the summary view (force either
with ``view="full"`` / ``view="summary"``).
"""

from __future__ import annotations

from pathlib import Path

from ..io import atomic_write
from ..network import Network
from .dag import DotMissing

FULL_MAX_WIRES = 64
FULL_MAX_COMPARATORS = 1500
FORMATS = ("svg", "png", "pdf", "dot")
VIEWS = ("auto", "full", "summary")


def output_format(path) -> str:
    """The format named by the path's suffix (svg, png, pdf or dot)."""
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"cannot tell the output format from {str(path)!r}: use a .svg, .png, .pdf or .dot file")
    return fmt


def choose_view(net: Network, view: str = "auto") -> str:
    """``"knuth"`` or ``"summary"`` for a picture of ``net``."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}; expected one of {', '.join(VIEWS)}")
    if view == "full":
        return "knuth"
    if view == "summary":
        return "summary"
    small = net.n <= FULL_MAX_WIRES and net.size <= FULL_MAX_COMPARATORS
    return "knuth" if small else "summary"


def render(net: Network, path, *, view: str = "auto", dag: bool = False, min_ranks: bool = False,
           title: str | None = None) -> str:
    """Write a picture of ``net`` to ``path`` (format from the suffix) and
    return the view used: ``"knuth"``, ``"summary"``, ``"dag"`` (laid out by
    graphviz) or ``"dot"`` (dot source). Written atomically. Raises
    ValueError on bad arguments and :class:`DotMissing` when graphviz is
    needed but not installed."""
    fmt = output_format(path)
    if fmt == "dot":
        from .dag import to_dot

        atomic_write(path, lambda tmp: Path(tmp).write_text(to_dot(net), encoding="utf-8"))
        return "dot"
    if dag:
        from .dag import check_renderable, dot_binary, render_dot, to_dot

        dot_binary()
        check_renderable(net)
        src = to_dot(net)
        atomic_write(path, lambda tmp: render_dot(src, tmp, fmt))
        return "dag"
    chosen = choose_view(net, view)
    from ..extras import require

    require("matplotlib", f"drawing a {fmt} file")
    if chosen == "knuth":
        from . import knuth

        atomic_write(path, lambda tmp: knuth.draw(net, tmp, fmt, min_ranks=min_ranks, title=title))
    else:
        from . import summary

        atomic_write(path, lambda tmp: summary.draw(net, tmp, fmt, title=title))
    return chosen


__all__ = ["render", "choose_view", "output_format", "DotMissing", "FULL_MAX_WIRES", "FULL_MAX_COMPARATORS"]
