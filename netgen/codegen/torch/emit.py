"""The ``torch`` target: emit a self-contained PyTorch module for a network.

The emitted file needs only torch. It follows the generated-module contract
of docs/design.md section 8 (``NETWORK``, ``RELAXATION``, ``TARGET``, ``Layer``
with ``forward``, ``column`` and ``hard``) and computes exactly the
semantics of :mod:`netgen.relax.reference`, but written out:

* the comparator wires live in index buffers (``a``: max wires, ``b``: min
  wires, one slice per layer); each layer is a handful of vector ops over
  all its comparators at once, in a wire-major layout (wires x batch) so
  every gather and scatter moves contiguous rows;
* the swap probability and its derivative are specialised to the chosen
  distribution and constants;
* ``forward`` and ``column`` are ``torch.autograd.Function`` s with a
  hand-written backward (the adjoint sweeps): the forward saves the per-
  comparator differences, swap probabilities and their slopes (O(size) per
  sample); the backward sweeps the P adjoint forwards and the value adjoint
  backwards;
* the P engine (issue 18, :func:`engine`): the P adjoint needs the
  back-sweep's differences, which the forward keeps (mode ``save``, size x k
  per sample, when that is at most 4 k n or small) or the backward computes
  again by rank groups (mode ``recompute``: one group's differences at a
  time); a build-time constant of the module, forced by ``emit(...,
  mode=, group=)``.

The fixed code (sweeps, checks, ``hard``, ``Layer``) is copied from
:mod:`netgen.codegen.torch.layer`, :mod:`netgen.codegen.torch.engine`
and :mod:`netgen.codegen.runtime.common` (real, tested modules); this emitter
writes the constants, the index table and ``_swap``, rendered from
:mod:`netgen.relax.formulas`.

Index arrays are stored compactly (delta-coded int32, zlib, base64), so a
network with 10^6 comparators emits a few MB and imports in well under a
second; ``NETWORK`` (the interchange dict) is built lazily on first access.
"""

from __future__ import annotations

import json

from ... import __version__
from ...network import Network
from ...relax.distributions import Relaxation
from ...relax.expr import var
from ...relax.formulas import swap_exprs
from ..lines import Lines, blob_lines, pack_comparators
from ..literals import Namespace, literal
from ..render import TorchSource
from ..runtime import assemble
from ..runtime import common as _common
from . import engine as _engine
from . import layer as _rt

__all__ = ["emit", "engine"]

MODES = ("save", "recompute")
# The P engine (runtime/torch_engine.py; docs/targets.md, "torch: the P
# engine"). Mode ``save`` keeps the back-sweep's differences D (size x k
# floats per batch row) from the forward for the backward, as before issue
# 18; ``recompute`` keeps O(size) per row and re-runs the back-sweep in the
# backward, one rank group at a time. ``save`` is chosen when D is at most
# SAVE_MAX_PER_KN times P (size <= 4 n; top-5 of 10450: size = 3.0 n) or
# small in absolute terms (size x k <= SAVE_MAX_FLOATS per row, 256 KB in
# float32): then writing and reading D costs less than a second back-sweep.
# Sorters have size = 6 n (n = 32) to 23.5 n (n = 1024). Measured (odd-even,
# B = 64, float32, one thread, fwd+bwd, save / recompute): n = 64 (size x k
# = 34,752) 12.4 / 19.7 ms, n = 128 (188,288) 77.8 / 67.2 ms.
SAVE_MAX_PER_KN = 4
SAVE_MAX_FLOATS = 65536
# Rank groups in mode recompute (chosen per call unless forced): on a CPU
# the largest g whose back-sweep state R (n x g x B floats) stays within
# GROUP_BYTES (it and the layer's temporaries stay in cache; n = 1024, B =
# 64, one thread, fwd+bwd: 1 MB 13.7 s, 2 MB 11.7 s, 4 MB 10.8 s, 8 MB 14.6
# s; n = 256 two threads: 1 MB 295 ms, 4 MB 235 ms, 32 MB 352 ms); on other
# devices all k (fewer, larger kernels). In the backward a group's
# differences hold at most max(size, D_PER_KN k n) floats per row. Mode save
# runs all k ranks as one group (its D is kept whole anyway).
GROUP_BYTES = 4 << 20
D_PER_KN = 2


def _swap_lines(r: Relaxation) -> list[str]:
    """``_swap(d, s, ds=False) -> (p, dp/dd[, dp/ds])`` rendered from the
    one definition of the relaxation (:func:`netgen.relax.formulas.swap_exprs`)."""
    prog = swap_exprs(r, var("s"))
    renderer = TorchSource({"d": "d", "s": "s"}, reserved={"big", "ds", "torch", "math"})
    first, second = renderer.render([{"p": prog["p"], "dp": prog["dp"]}, {"dps": prog["dps"]}])
    L = Lines()
    with L.block("def _swap(d, s, ds=False):"):
        L(f'"""p = F(s * phi(d)), dp/dd and (with ds) dp/ds for d = x - y ({r.distribution}; '
          'rendered from netgen.relax.formulas)."""')
        L("big = torch.finfo(d.dtype).max")
        L(*first)
        with L.block("if not ds:"):
            L("return p, dp")
        L(*second)
        L("return p, dp, dps")
    return L.render().rstrip("\n").split("\n")


def engine(net: Network, mode: str | None = None, group: int | None = None) -> tuple[str, int | None]:
    """The P engine's build-time choices for ``net``: ``(mode, group)``,
    group None = chosen per call (see the constants above); ``mode`` /
    ``group`` force them (tests)."""
    if mode is None:
        small = net.size <= SAVE_MAX_PER_KN * net.n or net.size * net.k <= SAVE_MAX_FLOATS
        mode = "save" if small else "recompute"
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if group is not None:
        if isinstance(group, bool) or not isinstance(group, int) or group < 1:
            raise ValueError(f"group must be a positive integer, got {group!r}")
        group = min(group, max(net.k, 1))
    return mode, group


