"""Each view renders (png/svg/pdf/dot) with the content it promises."""

from __future__ import annotations

import re
import shutil

import numpy as np

import pytest

from netgen.network import Network
from netgen.render import FULL_MAX_WIRES, choose_view, render
from netgen.render import knuth, summary
from netgen.render.dag import to_dot

from render_nets import random_layered

MAGIC = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<?xml"}

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` binary not installed")


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_knuth_diagram_formats(tmp_path, small_net, fmt):
    out = tmp_path / f"net.{fmt}"
    assert render(small_net, out, min_ranks=True) == "knuth"
    assert out.read_bytes().startswith(MAGIC[fmt])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file left


def test_knuth_svg_labels_wires_outputs_layers(tmp_path):
    net = Network.from_layers(4, [[(0, 1), (2, 3)], [(0, 2)]], [0], {"kind": "knockout"})
    out = tmp_path / "net.svg"
    render(net, out, min_ranks=True)
    svg = out.read_text()
    texts = re.findall(r">([^<>]+)</text>", svg)
    assert "rank 0" in texts and "rank 1" not in texts
    for label in ["L1", "L2", "0", "1", "2", "3"]:
        assert label in texts
    assert "\u2713" in texts  # rank 0 fixed after layer 2


def test_layout_bars_never_overlap():
    net = random_layered(20, 15, seed=3)
    xs, ext = knuth.layout(net)
    for l in range(net.depth):
        o = int(net.layer_offsets[l])
        comps = net.layer(l)
        x = xs[o : o + len(comps)]
        x0, x1 = ext[l]
        assert ((x > x0) & (x < x1)).all()
        for col in np.unique(x):
            spans = sorted((min(a, b), max(a, b)) for (a, b), xc in zip(comps.tolist(), x) if xc == col)
            assert all(s1[1] < s2[0] for s1, s2 in zip(spans, spans[1:]))
    assert all(e1[1] <= e2[0] for e1, e2 in zip(ext, ext[1:]))


def test_auto_view_threshold(small_net, large_net):
    assert choose_view(small_net) == "knuth"
    assert choose_view(large_net) == "summary"
    assert choose_view(large_net, "full") == "knuth"
    assert choose_view(small_net, "summary") == "summary"
    wide = random_layered(FULL_MAX_WIRES + 1, 2, seed=0)
    assert choose_view(wide) == "summary"
    with pytest.raises(ValueError, match="unknown view"):
        choose_view(small_net, "huge")


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_summary_view(tmp_path, large_net, fmt):
    out = tmp_path / f"big.{fmt}"
    assert render(large_net, out) == "summary"
    assert out.read_bytes().startswith(MAGIC[fmt])


def test_summary_numbers(large_net):
    st = summary.layer_stats(large_net)
    assert st["comparators"].tolist() == large_net.layer_sizes()
    # live wires at layer l, counted directly
    for l in range(large_net.depth):
        later = np.unique(large_net.comparators[large_net.layer_offsets[l]:].reshape(-1))
        live = set(later.tolist()) | set(large_net.outputs)
        assert st["live"][l] == len(live)
    frac, dead, edges = summary.activity(large_net, 50)
    assert frac.shape == (50, large_net.depth) and edges[0] == 0 and edges[-1] == large_net.n
    # each layer touches 2 * size wires; frac * bin width sums to that
    assert np.allclose((frac * np.diff(edges)[:, None]).sum(0), 2 * np.array(large_net.layer_sizes()))
    assert not (dead & (frac > 0)).any()


def test_full_diagram_of_huge_network_is_refused(tmp_path):
    net = random_layered(3000, 3, seed=0)
    with pytest.raises(ValueError, match="--summary"):
        render(net, tmp_path / "x.png", view="full")
    assert not list(tmp_path.iterdir())


def _dot_edges(src: str) -> set[tuple[str, str, str]]:
    return {(a, b, w) for a, b, w in re.findall(r"^\s*(\w+) -> (\w+) \[label=\"(\d+)\"", src, re.M)}


def test_dot_source_is_the_comparator_dag(small_net):
    src = to_dot(small_net)
    name = lambda v: f"c{v}" if isinstance(v, int) else f"{v[0]}{v[1]}"  # noqa: E731
    g = small_net.to_networkx()
    want = {(name(u), name(v), str(d["wire"])) for u, v, d in g.edges(data=True)}
    assert _dot_edges(src) == want
    assert src.count("rank ") == small_net.k and src.strip().endswith("}")


@needs_dot
def test_dot_file_and_graphviz_layout(tmp_path, small_net):
    assert render(small_net, tmp_path / "g.dot") == "dot"
    assert (tmp_path / "g.dot").read_text() == to_dot(small_net)
    assert render(small_net, tmp_path / "g.svg", dag=True) == "dag"
    assert "<svg" in (tmp_path / "g.svg").read_text()
    assert render(small_net, tmp_path / "g.png", dag=True) == "dag"
    assert (tmp_path / "g.png").read_bytes().startswith(MAGIC["png"])


def test_bad_output_suffix(tmp_path, small_net):
    with pytest.raises(ValueError, match="output format"):
        render(small_net, tmp_path / "x.jpg")


@pytest.mark.parametrize("view", ["full", "summary"])
def test_degenerate_networks_render(tmp_path, view):
    for net in (Network.from_layers(1, [], [0]), Network.from_layers(2, [[(1, 0)]], [1, 0])):
        out = tmp_path / f"n{net.n}_{view}.png"
        assert render(net, out, view=view, min_ranks=view == "full") in ("knuth", "summary")
        assert out.read_bytes().startswith(MAGIC["png"])
        assert render(net, tmp_path / "g.dot") == "dot"
