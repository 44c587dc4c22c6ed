"""Checked loss inputs (issue 19 finding 9, issue 21 item 6) and topk_loss in
netgen.layers with a proved network (issue 23 item 5)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from netgen.construct import build
from netgen.relax import reference as ref
from netgen.relax.distributions import Relaxation
from netgen.relax.loss import TopKCrossEntropyLoss, check_labels

torch.set_num_threads(1)

R = Relaxation("cauchy", 6.0)


def loss_over(n=8, K=2, **kw):
    return TopKCrossEntropyLoss(ref.Layer(build("splitter", n, K), R), [0.5, 0.5], **kw)


@pytest.mark.parametrize("labels", [[0.0, 2.7], [True, False], torch.tensor([1.0, 2.0]), [1 + 0j, 2]])
def test_float_and_bool_labels_are_refused_not_truncated(labels):
    with pytest.raises(ValueError, match="labels must be integer"):
        loss_over()(torch.randn(2, 8), labels)


@pytest.mark.parametrize("labels, bad", [([0, 8], "label 8 (position 1)"), ([-1, 3], "label -1 (position 0)")])
def test_out_of_range_labels_are_named(labels, bad):
    with pytest.raises(ValueError, match=r"outside 0\.\.7") as e:
        loss_over()(torch.randn(2, 8), torch.tensor(labels))
    assert bad in str(e.value)


def test_out_of_range_label_with_m_is_a_value_error_not_a_runtime_error():
    fn = TopKCrossEntropyLoss(ref.Layer(build("splitter", 4, 2), R), [0.5, 0.5], m=4)
    with pytest.raises(ValueError, match="label 20 "):
        fn(torch.randn(3, 10), torch.tensor([1, 20, 2]))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_empty_batch_gives_zero_loss_not_nan(reduction):
    scores = torch.randn(0, 8, requires_grad=True)
    loss = loss_over(reduction=reduction)(scores, torch.zeros(0, dtype=torch.long))
    if reduction == "none":
        assert loss.shape == (0,)
    else:
        assert loss.item() == 0.0 and not math.isnan(loss.item())
        loss.backward()
        assert scores.grad.shape == (0, 8)


def test_check_labels_accepts_integers():
    assert check_labels([3, 0, 7], 8).tolist() == [3, 0, 7]
    assert check_labels(torch.tensor([1], dtype=torch.int32), 2).dtype == torch.int64


def test_topk_loss_checks_width_and_names_m():
    from netgen.layers import topk_loss

    with pytest.raises(ValueError, match=r"m = 3 must lie in K\.\.num_classes = 5\.\.100"):
        topk_loss(100, [0.5, 0, 0, 0, 0.5], m=3, target="torch")
    with pytest.raises(ValueError, match="m = 200"):
        topk_loss(100, [0.5, 0, 0, 0, 0.5], m=200, target="torch")
    fn = topk_loss(100, [0.5, 0, 0, 0, 0.5], m=16, target="torch")
    assert (fn.layer.n, fn.layer.k) == (16, 5)
    with pytest.raises(ValueError, match="99 columns.*num_classes = 100"):
        fn(torch.randn(4, 99), torch.tensor([1, 2, 3, 4]))
    fn2 = topk_loss(20, [0.5, 0.5], target="torch")
    with pytest.raises(ValueError, match="21 columns"):
        fn2(torch.randn(2, 21), torch.tensor([0, 1]))


def test_topk_loss_builds_a_proved_network():
    from netgen.layers import topk_loss

    fn = topk_loss(40, [0.5, 0.5], target="torch")
    net = fn.layer.net
    assert net.construction.get("kind") == "splitter"
    from netgen.compiler import build as compiled_build

    assert net == compiled_build(40, 2, "splitter").network  # pruned, cleaned, scheduled


def test_old_import_path_is_lazy_and_deprecated():
    code = ("import sys, warnings, netgen.relax.loss as L; assert 'netgen.layers' not in sys.modules; "
            "warnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n    from netgen.relax.loss import topk_loss\nexcept DeprecationWarning as e:\n"
            "    assert 'netgen.topk_loss' in str(e), e\nelse:\n    raise SystemExit('no DeprecationWarning')\n"
            "warnings.simplefilter('ignore', DeprecationWarning)\n"
            "from netgen.relax.loss import topk_loss; import netgen, netgen.layers\n"
            "assert topk_loss is netgen.layers.topk_loss is netgen.topk_loss")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