def emit(net: Network, r: Relaxation, *, mode: str | None = None, group: int | None = None) -> str:
    """Source of a torch module for ``net`` relaxed by ``r`` (byte-stable).
    ``mode`` ('save' / 'recompute') and ``group`` (ranks per group) override
    the P engine's build-time choices (:func:`engine`)."""
    if not isinstance(net, Network):
        raise ValueError(f"expected a Network, got {type(net).__name__}")
    if not isinstance(r, Relaxation):
        raise ValueError(f"expected a Relaxation, got {type(r).__name__}")
    mode, group = engine(net, mode, group)
    kind = net.construction.get("kind", "custom")
    rd = r.to_dict()
    names = Namespace()
    L = Lines()
    L.comment(
        f"Generated by netgen {__version__} (netgen.codegen.torch.emit: constants and _swap emitted, "
        "the rest copied from netgen.codegen.runtime). Do not edit: rebuild with `netgen build --target torch`."
    )
    L.comment(
        f"Network: kind={literal(kind)} n={net.n} k={net.k} depth={net.depth} size={net.size} key={net.key()}"
    )
    L.comment("Relaxation: " + " ".join(f"{k}={v!r}" for k, v in rd.items()))
    L.comment("Needs only torch. Same file for the same inputs (byte-stable).")
    L('"""Relaxed comparator network as a PyTorch layer (generated by netgen).')
    L("")
    L("    from <this module> import Layer")
    L("    layer = Layer()                # steepness=None: RELAXATION['steepness']")
    L("    values, P = layer(x)           # x (..., n) -> (..., k), (..., k, n); values = P @ x")
    L("    col = layer.column(x, y)       # P[..., :, y] -> (..., k), O(size) work")
    L("    vals, idx = layer.hard(x)      # the exact network (values, input indices)")
    L("    layer.steepness = 20.0         # read at every call; a tensor/nn.Parameter gets dL/ds")
    L("")
    L("Rank 0 is the largest value. A comparator (a, b) with x = v[a], y = v[b] sets")
    L("p = F(s * phi(x - y)), v[a] = p x + (1-p) y, v[b] = (1-p) x + p y.")
    L("float32/float64 are computed in their own dtype; float16/bfloat16 in float32,")
    L("returned in the input dtype. NaN or inf inputs (and y out of range), or a steepness")
    L("times input range that overflows the compute dtype, raise ValueError on CPU in eager")
    L("mode; on a GPU or under torch.compile, where a check would synchronise the host,")
    L("those rows come out NaN (values, P, column, gradient).")
    L("Backward passes are written out (autograd.Function), not traced: once")
    L("differentiable (a second backward raises; use netgen.relax.reference for that);")
    L("torch.func transforms are refused. No call writes to its input.")
    L('"""')
    L.blank()
    L("import base64", "import json", "import math", "import sys", "import zlib", "", "import torch")
    L.blank(2)
    constants = [
        ("TARGET", literal("torch")),
        ("RELAXATION", literal(rd)),
    ]
    for name, text in constants:
        L(f"{names.define(name)} = {text}")
    L.blank()
    for name, value in (("_N", net.n), ("_K", net.k), ("_DEPTH", net.depth), ("_SIZE", net.size)):
        L(f"{names.define(name)} = {literal(value)}")
    L(f"{names.define('_S')} = {literal(r.steepness)}  # default steepness (Layer(steepness=None))")
    L("# The P engine (build-time choices, netgen.codegen.torch.emit.engine, docs/targets.md):")
    L("# \"save\" keeps the back-sweep's differences (size x k per row) for the backward,")
    L("# \"recompute\" re-runs the back-sweep there, one rank group at a time. _GROUP ranks")
    L("# per group, or None: per call, a group's R (n x g x B) within _GROUP_BYTES on a CPU,")
    L("# all ranks elsewhere; recompute's differences at most _D_ROW_MAX floats per row.")
    L(f"{names.define('_MODE')} = {literal(mode)}")
    L(f"{names.define('_GROUP')} = {literal(group)}")
    L(f"{names.define('_GROUP_BYTES')} = {literal(GROUP_BYTES)}")
    L(f"{names.define('_D_ROW_MAX')} = {literal(max(net.size, D_PER_KN * net.k * net.n))}")
    L("# layer l = comparators _OFFSETS[l]:_OFFSETS[l + 1]")
    L(f"{names.define('_OFFSETS')} = {literal(tuple(int(o) for o in net.layer_offsets))}")
    L(f"{names.define('_CONSTRUCTION')} = {literal(json.dumps(net.construction, sort_keys=True))}")
    L("# int32 little-endian: deltas of the max wires a, then b - a, then the outputs; zlib, base64")
    with L.block(f"{names.define('_BLOB')} = ("):
        L(*blob_lines(pack_comparators(net.comparators, net.outputs)))
    L(")")
    L.blank(2)
    L(assemble(_common.PARTS, names))
    L.blank(2)
    L(assemble(_rt.PARTS[:1], names))
    L.blank(2)
    L(f"{names.define('_A')}, {names.define('_B')}, {names.define('_OUTS')} = _decode()")
    L.blank(2)
    L(assemble(_rt.PARTS[1:2], names))
    L.blank(2)
    names.define("_swap")
    L(*_swap_lines(r))
    L.blank(2)
    L(assemble(_engine.PARTS, names))
    L.blank(2)
    L(assemble(_rt.PARTS[2:], names))
    return L.render()
