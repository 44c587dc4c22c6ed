"""issue 34 item 7: ``sorting_network`` assignable (and then used), the same
``print(model)`` as the published modules (no extra child module), the
smooth losses' ``fn_smooth`` / ``fn_hard``."""

import contextlib
import io

import pytest
import torch

import netgen.compat as C

from _published_oracle import difftopk, diffsort, sort_net

torch.set_num_threads(1)


def test_print_model_like_the_published_modules():
    def model(ns):
        with contextlib.redirect_stdout(io.StringIO()):
            m = torch.nn.Sequential(torch.nn.Linear(3, 8), ns.DiffTopkNet("bitonic", 8, 2),
                                    ns.DiffSortNet("odd_even", 2))
            m.loss = ns.TopKCrossEntropyLoss("odd_even", 5.0, [0.5, 0.5], 8)
            m.smooth = ns.SmoothHardTopKLoss(8, 2)
        return m

    ours, theirs = model(C), model(type("both", (), {**vars(difftopk), **vars(diffsort)}))
    assert str(ours) == str(theirs)
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert list(ours.state_dict()) == list(theirs.state_dict())


@pytest.mark.parametrize("target", ["numba", "torch"])
def test_sorting_network_is_assignable_and_used(target):
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    m = C.DiffSortNet("bitonic", 8, steepness=5.0, target=target)
    theirs = sort_net("bitonic", 8, 5.0)
    # the same network moved/cast, as scripts do: kept, same numbers
    m.sorting_network = [[t.double() for t in layer] for layer in m.sorting_network]
    assert m.sorting_network[0][0].dtype == torch.float64
    torch.testing.assert_close(m(x)[1], theirs(x)[1], atol=1e-10, rtol=0)
    # another network: this module runs it
    other = C.get_sorting_network("odd_even", 8, "cpu")
    m.sorting_network = other
    theirs.sorting_network = [[t.double() for t in layer] for layer in other]
    assert m.sorting_network is other
    torch.testing.assert_close(m(x)[1], theirs(x)[1], atol=1e-10, rtol=0)
    # and a pickle keeps it
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=False)
    torch.testing.assert_close(back(x)[1], theirs(x)[1], atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="layer 0"):
        bad = [[t.clone() for t in layer] for layer in other]
        bad[0][2] = torch.zeros_like(bad[0][2])
        m.sorting_network = bad


def test_smooth_losses_have_fn_smooth_and_fn_hard():
    x = torch.randn(6, 10, generator=torch.Generator().manual_seed(1)) * 3
    y = torch.randint(0, 10, (6,), generator=torch.Generator().manual_seed(2))
    with contextlib.redirect_stdout(io.StringIO()):
        theirs = difftopk.SmoothHardTopKLoss(10, 3, tau=0.5)
        theirs_s = difftopk.SmoothTopKLoss(10, 3, tau=0.5)
    ours, ours_s = C.SmoothHardTopKLoss(10, 3, tau=0.5), C.SmoothTopKLoss(10, 3, tau=0.5)
    torch.testing.assert_close(ours.fn_hard(x, y), theirs.fn_hard(x, y))
    torch.testing.assert_close(ours.fn_smooth(x, y), theirs.fn_smooth(x.clone(), y), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours_s.fn_smooth(x, y), theirs_s.fn_smooth(x.clone(), y), atol=1e-5, rtol=1e-5)
    back = torch.load(io.BytesIO(_saved(ours)), weights_only=False)
    torch.testing.assert_close(back(x, y), ours(x, y))


def _saved(m):
    buf = io.BytesIO()
    torch.save(m, buf)
    return buf.getvalue()
