"""The comparator DAG as graphviz ``dot`` source, and rendering it with the
``dot`` binary.

Nodes: one per input wire (left), one per comparator ("max a / min b",
comparators of one layer in one column), one per wire end (right; outputs
are green and named by their rank). An edge carries a wire from one
comparator to the next comparator on that wire and is labelled with the
wire number. This is the same graph as :meth:`Network.to_networkx`.
"""

from __future__ import annotations

import shutil
import subprocess

from ..network import Network
from ..text import MAX_SHOWN, dot_string, printable

MAX_RENDER_COMPARATORS = 3000  # dot layout time grows quickly beyond this
INSTALL_HINT = "install graphviz (apt-get install graphviz, or brew install graphviz on macOS)"


class DotMissing(RuntimeError):
    """The graphviz ``dot`` binary is not on PATH."""


def to_dot(net: Network) -> str:
    """dot source of the comparator DAG (deterministic for a network)."""
    n = net.n
    rank_of = {w: r for r, w in enumerate(net.outputs)}
    kind = net.construction.get("kind", "network")
    label = dot_string(f"{printable(kind, MAX_SHOWN)} n={n} k={net.k} depth={net.depth} size={net.size}", limit=None)
    lines = [
        "digraph comparators {",
        f'  label={label}; labelloc=t; fontsize=12; fontname="Helvetica";',
        "  rankdir=LR; nodesep=0.12; ranksep=0.35;",
        '  node [fontname="Helvetica", fontsize=9, height=0.25, margin="0.04,0.02"];',
        '  edge [fontname="Helvetica", fontsize=7, arrowsize=0.5, color="#555555"];',
    ]
    lines.append("  { rank=source; " + " ".join(f'in{w} [shape=plaintext, label="{w}"];' for w in range(n)) + " }")
    last = [f"in{w}" for w in range(n)]
    edges: list[str] = []
    for l in range(net.depth):
        o = int(net.layer_offsets[l])
        nodes = []
        for j, (a, b) in enumerate(net.layer(l).tolist()):
            c = f"c{o + j}"
            nodes.append(f'{c} [shape=box, style="rounded,filled", fillcolor="#eef1f8", '
                         f'label="max {a}\\nmin {b}", tooltip="layer {l + 1}"];')
            for w in (a, b):
                edges.append(f'  {last[w]} -> {c} [label="{w}"];')
                last[w] = c
        lines.append("  { rank=same; " + " ".join(nodes) + " }")
    ends = []
    for w in range(n):
        if w in rank_of:
            ends.append(f'out{w} [shape=box, style=filled, fillcolor="#c8e6c9", color="#1a7f37", '
                        f'label="rank {rank_of[w]}\\n(wire {w})"];')
        else:
            ends.append(f'out{w} [shape=plaintext, fontcolor="#999999", label="{w}"];')
        style = "" if w in rank_of else ', style=dashed, color="#bbbbbb"'
        edges.append(f'  {last[w]} -> out{w} [label="{w}"{style}];')
    lines.append("  { rank=sink; " + " ".join(ends) + " }")
    # keep inputs and wire ends in wire order (top to bottom)
    if n > 1:
        lines.append("  " + " -> ".join(f"in{w}" for w in range(n)) + " [style=invis];")
        lines.append("  " + " -> ".join(f"out{w}" for w in range(n)) + " [style=invis];")
    lines.extend(edges)
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_binary() -> str:
    """Path of graphviz ``dot``; raises :class:`DotMissing` if absent."""
    exe = shutil.which("dot")
    if exe is None:
        raise DotMissing(f"the graphviz 'dot' binary was not found on PATH; {INSTALL_HINT}, "
                         "or write dot source with -o FILE.dot")
    return exe


def render_dot(source: str, path, fmt: str, timeout: float = 300.0) -> None:
    """Run ``dot -T<fmt>`` on ``source`` and write ``path``."""
    exe = dot_binary()
    proc = subprocess.run([exe, f"-T{fmt}", "-o", str(path)], input=source.encode(),
                          capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"dot failed (exit {proc.returncode}): {msg[-1] if msg else 'no message'}")


def check_renderable(net: Network) -> None:
    if net.size > MAX_RENDER_COMPARATORS:
        raise ValueError(
            f"the comparator DAG has {net.size} comparators; graphviz layout is limited to "
            f"{MAX_RENDER_COMPARATORS} (write dot source with -o FILE.dot, or use the summary view)"
        )


__all__ = ["to_dot", "render_dot", "dot_binary", "DotMissing", "check_renderable"]
