"""How a generated ``cuda`` module cuts a batch into launches: chunks
whose global scratch fits ``NETGEN_CUDA_WORKSPACE_MB`` (default 2048) and
whose rows keep the column kernels' 32-bit flat index in range
(:data:`INDEX_LIMIT`), worked out once per batch shape; rows of a tensor
for one chunk.

Real code, copied into generated modules by source extraction
(:data:`STATE` with :func:`netgen.codegen.runtime.statements`, :data:`PARTS`
with :func:`netgen.codegen.runtime.assemble`); it asks the launcher
(:mod:`.launch`) which variant a launch runs.
"""

from __future__ import annotations

import os

from ..runtime.tables import _N
from .launch import RECORDS_MAX, _variant
from .packing import _np_dtype

#: the module globals the copied code reads and neither defines nor imports
READS = ()


# ---------------------------------------------------------------- state (copied)
#: bytes of global scratch a launch may use before the batch is chunked
WORKSPACE = int(os.environ.get("NETGEN_CUDA_WORKSPACE_MB", "2048")) * 2**20
#: the rows and column kernels index a launch's saved d, p, dL/dp (rows x
#: size), D (rows x D's row, ``_DLEN``) and du, p (rows x 2 size) with
#: 32-bit flat indices (row * size + comparator): a launch takes at most
#: INDEX_LIMIT // (the longest row) rows (:func:`_most`; tests lower it)
INDEX_LIMIT = 2**32
_PLANS: dict = {}  # (kernel, device, dtype, B, rows, extra, most) -> the batch's chunks (_batch)


# ---------------------------------------------------------------- functions (copied)
def _part(t, b0, b1):
    """Rows b0:b1 of ``t``; ``t`` itself where that is all of it (no view made)."""
    return t if b0 == 0 and b1 == t.shape[0] else t[b0:b1]


def _batch(name, like, B, rows, extra=0, most=0):
    """The chunks of a batch of ``B`` rows launched as kernel ``name`` with
    ``rows`` rows of n floats per block (:func:`_chunks` of the global
    scratch where the launch runs the global variant, plus ``extra`` bytes
    per row; at most ``most`` rows each), worked out once per (kernel,
    device, dtype, B, rows, extra, most)."""
    key = (name, like.device, like.dtype, B, rows, extra, most)
    hit = _PLANS.get(key)
    if hit is None:
        glob = _variant(like.device, _np_dtype(like), name, rows) == "global"
        if len(_PLANS) >= RECORDS_MAX:
            _PLANS.clear()
        hit = _PLANS[key] = _chunks(B, (rows * _N * like.element_size() if glob else 0) + extra, most)
    return hit


def _most(per_row):
    """The most rows a launch may take so that its flat 32-bit indices
    (rows x ``per_row`` entries) stay in range; a row that alone passes
    them is refused (ValueError) rather than indexed wrong."""
    most = INDEX_LIMIT // max(1, per_row)
    if most < 1:
        raise ValueError(f"netgen cuda: one row holds {per_row} saved entries, past the kernels' 32-bit indices "
                         f"({INDEX_LIMIT}); this network is too large for the cuda target's rows with P")
    return most


def _chunks(B, per_row, most=0):
    """Row ranges of the batch whose global scratch (``per_row`` bytes a
    row; 0: none) fits WORKSPACE, of at most ``most`` rows (0: no limit);
    at least one row each."""
    step = B if per_row <= 0 else max(1, min(B, WORKSPACE // per_row))
    if most > 0:
        step = max(1, min(step, most))
    return [(i, min(B, i + step)) for i in range(0, B, max(step, 1))]


#: the module-level statements a generated module copies (after PARTS; in file order)
STATE = ("WORKSPACE", "INDEX_LIMIT", "_PLANS")
#: the functions a generated module copies, in order
PARTS = (_part, _batch, _most, _chunks)
