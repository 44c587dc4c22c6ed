"""The runtime modules copied into generated modules, tested as what they
are: ordinary code (netgen.codegen.runtime)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from netgen.codegen.literals import GeneratedSourceError, Namespace
from netgen.codegen.runtime import assemble, common
from netgen.codegen.torch import layer as torch_layer


def test_steepness_value_accepts_numbers_and_tensors():
    assert common.steepness_value(3) == 3.0 and isinstance(common.steepness_value(np.float32(2.5)), float)
    p = torch.nn.Parameter(torch.tensor([4.0]))
    s = common.steepness_value(p)
    assert s.shape == () and s.requires_grad
    for bad in (0, -1.0, float("nan"), float("inf"), True, "3", None, torch.tensor([1.0, 2.0]),
                torch.tensor(-1.0), torch.tensor(True)):
        with pytest.raises(ValueError, match="steepness"):
            common.steepness_value(bad)


def test_check_values_names_both_numbers():
    xt = torch.tensor([[1e38], [-1e38]], dtype=torch.float32)
    with pytest.raises(ValueError, match=r"steepness 10\.0 times the input range .*e\+38 overflows torch.float32"):
        common.check_values(xt, 10.0)
    common.check_values(xt.double(), 10.0)
    common.check_values(xt, torch.tensor(1.0))
    for bad, word in ((float("nan"), "NaN"), (float("inf"), "inf"), (-float("inf"), "inf")):
        x = torch.zeros(3, 2)
        x[1, 1] = bad
        with pytest.raises(ValueError, match=f"input contains {word} values"):
            common.check_values(x, 1.0)


def test_hard_network_never_writes_to_its_input():
    a, b = torch.tensor([0, 2, 0]), torch.tensor([1, 3, 2])
    offsets = (0, 2, 3)
    outs = torch.tensor([0])
    for x in (torch.tensor([1.0, 3.0, 2.0, 5.0]), torch.tensor([[1.0, 3.0, 2.0, 5.0]]),
              torch.tensor([[1.0], [3.0], [2.0], [5.0]]).t(), torch.tensor([1.0, 3.0, 2.0, 5.0]).expand(2, 4)):
        before = x.clone()
        v, i = common.hard_network(x, 4, a, b, offsets, outs)
        assert torch.equal(x, before) and v.reshape(-1)[0] == 5.0 and i.reshape(-1)[0] == 3


def test_second_order_refusal_only_when_recording():
    g = torch.ones(3)
    with torch.no_grad():  # a plain backward runs without recording
        same = common.refuse_second_order((g, None))
    assert same[0] is g and same[1] is None
    with torch.enable_grad():  # create_graph=True
        out, none = common.refuse_second_order((g, None))
    assert none is None and out.requires_grad and torch.equal(out, g)
    with pytest.raises(RuntimeError, match="second-order gradients .* netgen.relax.reference"):
        out.sum().backward()


def test_transforms_refused():
    def f(t):
        common.refuse_transforms()
        return t

    f(torch.ones(2))
    with pytest.raises(ValueError, match="torch.func transforms"):
        torch.func.vmap(f)(torch.ones(2, 2))


def test_assemble_claims_each_name_once():
    names = Namespace()
    src = assemble(common.PARTS, names)
    compile(src, "<parts>", "exec")
    assert "def hard_network" in src and "hard_network" in names
    with pytest.raises(GeneratedSourceError, match="twice"):
        assemble([common.hard_network], names)
    assert torch_layer.PARTS[-1].__name__ == "Layer"
