"""soft_sort's hard indices (netgen/ops/indices.py) against torch.sort:
identical on distinct values (NaN and infinities included, any dim, both
directions), a sorting permutation on ties, torch.sort's stable order with
stable=True; and the fallbacks (NaN, half types)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from netgen import ops
from netgen.ops.indices import sort_indices

SPECIAL = st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0])


def _arrays(dtype, unique):
    elems = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32), SPECIAL)
    return hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9), elements=elems,
                      unique=unique)


def _check_sorts(x, dim, descending, idx):
    ref = torch.sort(x, dim=dim, descending=descending)
    assert idx.dtype == torch.int64 and idx.shape == x.shape and idx.device == x.device
    # a permutation along dim ...
    assert torch.equal(idx.sort(dim=dim).values, torch.arange(x.shape[dim]).expand_as(
        x.movedim(dim, -1)).movedim(-1, dim))
    # ... that sorts x as torch.sort does (NaN last ascending, first descending)
    assert torch.equal(x.gather(dim, idx).nan_to_num(7.0), ref.values.nan_to_num(7.0))
    return ref


@settings(max_examples=150, deadline=None)
@given(a=_arrays(np.float32, unique=False), dim=st.integers(0, 2), descending=st.booleans(),
       f64=st.booleans())
def test_sorts_like_torch_with_ties_nan_inf(a, dim, descending, f64):
    x = torch.from_numpy(a.astype(np.float64) if f64 else a)
    dim = dim % x.dim()
    idx = sort_indices(x, dim, descending)
    _check_sorts(x, dim, descending, idx)
    # stable=True: exactly torch's stable order (input order of ties)
    assert torch.equal(sort_indices(x, dim, descending, stable=True),
                       torch.sort(x, dim=dim, descending=descending, stable=True).indices)


@settings(max_examples=150, deadline=None)
@given(a=_arrays(np.float32, unique=True), dim=st.integers(-3, 2), descending=st.booleans())
def test_distinct_values_equal_torch_sort(a, dim, descending):
    x = torch.from_numpy(a)
    dim = max(dim, -x.dim()) if dim < 0 else dim % x.dim()  # negative dims too
    if ((x == 0).sum(dim) > 1).any():  # 0.0 and -0.0 compare equal: a tie
        return
    assert torch.equal(sort_indices(x, dim, descending), torch.sort(x, dim=dim, descending=descending).indices)


def test_numpy_path_on_large_rows_and_fallbacks():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 1024, generator=g)
    for descending in (False, True):
        for dim in (0, 1, -1):
            assert torch.equal(sort_indices(x, dim, descending), torch.sort(x, dim=dim, descending=descending).indices)
    xt = x.t()  # not contiguous
    assert torch.equal(sort_indices(xt, 1, True), torch.sort(xt, dim=1, descending=True).indices)
    for dt in (torch.float16, torch.bfloat16):  # torch.sort itself
        h = x.to(dt)
        assert torch.equal(sort_indices(h, -1, True), torch.sort(h, descending=True).indices)
    y = x.clone()
    y[3, 5] = float("nan")
    _check_sorts(y, 1, True, sort_indices(y, 1, True))
    assert sort_indices(torch.empty(0, 3), -1).shape == (0, 3)
    assert sort_indices(x.requires_grad_(), -1).requires_grad is False


@pytest.mark.parametrize("descending", [False, True])
def test_soft_sort_returns_these_indices(descending):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 2, 40, generator=g, dtype=torch.float64)
    res = ops.soft_sort(x, dim=1, descending=descending, target="reference")
    assert torch.equal(res.indices, torch.sort(x, dim=1, descending=descending).indices)
    ties = torch.tensor([[3.0, 1.0, 3.0, 2.0, 1.0]])
    res = ops.soft_sort(ties, descending=descending, target="reference")
    _check_sorts(ties, 1, descending, res.indices)
