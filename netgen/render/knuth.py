"""Knuth diagram of a comparator network (matplotlib, no pyplot state).

* wires are horizontal lines, wire 0 on top, labelled on the left;
* a comparator (a, b) is a vertical bar with a dot on each wire and an
  arrow head on the max wire a (as in the DiffTopK paper's figures);
* layers are alternating shaded bands, labelled L1, L2, ... on top;
  comparators of one layer whose bars would overlap are set side by side;
* output wires are drawn in green after their last comparator and labelled
  with their rank on the right; other wires turn grey (dashed) after their
  last comparator;
* with ``min_ranks=True`` (see :mod:`netgen.render.minrank`): the minimum
  rank of each wire at the start and wherever it changes after a layer,
  a red cross where a wire is discarded (minimum rank >= k) and a green
  check mark where a rank is fixed on its wire for good.
"""

from __future__ import annotations

import numpy as np

from ..network import Network
from ..text import plain_text

# geometry in data units (wire spacing = 1)
COL = 0.55  # between two sub-columns of one layer
PAD = 0.45  # band padding on each side of a layer
LABEL_ROOM = 0.75  # extra room after each layer for minimum-rank labels
INCH_X = 0.42  # inches per data unit, horizontally
INCH_Y = 0.30  # inches per wire
MAX_INCHES = 300.0  # refuse pictures larger than this (use the summary view)

C_COMP = "#1f3b73"
C_WIRE = "#222222"
C_DEAD = "#b5b5b5"
C_OUT = "#1a7f37"
C_RANK = "#6a3d9a"
C_DROP = "#d62728"
BAND = ("#eef1f8", "#ffffff")


def layout(net: Network, label_room: float = 0.0):
    """x position of every comparator and the [x0, x1] extent of every
    layer. Within a layer, comparators go into the first sub-column where
    their bar does not overlap another bar (first-fit by top wire, which is
    an optimal interval colouring)."""
    xs = np.zeros(net.size)
    extents = []
    x = 0.0
    for l in range(net.depth):
        o = int(net.layer_offsets[l])
        comps = net.layer(l)
        lo = np.minimum(comps[:, 0], comps[:, 1])
        hi = np.maximum(comps[:, 0], comps[:, 1])
        col_end: list[int] = []  # last wire covered in each sub-column
        col = np.zeros(len(comps), dtype=int)
        for i in np.argsort(lo, kind="stable").tolist():
            for c, end in enumerate(col_end):
                if end < lo[i]:
                    col_end[c] = int(hi[i])
                    col[i] = c
                    break
            else:
                col_end.append(int(hi[i]))
                col[i] = len(col_end) - 1
        width = (len(col_end) - 1) * COL
        x0 = x
        xs[o : o + len(comps)] = x0 + PAD + col * COL
        x1 = x0 + PAD + width + PAD + label_room
        extents.append((x0, x1))
        x = x1
    return xs, extents


def figure_size(net: Network, min_ranks: bool = False) -> tuple[float, float]:
    """Figure size in inches for the full diagram."""
    _, ext = layout(net, LABEL_ROOM if min_ranks else 0.0)
    width_units = (ext[-1][1] if ext else 1.0) + 2.6
    return 1.0 + width_units * INCH_X, 1.2 + (net.n + 1.5) * INCH_Y


