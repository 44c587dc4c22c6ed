"""The torch target's P engine (issue 18): P's k rows by the back-sweep,
dL/dp from dL/dP by the forward push, both by rank groups, and what the
backward keeps.

Real code, copied into generated torch modules by source extraction
(:data:`PARTS`); the stand-ins below only let this file import and lint on
its own. The emitter (:mod:`netgen.codegen.torch.emit`, from the plan of
:mod:`netgen.codegen.plan`) writes the build-time constants read here
(:data:`READS`):

* ``_MODE``: ``"save"`` keeps the back-sweep's differences
  ``D_l = R_l[a] - R_l[b]`` (size x k per batch row) from the forward for the
  backward, as before issue 18; ``"recompute"`` keeps only O(size) per row
  and re-runs the back-sweep in the backward, rank group by rank group, with
  one group's differences alive at a time.
* ``_GROUP``: ranks per group, or None: in mode ``save`` all k (one group,
  as before issue 18); in mode ``recompute`` chosen per call from the batch
  size and dtype: on a CPU the most whose back-sweep state ``R`` (n x g x B)
  stays within ``_GROUP_BYTES`` (cache-sized), on other devices all k, and
  in the backward at most ``_D_ROW_MAX // size`` (a group's differences hold
  at most ``_D_ROW_MAX`` floats per batch row, at least one rank's: size).

So the backward keeps p, d and dp/dd (3 size floats per row; 2 more with a
steepness gradient) and, in mode save, D (size k <= max(4 k n, 65,536));
in mode recompute its scratch is one group's D, R and dL/dR rows
(``_D_ROW_MAX`` + 2 n g floats per row), besides dL/dP itself.

Ranks never interact (``R <- R M_l`` mixes two wires within each rank's
row), so groups are independent; dL/dp_l is a sum over ranks, so the groups'
contributions add. A layer's mixing is written as one difference and two
row-wise adds: with ``D = R[a] - R[b]`` and ``q = 1 - p``,
``R[a] -= q D`` (= p R[a] + (1-p) R[b]) and ``R[b] += q D``
(``index_add_`` moves rows about twice as fast as ``index_copy_`` on a
CPU; the value sweeps keep ``torch.lerp``, as the reference). Layout:
(wires, ranks, batch), batch innermost; a group's R is its own contiguous
(n, g, B) tensor, copied into P's (n, k, B) when done.
"""

from __future__ import annotations

import torch

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("_N", "_K", "_DEPTH", "_SIZE", "_OFFSETS", "_MODE", "_GROUP", "_GROUP_BYTES", "_D_ROW_MAX")
_N = _K = _DEPTH = _SIZE = 0
_OFFSETS: tuple = (0,)
_MODE = "save"
_GROUP = None
_GROUP_BYTES = _D_ROW_MAX = 0


