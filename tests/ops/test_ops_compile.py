"""The operator functions under ``torch.compile`` with no eager call first:
the network's construction and the auto steepness's estimate run outside
the trace (a graph break each). Without that, dynamo traced into the
network's construction and failed ("RuntimeError when making fake tensor
call")."""

import pytest
import torch

import netgen

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("n", [21])
def test_operators_compile_on_their_first_call(n):
    torch.manual_seed(0)
    x = torch.randn(3, n, dtype=torch.float64, requires_grad=True)
    cases = {
        "soft_rank": lambda t: netgen.soft_rank(t, target="numba"),
        "topk_mask": lambda t: netgen.topk_mask(t, 4, target="numba"),
        "soft_sort auto": lambda t: netgen.soft_sort(t, steepness="auto", target="torch").values,
    }
    for name, f in cases.items():
        torch._dynamo.reset()
        got = torch.compile(f)(x)  # the first call of this (n, k) in the process
        want = f(x)
        assert torch.allclose(got, want, rtol=1e-12, atol=1e-12), name
        g_got = torch.autograd.grad(got.sum(), x)[0]
        g_want = torch.autograd.grad(want.sum(), x)[0]
        assert torch.allclose(g_got, g_want, rtol=1e-12, atol=1e-12), name
