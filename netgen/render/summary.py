"""Summary view for networks too large to draw comparator by comparator.

Three panels over the layers:

1. comparators per layer (bars, log scale, counts written on the bars);
2. live wires per layer: wires that still meet a comparator in this or a
   later layer, plus the output wires (log scale; the k outputs as a line);
3. where the work happens: wires grouped into at most ``MAX_BINS`` bins (wire
   0 on top); colour = fraction of the bin's wires touched by a comparator
   in that layer; grey = every wire of the bin is dead (no comparator left
   and not an output).
"""

from __future__ import annotations

import numpy as np

from ..network import Network
from ..text import plain_text

MAX_BINS = 160


def layer_stats(net: Network) -> dict[str, np.ndarray]:
    """Per-layer numbers: ``comparators`` (depth,), ``live`` (depth,) live
    wires at each layer (see module docstring), ``touched`` (depth,) wires
    used by a comparator of the layer."""
    sizes = np.diff(net.layer_offsets)
    last = np.full(net.n, -1, dtype=np.int64)  # last layer using each wire
    lay = net.layer_of()
    if net.size:
        np.maximum.at(last, net.comparators[:, 0], lay)
        np.maximum.at(last, net.comparators[:, 1], lay)
    last[list(net.outputs)] = net.depth  # outputs stay live to the end
    # live[l] = #wires with last >= l
    hist = np.bincount(np.clip(last, 0, None)[last >= 0], minlength=net.depth + 1)
    live = np.cumsum(hist[::-1])[::-1][: net.depth]
    return {"comparators": sizes, "live": live, "touched": 2 * sizes, "last_layer": last}


def activity(net: Network, bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(frac, dead, edges)``: ``frac[b, l]`` fraction of wires of bin b
    touched in layer l; ``dead[b, l]`` True when all wires of bin b are dead
    at layer l; ``edges`` the bin boundaries (wire numbers)."""
    edges = np.linspace(0, net.n, bins + 1).round().astype(np.int64)
    width = np.diff(edges)
    bin_of = np.searchsorted(edges, np.arange(net.n), side="right") - 1
    lay = net.layer_of()
    counts = np.zeros((bins, max(net.depth, 1)))
    if net.size:
        for col in (0, 1):
            np.add.at(counts, (bin_of[net.comparators[:, col]], lay), 1)
    frac = counts / width[:, None]
    last = layer_stats(net)["last_layer"]
    bin_last = np.full(bins, -1)
    np.maximum.at(bin_last, bin_of, last)
    dead = np.arange(max(net.depth, 1))[None, :] > bin_last[:, None]
    return frac, dead, edges


def draw(net: Network, path, fmt: str, *, title: str | None = None, dpi: int = 150) -> None:
    """Draw the summary view of ``net`` into ``path``."""
    from matplotlib.colors import LogNorm
    from matplotlib.figure import Figure

    st = layer_stats(net)
    depth = net.depth
    layers = np.arange(1, depth + 1)
    bins = min(net.n, MAX_BINS)
    frac, dead, edges = activity(net, bins)

    fig = Figure(figsize=(max(7.5, 2.5 + 0.28 * depth), 9.0), layout="constrained")
    axs = fig.subplots(3, 1, sharex=True, height_ratios=[1.0, 1.0, 1.6])
    kind = plain_text(net.construction.get("kind", "network"))
    fig.suptitle(plain_text(title, None) if title else
                 f"{kind}  n={net.n}  k={net.k}  depth={depth}  size={net.size:,}  (summary view)", parse_math=False,
                 fontsize=11, fontweight="bold")

    ax = axs[0]
    ax.bar(layers, st["comparators"], color="#1f3b73", width=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("comparators")
    ax.set_title("comparators per layer", fontsize=9, loc="left")
    if depth <= 80:
        for x, c in zip(layers, st["comparators"]):
            ax.text(x, c * 1.08, f"{c:,}", ha="center", va="bottom", fontsize=6, rotation=90 if depth > 30 else 0)
    ax.set_ylim(0.7, max(2, st["comparators"].max(initial=0)) * 6)
    ax.grid(axis="y", alpha=0.3)

    ax = axs[1]
    ax.step(layers, st["live"], where="mid", color="#6a3d9a", lw=1.8, label="live wires")
    ax.plot(layers, st["touched"], ls="none", marker=".", color="#1f3b73", ms=4, label="wires used in the layer")
    ax.axhline(net.k, color="#1a7f37", lw=1.0, ls="--", label=f"k = {net.k} outputs")
    ax.set_yscale("log")
    ax.set_ylabel("wires")
    ax.set_ylim(0.7, net.n * 2)
    ax.set_title("live wires per layer (a comparator still ahead, or an output)", fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(axis="y", alpha=0.3)

    ax = axs[2]
    shown = np.ma.masked_where(frac <= 0, frac)
    cmap = _cmap()
    img = ax.imshow(shown, aspect="auto", interpolation="nearest", cmap=cmap,
                    norm=LogNorm(vmin=max(frac[frac > 0].min(), 1e-4) if (frac > 0).any() else 1e-4, vmax=1.0),
                    extent=(0.5, max(depth, 1) + 0.5, net.n - 0.5, -0.5))
    ax.imshow(np.ma.masked_where(~dead, np.ones_like(frac)), aspect="auto", interpolation="nearest",
              cmap=_grey(), vmin=0, vmax=1, extent=(0.5, max(depth, 1) + 0.5, net.n - 0.5, -0.5))
    for r, w in enumerate(net.outputs[:20]):
        ax.plot([max(depth, 1) + 0.5], [w], marker="<", color="#1a7f37", ms=5, clip_on=False)
    ax.set_ylabel(f"wire (grouped into {bins} bins)" if bins < net.n else "wire")
    ax.set_xlabel("layer")
    ax.set_title("fraction of each wire group used per layer (white: live but idle; grey: all dead; green marks: outputs)",
                 fontsize=9, loc="left")
    fig.colorbar(img, ax=ax, shrink=0.8, label="fraction used")
    if depth <= 60:
        ax.set_xticks(layers)
        ax.tick_params(axis="x", labelsize=7)
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):  # real, searchable text
        fig.savefig(path, format=fmt, dpi=dpi)


def _cmap():
    import matplotlib

    return matplotlib.colormaps["viridis"]


def _grey():
    from matplotlib.colors import ListedColormap

    return ListedColormap(["#d9d9d9"])