# ---------------------------------------------------------------- copied parts
def _group_size(t, backward):
    """Ranks per group for a call whose tensors are t (..., B) (device, dtype,
    batch size): _GROUP where forced; in mode save all k (D is kept whole
    anyway: one group, as before issue 18); in mode recompute, on a CPU the
    most whose R (n x g x B) fits _GROUP_BYTES, elsewhere all k, and in the
    backward at most _D_ROW_MAX // size (the group's differences)."""
    if _GROUP is not None:
        return _GROUP
    if _MODE == "save":
        return _K
    g = _GROUP_BYTES // (_N * t.shape[-1] * t.element_size()) if t.device.type == "cpu" else _K
    if backward:
        g = min(g, _D_ROW_MAX // max(_SIZE, 1))
    return min(max(g, 1), _K)


def _groups(g):
    """The rank groups [g0, g1) of g ranks (the last one may be smaller)."""
    return [(g0, min(g0 + g, _K)) for g0 in range(0, _K, g)]


def _scratch(buf, *shape):
    """A contiguous (shape) view at the start of the flat buffer buf."""
    return buf[: torch.Size(shape).numel()].view(shape)


def _unit_rows(R, outs):
    """R (n, g, B) <- zero except R[outs[r], r] = 1: the back-sweep's start."""
    R.zero_()
    R[outs, torch.arange(R.shape[1], device=R.device)] = 1


def _back_sweep(R, a, b, q_all, D, final=True):
    """R <- R M_l for l = _DEPTH-1, ..., 0 in place (the last update only if
    ``final``); D (size, g, B) or None gets D_l = R_l[a] - R_l[b], R before
    layer l's update."""
    for l in range(_DEPTH - 1, -1, -1):
        s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
        al, bl = a[s0:e0], b[s0:e0]
        d = torch.sub(R.index_select(0, al), R.index_select(0, bl), out=None if D is None else D[s0:e0])
        if l or final:
            q = q_all[s0:e0].unsqueeze(1)
            t = d.mul_(q) if D is None else d * q
            R.index_add_(0, al, t, alpha=-1)  # p R[a] + (1-p) R[b]
            R.index_add_(0, bl, t)  # (1-p) R[a] + p R[b]


def _push(G, a, b, q_all, D, gp_all, first):
    """G <- G M_l, first layer first, adding sum_r D_l[r] (G[a] - G[b]) (G
    before layer l's update) to dL/dp_l in gp_all (size, B); ``first``:
    assign instead of add."""
    for l in range(_DEPTH):
        s0, e0 = _OFFSETS[l], _OFFSETS[l + 1]
        al, bl = a[s0:e0], b[s0:e0]
        gd = torch.sub(G.index_select(0, al), G.index_select(0, bl))
        if first:
            torch.linalg.vecdot(D[s0:e0], gd, dim=1, out=gp_all[s0:e0])
        else:
            gp_all[s0:e0] += torch.linalg.vecdot(D[s0:e0], gd, dim=1)
        if l < _DEPTH - 1:  # G after the last layer is not needed
            t = gd.mul_(q_all[s0:e0].unsqueeze(1))
            G.index_add_(0, al, t, alpha=-1)
            G.index_add_(0, bl, t)


def _rows(x, a, b, outs, q_all, save):
    """P's rows R (n, k, B), R[c, r, i] = P[i, r, c]: the back-sweep from the
    k output rows of the identity, group by group (q_all = 1 - p, (size,
    B)). Returns R, the group size and, with ``save``, the differences of
    every group (flat: group [g0, g1) at size g0 B as (size, g1 - g0, B))."""
    n, B = x.shape
    g = _group_size(x, False)
    R = x.new_empty(n, _K, B)
    buf = None if g == _K else x.new_empty(n * g * B)
    D_all = x.new_empty(_SIZE * _K * B) if save else None
    for g0, g1 in _groups(g):
        Rg = R if buf is None else _scratch(buf, n, g1 - g0, B)
        _unit_rows(Rg, outs[g0:g1])
        D = None if D_all is None else _scratch(D_all[_SIZE * g0 * B:], _SIZE, g1 - g0, B)
        _back_sweep(Rg, a, b, q_all, D)
        if buf is not None:
            R[:, g0:g1] = Rg
    return R, g, D_all


def _rows_adjoint(g_R, a, b, outs, q_all, D_all, g, gp_all):
    """dL/dp into gp_all (size, B) from dL/dR (n, k, B): per rank group, its
    differences (from D_all, saved by _rows with groups of g, or, when D_all
    is None (mode recompute), its back-sweep run again), then dL/dR's rows
    of the group pushed forward."""
    n, _, B = g_R.shape
    if D_all is None:
        g = _group_size(q_all, True)
        bufR, bufD = q_all.new_empty(n * g * B), q_all.new_empty(_SIZE * g * B)
    bufG = q_all.new_empty(n * g * B)
    for g0, g1 in _groups(g):
        G = _scratch(bufG, n, g1 - g0, B)
        G.copy_(g_R[:, g0:g1])
        if D_all is None:
            R, D = _scratch(bufR, n, g1 - g0, B), _scratch(bufD, _SIZE, g1 - g0, B)
            _unit_rows(R, outs[g0:g1])
            _back_sweep(R, a, b, q_all, D, final=False)
        else:
            D = _scratch(D_all[_SIZE * g0 * B:], _SIZE, g1 - g0, B)
        _push(G, a, b, q_all, D, gp_all, g0 == 0)


#: what a generated torch module copies from this file, in order
PARTS = (_group_size, _groups, _scratch, _unit_rows, _back_sweep, _push, _rows, _rows_adjoint)