def draw(net: Network, path, fmt: str, *, min_ranks: bool = False, title: str | None = None, dpi: int = 150) -> None:
    """Draw the Knuth diagram of ``net`` into ``path`` (format ``fmt``:
    png, svg or pdf)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    w_in, h_in = figure_size(net, min_ranks)
    if max(w_in, h_in) > MAX_INCHES:
        raise ValueError(
            f"a full diagram of this network would be {w_in:.0f} x {h_in:.0f} inches "
            f"(n={net.n}, {net.size} comparators); use --summary"
        )
    mr = None
    if min_ranks:
        from .minrank import min_ranks as compute

        mr = compute(net)

    xs, ext = layout(net, LABEL_ROOM if min_ranks else 0.0)
    x_start = -0.3
    x_end = (ext[-1][1] if ext else 0.0) + 0.3
    n, k = net.n, net.k
    y = lambda w: -float(w)  # noqa: E731  wire 0 on top

    fig = Figure(figsize=(w_in, h_in))
    ax = fig.add_axes([0.0, 0.0, 1.0, 1.0])
    ax.set_axis_off()

    # layer bands and labels
    fs_layer = 7 if net.depth < 60 else 5
    for l, (x0, x1) in enumerate(ext):
        ax.axvspan(x0, x1, color=BAND[l % 2], zorder=0, lw=0)
        ax.text((x0 + x1) / 2, 0.85, f"L{l + 1}", ha="center", va="bottom", fontsize=fs_layer, color="#555555")

    # wires: black up to the last comparator, then green (output) or grey
    last_x = np.full(n, x_start)
    for i, (a, b) in enumerate(net.comparators.tolist()):
        last_x[a] = max(last_x[a], xs[i])
        last_x[b] = max(last_x[b], xs[i])
    rank_of = {w: r for r, w in enumerate(net.outputs)}
    for w in range(n):
        ax.plot([x_start, last_x[w]], [y(w)] * 2, color=C_WIRE, lw=0.9, zorder=1, solid_capstyle="butt")
        if w in rank_of:
            ax.plot([last_x[w], x_end], [y(w)] * 2, color=C_OUT, lw=2.2, zorder=1, solid_capstyle="butt")
        else:
            ax.plot([last_x[w], x_end], [y(w)] * 2, color=C_DEAD, lw=0.8, ls=(0, (3, 2)), zorder=1)
        ax.text(x_start - 0.15, y(w), str(w), ha="right", va="center", fontsize=8, color=C_WIRE)
        if w in rank_of:
            ax.text(x_end + 0.15, y(w), f"rank {rank_of[w]}", ha="left", va="center", fontsize=8,
                    color=C_OUT, fontweight="bold")

    # comparators: bar, dots at both ends, arrow head at the max wire
    for i, (a, b) in enumerate(net.comparators.tolist()):
        x = xs[i]
        ax.plot([x, x], [y(a), y(b)], color=C_COMP, lw=1.4, zorder=3, solid_capstyle="butt")
        ax.plot([x, x], [y(a), y(b)], ls="none", marker="o", ms=3.6, color=C_COMP, zorder=4)
        up = y(a) > y(b)
        ax.plot([x], [y(a) + (-0.22 if up else 0.22)], ls="none", marker="^" if up else "v",
                ms=6.5, color=C_COMP, zorder=5)

    if mr is not None:
        _draw_min_ranks(ax, net, mr, ext, x_start, y)

    # title and a legend line
    kind = plain_text(net.construction.get("kind", "network"))
    head = plain_text(title, None) if title else f"{kind}  n={n}  k={k}  depth={net.depth}  size={net.size}"
    ax.text(x_start - 0.6, 1.75, head, ha="left", va="bottom", fontsize=10, fontweight="bold", parse_math=False)
    handles = [
        Line2D([], [], color=C_COMP, marker="^", ms=6, lw=1.4, label="comparator (arrow: max side)"),
        Line2D([], [], color=C_OUT, lw=2.2, label="output wire"),
        Line2D([], [], color=C_DEAD, lw=0.8, ls=(0, (3, 2)), label="wire unused after last comparator"),
    ]
    if mr is not None:
        handles.append(Line2D([], [], color=C_RANK, marker="$2$", ls="none", ms=6, label="minimum rank (0 = largest)"))
        if mr.discarded_at():
            handles.append(Line2D([], [], color=C_DROP, marker="x", ls="none", ms=6, mew=2,
                                  label=f"discarded (min rank >= k={k})"))
        if mr.determined_at():
            handles.append(Line2D([], [], color=C_OUT, marker="$\u2713$", ls="none", ms=8,
                                  label="rank fixed on this wire"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, 0.0), ncol=3, fontsize=7,
              frameon=False, bbox_transform=ax.transData)
    ax.set_xlim(x_start - 0.9, x_end + 1.6)
    ax.set_ylim(-(n - 1) - 1.4 - (0.5 if mr is not None else 0.0), 2.3)
    # place the legend just below the last wire
    ax.get_legend().set_bbox_to_anchor((x_start - 0.6, -(n - 1) - 0.35), transform=ax.transData)
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):  # real, searchable text
        fig.savefig(path, format=fmt, dpi=dpi)


def _draw_min_ranks(ax, net: Network, mr, ext, x_start: float, y) -> None:
    k = net.k
    ranks = mr.ranks
    dropped = mr.discarded_at()
    fixed = {w: (r, t) for r, (w, t) in mr.determined_at().items()}
    style = dict(ha="left", va="bottom", fontsize=7, color=C_RANK, zorder=6)
    for w in range(net.n):
        ax.text(x_start + 0.02, y(w) + 0.06, str(int(ranks[0, w])), **style)
    for t in range(1, net.depth + 1):
        xl = ext[t - 1][1] - LABEL_ROOM + 0.12
        for w in np.flatnonzero(ranks[t] != ranks[t - 1]).tolist():
            if dropped.get(w) == t:
                ax.plot([xl + 0.18], [y(w)], ls="none", marker="x", ms=7, mew=2.0, color=C_DROP, zorder=7)
            elif ranks[t, w] < k:
                ax.text(xl, y(w) + 0.06, str(int(ranks[t, w])), **style)
        for w, (r, tf) in fixed.items():
            if tf == t:
                ax.text(xl + 0.36, y(w) + 0.06, "\u2713", ha="left", va="bottom", fontsize=9,
                        color=C_OUT, fontweight="bold", zorder=7)
