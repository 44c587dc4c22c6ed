"""difftopk's splitter_selection network, run by difftopk's own code, at any n.

difftopk 0.2.0 builds its networks as dense (n x n) float64 matrices per
layer (~90 GB at n = 10450), and its sparse executor needs the optional
``torch_sparse`` package. To benchmark the published method anyway:

* its construction code (``difftopk.networks.sparse_splitter_selection_network``)
  runs with a recording stand-in for ``np.zeros`` that keeps only the
  assigned entries; the matrices become the torch sparse tensors its
  ``get_sparse_net`` makes;
* its executor (``difftopk.functional.execute_sparse_topk``) runs with a
  stand-in ``spmm`` (scatter-add of value * matrix[col], what torch_sparse
  computes; autograd gives the gradient w.r.t. value as a gather).

Used by the benchmarks only (difftopk is a baseline, not a dependency).
"""

from __future__ import annotations

import contextlib
import io
import types

__all__ = ["Recorded", "SpmmShim", "splitter_selection"]


class Recorded:
    """Stand-in for a dense 2-D ``np.zeros`` array: records assignments."""

    def __init__(self, shape, entries=None):
        self.shape = tuple(shape)
        self.entries = {} if entries is None else entries

    def __setitem__(self, key, value):
        self.entries[(int(key[0]), int(key[1]))] = float(value)

    def __getitem__(self, key):
        rows, cols = key
        r0, r1, _ = rows.indices(self.shape[0])
        c0, c1, _ = cols.indices(self.shape[1])
        kept = {(i - r0, j - c0): v for (i, j), v in self.entries.items() if r0 <= i < r1 and c0 <= j < c1}
        return Recorded((r1 - r0, c1 - c0), kept)


class SpmmShim:
    """torch_sparse.spmm(index, value, m, n, matrix): sum over the nonzeros
    of value * matrix[col] into row ``row``, on the device of ``value``."""

    @staticmethod
    def spmm(index, value, m, n, matrix):
        import torch

        row, col = index[0], index[1]
        out = torch.zeros(m, matrix.shape[1], dtype=value.dtype, device=value.device)
        return out.index_add(0, row, value.unsqueeze(1) * matrix[col].to(value.dtype))


def splitter_selection(n: int, k: int, device="cpu", steepness: float = 10.0, art_lambda: float = 0.25,
                       distribution: str = "cauchy"):
    """``run(x) -> X (B, n, k)``: difftopk's splitter_selection network and
    executor on ``device`` (X[b, c, j] = P[b, k-1-j, c], ranks ascending)."""
    import numpy as np
    import torch

    with contextlib.redirect_stdout(io.StringIO()):
        import difftopk.functional as dtf
        import difftopk.networks as dtn
    fake = types.SimpleNamespace(**{a: getattr(np, a) for a in dir(np) if not a.startswith("__")})
    fake.zeros = lambda shape, *a, **kw: Recorded(shape) if len(shape) == 2 else np.zeros(shape, *a, **kw)
    saved, dtn.np = dtn.np, fake
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            layers = dtn.sparse_splitter_selection_network(n, k)
    finally:
        dtn.np = saved

    def sparse_T(m):  # what get_sparse_net does: transpose, COO, coalesce
        ent = sorted(m.entries.items())
        idx = torch.tensor([[j for (i, j), _ in ent], [i for (i, j), _ in ent]], dtype=torch.int64).reshape(2, -1)
        val = torch.tensor([v for _, v in ent], dtype=torch.float32)
        return torch.sparse_coo_tensor(idx, val, (m.shape[1], m.shape[0])).coalesce().to(device)

    net = []
    for split_a, split_b, cmin, cmax, *idx in layers:
        net.append([sparse_T(m) for m in (split_a, split_b, cmin, cmax)]
                   + [torch.from_numpy(np.asarray(a)).float().to(device) for a in idx])
    dtf.torch_sparse = SpmmShim
    dtf.SPARSE_INSTALLED = True

    def run(x):
        _, X = dtf.execute_sparse_topk(net, x, k, steepness, art_lambda, distribution)
        return X

    return run
