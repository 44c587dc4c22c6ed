"""The baseline registry: every method by name, netgen's call shape."""

import pytest
import torch

from netgen.relax import baselines


@pytest.mark.parametrize("name", sorted(baselines.BASELINES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_call_shape(name, dtype):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 10, dtype=dtype, requires_grad=True)
    layer = baselines.get(name, k=3)
    if layer.kind == "loss":
        out = layer(x, torch.zeros(2, 3, dtype=torch.long))
        assert out.shape == () and out.dtype == dtype
        out.backward()
    elif layer.kind == "indicator":
        A = layer(x)
        assert A.shape == (2, 3, 10) and A.dtype == dtype
        torch.testing.assert_close(A.sum(-1), torch.full((2, 3), 3.0, dtype=dtype), atol=2e-3, rtol=0)
        A.sum().backward()
    else:
        values, P = layer(x)
        assert values.shape == (2, 3, 3) and P.shape == (2, 3, 3, 10) and P.dtype == dtype
        torch.testing.assert_close(values, (P @ x.unsqueeze(-1)).squeeze(-1))
        # rows = ranks: at a low temperature row 0 points at the largest input
        (values.sum() + P.sum()).backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())


def test_temperature_argument():
    torch.manual_seed(11)
    x = torch.randn(4, 8, dtype=torch.float64)
    for name in ("neuralsort", "softsort", "lapsum", "sinkhorn_sort", "soft_topk_sorted"):
        temp = 1e-4 if name != "sinkhorn_sort" else 1e-3
        # SOFT's own rule (200 fixed iterations) is far from converged at 1e-4
        opts = {"rule": "tolerance", "max_iter": 20000} if name == "soft_topk_sorted" else {}
        _, P = baselines.get(name, k=2, temperature=temp, **opts)(x)
        assert torch.equal(P.argmax(-1), torch.topk(x, 2).indices), name


def test_unknown_and_conflicting():
    with pytest.raises(ValueError, match="unknown baseline"):
        baselines.get("nope", k=2)
    with pytest.raises(ValueError, match="not both"):
        baselines.get("lapsum", k=2, temperature=1.0, alpha=2.0)
