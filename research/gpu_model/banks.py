"""Shared-memory bank conflicts of the cuda kernels' wire accesses, counted
from a network (no GPU; ESTIMATES of what a GPU would replay, not
measurements).

    python research/gpu_model/banks.py [--kind splitter] [--n 10450] [--k 5] [--lanes 1 5]

A warp's 32 threads run 32 consecutive comparators of a layer
(``sweeps.layers``: thread tx takes ls + tx, then steps by the block); a
shared load or store of wire a (``sm[a]``, or ``sm[a * m + r]`` in a rank
sweep's wire-major state of m lanes) by the 32 threads takes as many
wavefronts as the most distinct 4-byte words any one of the 32 banks
holds among them (one wavefront: no conflict). Printed per layout: the
mean wavefronts per warp access over every warp of every layer (both
wires), and how many accesses take 1, 2, ... Against the model: a
comparator's shared accesses times the mean are the cycles a warp keeps
the SM's shared pipe busy (one wavefront a cycle), to set beside its
instructions over the issue rate (docs/cuda-round11.md).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

import numpy as np

from _gpu_cost import warps

BANKS = 32


def wavefronts(words: np.ndarray) -> int:
    """Wavefronts of one warp access to the 4-byte ``words`` (word addresses)."""
    words = np.unique(np.asarray(words, dtype=np.int64))
    return int(np.bincount(words % BANKS, minlength=BANKS).max()) if words.size else 0


def layer_accesses(comps, offs, lanes: int = 1, rank: int = 0):
    """Per warp (``_gpu_cost.warps``: 32 consecutive comparators of a layer)
    the wavefronts of its access to wire a and to wire c (``sm[w * lanes +
    rank]``); ``comps``: the network's (size, 2) wires, ``offs``: its layer
    offsets. An odd ``lanes`` multiplies the words by a unit mod 32: the
    banks are permuted, the counts are those of ``lanes`` = 1."""
    comps = np.asarray(comps, dtype=np.int64).reshape(-1, 2)
    return [wavefronts(comps[ix, side] * lanes + rank) for _, ix in warps(offs) for side in (0, 1)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", default="splitter")
    ap.add_argument("--n", type=int, default=10450)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--lanes", type=int, nargs="+", default=[1, 5], help="m of sm[w * m + r] (1: the values)")
    args = ap.parse_args(argv)
    from netgen.compiler import compile_network
    from netgen.construct import build

    net = build(args.kind, args.n, args.k)
    if args.kind == "splitter":
        net = compile_network(net).network
    print(f"ESTIMATES (counted, not measured): {args.kind}({args.n}, {args.k}), {len(net.layers)} layers, "
          f"{net.size} comparators; warps of 32 consecutive comparators, both wires")
    for m in args.lanes:
        acc = layer_accesses(net.comparators, net.layer_offsets, m, 0)
        hist = Counter(acc)
        print(f"sm[w * {m} + r]: mean {np.mean(acc):.2f} wavefronts per warp access over {len(acc)} accesses; "
              + ", ".join(f"{w}: {hist[w]}" for w in sorted(hist)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
